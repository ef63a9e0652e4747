"""The plugin manifest of rlx-envs: environment specs only, so listing imports no NumPy code."""

from __future__ import annotations

from collections.abc import Callable

from rlx import EnvSpec, hookimpl

#: id, "module:Class" target, one-line summary
ENVS = (
    (
        "rlx/BernoulliMAB-v0",
        "rlx_envs.multi_armed:BernoulliMAB",
        "multi-armed bandit, 0/1 rewards; n_bandits > 1 shows which bandit as a one-hot context",
    ),
    (
        "rlx/GaussianMAB-v0",
        "rlx_envs.multi_armed:GaussianMAB",
        "multi-armed bandit, Gaussian rewards (the 10-armed testbed by default)",
    ),
    (
        "rlx/Wheel-v0",
        "rlx_envs.wheel:WheelBandit",
        "wheel bandit: 2-d contexts, 5 arms, exploration set by delta (Riquelme et al. 2018)",
    ),
    (
        "rlx/Mushroom-v0",
        "rlx_envs.uci:MushroomBandit",
        "UCI Mushroom: eat or leave, +5 / -35 rewards, 117 one-hot features",
    ),
    (
        "rlx/Statlog-v0",
        "rlx_envs.uci:StatlogBandit",
        "UCI Statlog (Shuttle): 7 classes as arms, 9 numeric features",
    ),
    (
        "rlx/Covertype-v0",
        "rlx_envs.uci:CovertypeBandit",
        "UCI Covertype: 7 forest cover types as arms, 54 features",
    ),
    (
        "rlx/Adult-v0",
        "rlx_envs.uci:AdultBandit",
        "UCI Adult: 14 occupations as arms, census attributes as features",
    ),
    (
        "rlx/Census-v0",
        "rlx_envs.uci:CensusBandit",
        "UCI US Census 1990: occupation codes as arms, one-hot attributes",
    ),
    (
        "rlx/Magic-v0",
        "rlx_envs.uci:MagicBandit",
        "UCI MAGIC Gamma Telescope: gamma or hadron, 10 numeric features",
    ),
    (
        "rlx/Wine-v0",
        "rlx_envs.uci:WineBandit",
        "UCI Wine: 3 cultivars as arms, 13 numeric features",
    ),
)


@hookimpl
def rlx_register_envs(register: Callable[[EnvSpec], None]) -> None:
    for env_id, target, summary in ENVS:
        register(EnvSpec(id=env_id, target=target, summary=summary))
