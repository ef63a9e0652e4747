"""A one-step task whose answer is in an image inside Dict observations.

:class:`LightOrDarkEnv` checks that an agent's network reads the image keys of a Dict
observation (a CNN per image, :class:`rlx.nn.layers.CombinedExtractor`): the only clue to the
right action is whether the image is bright or dark; the vector key is noise.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class LightOrDarkEnv(gym.Env):
    """Observations ``{"image": (size, size, 1) uint8, "noise": (2,) float32}``; action 1 when
    the image is bright, 0 when it is dark (reward 1 if right, else 0); one step per episode.
    With ``continuous=True`` the action is a Box in ``[-1, 1]``: its sign is the answer."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's attribute)

    def __init__(self, size: int = 36, continuous: bool = False) -> None:
        self.size, self.continuous = int(size), bool(continuous)
        self.observation_space = spaces.Dict(
            {
                "image": spaces.Box(0, 255, (self.size, self.size, 1), np.uint8),
                "noise": spaces.Box(-1.0, 1.0, (2,), np.float32),
            }
        )
        self.action_space = (
            spaces.Box(-1.0, 1.0, (1,), np.float32) if self.continuous else spaces.Discrete(2)
        )
        self.bright = False

    def _observation(self) -> dict[str, np.ndarray]:
        level = 200 if self.bright else 40
        image = self.np_random.integers(level - 30, level + 30, (self.size, self.size, 1))
        noise = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        return {"image": image.astype(np.uint8), "noise": noise}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self.bright = bool(self.np_random.integers(2))
        return self._observation(), {}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        """Reward 1 when the answer (``1`` or a positive action: bright) is right; one step."""
        said = float(np.asarray(action).ravel()[0]) > 0 if self.continuous else int(action) == 1
        reward = 1.0 if said == self.bright else 0.0
        return self._observation(), reward, True, False, {}
