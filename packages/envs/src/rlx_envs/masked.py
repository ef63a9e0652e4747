"""A task with many actions of which few are valid at each step: what invalid-action masking
is for.

:class:`MaskedPickEnv` offers ``n_actions`` actions; at each step ``n_valid`` of them, drawn
at random, are valid. Every action has a value in ``[0, 1]``, drawn anew at each step, which
the observation shows; picking a valid action earns its value, picking an invalid one costs
``penalty`` and ends the episode. Which actions are valid is not in the observation: it comes
from the ``action_masks()`` method (sb3-contrib's convention) and ``info["action_mask"]``
alone; with ``mask_in_info=True`` the environment has no such method and the info alone tells
(PettingZoo's convention, and that of many gymnasium environments). A masked policy only
has to learn to prefer the actions of higher value (the best of 3 valid ones is worth 0.75 on
average, a random valid one 0.5: about 15 and 10 over the 20 steps of ``rlx/MaskedPick-v0``);
an unmasked one picks a valid action with probability ``n_valid / n_actions`` whatever it
learns.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class MaskedPickEnv(gym.Env):
    """Observations ``(n_actions,)`` float32: the actions' values; Discrete(``n_actions``)
    actions, ``n_valid`` of them valid at a time (the registered ``rlx/MaskedPick-v0`` cuts an
    episode at 20 steps). The valid actions are in every reset's and step's
    ``info["action_mask"]``, and ``action_masks()`` returns them unless ``mask_in_info``: then
    the instance has no such method, and masking has to read the info."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's attribute)

    def __init__(
        self,
        n_actions: int = 16,
        n_valid: int = 3,
        penalty: float = 1.0,
        mask_in_info: bool = False,
    ) -> None:
        if not 1 <= n_valid <= n_actions:
            raise ValueError(f"n_valid must be in 1..n_actions={n_actions}, got {n_valid}")
        self.n_actions, self.n_valid, self.penalty = int(n_actions), int(n_valid), float(penalty)
        self.observation_space = spaces.Box(0.0, 1.0, (self.n_actions,), np.float32)
        self.action_space = spaces.Discrete(self.n_actions)
        self.valid = np.zeros(self.n_actions, bool)
        self.values = np.zeros(self.n_actions, np.float32)
        self.mask_in_info = bool(mask_in_info)
        if not self.mask_in_info:
            # An attribute of the instance, so that with mask_in_info there is no method to find.
            self.action_masks = self.valid_actions

    def _draw(self) -> tuple[np.ndarray, dict[str, Any]]:
        """New valid actions and values; the observation and the info that shows them."""
        self.valid[:] = False
        self.valid[self.np_random.choice(self.n_actions, self.n_valid, replace=False)] = True
        self.values = self.np_random.uniform(0.0, 1.0, self.n_actions).astype(np.float32)
        return self.values.copy(), {"action_mask": self.valid.copy()}

    def valid_actions(self) -> np.ndarray:
        """The valid actions now, one bool per action (``action_masks()`` unless
        ``mask_in_info``)."""
        return self.valid.copy()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode: the first valid actions and their values."""
        super().reset(seed=seed)
        return self._draw()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """The value of a valid action (and new valid actions), or ``-penalty`` and the end of
        the episode for an invalid one."""
        action = int(action)
        if not self.valid[action]:
            info = {"action_mask": self.valid.copy()}
            return self.values.copy(), -self.penalty, True, False, info
        reward = float(self.values[action])
        observation, info = self._draw()
        return observation, reward, False, False, info
