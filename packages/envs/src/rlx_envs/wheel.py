"""The wheel bandit: a contextual problem whose need for exploration is set by one number.

Riquelme, Tucker and Snoek, "Deep Bayesian Bandits Showdown: An Empirical Comparison of
Bayesian Deep Networks for Thompson Sampling", ICLR 2018, section "The Wheel Bandit".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.errors import ConfigError
from rlx_envs.base import BanditEnv


class WheelBandit(BanditEnv):
    """Contexts uniform in the unit disk; 5 arms; a rare, large reward outside radius ``delta``.

    Arm 0 (the paper's ``a_1``) always pays ``N(mu_1, sigma^2)``. Inside the disk of radius
    ``delta`` the four other arms pay ``N(mu_2, sigma^2)``, so arm 0 is best. Outside it, the
    arm of the context's quadrant pays ``N(mu_3, sigma^2)`` and is best by far; the other
    three still pay ``N(mu_2, sigma^2)``. Quadrant arms, in the order of the paper's code:
    1 for ``x > 0, y > 0``; 2 for ``x > 0, y <= 0``; 3 for ``x <= 0, y > 0``; 4 for
    ``x <= 0, y <= 0``. The larger ``delta``, the rarer the high-reward region (a fraction
    ``1 - delta^2`` of contexts) and the more an agent must explore to find it.

    Defaults are the paper's: ``mu_1 = 1.2``, ``mu_2 = 1.0``, ``mu_3 = 50``, ``sigma = 0.01``,
    and ``delta = 0.95`` from its reference code. The default horizon of 2000 rounds is the
    number of contexts that code plays per problem (``num_contexts = 2000`` in
    ``example_main.py``), so regrets are comparable with its runs. Regret uses the expected
    rewards above; the context is rounded to float32 before it decides the best arm, so the
    agent sees exactly the point that sets the rewards.
    """

    def __init__(
        self,
        delta: float = 0.95,
        mu_1: float = 1.2,
        mu_2: float = 1.0,
        mu_3: float = 50.0,
        sigma: float = 0.01,
        horizon: int = 2000,
    ) -> None:
        if not 0.0 <= delta <= 1.0:
            raise ConfigError(f"delta must be in [0, 1], got {delta!r}")
        if not np.isfinite(sigma) or sigma < 0:
            raise ConfigError(f"sigma must be a finite number >= 0, got {sigma!r}")
        self.delta = float(delta)
        self.mu_1, self.mu_2, self.mu_3 = float(mu_1), float(mu_2), float(mu_3)
        self.sigma = float(sigma)
        super().__init__(n_arms=5, context_dim=2, horizon=horizon, low=-1.0, high=1.0)
        self._expected = np.empty(5)

    def _next_context(self) -> np.ndarray:
        radius = np.sqrt(self.np_random.random())
        angle = 2.0 * np.pi * self.np_random.random()
        context = np.array([radius * np.cos(angle), radius * np.sin(angle)], dtype=np.float32)
        self._set_expected(context)
        return context

    def _set_expected(self, context: np.ndarray) -> None:
        x, y = float(context[0]), float(context[1])
        self._expected[0] = self.mu_1
        self._expected[1:] = self.mu_2
        if np.hypot(x, y) > self.delta:
            self._expected[1 + 2 * (x <= 0) + (y <= 0)] = self.mu_3

    def expected_rewards(self) -> np.ndarray:
        return self._expected.copy()

    def _draw_reward(self, action: int) -> float:
        return float(self._expected[action] + self.sigma * self.np_random.standard_normal())

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._set_expected(np.asarray(state["context"], dtype=np.float32))
