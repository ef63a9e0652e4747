"""A tiny environment that registers itself on import, for ``module:Env-v0`` ids in tests."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class TinyCountEnv(gym.Env):
    """Count up to ``length`` steps; action 1 pays 1, action 0 pays nothing."""

    def __init__(self, length: int = 5) -> None:
        self.length = length
        self.observation_space = gym.spaces.Discrete(length + 1)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        self.t += 1
        return self.t, float(action), self.t >= self.length, False, {}


gym.register("RlxTinyCount-v0", entry_point=TinyCountEnv, max_episode_steps=50)
