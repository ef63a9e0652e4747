"""The plugin manifest of rlx-onpolicy: specs only; listing imports neither torch nor an agent."""

from __future__ import annotations

from collections.abc import Callable

from rlx import AgentSpec, hookimpl
from rlx.spec import ENCODED_OBSERVATIONS

OBSERVATIONS = ENCODED_OBSERVATIONS
ACTIONS = ("Discrete", "MultiDiscrete", "Box")
#: The agents that take fewer action spaces than :data:`ACTIONS`: masks are over discrete actions.
AGENT_ACTIONS = {"maskable-ppo": ("Discrete", "MultiDiscrete")}

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
        "maskable-ppo",
        "rlx_onpolicy.ppo:MaskablePPO",
        "PPO on valid actions only: the environment's action_masks() mask the policy (sb3-contrib)",
    ),
    (
        "recurrent-ppo",
        "rlx_onpolicy.recurrent_ppo:RecurrentPPO",
        "PPO with an LSTM or GRU policy and critic trained on whole sequences, for memory tasks",
    ),
    (
        "svpg",
        "rlx_onpolicy.svpg:SVPG",
        "Stein variational policy gradient: kernel-coupled policy particles (Liu et al. 2017)",
    ),
    (
        "trpo",
        "rlx_onpolicy.trpo:TRPO",
        "trust region policy optimisation: natural gradient, KL-bounded line search (2015)",
    ),
)


#: name: where the algorithm comes from (AgentSpec.paper)
PAPERS = {
    "vpg": (
        "Williams (1992), Simple Statistical Gradient-Following Algorithms for "
        "Connectionist Reinforcement Learning, Machine Learning 8"
    ),
    "a2c": ("Mnih et al. (2016), Asynchronous Methods for Deep Reinforcement Learning, ICML"),
    "ppo": (
        "Schulman, Wolski, Dhariwal, Radford & Klimov (2017), Proximal Policy "
        "Optimization Algorithms, arXiv:1707.06347"
    ),
    "maskable-ppo": (
        "Huang & Ontañón (2022), A Closer Look at Invalid Action Masking in Policy Gradient "
        "Algorithms, FLAIRS"
    ),
    "recurrent-ppo": (
        "Schulman et al. (2017), Proximal Policy Optimization Algorithms, arXiv:1707.06347, "
        "with a recurrent policy on whole sequences as in Pleines, Pallasch, Zimmer & Preuss "
        "(2023), Memory Gym: Partially Observable Challenges to Memory-Based Agents, ICLR"
    ),
    "svpg": ("Liu, Ramachandran, Liu & Peng (2017), Stein Variational Policy Gradient, UAI"),
    "trpo": (
        "Schulman, Levine, Moritz, Jordan & Abbeel (2015), Trust Region Policy Optimization, ICML"
    ),
}


@hookimpl
def rlx_register_agents(register: Callable[[AgentSpec], None]) -> None:
    """Register the policy-gradient agents, each with the family's tuned settings."""
    for name, target, summary in AGENTS:
        register(
            AgentSpec(
                name=name,
                target=target,
                family="onpolicy",
                summary=summary,
                paper=PAPERS[name],
                tuned="rlx_onpolicy:tuned.toml",
                observation_spaces=OBSERVATIONS,
                action_spaces=AGENT_ACTIONS.get(name, ACTIONS),
            )
        )
