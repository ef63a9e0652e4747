"""Test helpers shared by the rlx-bandits tests (fixtures: conftest modules are not importable)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def _play(agent: Any, rounds: int) -> float:
    for _ in range(rounds):
        agent.step()
    return agent.cumulative_regret


@pytest.fixture
def play() -> Callable[[Any, int], float]:
    """``play(agent, rounds)``: run a bandit agent for ``rounds`` rounds; returns its
    cumulative regret so far."""
    return _play
