"""Multi-armed bandits with Bernoulli or Gaussian rewards, optionally several of them at once.

With ``n_bandits > 1`` each round first draws one of the bandits uniformly at random and
shows its index as a one-hot context, so one agent plays several independent multi-armed
problems (Sutton and Barto, *Reinforcement Learning: An Introduction*, 2nd ed., section
2.9, "associative search"). With one bandit the context is the constant ``[1.0]``.

The arm means are the problem: given explicitly, or drawn from the seed of ``reset(seed=s)``
and kept through the unseeded resets that start later episodes, so the same seed always
gives the same problem (and an environment first reset without a seed draws them from
fresh entropy). They are drawn from a child of the seed's ``SeedSequence``, not from
``np_random``, so they do not shift the rounds' random numbers. They are part of
:meth:`~rlx_envs.base.BanditEnv.state_dict`.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from rlx.errors import CheckpointError, ConfigError
from rlx.memory import array_nbytes, check_allocations
from rlx_envs.base import BanditEnv, positive_int


class MultiArmedBandit(BanditEnv):
    """Shared logic of :class:`BernoulliMAB` and :class:`GaussianMAB`: means, one-hot contexts."""

    def __init__(
        self,
        n_arms: int | None,
        n_bandits: int | None,
        means: Any,
        horizon: int,
    ) -> None:
        self._means: np.ndarray | None = None
        self._given_means = means is not None
        if means is not None:
            given = np.asarray(means, dtype=np.float64)
            if given.ndim == 1:
                given = given[None, :]
            if given.ndim != 2 or given.size == 0 or not np.all(np.isfinite(given)):
                raise ConfigError(
                    "means must be a finite array of shape (n_arms,) or (n_bandits, n_arms), "
                    f"got shape {np.shape(means)}"
                )
            if n_arms is not None and n_arms != given.shape[1]:
                raise ConfigError(f"n_arms={n_arms} but means has {given.shape[1]} arms")
            if n_bandits is not None and n_bandits != given.shape[0]:
                raise ConfigError(f"n_bandits={n_bandits} but means has {given.shape[0]} rows")
            self._check_means(given)
            self._means = given
            n_arms, n_bandits = given.shape[1], given.shape[0]
        self.n_bandits = positive_int("n_bandits", 1 if n_bandits is None else n_bandits)
        n_arms = positive_int("n_arms", 10 if n_arms is None else n_arms)
        # Checked before the context space (n_bandits wide) and the means are allocated.
        check_allocations(
            {
                f"expected rewards of {self.n_bandits:,} bandit(s) of {n_arms:,} arms": (
                    array_nbytes((2, self.n_bandits, n_arms), 8),
                    "lower n_arms or n_bandits",
                ),
                f"one-hot contexts of {self.n_bandits:,} bandits": (
                    array_nbytes((4, self.n_bandits), 4),
                    "lower n_bandits",
                ),
            }
        )
        super().__init__(
            n_arms=n_arms,
            context_dim=self.n_bandits,
            horizon=horizon,
            low=0.0,
            high=1.0,
        )
        self._bandit = 0

    @property
    def means(self) -> np.ndarray:
        """The expected reward of every arm, shape ``(n_bandits, n_arms)`` (once drawn by reset)."""
        return self._drawn_means().copy()

    def _drawn_means(self) -> np.ndarray:
        if self._means is None:
            raise gymnasium.error.ResetNeeded(
                f"{type(self).__name__}: the means are drawn by reset(); call it first"
            )
        return self._means

    def _check_means(self, means: np.ndarray) -> None:
        """Raise ConfigError for means the reward distribution cannot have."""

    def _draw_means(self, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def _begin_episode(self, seed: int | None) -> None:
        if not self._given_means and (seed is not None or self._means is None):
            sequence = np.random.SeedSequence(seed).spawn(1)[0]
            means = self._draw_means(np.random.default_rng(sequence))
            self._means = means.reshape(self.n_bandits, self.n_arms)

    def _next_context(self) -> np.ndarray:
        self._bandit = int(self.np_random.integers(self.n_bandits)) if self.n_bandits > 1 else 0
        context = np.zeros(self.n_bandits, np.float32)
        context[self._bandit] = 1.0
        return context

    def expected_rewards(self) -> np.ndarray:
        return self._drawn_means()[self._bandit].copy()

    def _extra_state(self) -> dict[str, Any]:
        return {"means": None if self._means is None else self._means.tolist()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        if state["means"] is None:
            self._means = None
            return
        means = np.asarray(state["means"], dtype=np.float64)
        if means.shape != (self.n_bandits, self.n_arms):
            raise CheckpointError(
                f"{type(self).__name__}: the saved means have shape {means.shape}, this "
                f"environment has {self.n_bandits} bandit(s) of {self.n_arms} arms"
            )
        self._means = means
        self._bandit = int(np.argmax(state["context"]))


class BernoulliMAB(MultiArmedBandit):
    """Arms pay 1 with probability ``means[bandit, arm]``, else 0.

    :param n_arms: arms per bandit (default 10, or the width of ``means``).
    :param n_bandits: independent bandits, one drawn uniformly each round (context: its one-hot);
        default 1, or the height of ``means``.
    :param means: success probabilities, shape ``(n_arms,)`` or ``(n_bandits, n_arms)``;
        by default drawn uniformly from [0, 1] from the seed of ``reset(seed=...)``.
    :param horizon: rounds per episode.
    """

    def __init__(
        self,
        n_arms: int | None = None,
        n_bandits: int | None = None,
        means: Any = None,
        horizon: int = 10_000,
    ) -> None:
        super().__init__(n_arms, n_bandits, means, horizon)

    def _check_means(self, means: np.ndarray) -> None:
        if np.any(means < 0) or np.any(means > 1):
            raise ConfigError("BernoulliMAB means are probabilities: every value must be in [0, 1]")

    def _draw_means(self, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(0.0, 1.0, self.n_bandits * self.n_arms)

    def _draw_reward(self, action: int) -> float:
        return 1.0 if self.np_random.random() < self._drawn_means()[self._bandit, action] else 0.0


class GaussianMAB(MultiArmedBandit):
    """Arms pay ``means[bandit, arm] + sigma * N(0, 1)``.

    :param n_arms: arms per bandit (default 10, or the width of ``means``).
    :param n_bandits: independent bandits, one drawn uniformly each round (context: its one-hot);
        default 1, or the height of ``means``.
    :param means: expected rewards, shape ``(n_arms,)`` or ``(n_bandits, n_arms)``; by default
        drawn from the standard normal from the seed of ``reset(seed=...)`` (the
        10-armed testbed of Sutton and Barto, section 2.3).
    :param sigma: standard deviation of the reward noise.
    :param horizon: rounds per episode.
    """

    def __init__(
        self,
        n_arms: int | None = None,
        n_bandits: int | None = None,
        means: Any = None,
        sigma: float = 1.0,
        horizon: int = 10_000,
    ) -> None:
        if not np.isfinite(sigma) or sigma < 0:
            raise ConfigError(f"sigma must be a finite number >= 0, got {sigma!r}")
        self.sigma = float(sigma)
        super().__init__(n_arms, n_bandits, means, horizon)

    def _draw_means(self, rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal(self.n_bandits * self.n_arms)

    def _draw_reward(self, action: int) -> float:
        noise = self.np_random.standard_normal()
        return float(self._drawn_means()[self._bandit, action] + self.sigma * noise)
