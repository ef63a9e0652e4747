"""Linear contextual bandits: one Bayesian or ridge linear regression per arm, updated online.

Both agents keep, for every arm, the precision matrix ``lambda * I + X^T X`` of the contexts
that arm was pulled in, its inverse, ``X^T y`` and the mean ``inverse @ X^T y``. A new
observation changes one arm by a rank-one term, so the inverse follows by the
Sherman-Morrison formula in O(d^2) instead of a refit from all data in O(n d^2 + d^3)
(the reference implementation of Riquelme et al. and GenRL's port refit at every round;
``benchmarks/bandits_linear_speed.py`` measures the difference).

NumPy float64 is used throughout: at these sizes (d of 10 to 120) one call costs
microseconds, less than torch's per-call overhead, and these agents need no torch at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.config import hyperparameter
from rlx.protocols import AgentState
from rlx_bandits.base import BanditLearner


class RidgeRegressions:
    """One ridge regression per arm on features of size ``dim``, updated one observation at a time.

    Arrays (``k`` arms, ``d`` features): ``precision`` and ``covariance`` (its inverse) of
    shape ``(k, d, d)``, ``xty`` and ``mean`` of shape ``(k, d)``, ``counts`` of shape ``(k,)``;
    ``observations`` is the sum of ``counts``.
    """

    def __init__(self, n_arms: int, dim: int, regularisation: float) -> None:
        self.regularisation = regularisation
        eye = np.eye(dim)
        self.precision = np.repeat((regularisation * eye)[None], n_arms, axis=0)
        self.covariance = np.repeat((eye / regularisation)[None], n_arms, axis=0)
        self.xty = np.zeros((n_arms, dim))
        self.mean = np.zeros((n_arms, dim))
        self.counts = np.zeros(n_arms, dtype=np.int64)
        self.observations = 0

    def update(self, arm: int, x: np.ndarray, y: float) -> None:
        """Add one observation ``(x, y)`` (``x`` of shape ``(d,)``) to ``arm``'s regression."""
        covariance = self.covariance[arm]
        u = covariance @ x
        # Sherman-Morrison: (P + x x^T)^-1 = P^-1 - (P^-1 x)(P^-1 x)^T / (1 + x^T P^-1 x).
        # Broadcasting instead of np.outer: this runs once per round, np.outer's checks cost.
        covariance -= u[:, None] * (u / (1.0 + float(x @ u)))
        self.precision[arm] += x[:, None] * x
        xty = self.xty[arm]
        xty += y * x
        self.counts[arm] += 1
        self.observations += 1
        self.mean[arm] = covariance @ xty

    def refit(self, x: np.ndarray, arms: np.ndarray, y: np.ndarray) -> None:
        """Recompute all arms from data ``x`` ``(n, d)``, ``arms`` ``(n,)``, ``y`` ``(n,)``."""
        dim = self.precision.shape[-1]
        for arm in range(len(self.counts)):
            rows = arms == arm
            xa, ya = x[rows], y[rows]
            self.precision[arm] = self.regularisation * np.eye(dim) + xa.T @ xa
            self.covariance[arm] = np.linalg.inv(self.precision[arm])
            self.xty[arm] = xa.T @ ya
            self.mean[arm] = self.covariance[arm] @ self.xty[arm]
            self.counts[arm] = int(rows.sum())
        self.observations = len(arms)

    def mean_values(self, x: np.ndarray) -> np.ndarray:
        """The fitted reward of every arm at ``x`` ``(d,)``: shape ``(k,)``."""
        return self.mean @ x

    def quadratic_forms(self, x: np.ndarray) -> np.ndarray:
        """``x^T covariance_a x`` for every arm ``a``: shape ``(k,)``."""
        # Positive in exact arithmetic; clipped so rounding never reaches a square root as < 0.
        return np.maximum((self.covariance @ x) @ x, 0.0)

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "precision": self.precision,
            "covariance": self.covariance,
            "xty": self.xty,
            "mean": self.mean,
            "counts": self.counts,
        }

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        for name, value in self.arrays().items():
            value[...] = arrays[name]
        self.observations = int(self.counts.sum())


