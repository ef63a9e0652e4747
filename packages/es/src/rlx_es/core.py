"""What every evolution strategy here shares: populations rebuilt from seeds, fitness shaping,
novelty, and the ask/tell interface with an optimiser loop for plain objective functions.

A population is described, not stored: :class:`Population` holds a centre, a scale (a
number, a vector or a matrix) and one seed, and member ``i`` is ``centre + sigma * A z_i``
with ``z_i`` row ``i`` of a standard normal matrix drawn from ``seed`` (row ``i // 2`` with the
sign ``(-1)^i`` when sampling is mirrored). A worker that receives the description rebuilds
exactly the members it evaluates, so workers exchange only returns (Salimans et al. 2017,
section 2.1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rlx.config import load_setting
from rlx.errors import ConfigError, did_you_mean

#: objective(parameters (n_members, n) float64) -> fitness (n_members,), higher is better
Objective = Callable[[np.ndarray], np.ndarray]


@dataclass
class Population:
    """The members of one generation as ``centre + sigma * (z @ A^T)``.

    ``scale`` is ``None`` (A = identity), a vector ``(n,)`` (A diagonal) or a matrix ``(n, n)``.
    """

    centre: np.ndarray
    sigma: float
    seed: int
    size: int
    mirrored: bool = False
    scale: np.ndarray | None = None
    _all_noise: np.ndarray | None = field(default=None, repr=False, compare=False)

    def noise(self, members: np.ndarray | None = None) -> np.ndarray:
        """Standard normal ``z`` of ``members`` (default all), shape ``(len(members), n)``."""
        if members is None:
            if self._all_noise is None:
                self._all_noise = self._draw(np.arange(self.size))
            return self._all_noise
        if self._all_noise is not None:
            return self._all_noise[np.asarray(members)]
        return self._draw(np.asarray(members))

    def _draw(self, members: np.ndarray) -> np.ndarray:
        # One generator per generation: row d of its (draws, n) matrix is draw d. A worker draws
        # the rows up to its last member and keeps its own, which costs far less than an episode.
        n = self.centre.shape[0]
        draws = members // 2 if self.mirrored else members
        count = int(draws.max()) + 1 if len(draws) else 0
        z = np.random.default_rng(self.seed).standard_normal((count, n))[draws]
        if self.mirrored:
            z[members % 2 == 1] *= -1.0
        return z

    def steps(self, z: np.ndarray) -> np.ndarray:
        """``A z`` for rows of ``z``: the perturbation directions before ``sigma``."""
        if self.scale is None:
            return z
        if self.scale.ndim == 1:
            return z * self.scale
        return z @ self.scale.T

    def parameters(self, members: np.ndarray | None = None) -> np.ndarray:
        """Parameters of ``members`` (default all), shape ``(len(members), n)`` float64."""
        return self.centre + self.sigma * self.steps(self.noise(members))

    def to_message(self) -> dict[str, Any]:
        """A picklable description for a worker."""
        return {
            "centre": self.centre,
            "sigma": self.sigma,
            "seed": self.seed,
            "size": self.size,
            "mirrored": self.mirrored,
            "scale": self.scale,
        }


class Strategy(Protocol):
    """An evolution strategy in ask/tell form over a flat float64 parameter vector."""

    def ask(self, seed: int) -> Population:
        """The next generation's population, its noise drawn from ``seed``."""
        ...

    def tell(self, population: Population, fitness: np.ndarray) -> dict[str, float]:
        """Update from the members' fitness ``(size,)`` (higher is better); returns metrics."""
        ...

    @property
    def mean(self) -> np.ndarray:
        """The current centre (the policy to deploy)."""
        ...

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Arrays and JSON metadata that restore the strategy exactly."""
        ...

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Inverse of :meth:`state`."""
        ...


def rank_transformation(values: np.ndarray) -> np.ndarray:
    """Centered ranks in ``[-0.5, 0.5]`` (Salimans et al. 2017): the best gets 0.5.

    Ties get distinct ranks in order of appearance (a stable sort), like the reference code.
    Shape is preserved; scaling by ranks makes the update invariant to monotone reward changes
    and robust to outliers.
    """
    values = np.asarray(values, dtype=np.float64)
    flat = values.ravel()
    ranks = np.empty(flat.size, dtype=np.float64)
    ranks[np.argsort(flat, kind="stable")] = np.arange(flat.size, dtype=np.float64)
    if flat.size > 1:
        ranks = ranks / (flat.size - 1) - 0.5
    else:
        ranks[:] = 0.0
    return ranks.reshape(values.shape)


def z_scores(values: np.ndarray) -> np.ndarray:
    """``(f - mean) / std`` over the population: mean 0 and standard deviation 1, all zeros when
    every fitness is equal. Keeps the fitness's proportions, so outliers weigh as much as they
    differ."""
    values = np.asarray(values, dtype=np.float64)
    std = values.std()
    if std == 0:
        return np.zeros_like(values)
    return (values - values.mean()) / std


def raw_fitness(values: np.ndarray) -> np.ndarray:
    """The fitness as it is (a float64 copy): the plain Monte Carlo gradient estimate of the
    smoothed objective, which depends on the scale of the rewards."""
    return np.array(values, dtype=np.float64)


