"""The cross-entropy method with extra, decaying noise.

Rubinstein (1999), "The Cross-Entropy Method for Combinatorial and Continuous Optimization";
the added noise is Szita & Lorincz (2006), "Learning Tetris Using the Noisy Cross-Entropy
Method", Neural Computation 18(12), which keeps the variance from collapsing too early.

Each generation: sample ``x_i = mu + std * z_i`` (a diagonal Gaussian); keep the best
``elite_fraction`` of the members; set ``mu`` and ``std^2`` to the elites' mean and variance,
plus the extra noise ``Z_t``, which decays by ``noise_decay`` per generation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.config import hyperparameter
from rlx_es.agent import ESAgent, ESConfig
from rlx_es.core import Population


class CEM:
    """Noisy cross-entropy method over a flat parameter vector (ask/tell, fitness maximised)."""

    def __init__(
        self,
        centre: np.ndarray,
        population_size: int,
        initial_std: float = 0.1,
        elite_fraction: float = 0.2,
        extra_noise: float = 0.01,
        noise_decay: float = 0.95,
    ) -> None:
        self.mu = np.array(centre, dtype=np.float64)
        self.std = np.full_like(self.mu, initial_std)
        self.population_size = population_size
        self.n_elite = max(1, math.ceil(elite_fraction * population_size))
        self.extra_noise, self.noise_decay = extra_noise, noise_decay

    @property
    def mean(self) -> np.ndarray:
        """The current mean ``mu`` (the policy to deploy)."""
        return self.mu

    def ask(self, seed: int) -> Population:
        """The next generation: diagonal Gaussian members ``mu + std * z``, the noise drawn from
        ``seed``."""
        return Population(self.mu.copy(), 1.0, seed, self.population_size, scale=self.std.copy())

    def tell(self, population: Population, fitness: np.ndarray) -> dict[str, float]:
        """Refit ``mu`` and ``std`` to the elites (plus the extra noise, which then decays); returns
        the elites' mean fitness, the mean ``std`` and the extra noise."""
        elite = np.argsort(-np.asarray(fitness), kind="stable")[: self.n_elite]
        parameters = population.parameters(elite)
        self.mu = parameters.mean(axis=0)
        self.std = np.sqrt(parameters.var(axis=0) + self.extra_noise)
        self.extra_noise *= self.noise_decay
        return {
            "elite_fitness_mean": float(np.mean(np.asarray(fitness)[elite])),
            "std_mean": float(self.std.mean()),
            "extra_noise": float(self.extra_noise),
        }

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Copies of ``mu`` and ``std``, and the current extra noise."""
        return {"mu": self.mu.copy(), "std": self.std.copy()}, {"extra_noise": self.extra_noise}

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Inverse of :meth:`state`."""
        self.mu, self.std = np.array(arrays["mu"]), np.array(arrays["std"])
        self.extra_noise = float(meta["extra_noise"])


@dataclass
class CEMConfig(ESConfig):
    """Cross-entropy method on a small policy."""

    population_size: int = hyperparameter(64, "members evaluated per generation", low=2)
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (16,), "units of each tanh hidden layer of the policy (empty: linear policy)"
    )
    initial_std: float = hyperparameter(
        0.5, "initial standard deviation of every parameter", low=0, low_open=True
    )
    elite_fraction: float = hyperparameter(
        0.2,
        "fraction of the best members that define the next distribution",
        low=0,
        low_open=True,
        high=1,
    )
    extra_noise: float = hyperparameter(
        0.05, "variance added to every parameter after the update (Szita & Lorincz)", low=0
    )
    noise_decay: float = hyperparameter(
        0.95, "factor applied to the extra noise every generation", low=0, high=1
    )


class CEMAgent(ESAgent):
    """Noisy CEM on a gymnasium environment; ``act`` uses the mean."""

    Config = CEMConfig
    name = "cem"

    def build_strategy(self, initial: np.ndarray) -> CEM:
        """A :class:`CEM` with the configured initial standard deviation, elite fraction and extra
        noise."""
        c = self.config
        return CEM(
            initial,
            c.population_size,
            c.initial_std,
            c.elite_fraction,
            c.extra_noise,
            c.noise_decay,
        )
