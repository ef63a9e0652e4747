"""The plugin manifest that rlx loads through the ``rlx.plugins`` entry point.

It describes the agent with a ``"module:Class"`` string and imports neither the agent nor
torch, so ``rlx list`` stays fast and torch-free with the plugin installed.
"""

from __future__ import annotations

from collections.abc import Callable

import rlx


@rlx.hookimpl
def rlx_register_agents(register: Callable[[rlx.AgentSpec], None]) -> None:
    """Register the ``mini-dqn`` agent: Box observations, Discrete actions."""
    register(
        rlx.AgentSpec(
            name="mini-dqn",
            target="rlx_minidqn.agent:MiniDQN",
            family="example",
            summary="deep Q-network in one file, built only from rlx-core's building blocks",
            paper=(
                "Mnih et al. (2015), Human-level control through deep reinforcement learning, "
                "Nature 518"
            ),
            observation_spaces=("Box",),
            action_spaces=("Discrete",),
        )
    )
