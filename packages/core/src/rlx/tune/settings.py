"""What every worker of a study shares (:class:`Settings`), what ``rlx tune`` returns
(:class:`TuneResult`), and how a trial's seeds and value follow from them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError
from rlx.tune.space import Space

#: What a trial's value can be from its evaluations (maximised by default). Any other name is
#: a metric the agent logs, taken at the end of the run (``cumulative_regret`` of a bandit,
#: with ``direction="minimize"``).
METRICS = {
    "eval_return": "mean return of the run's final evaluation",
    "best_eval_return": "best mean return over the run's evaluations",
    "mean_eval_return": "mean over the run's evaluations of their mean return (the area under "
    "the evaluation curve: it rewards learning fast)",
}


#: Trial states that count towards ``--trials`` (a failed or interrupted trial does not).
DONE_STATES = ("COMPLETE", "PRUNED")

#: ``--sampler``: Optuna's samplers by the names ``rlx tune`` gives them.
SAMPLERS = {
    "tpe": "tree-structured Parzen estimator (TPESampler; constant liar where trials run in "
    "parallel)",
    "random": "independent uniform draws (RandomSampler)",
    "cmaes": "CMA-ES on the numeric dimensions (CmaEsSampler; needs the cmaes package)",
    "qmc": "a scrambled Sobol sequence (QMCSampler; needs scipy)",
}

#: ``--pruner``: Optuna's pruners by the names ``rlx tune`` gives them.
PRUNERS = {
    "median": "stop a trial below the median of the others at the same step (MedianPruner)",
    "hyperband": "Hyperband over successive-halving brackets (HyperbandPruner)",
    "successive-halving": "asynchronous successive halving (SuccessiveHalvingPruner)",
    "none": "never stop a trial early (NopPruner; the same as --no-prune)",
}


@dataclass(frozen=True)
class Settings:
    """What every worker of a study needs; what the study records, so that a continued study
    is the same study."""

    agent: str
    env: str
    trials: int
    storage: str
    study_name: str
    out: str
    metric: str
    steps: int
    eval_every: int
    eval_episodes: int
    seed: int
    prune: bool
    #: Other processes may run trials of this study (``--workers``, ``--storage``).
    shared: bool = False
    #: Experiment trackers of every trial's run (``--logger``; :mod:`rlx.loggers`).
    loggers: tuple[Any, ...] = ()
    #: ``maximize`` or ``minimize`` the metric.
    direction: str = "maximize"
    #: Seeds every trial is scored over (``--seeds``; 1: one run per trial).
    seeds: int = 1
    #: With several seeds: train them as one batched computation where the agent can.
    batched: bool = True
    #: Keyword arguments of the environment (``--env-kwargs``), the same in every trial.
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Optuna's sampler (``--sampler``, a key of :data:`SAMPLERS`).
    sampler: str = "tpe"
    #: Optuna's pruner (``--pruner``, a key of :data:`PRUNERS`).
    pruner: str = "median"
    #: Seconds between a running trial's heartbeats on a database storage (None: none).
    heartbeat: int | None = 60

    @property
    def from_evaluations(self) -> bool:
        """Whether the metric comes from the evaluations (else from the agent's metrics)."""
        return self.metric in METRICS

    def identity(self, space: Space) -> dict[str, Any]:
        """What a continued study must share with the one it continues."""
        return {
            "agent": self.agent,
            "env": self.env,
            "metric": self.metric,
            "direction": self.direction,
            "steps": self.steps,
            "eval_every": self.eval_every,
            "eval_episodes": self.eval_episodes,
            "seed": self.seed,
            "seeds": self.seeds,
            "env_kwargs": dict(self.env_kwargs),
            "space": space.to_json(),
        }


#: What a study recorded before a setting joined its identity had that setting's value.
_IDENTITY_DEFAULTS: dict[str, Any] = {"seeds": 1, "env_kwargs": {}}


@dataclass
class TuneResult:
    """How a study stands after ``rlx tune``."""

    study_name: str
    storage: str
    out: Path
    counts: dict[str, int]
    best_value: float | None
    best_params: dict[str, Any]
    best_trial: int | None
    interrupted: bool
    files: dict[str, Path]
    notes: list[str]


def parse_trial_seeds(value: Any) -> int:
    """``--seeds``: how many seeds each trial is scored over, a positive integer (also given
    as its text on the command line); anything else is a ConfigError."""
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and text.lstrip("+").isdigit():
        text = int(text)
    if isinstance(text, bool) or not isinstance(text, int) or text < 1:
        raise ConfigError(
            f"--seeds must be a positive integer (the seeds each trial is scored over), "
            f"got {value!r}"
        )
    return text


def trial_seeds(seed: int, number: int, seeds: int) -> list[int]:
    """The seeds of trial ``number`` of a study seeded ``seed``. One seed per trial:
    ``derive(seed, "tune-trial", number)``, as always; K seeds: ``derive(seed, "tune-trial",
    number, k)`` for k in 0..K-1, apart from one another and from every other trial's."""
    from rlx.seeding import MAX_SEED, derive

    if seeds == 1:
        return [derive(seed, "tune-trial", number) % (MAX_SEED + 1)]
    return [derive(seed, "tune-trial", number, k) % (MAX_SEED + 1) for k in range(seeds)]


def trial_value(values: list[float]) -> float:
    """A trial's value from its seeds' values: their interquartile mean (Agarwal et al. 2021;
    ``scipy.stats.trim_mean(values, 0.25)``, which trims nothing below four seeds and is then
    the mean), robust to one lucky or unlucky seed."""
    from rlx.statistics import summarize

    return float(summarize(values)["iqm"]["value"])


def _metric_value(metric: str, returns: list[float]) -> float:
    if metric == "eval_return":
        return returns[-1]
    if metric == "best_eval_return":
        return max(returns)
    return sum(returns) / len(returns)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
