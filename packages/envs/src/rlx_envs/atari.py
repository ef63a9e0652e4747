"""The ``atari`` wrapper preset: the standard preprocessing of the Arcade Learning Environment.

Mnih et al. (2015) and Machado et al. (2018), as DQN and PPO baselines apply it, built from
gymnasium's wrappers where gymnasium has one:

- ``AtariPreprocessing``: up to 30 no-op actions at reset, a frame skip of 4 with the max of
  the last two frames, 84x84 grayscale (the emulator's own frame skip is turned off);
- :class:`EpisodicLife` (training only): a lost life ends the training episode, the game
  goes on;
- :class:`FireReset`: press FIRE after a reset in games that wait for it (Breakout);
- :class:`FireOnLifeLoss` (evaluation only): press FIRE after a lost life in those games, as
  training's episodic life and FIRE on reset do, so that a greedy policy that never learned
  to serve plays its game out instead of standing still until the 108,000-frame limit;
- ``ClipReward`` to [-1, 1] (training only): the sign of Atari's integer rewards;
- ``FrameStackObservation``: the last 4 frames, ``(4, 84, 84)`` ``uint8``.

Evaluations leave out the training-only wrappers, so they report the game's score.

    rlx run ppo --env ALE/Breakout-v5 --wrapper atari
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils import RecordConstructorArgs


class StickyActions(gym.Wrapper, RecordConstructorArgs):
    """The emulator's sticky actions, taken over: at every frame the previous action is
    repeated with the environment's ``repeat_action_probability`` (0.25 in ALE v5), and a
    reset makes NOOP the previous action, as in the ALE (Machado et al. 2018).

    The ALE keeps the action it repeats inside its C++ environment, outside the states that
    ``cloneState`` saves, and ale_py can neither read nor set it: a run restored from an
    emulator snapshot repeated another action and diverged. Here the repeated action is a
    plain attribute and the draws come from the environment's ``np_random``, both of which
    :mod:`rlx.envstate` saves. Wrap the environment itself (one emulator frame per step).
    """

    def __init__(self, env: gym.Env) -> None:
        RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        atari = env.unwrapped
        self.repeat_action_probability = atari.ale.getFloat("repeat_action_probability")
        if self.repeat_action_probability > 0:
            atari.ale.setFloat("repeat_action_probability", 0.0)
            atari.load_game()  # the emulator reads the setting when it loads the game
        if atari.continuous:
            self.noop: Any = np.zeros(env.action_space.shape, env.action_space.dtype)
        else:
            self.noop = atari.get_action_meanings().index("NOOP")
        self.last_action = self.noop

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        self.last_action = self.noop
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        if self.repeat_action_probability == 0:
            return self.env.step(action)
        if self.np_random.random() >= self.repeat_action_probability:
            self.last_action = action
        return self.env.step(self.last_action)


class FireReset(gym.Wrapper, RecordConstructorArgs):
    """After a reset, take FIRE (and then the next action in the game's list, as the common
    baselines do) in games whose action set has FIRE; a no-op wrapper in the others."""

    def __init__(self, env: gym.Env) -> None:
        RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        meanings = env.unwrapped.get_action_meanings()
        self.fire = meanings.index("FIRE") if "FIRE" in meanings else None

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        observation, info = self.env.reset(**kwargs)
        if self.fire is None:
            return observation, info
        for action in (self.fire, self.fire + 1):
            observation, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                observation, info = self.env.reset(**kwargs)
        return observation, info


class FireOnLifeLoss(gym.Wrapper, RecordConstructorArgs):
    """After a step that loses a life and does not end the game, take FIRE, in games whose
    action set has FIRE; a no-op wrapper in the others. For evaluations: in training,
    :class:`EpisodicLife` ends the episode there and :class:`FireReset` fires."""

    def __init__(self, env: gym.Env) -> None:
        RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        meanings = env.unwrapped.get_action_meanings()
        self.fire = meanings.index("FIRE") if "FIRE" in meanings else None
        self.lives = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        observation, info = self.env.reset(**kwargs)
        self.lives = self.env.unwrapped.ale.lives()
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        if self.fire is not None and lives < self.lives and not (terminated or truncated):
            observation, fired, terminated, truncated, info = self.env.step(self.fire)
            reward = float(reward) + float(fired)
            lives = self.env.unwrapped.ale.lives()
        self.lives = lives
        return observation, reward, terminated, truncated, info


class EpisodicLife(gym.Wrapper, RecordConstructorArgs):
    """A lost life ends the episode for the learner (``terminated``); the next reset goes on
    with the same game unless the game itself is over (Mnih et al. 2015)."""

    def __init__(self, env: gym.Env) -> None:
        RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self.lives = 0
        self.game_over = True

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return observation, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        if self.game_over:
            observation, info = self.env.reset(**kwargs)
        else:  # a no-op step from the state the lost life left
            observation, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                observation, info = self.env.reset(**kwargs)
        self.lives = self.env.unwrapped.ale.lives()
        return observation, info


def atari(
    noop_max: int = 30,
    frame_skip: int = 4,
    screen_size: int = 84,
    stack: int = 4,
    episodic_life: bool = True,
    clip_rewards: bool = True,
) -> dict[str, Any]:
    """The preset's wrappers and the environment arguments they need (its keyword arguments
    come from ``--wrapper atari,stack=...``)."""
    wrappers: list[dict[str, Any]] = [
        {"name": "rlx_envs.atari:StickyActions"},
        {
            "name": "AtariPreprocessing",
            "kwargs": {
                "noop_max": noop_max,
                "frame_skip": frame_skip,
                "screen_size": screen_size,
                "grayscale_obs": True,
                "scale_obs": False,
            },
        },
    ]
    if episodic_life:
        wrappers.append({"name": "rlx_envs.atari:EpisodicLife", "training_only": True})
    wrappers.append({"name": "rlx_envs.atari:FireReset"})
    wrappers.append({"name": "rlx_envs.atari:FireOnLifeLoss", "evaluation_only": True})
    if clip_rewards:
        wrappers.append(
            {
                "name": "ClipReward",
                "kwargs": {"min_reward": -1.0, "max_reward": 1.0},
                "training_only": True,
            }
        )
    wrappers.append({"name": "FrameStackObservation", "kwargs": {"stack_size": stack}})
    return {"env_kwargs": {"frameskip": 1}, "wrappers": wrappers}


#: None of the preset's arguments names code, an environment or a destination (rlx.trust).
atari.trust_arguments = {}  # type: ignore[attr-defined]
