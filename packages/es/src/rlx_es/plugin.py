"""The plugin manifest of rlx-es: specs only, so listing imports no agent and no torch."""

from __future__ import annotations

from collections.abc import Callable

from rlx import AgentSpec, EnvSpec, hookimpl
from rlx.spec import ENCODED_OBSERVATIONS

OBSERVATIONS = ENCODED_OBSERVATIONS
ACTIONS = ("Discrete", "Box")

#: name, "module:Class" target, one-line summary
AGENTS = (
    (
        "openai-es",
        "rlx_es.openai_es:OpenAIESAgent",
        "OpenAI-ES: mirrored noise, centered ranks, Adam on the centre (Salimans et al. 2017)",
    ),
    (
        "ns-es",
        "rlx_es.novelty:NSES",
        "NS-ES: OpenAI-ES toward novel behaviour, meta-population + archive (Conti et al. 2018)",
    ),
    (
        "nsr-es",
        "rlx_es.novelty:NSRES",
        "NSR-ES: OpenAI-ES on the mean of novelty and return ranks (Conti et al. 2018)",
    ),
    (
        "nsra-es",
        "rlx_es.novelty:NSRAES",
        "NSRA-ES: novelty and return with an adaptive weight (Conti et al. 2018)",
    ),
    (
        "cem",
        "rlx_es.cem:CEMAgent",
        "cross-entropy method with decaying extra noise (Szita & Lorincz 2006)",
    ),
    (
        "cma-es",
        "rlx_es.cma_es:CMAESAgent",
        "CMA-ES, full or separable covariance (Hansen & Ostermeier 2001; Ros & Hansen 2008)",
    ),
    (
        "ars",
        "rlx_es.ars:ARSAgent",
        "augmented random search: the best mirrored directions, V2 normalises states "
        "(Mania et al. 2018)",
    ),
    (
        "nop",
        "rlx_es.nop:NOPAgent",
        "NOP: a fixed action (zero or constant), evaluated and never updated (garage's NOP)",
    ),
)

#: Agents that read no observation take every observation space.
ANY_OBSERVATION = ("nop",)


#: name: where the algorithm comes from (AgentSpec.paper)
PAPERS = {
    "openai-es": (
        "Salimans, Ho, Chen, Sidor & Sutskever (2017), Evolution Strategies as a "
        "Scalable Alternative to Reinforcement Learning, arXiv:1703.03864"
    ),
    "ns-es": (
        "Conti, Madhavan, Such, Lehman, Stanley & Clune (2018), Improving Exploration "
        "in Evolution Strategies for Deep Reinforcement Learning via a Population of "
        "Novelty-Seeking Agents, NeurIPS"
    ),
    "nsr-es": (
        "Conti, Madhavan, Such, Lehman, Stanley & Clune (2018), Improving Exploration "
        "in Evolution Strategies for Deep Reinforcement Learning via a Population of "
        "Novelty-Seeking Agents, NeurIPS"
    ),
    "nsra-es": (
        "Conti, Madhavan, Such, Lehman, Stanley & Clune (2018), Improving Exploration "
        "in Evolution Strategies for Deep Reinforcement Learning via a Population of "
        "Novelty-Seeking Agents, NeurIPS"
    ),
    "cem": (
        "Szita & Lőrincz (2006), Learning Tetris Using the Noisy Cross-Entropy Method, "
        "Neural Computation 18"
    ),
    "cma-es": (
        "Hansen & Ostermeier (2001), Completely Derandomized Self-Adaptation in "
        "Evolution Strategies, Evolutionary Computation 9; Ros & Hansen (2008), A "
        "Simple Modification in CMA-ES Achieving Linear Time and Space Complexity, PPSN"
    ),
    "ars": (
        "Mania, Guy & Recht (2018), Simple random search provides a competitive approach to "
        "reinforcement learning, NeurIPS, arXiv:1803.07055"
    ),
    "nop": (
        "garage contributors (2019), garage: A toolkit for reproducible reinforcement learning "
        "research, https://github.com/rlworkgroup/garage (garage.np.algos.NOP, no optimisation "
        "performed)"
    ),
}


@hookimpl
def rlx_register_agents(register: Callable[[AgentSpec], None]) -> None:
    """Register the evolution strategies and the fixed-policy baseline ``nop``, each with the
    family's tuned settings (``rlx_es/tuned.toml``)."""
    for name, target, summary in AGENTS:
        register(
            AgentSpec(
                name=name,
                target=target,
                family="es",
                summary=summary,
                paper=PAPERS[name],
                tuned="rlx_es:tuned.toml",
                observation_spaces=("Any",) if name in ANY_OBSERVATION else OBSERVATIONS,
                action_spaces=ACTIONS,
            )
        )


@hookimpl
def rlx_register_envs(register: Callable[[EnvSpec], None]) -> None:
    """Register the deceptive maze that the novelty-search strategies are tested on, and the
    stand-in environment of runs of a user's rollouts."""
    register(
        EnvSpec(
            id="rlx/DeceptiveMaze-v0",
            target="rlx_es.envs:DeceptiveMaze",
            summary="point robot, goal behind a cup-shaped trap; info['bc'] = final position",
            observation_space="Box(3,)",
            action_space="Box(2,)",
        )
    )
    register(
        EnvSpec(
            id="rlx/Rollout-v0",
            target="rlx_es.rollouts:RolloutEnv",
            summary="runs of your own rollout(policy) (ES agents' rollout setting): an episode "
            "is one rollout, its return the reward",
            observation_space="Box(1,)",
            action_space="Box(1,)",
        )
    )
