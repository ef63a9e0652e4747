"""Linear contextual bandits: one Bayesian or ridge linear regression per arm, updated online.

Both agents keep, for every arm, the precision matrix ``lambda * I + X^T X`` of the contexts
that arm was pulled in, its inverse, ``X^T y`` and the mean ``inverse @ X^T y``. A new
observation changes one arm by a rank-one term, so the inverse follows by the
Sherman-Morrison formula in O(d^2) instead of a refit from all data in O(n d^2 + d^3)
(the reference implementation of Riquelme et al. and GenRL's port refit at every round;
``benchmarks/bandits_linear_speed.py`` measures the difference).

NumPy float64 is used throughout: at these sizes (d of 10 to 120) a NumPy call costs less
than torch's per-call overhead, and these agents need no torch at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.config import hyperparameter
from rlx.protocols import AgentState
from rlx_bandits.base import BanditLearner


def regressions_estimate(n_arms: int, dim: int) -> tuple[int, str]:
    """Bytes of :class:`NormalInverseGammaRegressions` (or the ridge ones) of ``n_arms`` arms on
    ``dim`` features, float64: the stacked covariances and means, the Gram matrices, the
    scratch, and the block of draws; and what lowers them."""
    arms, d = int(n_arms), int(dim)
    nbytes = 8 * (3 * arms * (d + 1) * (d + 1) + 3 * (d + 1) * (d + 1) + arms * (2 * 32 + 8))
    return nbytes, "use an environment with fewer arms or context features"


class RidgeRegressions:
    """One ridge regression per arm on features of size ``dim``, updated one observation at a time.

    Arrays (``k`` arms, ``d`` features): ``precision`` and ``covariance`` (its inverse) of
    shape ``(k, d, d)``, ``xty`` and ``mean`` of shape ``(k, d)``, ``yty`` and ``counts`` of
    shape ``(k,)``; ``observations`` is the sum of ``counts``.

    Each round is a few dozen NumPy calls on arrays of ``d`` to ``k d^2`` numbers, where a
    call's fixed cost dominates, so the arrays are laid out to need
    few calls: ``covariance`` and ``mean`` are views of one ``(k d + k, d)`` matrix (one
    matrix-vector product gives every arm's ``covariance @ x`` and ``mean . x``), and
    ``precision``, ``xty`` and ``yty`` are views of each arm's Gram matrix
    of ``(x, y)``, which one outer product updates. The per-round methods write into
    preallocated scratch arrays, and use ``ndarray.dot``, the cheapest call for these sizes.
    """

    def __init__(self, n_arms: int, dim: int, regularisation: float) -> None:
        self.regularisation = regularisation
        k, d = n_arms, dim
        eye = np.eye(d)
        self._stacked = np.zeros((k * d + k, d))
        self.covariance = self._stacked[: k * d].reshape(k, d, d)  # a view: rows are contiguous
        self.covariance[...] = eye / regularisation
        self.mean = self._stacked[k * d :]
        # [[lambda I + X^T X, X^T y], [y^T X, y^T y]] per arm.
        self._gram = np.zeros((k, d + 1, d + 1))
        self.precision = self._gram[:, :d, :d]
        self.precision[...] = regularisation * eye
        self.xty = self._gram[:, d, :d]
        self.yty = self._gram[:, d, d]
        self.counts = np.zeros(k, dtype=np.int64)
        self.observations = 0
        # Scratch: products with the stacked matrix, then one arm's rank-one terms.
        self._products = np.empty(k * d + k)
        self._covariance_x = self._products[: k * d].reshape(k, d)
        self._mean_x = self._products[k * d :]
        self._quadratic = np.empty(k)
        self._zeros = np.zeros(k)
        self._u = np.empty(d)
        self._u_column = self._u[:, None]
        self._denominator = np.empty(1)
        self._scaled = np.empty(d)
        self._scaled_row = self._scaled[None, :]
        self._outer = np.empty((d, d))
        self._z = np.empty(d + 1)
        self._z_column, self._z_row = self._z[:, None], self._z[None, :]
        self._outer_z = np.empty((d + 1, d + 1))

    def update(self, arm: int, x: np.ndarray, y: float) -> None:
        """Add one observation ``(x, y)`` (``x`` float64 of shape ``(d,)``) to ``arm``."""
        covariance = self.covariance[arm]
        u = covariance.dot(x, out=self._u)
        # Sherman-Morrison: (P + x x^T)^-1 = P^-1 - (P^-1 x)(P^-1 x)^T / (1 + x^T P^-1 x).
        self._denominator[0] = 1.0 + x.dot(u)
        np.divide(u, self._denominator, out=self._scaled)
        # Outer products as (d, 1) @ (1, d) products: cheaper calls than broadcasting.
        self._u_column.dot(self._scaled_row, out=self._outer)
        np.subtract(covariance, self._outer, out=covariance)
        z = self._z
        z[:-1] = x
        z[-1] = y
        gram = self._gram[arm]
        np.add(gram, self._z_column.dot(self._z_row, out=self._outer_z), out=gram)
        self.counts[arm] += 1
        self.observations += 1
        covariance.dot(self.xty[arm], out=self.mean[arm])

    def _project(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every arm's ``x^T covariance_a x`` and ``mean_a . x`` as scratch arrays ``(k,)``
        (overwritten by the next call)."""
        self._stacked.dot(x, out=self._products)
        quadratic = self._covariance_x.dot(x, out=self._quadratic)
        # Positive in exact arithmetic; clipped so rounding never reaches a square root as < 0.
        return np.maximum(quadratic, self._zeros, out=quadratic), self._mean_x

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
            self.yty[arm] = ya @ ya
            self.counts[arm] = int(rows.sum())
        self.observations = len(arms)

    def mean_values(self, x: np.ndarray) -> np.ndarray:
        """The fitted reward of every arm at ``x`` ``(d,)``: shape ``(k,)``."""
        return self.mean @ x

    def quadratic_forms(self, x: np.ndarray) -> np.ndarray:
        """``x^T covariance_a x`` for every arm ``a``: shape ``(k,)``."""
        return self._project(x)[0].copy()

    def residuals(self) -> np.ndarray:
        """Every arm's ridge residual ``y^T y - b^T A^-1 b`` (a sum of squares plus the
        penalty, so non-negative; rounding can leave a tiny negative, clipped): shape ``(k,)``.
        """
        residual = self.yty - self._explained()
        return np.maximum(residual, 0.0, out=residual)

    def _explained(self) -> np.ndarray:
        """Every arm's ``b^T A^-1 b = mean . xty``, the part of ``y^T y`` the fit explains."""
        return np.einsum("kd,kd->k", self.mean, self.xty)

    def arrays(self) -> dict[str, np.ndarray]:
        """The statistics by name (``precision``, ``covariance``, ``xty``, ``yty``, ``mean``,
        ``counts``): views of the live arrays, which a checkpoint copies."""
        return {
            "precision": self.precision,
            "covariance": self.covariance,
            "xty": self.xty,
            "yty": self.yty,
            "mean": self.mean,
            "counts": self.counts,
        }

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Write saved :meth:`arrays` into these, in place (the views stay valid), and recount
        ``observations``."""
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

    The random numbers of :meth:`sample_values` are drawn ahead, ``DRAW_BLOCK`` rounds at a
    time: ``gammas[a, t] ~ Gamma(a_a, 1)`` and ``normals[a, t] ~ N(0, 1)`` for the rounds
    ``t >= draw_index[0]`` of the block (one ``standard_gamma`` call with an array of shapes
    costs several times one with a scalar shape). When an update changes an arm's shape
    ``a_a``, that arm's unused gammas are drawn again at the new shape (one scalar-shape
    call, when ``update`` is given the generator; without it, the whole block is discarded),
    so every round still uses fresh, independent draws from the current posterior. The block
    is in :meth:`arrays`: checkpoints resume exactly.
    """

    #: Rounds of random numbers drawn at once by :meth:`sample_values`.
    DRAW_BLOCK = 32
    _DRAWS = ("gammas", "normals", "draw_index")

    def __init__(self, n_arms: int, dim: int, lambda_prior: float, a0: float, b0: float) -> None:
        super().__init__(n_arms, dim, lambda_prior)
        self.a0, self.b0 = a0, b0
        self.a = np.full(n_arms, a0)
        self.b = np.full(n_arms, b0)
        self.gammas = np.ones((n_arms, self.DRAW_BLOCK))
        self.normals = np.zeros((n_arms, self.DRAW_BLOCK))
        self.draw_index = np.array([self.DRAW_BLOCK])  # none drawn yet
        self._spread = np.empty(n_arms)

    def update(
        self, arm: int, x: np.ndarray, y: float, rng: np.random.Generator | None = None
    ) -> None:
        """Add ``(x, y)`` to ``arm``; ``rng`` redraws the arm's unused gammas (see above)."""
        super().update(arm, x, y)
        self._update_noise(arm)
        start = self.draw_index.item(0)
        if start < self.DRAW_BLOCK:
            if rng is None:
                self.draw_index[0] = self.DRAW_BLOCK
            else:
                shape = self.a.item(arm)
                self.gammas[arm, start:] = rng.standard_gamma(shape, self.DRAW_BLOCK - start)

    def refit(self, x: np.ndarray, arms: np.ndarray, y: np.ndarray) -> None:
        super().refit(x, arms, y)
        for arm in range(len(self.counts)):
            self._update_noise(arm)
        self.draw_index[0] = self.DRAW_BLOCK  # drawn for the old shapes

    def _update_noise(self, arm: int) -> None:
        """The inverse-gamma posterior of ``arm``'s noise variance, from its statistics."""
        residual = self.yty.item(arm) - self.mean[arm].dot(self.xty[arm])
        self.a[arm] = self.a0 + 0.5 * self.counts.item(arm)
        # Non-negative in exact arithmetic; rounding can leave a tiny negative residual.
        self.b[arm] = self.b0 + 0.5 * max(residual, 0.0)

    def sample_values(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One posterior draw of every arm's expected reward at ``x`` ``(d,)``: shape ``(k,)``.

        Thompson sampling only ever uses ``beta_a . x``. Given ``sigma2_a`` it is normal with
        mean ``mu_a . x`` and variance ``sigma2_a x^T P_a^-1 x``, so drawing that scalar has
        exactly the distribution of drawing ``beta_a`` and multiplying, without a Cholesky
        factorisation per arm and round.
        """
        quadratic, means = self._project(x)
        t = self.draw_index.item(0)
        if t == self.DRAW_BLOCK:
            rng.standard_gamma(self.a[:, None], size=self.gammas.shape, out=self.gammas)
            rng.standard_normal(out=self.normals)
            t = 0
        self.draw_index[0] = t + 1
        # sigma2 = b / Gamma(a, 1) ~ InvGamma(a, b); the spread is sqrt(sigma2 x^T P^-1 x).
        spread = np.divide(self.b, self.gammas[:, t], out=self._spread)
        np.sqrt(np.multiply(spread, quadratic, out=spread), out=spread)
        values = np.multiply(spread, self.normals[:, t])
        return np.add(values, means, out=values)

    def arrays(self) -> dict[str, np.ndarray]:
        """The ridge statistics, the noise posteriors ``a`` and ``b``, and the block of draws
        (``gammas``, ``normals``, ``draw_index``), so that a resumed run draws the same numbers."""
        return {
            **super().arrays(),
            "a": self.a,
            "b": self.b,
            "gammas": self.gammas,
            "normals": self.normals,
            "draw_index": self.draw_index,
        }

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        for name, value in self.arrays().items():
            value[...] = arrays[name]
        self.observations = int(self.counts.sum())


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

    def memory_estimate(self) -> dict[str, tuple[int, str]]:
        dim = self.context_dim + int(self.config.intercept)
        return {
            f"linear regressions of {self.n_arms:,} arms on {dim:,} features": (
                regressions_estimate(self.n_arms, dim)
            )
        }

    def __init__(self, env: Any, config: LinearPosteriorConfig, seed: int) -> None:
        super().__init__(env, config, seed)
        self.features = Features(self.context_dim, config.intercept)
        self.posterior = NormalInverseGammaRegressions(
            self.n_arms, len(self.features.buffer), config.lambda_prior, config.a0, config.b0
        )

    def select(self, context: np.ndarray) -> int:
        """Each arm in turn for the first ``initial_pulls`` rounds per arm, then the arm whose
        reward, drawn from its posterior at this context, is highest."""
        x = self.features(self.check_context(context))
        pulls = self.posterior.observations
        if pulls < self.n_arms * self.config.initial_pulls:
            return pulls % self.n_arms
        return int(self.posterior.sample_values(x, self.rng).argmax())

    def greedy(self, context: np.ndarray) -> int:
        """The arm whose posterior mean reward at this context is highest."""
        x = self.features(self.check_context(context))
        return int(self.posterior.mean_values(x).argmax())

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        """Add the round to the pulled arm's regression (a rank-one update), redrawing its unused
        gammas from ``self.rng``."""
        x = self.features(self.check_context(context))
        self.posterior.update(int(action), x, float(reward), self.rng)

    def learned_state(self) -> AgentState:
        """A copy of the regressions' :meth:`~NormalInverseGammaRegressions.arrays`."""
        return AgentState(arrays={k: v.copy() for k, v in self.posterior.arrays().items()})

    def load_learned_state(self, state: AgentState) -> None:
        """Write the saved regressions into this agent's."""
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
    noise: str = hyperparameter(
        "unit",
        "noise scale of the width: 'unit' (Li et al.'s width, for rewards in [0, 1]) or "
        "'estimated' (each arm's residual standard deviation, for rewards on other scales)",
        choices=("unit", "estimated"),
    )


class LinUCB(BanditLearner):
    """LinUCB with disjoint linear models (Li, Chu, Langford & Schapire 2010, Algorithm 1).

    Each arm keeps a ridge regression ``theta_a = A_a^-1 b_a`` of its reward on the context,
    and the arm with the highest upper confidence bound
    ``theta_a . x + alpha * sigma_a * sqrt(x^T A_a^-1 x)`` is pulled. ``A_a^-1`` is updated by
    Sherman-Morrison; selection draws no random numbers (ties go to the lowest arm).

    Li et al. take ``sigma_a = 1`` (``noise="unit"``, the default), which suits rewards in
    [0, 1]. With rewards on another scale that width is off by the same factor: on Mushroom
    (rewards 5, 0 and -35) the agent stops eating after a few poisonous mushrooms and never
    learns otherwise. ``noise="estimated"`` sets ``sigma_a`` to each arm's residual standard
    deviation, ``sqrt((1 + RSS_a) / (1 + n_a))`` with the ridge residual
    ``RSS_a = y^T y - b_a^T A_a^-1 b_a``: one pseudo-observation of unit variance to start,
    then the spread the arm's rewards actually show. The residual also holds whatever a
    linear model cannot fit, so on a misspecified problem the estimate keeps exploring.
    Relative to uniform's regret after 2,000 rounds (3 seeds), unit / estimated: Mushroom
    51.7 / 7.5, Statlog 12.1 / 11.6, Adult 91.0 / 86.0, MAGIC 42.9 / 42.4, and the wheel
    (delta 0.95, a non-linear problem) 24.7 / 94.4.
    """

    Config = LinUCBConfig

    def memory_estimate(self) -> dict[str, tuple[int, str]]:
        dim = self.context_dim + int(self.config.intercept)
        return {
            f"linear regressions of {self.n_arms:,} arms on {dim:,} features": (
                regressions_estimate(self.n_arms, dim)
            )
        }

    def __init__(self, env: Any, config: LinUCBConfig, seed: int) -> None:
        super().__init__(env, config, seed)
        self.features = Features(self.context_dim, config.intercept)
        self.regressions = RidgeRegressions(
            self.n_arms, len(self.features.buffer), config.regularisation
        )

    def select(self, context: np.ndarray) -> int:
        """The arm with the highest upper confidence bound at this context (the lowest among ties);
        it draws no random numbers."""
        x = self.features(self.check_context(context))
        width = self.regressions.quadratic_forms(x)
        if self.config.noise == "estimated":
            width *= self.noise_variances()
        bonus = self.config.alpha * np.sqrt(width)
        return int(np.argmax(self.regressions.mean_values(x) + bonus))

    def noise_variances(self) -> np.ndarray:
        """Every arm's estimated reward noise variance ``(1 + RSS_a) / (1 + n_a)``: ``(k,)``."""
        return (1.0 + self.regressions.residuals()) / (1.0 + self.regressions.counts)

    def greedy(self, context: np.ndarray) -> int:
        """The arm whose fitted reward at this context is highest."""
        x = self.features(self.check_context(context))
        return int(np.argmax(self.regressions.mean_values(x)))

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        """Add the round to the pulled arm's ridge regression (a rank-one update)."""
        x = self.features(self.check_context(context))
        self.regressions.update(int(action), x, float(reward))

    def learned_state(self) -> AgentState:
        """A copy of the ridge regressions' :meth:`~RidgeRegressions.arrays`."""
        return AgentState(arrays={k: v.copy() for k, v in self.regressions.arrays().items()})

    def load_learned_state(self, state: AgentState) -> None:
        """Write the saved ridge regressions into this agent's."""
        self.regressions.load_arrays(state.arrays)
