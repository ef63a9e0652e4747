"""The plugin manifest of rlx-offpolicy: specs only; listing imports neither torch nor an agent."""

from __future__ import annotations

from collections.abc import Callable

from rlx import AgentSpec, hookimpl
from rlx.spec import ENCODED_OBSERVATIONS

#: name, "module:Class" target, action spaces, one-line summary
AGENTS = (
    ("dqn", "rlx_offpolicy.dqn:DQN", ("Discrete",), "deep Q-network (Mnih et al. 2015)"),
    (
        "double-dqn",
        "rlx_offpolicy.dqn:DoubleDQN",
        ("Discrete",),
        "DQN with double Q-learning targets (van Hasselt et al. 2016)",
    ),
    (
        "dueling-dqn",
        "rlx_offpolicy.dqn:DuelingDQN",
        ("Discrete",),
        "DQN with dueling value and advantage heads (Wang et al. 2016)",
    ),
    (
        "sac",
        "rlx_offpolicy.sac:SAC",
        ("Box",),
        "soft actor-critic with automatic entropy tuning (Haarnoja et al. 2018)",
    ),
    (
        "crossq",
        "rlx_offpolicy.crossq:CrossQ",
        ("Box",),
        "SAC without target networks, batch-renormalised critics (Bhatt et al. 2024)",
    ),
    (
        "td3",
        "rlx_offpolicy.td3:TD3",
        ("Box",),
        "twin delayed DDPG: clipped double Q, smoothed targets (Fujimoto et al. 2018)",
    ),
    (
        "ddpg",
        "rlx_offpolicy.ddpg:DDPG",
        ("Box",),
        "deep deterministic policy gradient (Lillicrap et al. 2016)",
    ),
    (
        "prioritized-dqn",
        "rlx_offpolicy.dqn:PrioritizedDQN",
        ("Discrete",),
        "double DQN with prioritized experience replay (Schaul et al. 2016)",
    ),
    (
        "noisy-dqn",
        "rlx_offpolicy.dqn:NoisyDQN",
        ("Discrete",),
        "DQN exploring with noisy linear layers (Fortunato et al. 2018)",
    ),
    (
        "c51",
        "rlx_offpolicy.dqn:C51",
        ("Discrete",),
        "categorical distributional DQN, 51 atoms (Bellemare et al. 2017)",
    ),
    (
        "rainbow",
        "rlx_offpolicy.dqn:Rainbow",
        ("Discrete",),
        "double, dueling, noisy, prioritized, n-step and distributional DQN (Hessel et al. 2018)",
    ),
    (
        "qr-dqn",
        "rlx_offpolicy.qr_dqn:QRDQN",
        ("Discrete",),
        "distributional DQN with quantile regression (Dabney et al. 2018)",
    ),
    (
        "tqc",
        "rlx_offpolicy.tqc:TQC",
        ("Box",),
        "SAC with a truncated mixture of quantile critics (Kuznetsov et al. 2020)",
    ),
)


#: name: where the algorithm comes from (AgentSpec.paper)
PAPERS = {
    "dqn": (
        "Mnih et al. (2015), Human-level control through deep reinforcement learning, Nature 518"
    ),
    "double-dqn": (
        "van Hasselt, Guez & Silver (2016), Deep Reinforcement Learning with Double "
        "Q-learning, AAAI"
    ),
    "dueling-dqn": (
        "Wang, Schaul, Hessel, van Hasselt, Lanctot & de Freitas (2016), Dueling "
        "Network Architectures for Deep Reinforcement Learning, ICML"
    ),
    "sac": (
        "Haarnoja, Zhou, Abbeel & Levine (2018), Soft Actor-Critic: Off-Policy Maximum "
        "Entropy Deep Reinforcement Learning with a Stochastic Actor, ICML; Haarnoja et "
        "al. (2018), Soft Actor-Critic Algorithms and Applications, arXiv:1812.05905"
    ),
    "crossq": (
        "Bhatt, Palenicek, Belousov, Argus, Amiranashvili, Brox & Peters (2024), CrossQ: "
        "Batch Normalization in Deep Reinforcement Learning for Greater Sample Efficiency "
        "and Simplicity, ICLR"
    ),
    "td3": (
        "Fujimoto, van Hoof & Meger (2018), Addressing Function Approximation Error in "
        "Actor-Critic Methods, ICML"
    ),
    "ddpg": ("Lillicrap et al. (2016), Continuous control with deep reinforcement learning, ICLR"),
    "prioritized-dqn": (
        "Schaul, Quan, Antonoglou & Silver (2016), Prioritized Experience Replay, ICLR"
    ),
    "noisy-dqn": ("Fortunato et al. (2018), Noisy Networks for Exploration, ICLR"),
    "c51": (
        "Bellemare, Dabney & Munos (2017), A Distributional Perspective on "
        "Reinforcement Learning, ICML"
    ),
    "rainbow": (
        "Hessel et al. (2018), Rainbow: Combining Improvements in Deep Reinforcement Learning, AAAI"
    ),
    "qr-dqn": (
        "Dabney, Rowland, Bellemare & Munos (2018), Distributional Reinforcement Learning "
        "with Quantile Regression, AAAI"
    ),
    "tqc": (
        "Kuznetsov, Shvechikov, Grishin & Vetrov (2020), Controlling Overestimation Bias "
        "with Truncated Mixture of Continuous Distributional Quantile Critics, ICML"
    ),
}


@hookimpl
def rlx_register_agents(register: Callable[[AgentSpec], None]) -> None:
    """Register DQN, its presets, DDPG, TD3 and SAC, with the family's tuned settings."""
    for name, target, actions, summary in AGENTS:
        register(
            AgentSpec(
                name=name,
                target=target,
                family="offpolicy",
                summary=summary,
                paper=PAPERS[name],
                tuned="rlx_offpolicy:tuned.toml",
                observation_spaces=ENCODED_OBSERVATIONS,
                action_spaces=actions,
            )
        )
