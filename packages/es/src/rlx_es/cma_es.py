"""CMA-ES: the covariance matrix adaptation evolution strategy, full and separable.

Hansen & Ostermeier (2001), "Completely Derandomized Self-Adaptation in Evolution Strategies",
Evolutionary Computation 9(2); equations and default parameters of Hansen (2016), "The CMA
Evolution Strategy: A Tutorial", arXiv:1604.00772. The separable variant (diagonal covariance,
linear cost in the dimension, for large parameter counts) is Ros & Hansen (2008), "A Simple
Modification in CMA-ES Achieving Linear Time and Space Complexity", PPSN X.

Each generation: sample ``x_i = m + sigma B D z_i``; sort by fitness; move ``m`` to the weighted
mean of the best ``mu``; update the evolution paths ``p_sigma`` (cumulative step-size
adaptation) and ``p_c``; update ``C`` by the rank-one and rank-mu terms; adapt ``sigma``;
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


class CMAES:
    """(mu/mu_w, lambda)-CMA-ES over a flat parameter vector (ask/tell, fitness maximised).

    ``separable=True`` keeps ``C`` diagonal (sep-CMA-ES) with the learning rates scaled by
    ``(n + 2) / 3``.
    """

    def __init__(
        self,
        centre: np.ndarray,
        sigma: float,
        population_size: int | None = None,
        separable: bool = False,
    ) -> None:
        n = len(centre)
        self.n, self.separable = n, separable
        self.population_size = population_size or default_population_size(n)
        lam = self.population_size
        self.mu = lam // 2
        weights = math.log((lam + 1) / 2) - np.log(np.arange(1, self.mu + 1))
        self.weights = weights / weights.sum()
        self.mu_eff = 1.0 / (self.weights**2).sum()
        mu_eff = self.mu_eff
        self.c_sigma = (mu_eff + 2) / (n + mu_eff + 5)
        self.d_sigma = 1 + 2 * max(0.0, math.sqrt((mu_eff - 1) / (n + 1)) - 1) + self.c_sigma
        self.c_c = (4 + mu_eff / n) / (n + 4 + 2 * mu_eff / n)
        self.c_1 = 2 / ((n + 1.3) ** 2 + mu_eff)
        self.c_mu = min(1 - self.c_1, 2 * (mu_eff - 2 + 1 / mu_eff) / ((n + 2) ** 2 + mu_eff))
        if separable:
            self.c_1 = min(1.0, self.c_1 * (n + 2) / 3)
            self.c_mu = min(1 - self.c_1, self.c_mu * (n + 2) / 3)
        self.chi_n = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n))
        self.m = np.array(centre, dtype=np.float64)
        self.sigma = float(sigma)
        self.p_sigma = np.zeros(n)
        self.p_c = np.zeros(n)
        self.C = np.ones(n) if separable else np.eye(n)
        self.B = None if separable else np.eye(n)
        self.D = np.ones(n)
        self.generation = 0
        self.eigen_generation = 0

    @property
    def mean(self) -> np.ndarray:
        return self.m

    def _transform(self) -> np.ndarray:
        """``A`` with ``C = A A^T``: the vector ``D`` (separable) or the matrix ``B diag(D)``."""
        return self.D.copy() if self.separable else self.B * self.D

    def ask(self, seed: int) -> Population:
        return Population(
            self.m.copy(), self.sigma, seed, self.population_size, scale=self._transform()
        )

    def tell(self, population: Population, fitness: np.ndarray) -> dict[str, float]:
        n = self.n
        best = np.argsort(-np.asarray(fitness), kind="stable")[: self.mu]
        z = population.noise(best)
        y = population.steps(z)
        y_w = self.weights @ y
        z_w = self.weights @ z
        self.m = self.m + self.sigma * y_w
        self.generation += 1

        # C^{-1/2} y_w = B z_w because y = B D z.
        c_inv_sqrt_y = z_w if self.separable else self.B @ z_w
        self.p_sigma = (1 - self.c_sigma) * self.p_sigma + math.sqrt(
            self.c_sigma * (2 - self.c_sigma) * self.mu_eff
        ) * c_inv_sqrt_y
        norm_p_sigma = float(np.linalg.norm(self.p_sigma))
        h_sigma = float(
            norm_p_sigma / math.sqrt(1 - (1 - self.c_sigma) ** (2 * self.generation))
            < (1.4 + 2 / (n + 1)) * self.chi_n
        )
        self.p_c = (1 - self.c_c) * self.p_c + h_sigma * math.sqrt(
            self.c_c * (2 - self.c_c) * self.mu_eff
        ) * y_w

        decay = 1 - self.c_1 - self.c_mu + (1 - h_sigma) * self.c_1 * self.c_c * (2 - self.c_c)
        if self.separable:
            self.C = decay * self.C + self.c_1 * self.p_c**2 + self.c_mu * (self.weights @ (y**2))
        else:
            self.C = (
                decay * self.C
                + self.c_1 * np.outer(self.p_c, self.p_c)
                + self.c_mu * (y.T * self.weights) @ y
            )
        self.sigma *= math.exp((self.c_sigma / self.d_sigma) * (norm_p_sigma / self.chi_n - 1))
        self._decompose()
        return {
            "sigma": self.sigma,
            "axis_ratio": float(self.D.max() / self.D.min()),
            "path_sigma_norm": norm_p_sigma,
        }

    def _decompose(self) -> None:
        if self.separable:
            self.D = np.sqrt(self.C)
            return
        # Decompose again only after 1 / (10 n (c_1 + c_mu)) generations (Hansen 2016, B.2).
        if self.generation - self.eigen_generation < 1 / (10 * self.n * (self.c_1 + self.c_mu)):
            return
        self.eigen_generation = self.generation
        self.C = np.triu(self.C) + np.triu(self.C, 1).T
        eigenvalues, self.B = np.linalg.eigh(self.C)
        self.D = np.sqrt(np.maximum(eigenvalues, 1e-300))

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {"m": self.m, "p_sigma": self.p_sigma, "p_c": self.p_c, "C": self.C, "D": self.D}
        if self.B is not None:
            arrays["B"] = self.B
        meta = {
            "sigma": self.sigma,
            "generation": self.generation,
            "eigen_generation": self.eigen_generation,
        }
        return {k: v.copy() for k, v in arrays.items()}, meta

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        for key in ("m", "p_sigma", "p_c", "C", "D"):
            setattr(self, key, np.array(arrays[key]))
        if "B" in arrays:
            self.B = np.array(arrays["B"])
        self.sigma = float(meta["sigma"])
        self.generation = int(meta["generation"])
        self.eigen_generation = int(meta["eigen_generation"])


@dataclass
class CMAESConfig(ESConfig):
    """CMA-ES on a small policy; ``population_size=0`` uses the default ``4 + 3 ln n``."""

    population_size: int = hyperparameter(
        32, "members per generation (0: 4 + floor(3 ln n_params))", low=0
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (8,), "units of each tanh hidden layer of the policy (empty: linear policy)"
    )
    initial_sigma: float = hyperparameter(0.5, "initial step size sigma", low=0, low_open=True)
    separable: bool = hyperparameter(
        False, "diagonal covariance (sep-CMA-ES): linear cost for large parameter counts"
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
        c = self.config
        return CMAES(initial, c.initial_sigma, c.population_size or None, c.separable)

    @property
    def population_size(self) -> int:
        return self.strategy.population_size
