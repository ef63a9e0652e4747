"""Aggregate statistics over seeds, as Agarwal et al. (2021) recommend reporting them.

"Deep Reinforcement Learning at the Edge of the Statistical Precipice" (NeurIPS 2021) argues
that a handful of seeds calls for interval estimates, not point estimates, and for the
interquartile mean (IQM: the mean of the middle 50% of the values), which is robust to an
outlying seed yet less noisy than the median. Each statistic here comes with a percentile
stratified-bootstrap confidence interval; for one task the strata are trivial, so the
bootstrap resamples the seeds with replacement (:func:`scipy.stats.bootstrap`).

The intervals need scipy (``pip install 'rlx-core[stats]'``), imported only when they are
computed, so ``import rlx`` stays light.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.errors import ConfigError, RlxError

#: The statistics :func:`summarize` reports and :func:`curve` draws.
STATISTICS = ("iqm", "mean", "median")
#: Bootstrap resamples by default: enough for stable 95% percentile bounds at a few seeds.
RESAMPLES = 10_000


# -- point estimates without scipy (live displays) ------------------------------------------


def iqm(values: Sequence[float]) -> float:
    """The interquartile mean: the mean of the middle half of ``values`` (NaN when empty)."""
    ordered = sorted(values)
    cut = len(ordered) // 4
    middle = ordered[cut : len(ordered) - cut]
    return sum(middle) / len(middle) if middle else math.nan


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (NaN when empty)."""
    ordered, n = sorted(values), len(values)
    if not n:
        return math.nan
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def _scipy_stats() -> Any:
    try:
        import scipy.stats
    except ImportError as exc:
        raise RlxError(
            "confidence intervals over seeds need scipy: pip install 'rlx-core[stats]'"
        ) from exc
    return scipy.stats


def _statistic(name: str) -> Callable[..., Any]:
    """``f(values, axis=-1)`` for a statistic's name; an unknown name is a ConfigError."""
    if name == "iqm":
        trim_mean = _scipy_stats().trim_mean
        return lambda values, axis=-1: trim_mean(values, 0.25, axis=axis)
    if name == "mean":
        return np.mean
    if name == "median":
        return np.median
    raise ConfigError(f"unknown statistic {name!r}; choose one of {', '.join(STATISTICS)}")


def _check_settings(confidence: float, resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    if resamples < 1:
        raise ConfigError(f"resamples must be at least 1, got {resamples}")


def _estimate(
    values: np.ndarray, name: str, confidence: float, resamples: int, seed: int
) -> dict[str, float]:
    """The statistic of ``values`` (shape ``(n,)``) and its percentile bootstrap interval."""
    function = _statistic(name)
    if np.all(values == values[0]):  # one seed, or equal values: nothing to resample
        value = float(values[0])
        return {"value": value, "low": value, "high": value}
    # Computed on values scaled into [-2, 2) by a power of two (exact), so that sums of
    # returns near the float limit cannot overflow.
    scale = float(np.ldexp(1.0, int(np.frexp(np.max(np.abs(values)))[1]) - 1))
    values = values / scale
    value = float(function(values))
    stats = _scipy_stats()
    # scipy 1.15 renamed random_state to rng; both take a Generator.
    generator = np.random.default_rng(seed)
    seeding = {"rng": generator} if _has_rng_argument(stats) else {"random_state": generator}
    result = stats.bootstrap(
        (values,),
        function,
        n_resamples=resamples,
        vectorized=True,
        confidence_level=confidence,
        method="percentile",
        **seeding,
    )
    low = float(result.confidence_interval.low)
    high = float(result.confidence_interval.high)
    # A percentile interval can miss the point estimate (rounding when the values are almost
    # equal, or a small skewed sample); widened to hold it, so that low <= value <= high.
    return {
        "value": value * scale,
        "low": min(low, value) * scale,
        "high": max(high, value) * scale,
    }


def _has_rng_argument(stats: Any) -> bool:
    import inspect

    return "rng" in inspect.signature(stats.bootstrap).parameters


def _finite_array(values: Sequence[float], what: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).reshape(-1)
    if array.size == 0:
        raise ConfigError(f"{what} needs at least one value")
    if not np.all(np.isfinite(array)):
        raise ConfigError(f"{what} needs finite values, got {array.tolist()}")
    return array


def summarize(
    values: Sequence[float],
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """IQM, mean and median of one value per seed, each with a bootstrap confidence interval.

    Returns ``{"n": n, "iqm": {"value", "low", "high"}, "mean": {...}, "median": {...}}``.
    The intervals are percentile intervals of ``resamples`` bootstrap resamples of the seeds
    (Agarwal et al. 2021), drawn from ``seed``: the same input gives the same intervals.
    Below four seeds nothing is trimmed and the IQM is the mean.
    With one seed there is nothing to resample and each interval is the value itself; with
    two or three seeds the bootstrap sees only a few distinct resamples, so the intervals
    are wide and unreliable (too narrow, if anything): report the seeds themselves as well.
    """
    _check_settings(confidence, resamples)
    array = _finite_array(values, "summarize")
    summary: dict[str, Any] = {"n": int(array.size)}
    for name in STATISTICS:
        summary[name] = _estimate(array, name, confidence, resamples, seed)
    return summary


@dataclass(frozen=True)
class Curve:
    """A statistic over seeds at each evaluation step, with its bootstrap interval.

    All fields have one entry per step (``steps`` ascending); ``seeds`` counts the seeds
    that had an evaluation at that step.
    """

    statistic: str
    steps: tuple[int, ...]
    value: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    seeds: tuple[int, ...]


def curve(
    steps_by_seed: Sequence[Sequence[int]],
    values_by_seed: Sequence[Sequence[float]],
    statistic: str = "iqm",
    confidence: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Curve:
    """A learning curve over seeds: at each step, ``statistic`` and its bootstrap interval.

    ``steps_by_seed[i]`` and ``values_by_seed[i]`` are seed ``i``'s evaluation steps and
    returns. The seeds are aligned on equal steps; a seed without a (finite) evaluation at a step is
    left out at that step (the step's entry in :attr:`Curve.seeds` says how many remain),
    and a seed that logged a step twice (a resumed run) counts with its last value. The
    intervals are those of :func:`summarize`, step by step, with the same caveats.
    """
    _check_settings(confidence, resamples)
    _statistic(statistic)
    if len(steps_by_seed) != len(values_by_seed):
        raise ConfigError(
            f"curve needs as many step lists as value lists, got {len(steps_by_seed)} "
            f"and {len(values_by_seed)}"
        )
    at_step: dict[int, dict[int, float]] = {}
    for index, (steps, values) in enumerate(zip(steps_by_seed, values_by_seed, strict=True)):
        if len(steps) != len(values):
            raise ConfigError(f"seed {index} has {len(steps)} steps but {len(values)} values")
        for step, value in zip(steps, values, strict=True):
            if math.isfinite(value):
                at_step.setdefault(int(step), {})[index] = float(value)
    ordered = sorted(at_step)
    points = [
        _estimate(np.array(list(at_step[step].values())), statistic, confidence, resamples, seed)
        for step in ordered
    ]
    return Curve(
        statistic=statistic,
        steps=tuple(ordered),
        value=tuple(point["value"] for point in points),
        low=tuple(point["low"] for point in points),
        high=tuple(point["high"] for point in points),
        seeds=tuple(len(at_step[step]) for step in ordered),
    )
