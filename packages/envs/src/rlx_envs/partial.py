"""CartPole with its velocities hidden: a task that needs memory.

:class:`CartPoleNoVelocity` is gymnasium's ``CartPole-v1`` whose observations show the cart's
position and the pole's angle, and zeros where the cart's velocity and the pole's angular
velocity were: the partially observable CartPole of RL Baselines3 Zoo's ``CartPoleNoVel-v1``
(its ``MaskVelocityWrapper`` zeroes indices 1 and 3 and keeps the shape), on which the zoo
tunes sb3-contrib's recurrent PPO. A policy that sees one observation cannot tell which way
the pole is falling; one that remembers the last observations (a recurrent policy) can.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

#: The indices of CartPole's observation that hold velocities: the cart's and the pole's.
VELOCITY_INDICES = (1, 3)


class CartPoleNoVelocity(CartPoleEnv):
    """``CartPole-v1`` whose observations are ``(x, 0, theta, 0)``: the velocities zeroed, the
    observation space and everything else CartPole's (its state, and so a checkpoint's
    snapshot of it, still holds the velocities)."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        self.mask = np.ones(4, np.float32)
        self.mask[list(VELOCITY_INDICES)] = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """CartPole's reset, its observation masked."""
        observation, info = super().reset(seed=seed, options=options)
        return observation * self.mask, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """CartPole's step, its observation masked."""
        observation, reward, terminated, truncated, info = super().step(action)
        return observation * self.mask, reward, terminated, truncated, info
