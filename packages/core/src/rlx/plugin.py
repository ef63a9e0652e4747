"""The plugin manifest of rlx-core, registered through the ``rlx.plugins`` entry point."""

from __future__ import annotations

from collections.abc import Callable

from rlx.hookspecs import hookimpl
from rlx.spec import AgentSpec


@hookimpl
def rlx_register_agents(register: Callable[[AgentSpec], None]) -> None:
    register(
        AgentSpec(
            name="random",
            target="rlx.agents.random:RandomAgent",
            family="baseline",
            summary="uniform random actions, no learning: the baseline every agent must beat",
        )
    )
