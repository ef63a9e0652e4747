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
    (
        "rlx/BitFlipping-v0",
        "rlx_envs.goals:BitFlippingEnv",
        "goal-conditioned: flip n_bits=15 bits to match a goal, -1 per step (HER's test task)",
    ),
    (
        "rlx/PointGoal-v0",
        "rlx_envs.goals:PointGoalEnv",
        "goal-conditioned: drive a point to a goal in the unit square, minus the distance",
    ),
    (
        "rlx/LightOrDark-v0",
        "rlx_envs.pixels:LightOrDarkEnv",
        "Dict observations with an image: say whether it is bright (tests CNNs on Dict keys)",
    ),
    (
        "rlx/CartPoleNoVel-v1",
        "rlx_envs.partial:CartPoleNoVelocity",
        "CartPole-v1 with its velocities zeroed: partially observable, needs memory (the zoo's)",
    ),
    (
        "rlx/MaskedPick-v0",
        "rlx_envs.masked:MaskedPickEnv",
        "pick the best of 3 valid actions among 16, known from action_masks() alone",
    ),
)

#: id -> steps per episode, for the episodic tasks (the bandits have no episodes to cut)
EPISODE_STEPS = {
    "rlx/BitFlipping-v0": 15,
    "rlx/PointGoal-v0": 50,
    "rlx/LightOrDark-v0": 1,
    "rlx/CartPoleNoVel-v1": 500,
    "rlx/MaskedPick-v0": 20,
}

#: id -> (observation space, action space) as ``rlx list envs`` shows them (default arguments)
SPACES = {
    "rlx/BernoulliMAB-v0": ("Box(n_bandits=1,)", "Discrete(n_arms=10)"),
    "rlx/GaussianMAB-v0": ("Box(n_bandits=1,)", "Discrete(n_arms=10)"),
    "rlx/Wheel-v0": ("Box(2,)", "Discrete(5)"),
    "rlx/Mushroom-v0": ("Box(117,)", "Discrete(2)"),
    "rlx/Statlog-v0": ("Box(9,)", "Discrete(7)"),
    "rlx/Covertype-v0": ("Box(54,)", "Discrete(7)"),
    "rlx/Adult-v0": ("Box(92,)", "Discrete(14)"),
    "rlx/Census-v0": ("Box(one-hot codes,)", "Discrete(dOccup codes)"),
    "rlx/Magic-v0": ("Box(10,)", "Discrete(2)"),
    "rlx/Wine-v0": ("Box(13,)", "Discrete(3)"),
    "rlx/BitFlipping-v0": ("Dict(3 x MultiBinary(n_bits=15))", "Discrete(n_bits=15)"),
    "rlx/PointGoal-v0": ("Dict(3 x Box(2,))", "Box(2,)"),
    "rlx/LightOrDark-v0": ("Dict(image 36x36x1, noise 2)", "Discrete(2)"),
    "rlx/CartPoleNoVel-v1": ("Box(4,) (velocities zeroed)", "Discrete(2)"),
    "rlx/MaskedPick-v0": ("Box(n_actions=16,)", "Discrete(n_actions=16)"),
}


@hookimpl
def rlx_register_envs(register: Callable[[EnvSpec], None]) -> None:
    """Register the bandit, data-bandit and goal environments of rlx-envs."""
    for env_id, target, summary in ENVS:
        observations, actions = SPACES[env_id]
        register(
            EnvSpec(
                id=env_id,
                target=target,
                summary=summary,
                observation_space=observations,
                action_space=actions,
                max_episode_steps=EPISODE_STEPS.get(env_id),
            )
        )
