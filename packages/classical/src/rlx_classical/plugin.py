"""rlx-classical's plugin manifest: names the four tabular agents without importing them."""

from __future__ import annotations

from collections.abc import Callable

from rlx import AgentSpec, hookimpl

_DISCRETE = ("Discrete",)


@hookimpl
def rlx_register_agents(register: Callable[[AgentSpec], None]) -> None:
    """Register the four tabular agents."""
    register(
        AgentSpec(
            name="q-learning",
            target="rlx_classical.q_learning:QLearning",
            family="classical",
            summary="tabular Q-learning, off-policy TD control (Watkins 1989)",
            paper=(
                "Watkins (1989), Learning from Delayed Rewards, PhD thesis, Cambridge; Watkins & "
                "Dayan (1992), Q-learning, Machine Learning 8"
            ),
            observation_spaces=_DISCRETE,
            action_spaces=_DISCRETE,
        )
    )
    register(
        AgentSpec(
            name="sarsa",
            target="rlx_classical.sarsa:Sarsa",
            family="classical",
            summary="tabular SARSA, on-policy TD control (Rummery and Niranjan 1994)",
            paper=(
                "Rummery & Niranjan (1994), On-line Q-learning using connectionist systems, "
                "technical report CUED/F-INFENG/TR 166, Cambridge"
            ),
            observation_spaces=_DISCRETE,
            action_spaces=_DISCRETE,
        )
    )
    register(
        AgentSpec(
            name="sarsa-lambda",
            target="rlx_classical.sarsa_lambda:SarsaLambda",
            family="classical",
            summary="tabular SARSA(lambda) with accumulating or replacing eligibility traces",
            paper=(
                "Rummery & Niranjan (1994), On-line Q-learning using connectionist systems, "
                "CUED/F-INFENG/TR 166; Singh & Sutton (1996), Reinforcement learning with "
                "replacing eligibility traces, Machine Learning 22"
            ),
            observation_spaces=_DISCRETE,
            action_spaces=_DISCRETE,
        )
    )
    register(
        AgentSpec(
            name="dyna-q",
            target="rlx_classical.dyna_q:DynaQ",
            family="classical",
            summary="tabular Dyna-Q, Q-learning plus planning with a learned model (Sutton 1990)",
            paper=(
                "Sutton (1990), Integrated Architectures for Learning, Planning, and Reacting "
                "Based on Approximating Dynamic Programming, ICML"
            ),
            observation_spaces=_DISCRETE,
            action_spaces=_DISCRETE,
        )
    )
