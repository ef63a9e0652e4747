"""CMA-ES: the covariance matrix adaptation evolution strategy, full and separable.

Hansen & Ostermeier (2001), "Completely Derandomized Self-Adaptation in Evolution Strategies",
Evolutionary Computation 9(2); equations and default parameters of Hansen (2016), "The CMA
Evolution Strategy: A Tutorial", arXiv:1604.00772. The separable variant (diagonal covariance,
linear cost in the dimension, for large parameter counts) is Ros & Hansen (2008), "A Simple
Modification in CMA-ES Achieving Linear Time and Space Complexity", PPSN X.

Each generation: sample ``x_i = m + sigma B D z_i``; sort by fitness; move ``m`` to the weighted
mean of the best ``mu``; update the evolution paths ``p_sigma`` (cumulative step-size
adaptation) and ``p_c``; update ``C`` by the rank-one and rank-mu terms, the rank-mu term with
negative weights for the worst members (active CMA, Jastrebski & Arnold (2006), "Improving
Evolution Strategies through Active Covariance Matrix Adaptation", CEC; the tutorial's default
weights); adapt ``sigma``; optionally restart with twice the population when a run stalls
(IPOP-CMA-ES, Auger & Hansen (2005), CEC);
re-decompose ``C = B D^2 B^T`` only every few generations (the tutorial's lazy update), which
keeps the cost per generation near ``O(n^2)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.config import hyperparameter
from rlx_es.agent import ESAgent, ESConfig
from rlx_es.core import Population


def default_population_size(n: int) -> int:
    """``4 + floor(3 ln n)`` (Hansen 2016, table 1)."""
    return 4 + int(3 * math.log(n))


def recombination_weights(
    n: int, population_size: int, active: bool = True, separable: bool = False
) -> tuple[np.ndarray, float, float, float]:
    """The weights ``w_1..w_lambda``, ``mu_eff``, ``c_1`` and ``c_mu`` of Hansen (2016), table 1.

    ``w'_i = ln((lambda + 1) / 2) - ln i``; the positive ones are scaled to sum to 1 and, with
    ``active``, the negative ones to sum to ``-min(alpha_mu^-, alpha_mueff^-, alpha_posdef^-)``
    with ``alpha_mu^- = 1 + c_1 / c_mu``, ``alpha_mueff^- = 1 + 2 mu_eff^- / (mu_eff + 2)`` and
    ``alpha_posdef^- = (1 - c_1 - c_mu) / (n c_mu)`` (active CMA, Jastrebski & Arnold 2006);
    without ``active`` they are 0. ``separable`` scales ``c_1`` and ``c_mu`` by ``(n + 2) / 3``
    (Ros & Hansen 2008) before the negative weights are set.
    """
    raw = math.log((population_size + 1) / 2) - np.log(np.arange(1, population_size + 1))
    positive, negative = raw[raw > 0], raw[raw < 0]
    mu_eff = positive.sum() ** 2 / (positive**2).sum()
    alpha_cov = 2.0
    c_1 = alpha_cov / ((n + 1.3) ** 2 + mu_eff)
    c_mu = min(
        1 - c_1,
        alpha_cov * (0.25 + mu_eff + 1 / mu_eff - 2) / ((n + 2) ** 2 + alpha_cov * mu_eff / 2),
    )
    if separable:
        c_1 = min(1.0, c_1 * (n + 2) / 3)
        c_mu = min(1 - c_1, c_mu * (n + 2) / 3)
    weights = np.where(raw > 0, raw / positive.sum(), 0.0)
    if active and len(negative) and c_mu > 0:
        mu_eff_minus = negative.sum() ** 2 / (negative**2).sum()
        alpha = min(
            1 + c_1 / c_mu,
            1 + 2 * mu_eff_minus / (mu_eff + 2),
            (1 - c_1 - c_mu) / (n * c_mu),
        )
        weights = np.where(raw < 0, max(alpha, 0.0) * raw / -negative.sum(), weights)
    return weights, float(mu_eff), float(c_1), float(c_mu)


class CMAES:
    """(mu/mu_w, lambda)-CMA-ES over a flat parameter vector (ask/tell, fitness maximised).

    ``separable=True`` keeps ``C`` diagonal (sep-CMA-ES) with the learning rates scaled by
    ``(n + 2) / 3``. ``active=True`` (the default) uses the worst half of each generation with
    negative weights in the rank-mu update (active CMA). ``restarts > 0`` restarts from the
    initial centre and step size with twice the population (IPOP-CMA-ES, Auger & Hansen 2005)
    when a run stalls, up to ``restarts`` times.
    """

    def __init__(
        self,
        centre: np.ndarray,
        sigma: float,
        population_size: int | None = None,
        separable: bool = False,
        active: bool = True,
        restarts: int = 0,
    ) -> None:
        n = len(centre)
        self.n, self.separable, self.active = n, separable, active
        self.restarts, self.restarts_done = int(restarts), 0
        self.initial_centre = np.array(centre, dtype=np.float64)
        self.initial_sigma = float(sigma)
        self.chi_n = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n))
        self.generation = 0
        self._start(population_size or default_population_size(n))

    def _set_parameters(self, population_size: int) -> None:
        """Constants of Hansen (2016), table 1, for a population of ``population_size``."""
        n = self.n
        self.population_size = lam = int(population_size)
        self.mu = lam // 2
        weights, mu_eff, self.c_1, self.c_mu = recombination_weights(
            n, lam, self.active, self.separable
        )
        self.weights = weights
        self.mu_eff = mu_eff
        # pycma's default step-size learning rate; the tutorial's table 1 has n + mu_eff + 5.
        self.c_sigma = (mu_eff + 2) / (n + mu_eff + 3)
        self.d_sigma = 1 + 2 * max(0.0, math.sqrt((mu_eff - 1) / (n + 1)) - 1) + self.c_sigma
        self.c_c = (4 + mu_eff / n) / (n + 4 + 2 * mu_eff / n)
        # Rows of the sorted population with a nonzero weight, and their weights.
        self._used = np.flatnonzero(weights)
        self._positive = weights[: self.mu]

    def _start(self, population_size: int) -> None:
        """(Re)start from the initial centre and step size with ``population_size`` members."""
        n = self.n
        self._set_parameters(population_size)
        self.m = self.initial_centre.copy()
        self.sigma = self.initial_sigma
        self.p_sigma = np.zeros(n)
        self.p_c = np.zeros(n)
        self.C = np.ones(n) if self.separable else np.eye(n)
        self.B = None if self.separable else np.eye(n)
        self.D = np.ones(n)
        self.run_generation = 0
        self.eigen_generation = self.generation
        self.best_history = np.zeros(0)

    @property
    def mean(self) -> np.ndarray:
        """The current mean ``m`` (the policy to deploy)."""
        return self.m

    def _transform(self) -> np.ndarray:
        """``A`` with ``C = A A^T``: the vector ``D`` (separable) or the matrix ``B diag(D)``."""
        return self.D.copy() if self.separable else self.B * self.D

    def ask(self, seed: int) -> Population:
        """The next generation: members ``m + sigma B D z_i`` (``m + sigma D z_i`` when separable),
        the noise drawn from ``seed``."""
        return Population(
            self.m.copy(), self.sigma, seed, self.population_size, scale=self._transform()
        )

    def tell(self, population: Population, fitness: np.ndarray) -> dict[str, float]:
        """One CMA-ES update from the members' fitness: the mean, the evolution paths, the
        covariance and the step size, then an IPOP restart if the run stalled and restarts remain;
        returns ``sigma``, the axis ratio, the norm of ``p_sigma``, the population size and the
        restarts done."""
        n = self.n
        fitness = np.asarray(fitness)
        order = np.argsort(-fitness, kind="stable")
        members = order[self._used]
        z = population.noise(members)
        y = population.steps(z)
        mu = self.mu
        y_w = self._positive @ y[:mu]
        z_w = self._positive @ z[:mu]
        self.m = self.m + self.sigma * y_w
        self.generation += 1
        self.run_generation += 1

        # C^{-1/2} y_w = B z_w because y = B D z.
        c_inv_sqrt_y = z_w if self.separable else self.B @ z_w
        self.p_sigma = (1 - self.c_sigma) * self.p_sigma + math.sqrt(
            self.c_sigma * (2 - self.c_sigma) * self.mu_eff
        ) * c_inv_sqrt_y
        norm_p_sigma = float(np.linalg.norm(self.p_sigma))
        h_sigma = float(
            norm_p_sigma / math.sqrt(1 - (1 - self.c_sigma) ** (2 * self.run_generation))
            < (1.4 + 2 / (n + 1)) * self.chi_n
        )
        self.p_c = (1 - self.c_c) * self.p_c + h_sigma * math.sqrt(
            self.c_c * (2 - self.c_c) * self.mu_eff
        ) * y_w

        # Active CMA: a negative weight is rescaled by n / ||C^{-1/2} y_i||^2 = n / ||z_i||^2
        # (Hansen 2016, eq. 46), which keeps C positive definite.
        weights = self.weights[self._used]
        if len(weights) > mu:
            weights = weights.copy()
            weights[mu:] *= n / np.maximum((z[mu:] ** 2).sum(axis=1), 1e-300)
        decay = (
            1
            - self.c_1
            - self.c_mu * float(self.weights.sum())
            + (1 - h_sigma) * self.c_1 * self.c_c * (2 - self.c_c)
        )
        if self.separable:
            self.C = decay * self.C + self.c_1 * self.p_c**2 + self.c_mu * (weights @ (y**2))
        else:
            self.C = (
                decay * self.C
                + self.c_1 * np.outer(self.p_c, self.p_c)
                + self.c_mu * (y.T * weights) @ y
            )
        self.sigma *= math.exp((self.c_sigma / self.d_sigma) * (norm_p_sigma / self.chi_n - 1))
        self._decompose()
        info = {
            "sigma": self.sigma,
            "axis_ratio": float(self.D.max() / self.D.min()),
            "path_sigma_norm": norm_p_sigma,
            "population_size": float(self.population_size),
            "restarts": float(self.restarts_done),
        }
        if self.restarts_done < self.restarts:
            self.best_history = np.append(self.best_history, -float(fitness.max()))
            if self._stalled(-fitness):
                self.restarts_done += 1
                self._start(2 * self.population_size)
        return info

    def _stalled(self, values: np.ndarray) -> bool:
        """The tutorial's termination criteria (Hansen 2016, B.3) that trigger an IPOP restart."""
        n = self.n
        window = 10 + math.ceil(30 * n / self.population_size)
        recent = self.best_history[-window:]
        if (
            len(recent) >= window
            and max(recent.max(), values.max()) - min(recent.min(), values.min()) < 1e-12
        ):
            return True  # TolFun
        if self.D.min() <= 0 or self.D.max() / self.D.min() > 1e7:
            return True  # ConditionCov: cond(C) > 1e14
        scale = np.sqrt(self.C if self.separable else np.diag(self.C))
        if self.sigma * max(float(np.abs(self.p_c).max()), float(scale.max())) < (
            1e-12 * self.initial_sigma
        ):
            return True  # TolX
        if np.all(self.m == self.m + 0.2 * self.sigma * scale):
            return True  # NoEffectCoord
        stagnation = 120 + int(30 * n / self.population_size)
        history = self.best_history
        if self.run_generation > stagnation and len(history) >= 40:
            tail = max(20, int(0.3 * len(history)))
            old, new = history[: len(history) - tail], history[-tail:]
            if len(old) >= 20 and np.median(new) >= np.median(old[-tail:]):
                return True  # TolStagnation
        return False

    def _decompose(self) -> None:
        if self.separable:
            self.D = np.sqrt(np.maximum(self.C, 1e-300))
            return
        # Decompose again only after 1 / (10 n (c_1 + c_mu)) generations (Hansen 2016, B.2).
        if self.generation - self.eigen_generation < 1 / (10 * self.n * (self.c_1 + self.c_mu)):
            return
        self.eigen_generation = self.generation
        self.C = np.triu(self.C) + np.triu(self.C, 1).T
        eigenvalues, self.B = np.linalg.eigh(self.C)
        self.D = np.sqrt(np.maximum(eigenvalues, 1e-300))

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Copies of the mean, the evolution paths, the covariance and its decomposition and the
        best-fitness history, and ``sigma``, the generation counters, the population size and the
        restarts done."""
        arrays = {
            "m": self.m,
            "p_sigma": self.p_sigma,
            "p_c": self.p_c,
            "C": self.C,
            "D": self.D,
            "best_history": self.best_history,
        }
        if self.B is not None:
            arrays["B"] = self.B
        meta = {
            "sigma": self.sigma,
            "generation": self.generation,
            "eigen_generation": self.eigen_generation,
            "run_generation": self.run_generation,
            "population_size": self.population_size,
            "restarts_done": self.restarts_done,
        }
        return {k: v.copy() for k, v in arrays.items()}, meta

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Inverse of :meth:`state`; the saved population size (which restarts double) sets the
        constants again."""
        self._set_parameters(int(meta.get("population_size", self.population_size)))
        for key in ("m", "p_sigma", "p_c", "C", "D"):
            setattr(self, key, np.array(arrays[key]))
        if "B" in arrays:
            self.B = np.array(arrays["B"])
        self.best_history = np.array(arrays.get("best_history", np.zeros(0)))
        self.sigma = float(meta["sigma"])
        self.generation = int(meta["generation"])
        self.eigen_generation = int(meta["eigen_generation"])
        self.run_generation = int(meta.get("run_generation", self.generation))
        self.restarts_done = int(meta.get("restarts_done", 0))


