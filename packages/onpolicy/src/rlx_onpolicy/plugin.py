"""The plugin manifest of rlx-onpolicy: specs only; listing imports neither torch nor an agent."""

from __future__ import annotations

from collections.abc import Callable

from rlx import AgentSpec, hookimpl
from rlx.spec import ENCODED_OBSERVATIONS

OBSERVATIONS = ENCODED_OBSERVATIONS
ACTIONS = ("Discrete", "MultiDiscrete", "Box")

#: name, "module:Class" target, one-line summary
AGENTS = (
    (
        "vpg",
        "rlx_onpolicy.vpg:VPG",
        "vanilla policy gradient: REINFORCE with a learned value baseline (Williams 1992)",
    ),
    (
        "a2c",
        "rlx_onpolicy.a2c:A2C",
        "synchronous advantage actor-critic over vector environments (Mnih et al. 2016)",
    ),
    (
        "ppo",
        "rlx_onpolicy.ppo:PPO",
        "proximal policy optimisation, clipped surrogate (Schulman et al. 2017)",
    ),
    (
        "svpg",
        "rlx_onpolicy.svpg:SVPG",
        "Stein variational policy gradient: kernel-coupled policy particles (Liu et al. 2017)",
    ),
)


@hookimpl
def rlx_register_agents(register: Callable[[AgentSpec], None]) -> None:
    for name, target, summary in AGENTS:
        register(
            AgentSpec(
                name=name,
                target=target,
                family="onpolicy",
                summary=summary,
                tuned="rlx_onpolicy:tuned.toml",
                observation_spaces=OBSERVATIONS,
                action_spaces=ACTIONS,
            )
        )