class NormalInverseGammaRegressions(RidgeRegressions):
    """Bayesian linear regression per arm with a normal-inverse-gamma prior.

    For arm ``a``: ``reward = beta_a . x + noise``, ``noise ~ N(0, sigma2_a)``,
    ``sigma2_a ~ InvGamma(a0, b0)`` and ``beta_a | sigma2_a ~ N(0, sigma2_a / lambda_prior I)``.
    The posterior is ``sigma2_a ~ InvGamma(a0 + n_a / 2, b0 + (y^T y - mu^T P mu) / 2)`` and
    ``beta_a | sigma2_a ~ N(mu, sigma2_a P^-1)`` with ``P = lambda_prior I + X^T X`` and
    ``mu = P^-1 X^T y`` (Riquelme et al. 2018, section 3; ``mu^T P mu = mu^T X^T y``).
    """

    def __init__(self, n_arms: int, dim: int, lambda_prior: float, a0: float, b0: float) -> None:
        super().__init__(n_arms, dim, lambda_prior)
        self.a0, self.b0 = a0, b0
        self.yty = np.zeros(n_arms)
        self.a = np.full(n_arms, a0)
        self.b = np.full(n_arms, b0)

    def update(self, arm: int, x: np.ndarray, y: float) -> None:
        super().update(arm, x, y)
        self.yty[arm] += y * y
        self._update_noise(arm)

    def refit(self, x: np.ndarray, arms: np.ndarray, y: np.ndarray) -> None:
        super().refit(x, arms, y)
        self.yty[:] = np.bincount(arms, weights=y * y, minlength=len(self.counts))
        for arm in range(len(self.counts)):
            self._update_noise(arm)

    def _update_noise(self, arm: int) -> None:
        """The inverse-gamma posterior of ``arm``'s noise variance, from its statistics."""
        residual = self.yty[arm] - self.mean[arm] @ self.xty[arm]
        self.a[arm] = self.a0 + 0.5 * self.counts[arm]
        # Non-negative in exact arithmetic; rounding can leave a tiny negative residual.
        self.b[arm] = self.b0 + 0.5 * max(residual, 0.0)

    def sample_values(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One posterior draw of every arm's expected reward at ``x`` ``(d,)``: shape ``(k,)``.

        Thompson sampling only ever uses ``beta_a . x``. Given ``sigma2_a`` it is normal with
        mean ``mu_a . x`` and variance ``sigma2_a x^T P_a^-1 x``, so drawing that scalar has
        exactly the distribution of drawing ``beta_a`` and multiplying, without a Cholesky
        factorisation per arm and round.
        """
        sigma2 = self.b / rng.standard_gamma(self.a)  # InvGamma(a, b) = b / Gamma(a, 1)
        spread = np.sqrt(sigma2 * self.quadratic_forms(x))
        return self.mean_values(x) + spread * rng.standard_normal(len(sigma2))

    def arrays(self) -> dict[str, np.ndarray]:
        return {**super().arrays(), "yty": self.yty, "a": self.a, "b": self.b}


class Features:
    """The regression features of a context ``(d,)``: itself, then a constant 1 if ``intercept``.

    Written into one reused array: the agents use the features before the next call.
    """

    def __init__(self, context_dim: int, intercept: bool) -> None:
        self.buffer = np.ones(context_dim + int(intercept))
        self.context_dim = context_dim

    def __call__(self, context: np.ndarray) -> np.ndarray:
        self.buffer[: self.context_dim] = context
        return self.buffer


@dataclass
class LinearPosteriorConfig:
    """Hyperparameters of :class:`LinearPosterior` (defaults: Riquelme et al. 2018)."""

    lambda_prior: float = hyperparameter(
        0.25,
        "precision of the Gaussian prior on the weights, relative to the noise variance",
        low=0,
        low_open=True,
    )
    a0: float = hyperparameter(
        6.0, "shape of the inverse-gamma prior on the noise variance", low=0, low_open=True
    )
    b0: float = hyperparameter(
        6.0, "scale of the inverse-gamma prior on the noise variance", low=0, low_open=True
    )
    intercept: bool = hyperparameter(True, "append a constant feature 1 to every context")
    initial_pulls: int = hyperparameter(
        2, "rounds each arm is pulled in turn (round robin) before sampling starts", low=0
    )


class LinearPosterior(BanditLearner):
    """Thompson sampling with an exact Bayesian linear regression per arm.

    Riquelme, Tucker & Snoek (2018), "Deep Bayesian Bandits Showdown", ICLR, section 3
    ("Linear methods", LinFullPost): each arm's reward is linear in the context with its own
    unknown noise variance under a normal-inverse-gamma prior; each round draws the noise
    variance and the weights of every arm from its posterior and pulls the arm whose drawn
    model predicts the highest reward. Posteriors are updated incrementally (rank one per
    observation); see :class:`NormalInverseGammaRegressions`.
    """

    Config = LinearPosteriorConfig

    def __init__(self, env: Any, config: LinearPosteriorConfig, seed: int) -> None:
        super().__init__(env, config, seed)
        self.features = Features(self.context_dim, config.intercept)
        self.posterior = NormalInverseGammaRegressions(
            self.n_arms, len(self.features.buffer), config.lambda_prior, config.a0, config.b0
        )

    def select(self, context: np.ndarray) -> int:
        x = self.features(self.check_context(context))
        pulls = self.posterior.observations
        if pulls < self.n_arms * self.config.initial_pulls:
            return pulls % self.n_arms
        return int(self.posterior.sample_values(x, self.rng).argmax())

    def greedy(self, context: np.ndarray) -> int:
        x = self.features(self.check_context(context))
        return int(self.posterior.mean_values(x).argmax())

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        x = self.features(self.check_context(context))
        self.posterior.update(int(action), x, float(reward))

    def learned_state(self) -> AgentState:
        return AgentState(arrays={k: v.copy() for k, v in self.posterior.arrays().items()})

    def load_learned_state(self, state: AgentState) -> None:
        self.posterior.load_arrays(state.arrays)


@dataclass
class LinUCBConfig:
    """Hyperparameters of :class:`LinUCB`."""

    alpha: float = hyperparameter(
        1.0, "width of the confidence bound, in standard errors of the fitted reward", low=0
    )
    regularisation: float = hyperparameter(
        1.0, "ridge penalty lambda (the design matrix starts as lambda * I)", low=0, low_open=True
    )
    intercept: bool = hyperparameter(True, "append a constant feature 1 to every context")


class LinUCB(BanditLearner):
    """LinUCB with disjoint linear models (Li, Chu, Langford & Schapire 2010, Algorithm 1).

    Each arm keeps a ridge regression ``theta_a = A_a^-1 b_a`` of its reward on the context,
    and the arm with the highest upper confidence bound
    ``theta_a . x + alpha * sqrt(x^T A_a^-1 x)`` is pulled. ``A_a^-1`` is updated by
    Sherman-Morrison; selection draws no random numbers (ties go to the lowest arm).
    """

    Config = LinUCBConfig

    def __init__(self, env: Any, config: LinUCBConfig, seed: int) -> None:
        super().__init__(env, config, seed)
        self.features = Features(self.context_dim, config.intercept)
        self.regressions = RidgeRegressions(
            self.n_arms, len(self.features.buffer), config.regularisation
        )

    def select(self, context: np.ndarray) -> int:
        x = self.features(self.check_context(context))
        bonus = self.config.alpha * np.sqrt(self.regressions.quadratic_forms(x))
        return int(np.argmax(self.regressions.mean_values(x) + bonus))

    def greedy(self, context: np.ndarray) -> int:
        x = self.features(self.check_context(context))
        return int(np.argmax(self.regressions.mean_values(x)))

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        x = self.features(self.check_context(context))
        self.regressions.update(int(action), x, float(reward))

    def learned_state(self) -> AgentState:
        return AgentState(arrays={k: v.copy() for k, v in self.regressions.arrays().items()})

    def load_learned_state(self, state: AgentState) -> None:
        self.regressions.load_arrays(state.arrays)