@dataclass
class CMAESConfig(ESConfig):
    """CMA-ES on a small policy; ``population_size=0`` uses the default ``4 + 3 ln n``."""

    population_size: int = hyperparameter(
        32, "members per generation (0: 4 + floor(3 ln n_params))", low=0
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (8,), "units of each tanh hidden layer of the policy (empty: linear policy)"
    )
    initial_sigma: float = hyperparameter(
        0.5, "initial step size sigma", low=0, low_open=True, search=(0.05, 2.0)
    )
    separable: bool = hyperparameter(
        False, "diagonal covariance (sep-CMA-ES): linear cost for large parameter counts"
    )
    active: bool = hyperparameter(
        True, "active CMA: negative weights for the worst half in the rank-mu update"
    )
    restarts: int = hyperparameter(
        0,
        "IPOP-CMA-ES: restart from the initial mean and step size with twice the population "
        "when a run stalls (Hansen's termination criteria), up to this many times",
        low=0,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.population_size == 1:
            raise ValueError("population_size must be at least 2 (or 0 for the default)")


class CMAESAgent(ESAgent):
    """CMA-ES on a gymnasium environment; ``act`` uses the mean."""

    Config = CMAESConfig
    name = "cma-es"

    def build_strategy(self, initial: np.ndarray) -> CMAES:
        """A :class:`CMAES` from the configuration (``population_size`` 0: the default for the
        parameter count)."""
        c = self.config
        return CMAES(
            initial,
            c.initial_sigma,
            c.population_size or None,
            c.separable,
            active=c.active,
            restarts=c.restarts,
        )

    @property
    def population_size(self) -> int:
        """The strategy's current population size: the default for the parameter count when
        ``population_size`` is 0, doubled at each IPOP restart."""
        return self.strategy.population_size

    def largest_population(self, n_params: int) -> int:
        """``population_size`` (or the default for ``n_params``), doubled at each restart."""
        c = self.config
        # Past 64 doublings no population fits anyway; 2**restarts itself could not be computed.
        return (c.population_size or default_population_size(n_params)) * 2 ** min(c.restarts, 64)

    def memory_estimate(self, n_params: int) -> dict[str, tuple[int, str]]:
        """The population and environments, and the covariance: a few ``(n, n)`` float64
        matrices (``C``, ``B`` and the eigendecomposition's work), or vectors when separable."""
        c = self.config
        parts = super().memory_estimate(n_params)
        if c.restarts:
            doubling = f" (the population doubles at each of up to {c.restarts} restarts)"
            parts = {
                name + doubling: (nbytes, f"lower restarts, or {hint.removeprefix('lower ')}")
                for name, (nbytes, hint) in parts.items()
            }
        if not c.separable:
            parts[f"a covariance matrix of {n_params:,} x {n_params:,} parameters"] = (
                4 * n_params * n_params * 8,
                "lower hidden_sizes or set separable=true",
            )
        return parts
