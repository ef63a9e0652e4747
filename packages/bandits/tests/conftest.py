"""Test helpers shared by the rlx-bandits tests (fixtures: conftest modules are not importable)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
import pytest

import rlx
from rlx_envs.base import BanditEnv

LINEAR_ID = "rlx_test/LinearBandit-v0"


class LinearBandit(BanditEnv):
    """Contexts ``x ~ N(0, I)``; arm ``a`` pays ``theta_a . x + N(0, 0.1^2)``, unit-norm
    ``theta_a`` fixed by the problem (not by the seed of ``reset``)."""

    def __init__(self, context_dim: int = 6, n_arms: int = 4, horizon: int = 1000) -> None:
        super().__init__(n_arms=n_arms, context_dim=context_dim, horizon=horizon)
        weights = np.random.default_rng(0).standard_normal((n_arms, context_dim))
        self.theta = weights / np.linalg.norm(weights, axis=1, keepdims=True)

    def _next_context(self) -> np.ndarray:
        return self.np_random.standard_normal(self.context_dim).astype(np.float32)

    def expected_rewards(self) -> np.ndarray:
        return self.theta @ self._context.astype(np.float64)

    def _draw_reward(self, action: int) -> float:
        noise = 0.1 * self.np_random.standard_normal()
        return float(self.expected_rewards()[action] + noise)


@pytest.fixture(scope="session")
def linear_bandit() -> str:
    """The id of a registered :class:`LinearBandit` (6-d contexts, 4 arms)."""
    if LINEAR_ID not in gymnasium.registry:
        gymnasium.register(LINEAR_ID, entry_point=LinearBandit)
    return LINEAR_ID


def _uniform_regret(env_id: str, rounds: int, seed: int = 0) -> float:
    env = rlx.make_env(env_id)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    return sum(env.step(env.action_space.sample())[4]["regret"] for _ in range(rounds))


@pytest.fixture
def uniform_regret() -> Callable[..., float]:
    """``uniform_regret(env_id, rounds, seed=0)``: the regret of uniformly random arms."""
    return _uniform_regret


def _play(agent: Any, rounds: int) -> float:
    for _ in range(rounds):
        agent.step()
    return agent.cumulative_regret


@pytest.fixture
def play() -> Callable[[Any, int], float]:
    """``play(agent, rounds)``: run a bandit agent for ``rounds`` rounds; returns its
    cumulative regret so far."""
    return _play
