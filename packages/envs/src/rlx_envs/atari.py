"""The ``atari`` wrapper preset: the standard preprocessing of the Arcade Learning Environment.

Mnih et al. (2015) and Machado et al. (2018), as DQN and PPO baselines apply it, built from
gymnasium's wrappers where gymnasium has one:

- ``AtariPreprocessing``: up to 30 no-op actions at reset, a frame skip of 4 with the max of
  the last two frames, 84x84 grayscale (the emulator's own frame skip is turned off);
- :class:`EpisodicLife` (training only): a lost life ends the training episode, the game
  goes on;
- :class:`FireReset`: press FIRE after a reset in games that wait for it (Breakout);
- ``ClipReward`` to [-1, 1] (training only): the sign of Atari's integer rewards;
- ``FrameStackObservation``: the last 4 frames, ``(4, 84, 84)`` ``uint8``.

Evaluations leave out the training-only wrappers, so they report the game's score.

    rlx run ppo --env ALE/Breakout-v5 --wrapper atari
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.utils import RecordConstructorArgs


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
        {
            "name": "AtariPreprocessing",
            "kwargs": {
                "noop_max": noop_max,
                "frame_skip": frame_skip,
                "screen_size": screen_size,
                "grayscale_obs": True,
                "scale_obs": False,
            },
        }
    ]
    if episodic_life:
        wrappers.append({"name": "rlx_envs.atari:EpisodicLife", "training_only": True})
    wrappers.append({"name": "rlx_envs.atari:FireReset"})
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