def nes_utilities(values: np.ndarray) -> np.ndarray:
    """The rank-based utilities of Wierstra et al. 2014 ("Natural Evolution Strategies", JMLR
    15, section 3.1): for rank ``k`` (1 = best) of ``n``,
    ``u_k = max(0, log(n/2 + 1) - log k) / sum_j max(0, log(n/2 + 1) - log j) - 1/n``.

    They sum to 0, only the better half gets a positive weight, and the best the largest.
    Ties get distinct ranks in order of appearance, as in :func:`rank_transformation`.
    """
    values = np.asarray(values, dtype=np.float64)
    flat = values.ravel()
    n = flat.size
    ranks = np.empty(n, dtype=np.int64)
    # rank 1 for the largest: the last of the stable ascending order
    ranks[np.argsort(flat, kind="stable")] = np.arange(n, 0, -1)
    scores = np.maximum(0.0, np.log(n / 2 + 1) - np.log(np.arange(1, n + 1, dtype=np.float64)))
    utilities = scores / scores.sum() - 1 / n
    return utilities[ranks - 1].reshape(values.shape)


#: The built-in fitness shapings by name: each maps the fitness of one generation ``(n,)``
#: (mirrored pairs included, in the order of the population) to the weights of its noise
#: ``(n,)``, higher for better members.
FITNESS_SHAPINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "centered_ranks": rank_transformation,
    "z_scores": z_scores,
    "raw": raw_fitness,
    "nes_utilities": nes_utilities,
}


def check_fitness_shaping(name: str, setting: str = "fitness_shaping") -> None:
    """Refuse a shaping that is neither a name of :data:`FITNESS_SHAPINGS` nor a
    ``"package.module:function"`` target, without importing anything."""
    module, sep, attribute = name.partition(":")
    if sep and module and attribute:
        return
    if name not in FITNESS_SHAPINGS:
        raise ConfigError(
            f"{setting} must be one of {', '.join(FITNESS_SHAPINGS)} or "
            f"'package.module:function', got {name!r}." + did_you_mean(name, FITNESS_SHAPINGS)
        )


def shaping_function(
    name: str | Callable[[np.ndarray], np.ndarray], setting: str = "fitness_shaping"
) -> Callable[[np.ndarray], np.ndarray]:
    """The shaping function that ``name`` names: a built-in, a callable itself, or a user's
    ``"package.module:function"`` (imported here), checked to return one weight per member.
    """
    if callable(name):
        function = name
    else:
        check_fitness_shaping(name, setting)
        if name in FITNESS_SHAPINGS:
            return FITNESS_SHAPINGS[name]
        function = load_setting(name, setting, "package.module:function")
        if not callable(function):
            raise ConfigError(f"{setting} {name!r} is not a function")

    def shaped(values: np.ndarray) -> np.ndarray:
        fitness = np.asarray(values, dtype=np.float64)
        weights = np.asarray(function(fitness.copy()), dtype=np.float64)
        if weights.shape != fitness.shape:
            raise ConfigError(
                f"{setting} {name!r} must return one weight per member, shape {fitness.shape}; "
                f"got shape {weights.shape}"
            )
        return weights

    return shaped


def novelty(behaviours: np.ndarray, archive: np.ndarray, k: int) -> np.ndarray:
    """Mean Euclidean distance of each behaviour ``(m, d)`` to its ``k`` nearest neighbours in
    ``archive`` ``(a, d)`` (Conti et al. 2018, eq. 2); shape ``(m,)``.
    """
    if archive.shape[0] == 0:
        return np.zeros(behaviours.shape[0])
    distances = np.sqrt(
        np.maximum(
            (behaviours**2).sum(1)[:, None]
            + (archive**2).sum(1)[None, :]
            - 2.0 * behaviours @ archive.T,
            0.0,
        )
    )
    k = min(k, archive.shape[0])
    nearest = np.partition(distances, k - 1, axis=1)[:, :k]
    return nearest.mean(axis=1)


@dataclass
class OptimizeResult:
    """The best point an :func:`optimize` run saw and the run's trace."""

    best_parameters: np.ndarray
    best_fitness: float
    generations: int
    evaluations: int
    history: list[float] = field(default_factory=list)


def optimize(
    strategy: Strategy,
    objective: Objective,
    generations: int,
    *,
    seed: int = 0,
    minimize: bool = False,
    target: float | None = None,
) -> OptimizeResult:
    """Run ``strategy`` on ``objective`` for up to ``generations`` generations.

    ``objective`` maps a batch of parameter vectors ``(m, n)`` to values ``(m,)``; with
    ``minimize=True`` lower values are better. The run stops early once the best value reaches
    ``target`` (``<=`` when minimising). ``history`` holds the best value of each generation.
    """
    rng = np.random.default_rng(seed)
    sign = -1.0 if minimize else 1.0
    best_parameters, best_fitness = strategy.mean.copy(), -np.inf
    history: list[float] = []
    evaluations = 0
    generation = 0
    while generation < generations:
        generation += 1
        population = strategy.ask(int(rng.integers(2**31)))
        parameters = population.parameters()
        fitness = sign * np.asarray(objective(parameters), dtype=np.float64)
        evaluations += len(fitness)
        strategy.tell(population, fitness)
        best = int(np.argmax(fitness))
        if fitness[best] > best_fitness:
            best_fitness, best_parameters = float(fitness[best]), parameters[best].copy()
        history.append(sign * float(fitness[best]))
        if target is not None and best_fitness >= sign * target:
            break
    return OptimizeResult(best_parameters, sign * best_fitness, generation, evaluations, history)


def sphere(parameters: np.ndarray) -> np.ndarray:
    """Sum of squares of each row of ``(m, n)``; minimum 0 at the origin."""
    return (np.asarray(parameters) ** 2).sum(axis=-1)


def rastrigin(parameters: np.ndarray) -> np.ndarray:
    """Rastrigin's function of each row of ``(m, n)``: ``10 n + sum(x^2 - 10 cos(2 pi x))``."""
    x = np.asarray(parameters)
    return 10.0 * x.shape[-1] + (x**2 - 10.0 * np.cos(2.0 * np.pi * x)).sum(axis=-1)
