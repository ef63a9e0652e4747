"""Goal-conditioned tasks with Dict observations: ``observation``, ``achieved_goal`` and
``desired_goal`` keys and a vectorised ``compute_reward``, the interface of gymnasium-robotics
that hindsight experience replay relies on.

- :class:`BitFlippingEnv`: the bit-flipping task of Andrychowicz et al. (2017), section 3.1:
  ``n`` bits, one flipped per step, reward -1 until the state equals the goal. With ``n = 15``
  a random policy almost never sees a goal reached, so DQN alone fails and DQN with HER
  learns it.
- :class:`PointGoalEnv`: a point in the unit square driven by continuous velocities towards a
  goal, rewarded by minus its distance: a small continuous-control Dict task.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class BitFlippingEnv(gym.Env):
    """``n`` bits and a goal; action ``i`` flips bit ``i``; reward 0 when the bits equal the
    goal (the episode ends), else -1. Registered with ``n`` steps per episode."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's attribute)

    def __init__(self, n_bits: int = 15) -> None:
        if not isinstance(n_bits, int) or n_bits < 1:
            raise ValueError(f"n_bits must be a positive integer, got {n_bits!r}")
        self.n_bits = n_bits
        bits = spaces.MultiBinary(n_bits)
        self.observation_space = spaces.Dict(
            {"observation": bits, "achieved_goal": bits, "desired_goal": bits}
        )
        self.action_space = spaces.Discrete(n_bits)
        self.state = np.zeros(n_bits, np.int8)
        self.goal = np.zeros(n_bits, np.int8)

    def _observation(self) -> dict[str, np.ndarray]:
        return {
            "observation": self.state.copy(),
            "achieved_goal": self.state.copy(),
            "desired_goal": self.goal.copy(),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self.state = self.np_random.integers(0, 2, self.n_bits).astype(np.int8)
        self.goal = self.np_random.integers(0, 2, self.n_bits).astype(np.int8)
        while (self.goal == self.state).all():  # start away from the goal
            self.goal = self.np_random.integers(0, 2, self.n_bits).astype(np.int8)
        return self._observation(), {}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        """Flip bit ``action``; the episode ends when every bit matches the goal."""
        self.state[int(action)] ^= 1
        reward = float(self.compute_reward(self.state, self.goal, {}))
        success = reward == 0.0
        return self._observation(), reward, success, False, {"is_success": success}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """0 where ``achieved_goal`` equals ``desired_goal`` (on the last axis), else -1."""
        achieved, desired = np.asarray(achieved_goal), np.asarray(desired_goal)
        return -(achieved != desired).any(axis=-1).astype(np.float32)


class PointGoalEnv(gym.Env):
    """A point in ``[-1, 1]^2`` moved by ``0.1 * action`` (``action`` in ``[-1, 1]^2``) towards
    a random goal; reward minus the distance to it; the episode ends within ``0.05`` of the
    goal. Registered with 50 steps per episode."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's attribute)

    def __init__(self, tolerance: float = 0.05) -> None:
        self.tolerance = float(tolerance)
        square = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict(
            {"observation": square, "achieved_goal": square, "desired_goal": square}
        )
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.position = np.zeros(2, np.float32)
        self.goal = np.zeros(2, np.float32)

    def _observation(self) -> dict[str, np.ndarray]:
        return {
            "observation": self.position.copy(),
            "achieved_goal": self.position.copy(),
            "desired_goal": self.goal.copy(),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        return self._observation(), {}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        """Move the point by ``0.1 * action`` (clipped to the square); the episode ends
        within ``tolerance`` of the goal."""
        move = np.clip(np.asarray(action, np.float32), -1.0, 1.0) * 0.1
        self.position = np.clip(self.position + move, -1.0, 1.0).astype(np.float32)
        reward = float(self.compute_reward(self.position, self.goal, {}))
        success = -reward < self.tolerance
        return self._observation(), reward, success, False, {"is_success": success}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """Minus the distance between ``achieved_goal`` and ``desired_goal`` (last axis)."""
        difference = np.asarray(achieved_goal) - np.asarray(desired_goal)
        return -np.linalg.norm(difference, axis=-1).astype(np.float32)
