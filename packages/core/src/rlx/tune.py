"""``rlx tune``: hyperparameter search with Optuna over the spaces the agents declare.

The search space of an agent comes from its own :func:`rlx.config.hyperparameter`
declarations (numbers with a finite range, switches, choices; a log scale where the range
spans decades), so every installed agent, a third-party plugin's included, can be tuned
without writing a sampler. A TOML space file narrows, widens within the declared range, or
fixes them::

    learning_rate = {low = 1e-5, high = 1e-2, log = true}   # a range
    gamma = [0.9, 0.99]                                      # choices
    n_steps = 128                                            # a fixed value
    default_space = false        # search only what this file gives (default: true)

Each trial is an ordinary rlx run in ``OUT/trials/<number>``, evaluated by the trainer's
periodic evaluation; every evaluation is reported to Optuna, whose median pruner stops
unpromising trials. With ``--seeds K`` a trial is scored over K seeds instead of one (a
setting tuned on one seed is often tuned to that seed's luck): K runs in
``OUT/trials/<number>/seed-<k>``, and the trial's value is the interquartile mean of their
values (:func:`trial_value`). When the agent batches seeds
(:class:`rlx.protocols.BatchesSeeds`) the K seeds train as one batched computation;
otherwise (and with ``--no-batched``) one after another, and a trial may be pruned between
two of them. The study lives in an Optuna storage (``OUT/study.db`` by default), so an
interrupted ``rlx tune`` continues where it stopped and several processes or machines can
share one study. Optuna is imported only here, never by ``import rlx``.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import os
import signal
import sys
import types
import typing
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlx.callbacks import Callback
from rlx.checkpoint import is_number
from rlx.errors import ConfigError, RlxError, did_you_mean
from rlx.files import open_lock, write_text_atomic, writing

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

#: Settings about how a run executes rather than what it learns: never searched by default.
_EXECUTION = frozenset(
    {
        "device",
        "torch_threads",
        "vectorization",
        "backend",
        "address",
        "workers",
        "seed",
        "behaviour_source",
        "behaviour_key",
        "history",
    }
)

#: Why a declared hyperparameter is left out of the default space, as ``rlx tune`` prints it.
SKIP_REASONS = {
    "code": "they import code",
    "execution": "they say how a run executes, not what it learns",
    "environment": "their valid values depend on the environment",
    "size": "sizes and lengths, which make trials bigger",
    "unbounded": "no finite declared range",
    "type": "not a number, switch or choice",
}

SPACE_FILE_KEY = "default_space"


def _optuna() -> Any:
    """Optuna, or the install command when the extra is missing."""
    try:
        import optuna
    except ImportError:
        raise RlxError("rlx tune needs Optuna: pip install 'rlx-core[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # rlx tune prints its own lines
    return optuna


# -- search spaces ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Dimension:
    """One hyperparameter of the search: a float or int range, choices, or a fixed value."""

    name: str
    kind: str  # "float", "int", "choice" or "fixed"
    low: float | None = None
    high: float | None = None
    #: The declared range excludes ``low`` (a step size that must be positive).
    low_open: bool = False
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()
    value: Any = None
    source: str = "declared"

    def sample(self, trial: Any) -> Any:
        """This dimension's value for an Optuna trial."""
        if self.kind == "fixed":
            return self.value
        assert (self.low is not None and self.high is not None) or self.kind == "choice"
        if self.kind == "float":
            assert self.low is not None
            low = math.nextafter(self.low, math.inf) if self.low_open else self.low
            return trial.suggest_float(self.name, low, self.high, log=self.log, step=self.step)
        if self.kind == "int":
            step = int(self.step) if self.step else 1
            assert self.low is not None and self.high is not None
            low = int(self.low) + 1 if self.low_open else int(self.low)
            return trial.suggest_int(self.name, low, int(self.high), log=self.log, step=step)
        encoded = [_encode(choice) for choice in self.choices]
        return self.choices[encoded.index(trial.suggest_categorical(self.name, encoded))]

    def text(self) -> str:
        """The range, the choices or the value, as ``rlx tune`` prints it."""
        if self.kind == "fixed":
            return f"= {_show(self.value)}"
        if self.kind == "choice":
            return "{" + ", ".join(_show(choice) for choice in self.choices) + "}"
        scale = " log" if self.log else ""
        step = f" step {_show(self.step)}" if self.step else ""
        left = "(" if self.low_open else "["
        return f"{left}{_show(self.low)}, {_show(self.high)}]{scale}{step}"

    def to_json(self) -> dict[str, Any]:
        """The dimension as JSON values (tuples as lists), part of a study's identity."""
        return json.loads(json.dumps(dataclasses.asdict(self)))


@dataclass
class Space:
    """The dimensions of a search, in the agent's declaration order, and what was left out."""

    agent: str
    dimensions: list[Dimension]
    #: reason (a key of :data:`SKIP_REASONS`) -> hyperparameter names not searched
    skipped: dict[str, list[str]] = field(default_factory=dict)

    @property
    def searched(self) -> list[Dimension]:
        """The dimensions the search samples: all but the fixed ones."""
        return [d for d in self.dimensions if d.kind != "fixed"]

    @property
    def fixed(self) -> dict[str, Any]:
        """The fixed hyperparameters and their values."""
        return {d.name: d.value for d in self.dimensions if d.kind == "fixed"}

    def sample(self, trial: Any) -> dict[str, Any]:
        """The hyperparameters of one trial: sampled ones and fixed ones."""
        return {d.name: d.sample(trial) for d in self.dimensions}

    def to_json(self) -> list[dict[str, Any]]:
        """Every dimension's :meth:`Dimension.to_json`, in declaration order."""
        return [d.to_json() for d in self.dimensions]


def _encode(choice: Any) -> Any:
    """A value Optuna can store as a categorical choice: scalars as they are, a tuple, a list
    or a table (hidden sizes, say) as its JSON text."""
    if choice is None or isinstance(choice, (bool, int, float, str)):
        return choice
    return json.dumps(choice)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return json.dumps(value) if isinstance(value, dict) else str(value)


def _base_type(tp: Any) -> Any:
    """``tp`` without ``| None``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        if len(options) == 1:
            return _base_type(options[0])
    return tp


def _is_execution(name: str) -> bool:
    return name in _EXECUTION or name.endswith(("_seed", "_path", "_dir", "_file", "_device"))


def _is_size(name: str) -> bool:
    return name.startswith(("n_", "num_")) or name.endswith(
        ("_size", "_sizes", "_envs", "_steps", "_workers")
    )


def _declared(name: str, metadata: Mapping[str, Any], tp: Any) -> tuple[Dimension | None, str]:
    """The default dimension of a declared hyperparameter, or None and why it is left out."""
    if metadata.get("imports_code"):
        return None, "code"
    if metadata.get("searched") is False:
        return None, "environment"
    if _is_execution(name):
        return None, "execution"
    base = _base_type(tp)
    search = metadata.get("search")
    if search is not None and base in (int, float):
        # The declaration says where good values lie: searched even for a size.
        low, high = search
        log = bool(metadata.get("log")) or (low > 0 and high / low >= 100)
        kind = "int" if base is int else "float"
        return Dimension(name, kind, low=low, high=high, log=log), ""
    if _is_size(name):
        return None, "size"
    choices = metadata.get("choices")
    if choices is not None and len(choices) > 1:
        dimension = Dimension(name, "choice", choices=tuple(choices))
    elif base is bool:
        dimension = Dimension(name, "choice", choices=(False, True))
    elif base in (int, float):
        low, high = metadata.get("low"), metadata.get("high")
        if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
            return None, "unbounded"
        log = bool(metadata.get("log")) or (low > 0 and high / low >= 100)
        low_open = bool(metadata.get("low_open"))
        if low >= high or (log and low <= 0) or (base is int and low_open and low + 1 > high):
            return None, "unbounded"
        kind = "int" if base is int else "float"
        dimension = Dimension(name, kind, low=low, high=high, low_open=low_open, log=log)
    else:
        return None, "type"
    return dimension, ""


def _checked(where: str, name: str, value: Any, metadata: Mapping[str, Any], tp: Any) -> Any:
    """``value`` parsed to the declared type and inside the declared range, or a ConfigError."""
    from rlx.config import _check_range, _coerce

    try:
        parsed = _coerce(name, value, tp)
        _check_range(name, parsed, metadata)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return parsed


def _range_dimension(
    where: str, name: str, table: Mapping[str, Any], metadata: Mapping[str, Any], base: Any
) -> Dimension:
    """A ``{low = .., high = .., log = .., step = ..}`` entry of a space file, checked against
    the declaration."""
    from rlx.config import _check_range

    unknown = sorted(set(table) - {"low", "high", "log", "step"})
    if unknown:
        raise ConfigError(
            f"{where}: {name} has an unknown key {unknown[0]!r}; a range is "
            "{low = .., high = .., log = true|false, step = ..}"
        )
    if "low" not in table or "high" not in table:
        raise ConfigError(f"{where}: the range of {name} needs both low and high")
    low, high = table["low"], table["high"]
    log, step = table.get("log", False), table.get("step")
    if not (is_number(low) and is_number(high)):
        raise ConfigError(f"{where}: {name}'s low and high must be numbers, got {low!r}, {high!r}")
    if base is int and not (float(low).is_integer() and float(high).is_integer()):
        raise ConfigError(f"{where}: {name} is an integer; give integer low and high")
    if not low < high:
        raise ConfigError(f"{where}: {name}'s low ({low}) must be below its high ({high})")
    if not isinstance(log, bool):
        raise ConfigError(f"{where}: {name}'s log must be true or false, got {log!r}")
    if step is not None and not (is_number(step) and step > 0):
        raise ConfigError(f"{where}: {name}'s step must be a positive number, got {step!r}")
    if step is not None and base is int and not float(step).is_integer():
        raise ConfigError(f"{where}: {name} is an integer; give an integer step")
    if log and step is not None:
        raise ConfigError(f"{where}: {name} takes log = true or a step, not both")
    if log and low <= 0:
        raise ConfigError(f"{where}: {name} on a log scale needs low > 0, got {low}")
    for bound in (low, high):
        try:
            _check_range(name, bound, metadata)
        except ConfigError as exc:
            raise ConfigError(
                f"{where}: {name} = {{low = {low}, high = {high}}} leaves the declared range: {exc}"
            ) from None
    if base is int:
        low, high = int(low), int(high)
        step = int(step) if step is not None else None
    else:
        low, high = float(low), float(high)
        step = float(step) if step is not None else None
    kind = "int" if base is int else "float"
    return Dimension(name, kind, low=low, high=high, log=log, step=step, source="space file")


def _file_dimension(
    where: str, name: str, raw: Any, metadata: Mapping[str, Any], tp: Any
) -> Dimension:
    """One entry of a space file: a range (table), choices (array) or a fixed value."""
    base = _base_type(tp)
    origin = typing.get_origin(base)
    structured = origin in (tuple, list, dict) or base is dict
    if isinstance(raw, dict) and base in (int, float):
        return _range_dimension(where, name, raw, metadata, base)
    if isinstance(raw, dict) and not structured:
        raise ConfigError(
            f"{where}: {name} is not a number, so it takes no range; give choices "
            f"[a, b, ...] or one value"
        )
    # For a tuple setting (hidden_sizes) an array of arrays is the choices and one array a
    # value; for a scalar setting an array is the choices.
    is_choices = isinstance(raw, list) and (
        not structured or (bool(raw) and all(isinstance(item, (list, dict)) for item in raw))
    )
    if not is_choices:
        value = _checked(where, name, raw, metadata, tp)
        return Dimension(name, "fixed", value=value, source="space file")
    if not raw:
        raise ConfigError(f"{where}: {name} = [] gives no choices")
    choices: list[Any] = []
    for item in raw:
        value = _checked(where, name, item, metadata, tp)
        if value not in choices:
            choices.append(value)
    if len(choices) == 1:
        return Dimension(name, "fixed", value=choices[0], source="space file")
    return Dimension(name, "choice", choices=tuple(choices), source="space file")


def read_space_file(path: str | Path) -> dict[str, Any]:
    """The entries of a TOML space file (names as ``rlx info AGENT`` lists them)."""
    import tomllib

    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"space file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"space file {path} is unreadable: {exc}") from None
    return data


def build_space(
    agent: str, entries: Mapping[str, Any] | None = None, where: str = "space file"
) -> Space:
    """The search space of ``agent``: its declared default space, with ``entries`` (what a
    space file holds) replacing or adding dimensions. Bad entries are one ConfigError."""
    from rlx.api import agent_spec

    config_cls = agent_spec(agent).load().Config
    entries = {key.replace("-", "_"): value for key, value in dict(entries or {}).items()}
    use_defaults = entries.pop(SPACE_FILE_KEY, True)
    if not isinstance(use_defaults, bool):
        raise ConfigError(f"{where}: {SPACE_FILE_KEY} must be true or false")
    fields = {f.name: f for f in dataclasses.fields(config_cls) if f.init}
    for key in entries:
        if key not in fields:
            raise ConfigError(
                f"{where}: {agent} has no hyperparameter {key!r}.{did_you_mean(key, fields)} "
                f"'rlx info {agent}' lists them."
            )
    hints = typing.get_type_hints(config_cls)
    dimensions: list[Dimension] = []
    skipped: dict[str, list[str]] = {}
    for name, f in fields.items():
        if name in entries:
            dimensions.append(_file_dimension(where, name, entries[name], f.metadata, hints[name]))
        elif use_defaults:
            dimension, reason = _declared(name, f.metadata, hints[name])
            if dimension is None:
                skipped.setdefault(reason, []).append(name)
            else:
                dimensions.append(dimension)
    space = Space(agent, dimensions, skipped)
    from rlx.config import build_config

    try:  # fixed values that do not go together fail now, not in every trial
        build_config(config_cls, space.fixed)
    except RlxError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return space


# -- storage -----------------------------------------------------------------------------------


def redact(url: str) -> str:
    """A storage URL with its password hidden, for messages and files."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


@contextlib.contextmanager
def _creation_lock(url: str) -> Iterator[None]:
    """Hold an exclusive lock on ``<database>.lock`` beside an SQLite file while Optuna opens
    it: two processes that open a new database at once would both create its tables."""
    try:
        import fcntl

        from sqlalchemy.engine import make_url

        database = make_url(url).database if url.startswith("sqlite") else None
    except Exception:  # no fcntl (Windows) or a malformed URL: the storage itself says why
        database = None
    if not database or database == ":memory:":
        yield
        return
    try:
        handle = open_lock(f"{database}.lock")  # held until the storage is open
    except OSError:  # a directory that does not exist: the storage's own error says so
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def check_storage(url: str) -> None:
    """Refuse an in-memory SQLite storage: it dies with the process, so no worker process
    shares it and no later ``rlx tune`` continues its study."""
    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
    except Exception:  # a malformed URL: open_storage says why
        return
    if parsed.get_backend_name() != "sqlite":
        return
    database = parsed.database or ""
    if database in ("", ":memory:") or "memory" in (
        parsed.query.get("mode"),
        database.partition("file::")[2].partition(":")[0],
    ):
        raise ConfigError(
            f"--storage {url} is an in-memory database: it lives only as long as one "
            "process, so worker processes cannot share it and the study cannot be resumed; "
            "drop --storage (the study goes to OUT/study.db) or give a file "
            "(sqlite:///path/study.db)"
        )


def open_storage(url: str) -> Any:
    """An Optuna storage for ``url``; an unreachable, malformed or driverless one is a
    ConfigError. SQLite waits up to a minute for a lock, so that worker processes share it."""
    optuna = _optuna()
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    try:
        with _creation_lock(url), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
    except ImportError:  # Optuna's own message for a missing driver says only that
        raise ConfigError(
            f"storage {redact(url)}: the database driver for it is not installed (pip install "
            "psycopg2-binary for postgresql://, pymysql for mysql+pymysql://)"
        ) from None
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        reason = lines[0].rstrip(".") if lines else type(exc).__name__
        raise ConfigError(
            f"cannot open the study storage {redact(url)}: {reason}. Give a reachable Optuna "
            "storage URL (sqlite:///path/study.db, postgresql://user@host/db, ...)"
        ) from None


# -- the study ---------------------------------------------------------------------------------


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


def _trial_loggers(entries: tuple[Any, ...], run_name: str) -> tuple[Any, ...]:
    """The ``--logger`` entries of one trial: trackers that take a ``run_name`` (mlflow, wandb)
    name the trial's tracker run after the study and the trial, unless the entry sets one."""
    import inspect

    from rlx.discovery import get_registry

    named = []
    for entry in entries:
        kwargs = dict(entry["kwargs"])
        try:
            takes = (
                "run_name"
                in inspect.signature(get_registry().logger(entry["name"]).load()).parameters
            )
        except (TypeError, ValueError):
            takes = False
        if takes and "run_name" not in kwargs:
            kwargs["run_name"] = run_name
        named.append({"name": entry["name"], "kwargs": kwargs})
    return tuple(named)


class _Pruning(Callback):
    """A trial's evaluations: each return kept, reported to Optuna, and the trial pruned when
    Optuna says so (not on an agent's metric, read at the end; not at the final evaluation,
    when nothing is left to prune; not for one seed of several, whose trial reports after
    each whole seed)."""

    def __init__(self, trial: Any, settings: Settings) -> None:
        self.trial, self.settings = trial, settings
        self.returns: list[float] = []

    def on_evaluation(self, trainer: Any, result: Any) -> str | None:
        self.returns.append(result.mean_return)
        if not self.settings.from_evaluations or trainer.stop_reason or self.settings.seeds > 1:
            return None
        self.trial.report(_metric_value(self.settings.metric, self.returns), trainer.env_steps)
        return "pruned" if self.trial.should_prune() else None


def _record_error(trial: Any, exc: Exception, where: str = "") -> None:
    """Keep the first line of what made a trial fail, for the study's table."""
    trial.set_user_attr("error", f"{where}{type(exc).__name__}: {exc}".splitlines()[0])


class _Objective:
    """One trial: an rlx run in ``OUT/trials/<number>`` whose evaluations go to Optuna, or
    with ``--seeds K`` one run per seed in ``OUT/trials/<number>/seed-<k>``."""

    def __init__(
        self,
        settings: Settings,
        space: Space,
        console: Any,
        show_done: Callable[[int], None] | None = None,
    ) -> None:
        self.settings = settings
        self.space = space
        self.console = console
        #: Moves the bar of finished trials (in-process on a terminal only).
        self.show_done = show_done
        self.current: int | None = None
        #: Whether the notice that the seeds cannot be batched was printed.
        self.told_unbatched = False

    def __call__(self, trial: Any) -> float:
        s = self.settings
        self.current = trial.number
        seeds = trial_seeds(s.seed, trial.number, s.seeds)
        trial_dir = Path(s.out) / "trials" / str(trial.number)
        trial.set_user_attr("seed", seeds[0])
        if s.seeds > 1:
            trial.set_user_attr("seeds", seeds)
        params = self.space.sample(trial)
        if s.seeds == 1:
            return self._one_seed(trial, params, seeds[0], trial_dir)
        return self._several_seeds(trial, params, seeds, trial_dir)

    def _trainer(
        self,
        trial: Any,
        params: dict[str, Any],
        seed: int,
        run_dir: Path,
        tracker_name: str,
        agent: Any = None,
    ) -> tuple[Any, _Pruning]:
        """One run of the trial, ready to train (``agent`` made here unless given), and the
        callback that keeps its evaluations."""
        import rlx
        from rlx.trainer import Trainer

        s = self.settings
        pruning = _Pruning(trial, s)
        if agent is None:
            agent = rlx.make(s.agent, s.env, seed=seed, env_kwargs=s.env_kwargs, **params)
        trainer = Trainer(
            agent,
            run_dir=run_dir,
            console=self.console,
            steps=s.steps,
            eval_every=s.eval_every,
            eval_episodes=s.eval_episodes,
            checkpoint_every=0,
            progress=False,
            verbose=False,
            plot=False,
            tensorboard=False,
            loggers=_trial_loggers(s.loggers, tracker_name),
            callbacks=[pruning],
        )
        trial.set_user_attr("run_dir", str(Path(s.out) / "trials" / str(trial.number)))
        return trainer, pruning

    def _value(self, result: Any, pruning: _Pruning) -> float | None:
        """A run's value of the metric (None when it has none: never evaluated, or the agent
        did not log it)."""
        s = self.settings
        if s.from_evaluations:
            return _metric_value(s.metric, pruning.returns) if pruning.returns else None
        value = result.metrics.get(s.metric)
        return None if value is None else float(value)

    def _fit(
        self, trial: Any, params: dict[str, Any], seed: int, run_dir: Path, tracker_name: str
    ) -> tuple[Any, float | None]:
        """Train one run of the trial; its result and its value of the metric."""
        try:
            trainer, pruning = self._trainer(trial, params, seed, run_dir, tracker_name)
            result = trainer.fit()
        except Exception as exc:
            _record_error(trial, exc)
            raise
        return result, self._value(result, pruning)

    def _one_seed(self, trial: Any, params: dict[str, Any], seed: int, run_dir: Path) -> float:
        """The trial as one run in ``run_dir``, pruned at its evaluations."""
        optuna = _optuna()
        s = self.settings
        result, value = self._fit(
            trial, params, seed, run_dir, f"{s.study_name}/trial-{trial.number}"
        )
        trial.set_user_attr("env_steps", result.env_steps)
        trial.set_user_attr("stop_reason", result.stop_reason)
        state = {"interrupted": "interrupted", "pruned": "pruned"}.get(result.stop_reason)
        self._mark(
            run_dir, trial.number, state or "complete", value, params, [seed], [], result.env_steps
        )
        if result.stop_reason == "interrupted":
            raise KeyboardInterrupt
        if result.stop_reason == "pruned":
            raise optuna.TrialPruned(f"pruned at {result.env_steps} environment steps")
        if value is None:
            self._missing_value()
        assert value is not None
        return float(value)

    def _several_seeds(
        self, trial: Any, params: dict[str, Any], seeds: list[int], trial_dir: Path
    ) -> float:
        """The trial as one run per seed in ``trial_dir/seed-<k>``, trained one after another
        in this process (``--workers`` runs trials side by side already). Its value is the IQM
        of the seeds' values. After each seed but the last, the IQM of the seeds done so far
        goes to Optuna at step = seeds done, so a trial is pruned between seeds, never inside
        one: every seed's value counts whole, and trials compare at equal numbers of seeds."""
        optuna = _optuna()
        s = self.settings
        if s.batched:
            value = self._batched_seeds(trial, params, seeds, trial_dir)
            if value is not None:
                return value
        values: list[float] = []
        env_steps = 0
        for k, seed in enumerate(seeds):
            result, value = self._fit(
                trial,
                params,
                seed,
                trial_dir / f"seed-{k}",
                f"{s.study_name}/trial-{trial.number}/seed-{k}",
            )
            env_steps += result.env_steps
            trial.set_user_attr("env_steps", env_steps)
            trial.set_user_attr("stop_reason", result.stop_reason)
            if result.stop_reason == "interrupted":
                so_far = trial_value(values) if values else None
                self._mark(
                    trial_dir, trial.number, "interrupted", so_far, params, seeds, values, env_steps
                )
                raise KeyboardInterrupt
            if value is None:
                self._missing_value(f"seed-{k}: ")
            assert value is not None
            values.append(float(value))
            trial.set_user_attr("seed_values", values)
            running = trial_value(values)
            if k + 1 < len(seeds):
                trial.report(running, k + 1)
                if trial.should_prune():
                    self._mark(
                        trial_dir, trial.number, "pruned", running, params, seeds, values, env_steps
                    )
                    raise optuna.TrialPruned(f"pruned after {k + 1} of {len(seeds)} seeds")
        self._mark(trial_dir, trial.number, "complete", running, params, seeds, values, env_steps)
        return running

    def _batched_seeds(
        self, trial: Any, params: dict[str, Any], seeds: list[int], trial_dir: Path
    ) -> float | None:
        """The trial's seeds trained as one batched computation, in lockstep
        (:func:`rlx.groups.train_side_by_side`), when their agent batches them; None when it
        cannot, and the caller trains them one after another. Every seed ends at once, so
        such a trial is not pruned: its value is the IQM of all its seeds."""
        import rlx
        from rlx.groups import batches_seeds, link_seeds, train_side_by_side
        from rlx.memory import shared_by
        from rlx.protocols import Closes
        from rlx.trainer import catch_interrupt_of

        s = self.settings
        if not batches_seeds(s.agent):
            return None
        try:
            with shared_by(len(seeds)):  # the seeds' buffers are all allocated at once
                agents = [
                    rlx.make(s.agent, s.env, seed=seed, env_kwargs=s.env_kwargs, **params)
                    for seed in seeds
                ]
        except Exception as exc:
            _record_error(trial, exc)
            raise
        batch, why = link_seeds(agents)
        if batch is None:
            for agent in agents:
                if isinstance(agent, Closes):
                    agent.close()
            if why and not self.told_unbatched:
                self.console.print(f"notice: each trial's seeds train one by one: {why}")
                self.told_unbatched = True
            return None
        trainers, prunings = {}, {}
        for k, (seed, agent) in enumerate(zip(seeds, agents, strict=True)):
            name = f"{s.study_name}/trial-{trial.number}/seed-{k}"
            trainers[k], prunings[k] = self._trainer(
                trial, params, seed, trial_dir / f"seed-{k}", name, agent
            )
        results, errors = {}, {}
        previous = catch_interrupt_of(*trainers.values())
        try:
            for k, outcome in train_side_by_side(trainers, batch):
                if isinstance(outcome, Exception):
                    errors[k] = outcome
                else:
                    results[k] = outcome
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        if errors:
            k, error = min(errors.items())
            _record_error(trial, error, f"seed-{k}: ")
            raise error
        env_steps = sum(result.env_steps for result in results.values())
        trial.set_user_attr("env_steps", env_steps)
        reasons = {result.stop_reason for result in results.values()}
        reason = "interrupted" if "interrupted" in reasons else reasons.pop()
        trial.set_user_attr("stop_reason", reason)
        if reason == "interrupted":
            self._mark(
                trial_dir, trial.number, "interrupted", None, params, seeds, [], env_steps, True
            )
            raise KeyboardInterrupt
        values: list[float] = []
        for k in range(len(seeds)):
            value = self._value(results[k], prunings[k])
            if value is None:
                self._missing_value(f"seed-{k}: ")
            assert value is not None
            values.append(value)
        trial.set_user_attr("seed_values", values)
        result = trial_value(values)
        self._mark(
            trial_dir, trial.number, "complete", result, params, seeds, values, env_steps, True
        )
        return result

    def _missing_value(self, where: str = "") -> None:
        if not self.settings.from_evaluations:
            raise RlxError(f"{where}the run's last iteration logged no {self.settings.metric}")
        raise RlxError(f"{where}the trial was never evaluated")

    def _mark(
        self,
        trial_dir: Path,
        number: int,
        state: str,
        value: float | None,
        params: dict[str, Any],
        seeds: list[int],
        seed_values: list[float],
        env_steps: int,
        batched: bool = False,
    ) -> None:
        """``trial.json`` in the trial's directory: which trial of which study it was, and how
        it ended (a pruned or interrupted trial's runs stay, marked so). With several seeds,
        ``value`` is the IQM of ``seed_values`` (one per seed done, in the order of
        ``seeds``, whose runs are ``seed-<k>``), and ``batched`` whether they trained as one
        computation."""
        s = self.settings
        document = {
            "study": s.study_name,
            "storage": redact(s.storage),
            "trial": number,
            "state": state,
            "metric": s.metric,
            "value": value,
            "seed": seeds[0],
            "env_steps": env_steps,
            "params": _jsonable(params),
        }
        if s.seeds > 1:
            document.update(statistic="iqm", seeds=seeds, seed_values=seed_values, batched=batched)
        if trial_dir.is_dir():
            write_text_atomic(trial_dir / "trial.json", json.dumps(document, indent=2) + "\n")

    def report(self, study: Any, trial: Any) -> None:
        """An Optuna callback: one line per finished trial, with the best value so far (the
        least one when the study minimises) and how many of the study's trials are done,
        every worker's included."""
        if self.console is None:
            return
        done = _done(study)
        if self.show_done is not None:
            self.show_done(done)
        state = trial.state.name.lower()
        seconds = trial.duration.total_seconds() if trial.duration else 0.0
        if state == "fail":
            error = trial.user_attrs.get("error", "interrupted")
            self.console.print(f"trial {trial.number} failed: {error}", markup=False)
            return
        shown = ", ".join(f"{key}={_show(value)}" for key, value in trial.params.items())
        value = trial.value if trial.value is not None else _last_intermediate(trial)
        number = f"{value:.4g}" if value is not None else "-"
        best = _best(study)
        best_so_far = f"best {best.value:.4g} (trial {best.number})" if best else "no best yet"
        over = f" (IQM of {self.settings.seeds} seeds)" if self.settings.seeds > 1 else ""
        self.console.print(
            f"trial {trial.number} {state}: {self.settings.metric}{over} {number} after "
            f"{trial.user_attrs.get('env_steps', 0):,} steps, {seconds:.1f} s; {best_so_far}; "
            f"{done}/{self.settings.trials} done | {shown}",
            markup=False,
        )


@contextlib.contextmanager
def _trials_bar(console: Any, done: int, total: int) -> Iterator[Callable[[int], None] | None]:
    """A bar of finished trials out of ``total`` while the study runs, only where ``console``
    is a terminal (a log file gets the lines alone). Yields what moves it, or None."""
    if console is None or not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("trials"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("trials", total=total, completed=done)
        yield lambda finished: progress.update(task, completed=finished)


def _last_intermediate(trial: Any) -> float | None:
    values = trial.intermediate_values
    return values[max(values)] if values else None


def _sampler(settings: Settings, worker: int, started: int) -> Any:
    """TPE, seeded apart for each worker and each continuation of the study (the same seed
    in two workers would propose the same first trials). Where other processes may share the
    study, the process id goes in too; a lone ``rlx tune`` is reproducible."""
    from rlx.seeding import MAX_SEED, derive

    optuna = _optuna()
    salt = os.getpid() if settings.shared else 0
    seed = derive(settings.seed, "tune-sampler", worker, started, salt) % (MAX_SEED + 1)
    return optuna.samplers.TPESampler(seed=seed)


def _pruner(settings: Settings) -> Any:
    """Optuna's median pruner: after 5 finished trials, a trial whose curve is below the
    median of the others at the same step stops; no trial stops in its first quarter. With
    several seeds a step is a number of seeds done, and a trial may stop after any of them
    but the last."""
    optuna = _optuna()
    if not settings.prune:
        return optuna.pruners.NopPruner()
    warmup = settings.steps // 4 if settings.seeds == 1 else 0
    return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=warmup)


def _optimize(
    settings: Settings,
    space: Space,
    worker: int,
    console: Any,
    pruner: Any = None,
    show_done: Callable[[int], None] | None = None,
    current: Any = None,
) -> None:
    """Run trials of the study in this process (one worker) until it holds
    ``settings.trials`` finished trials, or until this worker saw as many trials fail (a
    failed trial does not count: hyperparameters the agent refuses, a diverging loss).
    ``show_done`` gets the number of finished trials after each trial; ``current`` (a shared
    integer) the number of the trial under way."""
    optuna = _optuna()
    storage = open_storage(settings.storage)
    started = len(optuna.load_study(study_name=settings.study_name, storage=storage).trials)
    objective = _Objective(settings, space, console, show_done)
    sampler = _sampler(settings, worker, started)
    asked = sampler.before_trial

    def before_trial(study: Any, trial: Any) -> None:
        # the trial is this worker's from its creation on: a Ctrl-C before the objective
        # starts (while Optuna sets it up) must fail it too, not leave it running for ever
        objective.current = trial.number
        if current is not None:  # and the parent's copy (``_run_workers``)
            current.value = trial.number
        asked(study, trial)

    sampler.before_trial = before_trial
    study = optuna.load_study(
        study_name=settings.study_name,
        storage=storage,
        sampler=sampler,
        pruner=pruner if pruner is not None else _pruner(settings),
    )
    done = optuna.study.MaxTrialsCallback(
        settings.trials, states=tuple(optuna.trial.TrialState[s] for s in DONE_STATES)
    )
    failures = 0

    def stop_after_failures(study: Any, trial: Any) -> None:
        nonlocal failures
        failures += trial.state == optuna.trial.TrialState.FAIL
        if failures >= max(5, settings.trials):
            study.stop()

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.optimize(
                objective,
                catch=(Exception,),
                callbacks=[objective.report, done, stop_after_failures],
            )
    except KeyboardInterrupt:
        _fail_if_running(study, objective.current)
        raise


def _fail_if_running(study: Any, number: int | None) -> None:
    """Mark the trial that a Ctrl-C cut off as failed if Optuna had not yet recorded it."""
    if number is None:
        return
    import optuna

    try:
        trial = study.trials[number]
        if trial.state == optuna.trial.TrialState.RUNNING:
            study.tell(number, state=optuna.trial.TrialState.FAIL)
    except Exception:
        pass


def _worker_main(settings: Settings, space: Space, worker: int, current: Any = None) -> None:
    """A worker process: its own process group (a terminal's Ctrl-C reaches the parent, which
    passes one on to each worker), then trials until its share is done."""
    from rich.console import Console

    os.setpgrp()
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        _optimize(settings, space, worker, console, current=current)
    except KeyboardInterrupt:
        sys.exit(130)
    except RlxError as exc:
        console.print(f"error: worker {worker}: {exc}", markup=False)
        sys.exit(2)


def _run_workers(settings: Settings, space: Space, workers: int) -> bool:
    """Worker processes (not threads: the GIL) on the shared storage; True when interrupted.

    A SIGINT that was ignored when ``rlx tune`` started (a background job of a script) stays
    ignored, in the workers too, which inherit it.
    """
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    #: Each worker's trial, from the moment Optuna creates it (-1: none yet).
    current = [context.Value("l", -1, lock=False) for _ in range(workers)]
    processes = [
        context.Process(target=_worker_main, args=(settings, space, worker, current[worker]))
        for worker in range(workers)
    ]
    interrupted = False

    def forward(signum: int, frame: Any) -> None:
        nonlocal interrupted
        interrupted = True
        for process in processes:
            if process.pid is not None and process.is_alive():
                try:
                    os.kill(process.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass

    catch = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    previous = signal.signal(signal.SIGINT, forward) if catch else None
    try:
        for process in processes:
            process.start()
        for process in processes:
            process.join()
    finally:
        if catch:
            signal.signal(signal.SIGINT, previous)
    stopped = interrupted or any(process.exitcode == 130 for process in processes)
    if stopped:  # a worker cut off while it told Optuna may have left its trial running
        optuna = _optuna()
        study = optuna.load_study(
            study_name=settings.study_name, storage=open_storage(settings.storage)
        )
        for slot in current:
            _fail_if_running(study, slot.value if slot.value >= 0 else None)
    return stopped


def _counts(study: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name.lower()] = counts.get(trial.state.name.lower(), 0) + 1
    return counts


def _done(study: Any) -> int:
    counts = _counts(study)
    return sum(counts.get(state.lower(), 0) for state in DONE_STATES)


def _check_out(out: Path, default_storage: bool) -> None:
    """``--out`` must be a new or empty directory, or one of an earlier ``rlx tune``."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a directory")
    if not out.is_dir() or not any(out.iterdir()):
        return
    trials = out / "trials"
    for inside in [trials, *trials.glob("*"), *trials.glob("*/seed-*")]:
        if inside.is_symlink():  # trials would be trained, and pruned, in whatever it names
            raise ConfigError(
                f"--out {out} holds the symbolic link {inside}, which rlx never follows: trials "
                "written through it would land outside the study; remove the link"
            )
    if default_storage and not (out / "study.db").is_file():
        raise ConfigError(
            f"--out {out} already exists and holds no study.db of an earlier rlx tune; give a "
            "new directory, or the one of the study to continue"
        )
    if not default_storage and not (out / "trials").is_dir():
        raise ConfigError(f"--out {out} already exists and is not an rlx tune directory")


def _check_study_of_out(
    out: Path, study_name: str, storage: str | None, studies: Iterable[Any] = ()
) -> None:
    """An ``--out`` folder holds the outputs of one study (``trials.csv``, ``best.toml``, the
    plots, ``trials/<number>``): refuse, before the study is created, a study of another
    name or storage there, whose outputs and trial folders would replace that study's.

    ``storage`` is None for the folder's own ``study.db``, whose ``studies`` (Optuna's
    frozen studies) it holds; the trials' ``trial.json`` name theirs in any storage."""
    default_storage = storage is None
    held: dict[tuple[str, str | None], str] = {}  # (name, storage) -> how it is shown
    if default_storage:
        for study in studies:
            recorded = study.user_attrs.get("rlx") or {}
            what = f" ({recorded['agent']} on {recorded['env']})" if "env" in recorded else ""
            held[(study.study_name, None)] = f"{study.study_name!r}{what}"
    for record in sorted((out / "trials").glob("*/trial.json")):
        try:
            document = json.loads(record.read_text())
            name, where = str(document["study"]), str(document["storage"])
        except (OSError, ValueError, TypeError, KeyError):
            continue  # not written by rlx tune: nothing to tell from it
        key = (name, None if default_storage else _storage_key(where))
        held.setdefault(key, repr(name) if default_storage else f"{name!r} in {where}")
    mine = (study_name, None if storage is None else _storage_key(storage))
    others = [key for key in held if key != mine]
    if not others or (default_storage and mine in held):
        return
    raise ConfigError(
        f"--out {out} holds the study {held[others[0]]}, not {study_name!r}"
        + ("" if storage is None else f" in {redact(storage)}")
        + "; give another --out for a new study (its best.toml, trials.csv and plots would "
        "replace that study's), or the same agent, --env and --study-name to continue it"
    )


def _storage_key(url: str) -> str:
    """A storage URL as it compares: an SQLite database by its absolute path, so that
    ``sqlite:///study.db`` and ``sqlite:////path/to/study.db`` are the same storage."""
    if url.startswith("sqlite"):
        try:
            from sqlalchemy.engine import make_url

            database = make_url(url).database
        except Exception:  # a malformed URL: compared as written
            database = None
        if database and database != ":memory:":
            return f"sqlite:{Path(database).resolve()}"
    return redact(url)


def _make_out(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create --out {out}: {exc.strerror or exc}") from None


def _check_agent_metric(probe: Any, metric: str) -> None:
    """Refuse a ``--metric`` that is neither an evaluation metric nor one that the agent logs
    (seen on one iteration of the probe agent)."""
    logged = sorted(probe.step().metrics)
    if metric not in logged:
        known = [*METRICS, *logged]
        raise ConfigError(
            f"unknown metric {metric!r}.{did_you_mean(metric, known)} Metrics: "
            + "; ".join(f"{key} ({meaning})" for key, meaning in METRICS.items())
            + (f"; or one the agent logs: {', '.join(logged)}" if logged else "")
        )


def _trainer_settings(
    agent: Any,
    steps: int | None,
    eval_every: int | None,
    eval_episodes: int | None,
    needs_evaluations: bool = True,
) -> tuple[int, int, int]:
    """Steps, evaluation interval and episodes of every trial (the agent's suggestions and
    rlx run's defaults where not given; ten evaluations per trial by default)."""
    from rlx.config import build_config
    from rlx.trainer import TrainerConfig, trainer_defaults

    given = {
        key: value
        for key, value in (("steps", steps), ("eval_episodes", eval_episodes))
        if value is not None
    }
    config = build_config(TrainerConfig, {**trainer_defaults(agent), **given})
    if config.steps is None:
        raise ConfigError("rlx tune gives every trial a budget in environment steps: give --steps")
    if config.eval_episodes < 1 and needs_evaluations:
        raise ConfigError(
            f"rlx tune scores trials by their evaluations, which {type(agent).__name__} "
            "does not run by default: give --eval-episodes (at least 1), or a --metric the "
            "agent logs (a bandit's cumulative_regret, with --direction minimize)"
        )
    every = eval_every if eval_every is not None else max(1, config.steps // 10)
    if not 1 <= every <= config.steps:
        raise ConfigError(f"--eval-every must be in [1, --steps={config.steps}], got {every}")
    return config.steps, every, config.eval_episodes


def tune(
    agent: str,
    env: str,
    *,
    trials: int = 20,
    storage: str | None = None,
    workers: int = 1,
    steps: int | None = None,
    metric: str = "eval_return",
    direction: str = "maximize",
    space: str | Path | Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    seed: int = 0,
    eval_every: int | None = None,
    eval_episodes: int | None = None,
    study_name: str | None = None,
    prune: bool = True,
    pruner: Any = None,
    loggers: Any = (),
    console: Any = None,
    seeds: int = 1,
    batched: bool = True,
    env_kwargs: Mapping[str, Any] | None = None,
) -> TuneResult:
    """Tune ``agent`` on ``env`` until the study holds ``trials`` finished (complete or
    pruned) trials in total; continues the study when the storage already holds it.

    ``space`` is a TOML space file or its entries as a mapping. ``pruner`` replaces the
    median pruner (an Optuna pruner; in-process runs only, ``workers=1``). ``loggers`` are
    experiment trackers every trial's run logs to (``["mlflow,experiment=tune"]``: one
    tracker run per trial). ``seeds`` scores every trial over that many seeds, by the IQM of
    their values (needs scipy, ``rlx-core[stats]``), trained as one batched computation
    where the agent can (``batched=False``: one after another, a trial pruned between
    them). ``env_kwargs`` go to the environment of every trial (``gymnasium.make``'s keyword
    arguments), and to best.toml. Everything the input can get wrong is checked before
    anything is written.
    """
    import rlx
    from rlx.protocols import Closes
    from rlx.seeding import check_seed

    optuna = _optuna()
    from rich.console import Console

    console = console if console is not None else Console(stderr=True, highlight=False)
    check_seed(seed, "--seed")
    for value, what in ((trials, "--trials"), (workers, "--workers")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{what} must be a positive integer, got {value!r}")
    if direction not in ("maximize", "minimize"):
        raise ConfigError(f"--direction is maximize or minimize, got {direction!r}")
    if storage is not None:
        check_storage(storage)
    seeds = parse_trial_seeds(seeds)
    if seeds > 1:
        import importlib.util

        if importlib.util.find_spec("scipy") is None:
            raise RlxError(
                "rlx tune --seeds scores a trial by the IQM of its seeds, which needs scipy: "
                "pip install 'rlx-core[stats]'"
            )
    if pruner is not None and workers > 1:
        raise ConfigError("a pruner object works in-process only: use workers=1")
    from rlx.loggers import build_loggers, check_loggers

    loggers = check_loggers(loggers) if loggers else ()
    build_loggers(loggers)  # a missing library or an unreachable server: refused now
    if isinstance(space, (str, Path)):
        search = build_space(agent, read_space_file(space), f"space file {space}")
    else:
        search = build_space(agent, space, "space")
    # Build the agent once with the fixed values: a bad environment, a space the agent cannot
    # handle, or fixed values it refuses fail here, before anything is written.
    env_kwargs = dict(env_kwargs or {})
    probe = rlx.make(agent, env, seed=seed, env_kwargs=env_kwargs, **search.fixed)
    try:
        steps, eval_every, eval_episodes = _trainer_settings(
            probe, steps, eval_every, eval_episodes, needs_evaluations=metric in METRICS
        )
        if metric not in METRICS:
            _check_agent_metric(probe, metric)
    finally:
        if isinstance(probe, Closes):
            probe.close()
    if out is None:
        from rlx.runs import default_run_path

        out = default_run_path("tunes", agent, env, seed)
    out = Path(out)
    default_storage = storage is None
    _check_out(out, default_storage)
    name = study_name or f"{agent}-{env}"
    if not default_storage:  # before the storage is opened, which may create it
        _check_study_of_out(out, name, storage)
    created = not out.exists()
    if default_storage:
        _make_out(out)
        storage = f"sqlite:///{(out / 'study.db').resolve()}"
    assert storage is not None
    try:
        opened = open_storage(storage)
    except ConfigError:
        if created and default_storage:
            import shutil

            shutil.rmtree(out, ignore_errors=True)
        raise
    if default_storage:
        _check_study_of_out(out, name, None, opened.get_all_studies())
    settings = Settings(
        agent=agent,
        env=env,
        trials=trials,
        storage=storage,
        study_name=name,
        out=str(out),
        metric=metric,
        steps=steps,
        eval_every=eval_every,
        eval_episodes=eval_episodes,
        seed=seed,
        prune=prune,
        shared=workers > 1 or not default_storage,
        loggers=loggers,
        direction=direction,
        seeds=seeds,
        batched=batched,
        env_kwargs=env_kwargs,
    )
    study = _open_study(optuna, opened, settings, search)
    _make_out(out)
    done = _done(study)
    _print_space(console, settings, search, done)
    remaining = trials - done
    interrupted = False
    before = _counts(study)
    if remaining <= 0:
        console.print(f"the study already holds {done} finished trials (--trials {trials})")
    elif workers == 1:
        try:
            with _trials_bar(console, done, trials) as show_done:
                _optimize(settings, search, 0, console, pruner, show_done)
        except KeyboardInterrupt:
            interrupted = True
    else:
        interrupted = _run_workers(settings, search, min(workers, remaining))
    study = optuna.load_study(study_name=settings.study_name, storage=opened)
    counts = _counts(study)
    files, notes = write_outputs(study, out, settings, console, search)
    failed = counts.get("fail", 0) - before.get("fail", 0)
    if failed and not interrupted and _done(study) == done:
        errors = [t.user_attrs["error"] for t in study.trials if "error" in t.user_attrs]
        raise RlxError(
            f"all {failed} trials of this rlx tune failed (see {files['trials']}); the last "
            f"error: {errors[-1] if errors else 'unknown'}"
        )
    best = _best(study)
    return TuneResult(
        study_name=settings.study_name,
        storage=storage,
        out=out,
        counts=counts,
        best_value=best.value if best else None,
        best_params=dict(best.params) if best else {},
        best_trial=best.number if best else None,
        interrupted=interrupted,
        files=files,
        notes=notes,
    )


def _open_study(optuna: Any, storage: Any, settings: Settings, space: Space) -> Any:
    """Create the study, or load it and check that it is the same study (agent, environment,
    metric, budgets, seed and space); the settings are recorded as a user attribute."""
    study = optuna.create_study(
        storage=storage,
        study_name=settings.study_name,
        direction=settings.direction,
        load_if_exists=True,
    )
    identity = _jsonable(settings.identity(space))
    recorded = study.user_attrs.get("rlx")
    if recorded is None:
        study.set_user_attr("rlx", identity)
        return study
    for key, value in identity.items():
        before = recorded.get(key, _IDENTITY_DEFAULTS.get(key))
        if before != value:
            shown = "another search space" if key == "space" else f"{key}={before!r}"
            raise ConfigError(
                f"study {settings.study_name!r} in {redact(settings.storage)} was started with "
                f"{shown}, not {'this one' if key == 'space' else repr(value)}; give the same "
                "settings to continue it, or another --study-name or --out for a new study"
            )
    return study


def _print_space(console: Any, settings: Settings, space: Space, done: int) -> None:
    from rich.table import Table

    verb = f"continuing from {done} finished trials" if done else "new"
    console.print(
        f"study {settings.study_name!r} in {redact(settings.storage)}, {verb}: "
        f"{settings.trials} trials of {settings.steps:,} steps, "
        + (
            f"evaluated every {settings.eval_every:,} steps on {settings.eval_episodes} episodes; "
            if settings.eval_episodes
            else "not evaluated; "
        )
        + f"{settings.direction.replace('ize', 'ising')} {settings.metric}"
        + (f" (the IQM over {settings.seeds} seeds per trial)" if settings.seeds > 1 else ""),
        markup=False,
    )
    table = Table("hyperparameter", "searched over", "from", title="search space")
    for d in space.dimensions:
        table.add_row(d.name, d.text(), d.source)
    console.print(table)
    for reason, names in space.skipped.items():
        console.print(f"not searched ({SKIP_REASONS[reason]}): {', '.join(names)}", markup=False)
    if space.skipped:
        console.print(
            "a --space file searches any of them: name = {low = .., high = ..} or [choices]",
            markup=False,
        )
    if not space.searched:
        console.print(
            "nothing to search: every trial runs the same settings; give ranges in --space",
            markup=False,
        )


# -- outputs -------------------------------------------------------------------------------


def _best(study: Any) -> Any:
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        return None
    best = min if study.direction == optuna.study.StudyDirection.MINIMIZE else max
    return best(complete, key=lambda t: t.value)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    raise ConfigError(f"cannot write {value!r} to TOML")


def best_config(study: Any, settings: Settings, space: Space) -> str | None:
    """The best trial as a TOML config that ``rlx run --config`` accepts (the trial's seed,
    hyperparameters and budget: it reruns the trial); None before any trial completed."""
    best = _best(study)
    if best is None:
        return None
    params = {d.name: d.value for d in space.dimensions if d.kind == "fixed"}
    for d in space.dimensions:
        if d.name in best.params:
            choice = best.params[d.name]
            if d.kind == "choice":
                choice = d.choices[[_encode(c) for c in d.choices].index(choice)]
            params[d.name] = choice
    lines = [
        f"# rlx tune: trial {best.number}, the best of "
        f"{_done(study)} finished trials of study {settings.study_name!r}",
        f"# ({settings.metric} = {best.value:.6g}). Rerun it: rlx run --config best.toml",
        *(
            [
                f"# {settings.metric}: the IQM over the trial's {settings.seeds} seeds; seed: "
                "the first of them, seed-0"
            ]
            if settings.seeds > 1
            else []
        ),
        f"agent = {_toml_value(settings.agent)}",
        f"env = {_toml_value(settings.env)}",
        f"seed = {best.user_attrs.get('seed', settings.seed)}",
        "tuned = false  # the trial started from the agent's defaults, not its tuned settings",
        "",
        "[hyperparameters]",
        *(f"{name} = {_toml_value(_jsonable(value))}" for name, value in params.items()),
        "",
        "[trainer]",
        f"steps = {settings.steps}",
        f"eval_every = {settings.eval_every}",
        f"eval_episodes = {settings.eval_episodes}",
        *(
            ["", "[env_kwargs]"]
            + [
                f"{json.dumps(k)} = {_toml_value(_jsonable(v))}"
                for k, v in settings.env_kwargs.items()
            ]
            if settings.env_kwargs
            else []
        ),
    ]
    return "\n".join(lines) + "\n"


def best_entry(study: Any, settings: Settings, space: Space) -> str | None:
    """The best trial as an entry of a family's tuned-settings file (:mod:`rlx.tuned`): its
    hyperparameters and budget under ``[agent."env"]``, its study and value as the source;
    None before any trial completed."""
    best = _best(study)
    config = best_config(study, settings, space)
    if best is None or config is None:
        return None
    import tomllib

    params = tomllib.loads(config)["hyperparameters"]
    over = f" (the IQM over {settings.seeds} seeds)" if settings.seeds > 1 else ""
    source = (
        f"rlx tune, study {settings.study_name!r}, trial {best.number}: {settings.metric} "
        f"{best.value:.6g}{over} in {settings.steps:,} steps"
    )
    table = f"[{json.dumps(settings.agent)}.{json.dumps(settings.env)}]"
    lines = [
        "# The best trial as tuned settings (rlx.tuned): paste it into a family's tuned.toml.",
        table,
        f"source = {_toml_value(source)}",
        f"trainer = {{ steps = {settings.steps} }}",
        *(
            [f"env_kwargs = {_toml_value(_jsonable(settings.env_kwargs))}"]
            if settings.env_kwargs
            else []
        ),
        "",
        f"[{json.dumps(settings.agent)}.{json.dumps(settings.env)}.hyperparameters]",
        *(f"{name} = {_toml_value(value)}" for name, value in params.items()),
    ]
    return "\n".join(lines) + "\n"


def write_outputs(
    study: Any, out: Path, settings: Settings, console: Any, space: Space | None = None
) -> tuple[dict[str, Path], list[str]]:
    """``trials.csv``, ``best.toml``, the optimisation-history and parameter-importance plots
    in ``out``, and the table of trials on the console. Returns the files and notes.

    With several seeds per trial, the metric's column holds the IQM over the seeds,
    ``<metric>_seed_<k>`` columns each seed's value (empty for a seed a pruned trial did not
    reach) and ``seed`` the seeds, separated by spaces."""
    if space is None:
        recorded = study.user_attrs.get("rlx", {}).get("space", [])
        space = Space(settings.agent, [_dimension_from_json(d) for d in recorded])
    files: dict[str, Path] = {}
    notes: list[str] = []
    trials = study.get_trials(deepcopy=False)
    names = sorted({name for t in trials for name in t.params})
    per_seed = [f"{settings.metric}_seed_{k}" for k in range(settings.seeds)]
    if settings.seeds == 1:
        per_seed = []

    def seed_columns(trial: Any) -> list[Any]:
        if not per_seed:
            return [trial.user_attrs.get("seed", "")]
        values = list(trial.user_attrs.get("seed_values", []))
        values += [""] * (len(per_seed) - len(values))
        return [*values, " ".join(map(str, trial.user_attrs.get("seeds", [])))]

    files["trials"] = out / "trials.csv"
    with writing(files["trials"], "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "number",
                "state",
                settings.metric,
                *per_seed,
                "seed",
                "env_steps",
                "seconds",
                "run_dir",
                *names,
                "error",
            ]
        )
        for t in trials:
            value = t.value if t.value is not None else _last_intermediate(t)
            writer.writerow(
                [
                    t.number,
                    t.state.name.lower(),
                    "" if value is None else value,
                    *seed_columns(t),
                    t.user_attrs.get("env_steps", ""),
                    round(t.duration.total_seconds(), 3) if t.duration else "",
                    t.user_attrs.get("run_dir", ""),
                ]
                + [t.params.get(name, "") for name in names]
                + [t.user_attrs.get("error", "")]
            )
    text = best_config(study, settings, space)
    if text is not None:
        files["best"] = out / "best.toml"
        write_text_atomic(files["best"], text)
        files["tuned"] = out / "tuned.toml"
        write_text_atomic(files["tuned"], best_entry(study, settings, space) or "")
    else:
        notes.append("no trial completed yet, so there is no best.toml")
    plots, plot_notes = _plots(study, out)
    files.update(plots)
    notes += plot_notes
    _print_trials(console, study, settings)
    for note in notes:
        console.print(f"note: {note}", markup=False)
    for key, path in files.items():
        console.print(f"{key}: {path}", markup=False)
    return files, notes


def _dimension_from_json(document: Mapping[str, Any]) -> Dimension:
    values = dict(document)
    values["choices"] = tuple(values.get("choices") or ())
    return Dimension(**values)


def _plots(study: Any, out: Path) -> tuple[dict[str, Path], list[str]]:
    """Optuna's optimisation history and parameter importances as PNG files."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        return {}, ["no plots: they need matplotlib (pip install 'rlx-core[tune]')"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna
    from optuna.visualization import matplotlib as plots

    files: dict[str, Path] = {}
    notes: list[str] = []
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    drawings: list[tuple[str, str, Callable[[], Any]]] = [
        ("history", "optimization_history.png", lambda: plots.plot_optimization_history(study))
    ]
    varied = {
        name
        for name in {n for t in complete for n in t.params}
        if len({_key(t, name) for t in complete}) > 1
    }
    if len(complete) >= 2 and varied:
        drawings.append(
            ("importances", "param_importances.png", lambda: plots.plot_param_importances(study))
        )
    else:
        notes.append(
            "no parameter importances: they need at least 2 complete trials with varying "
            "hyperparameters"
        )
    if not complete:
        return {}, ["no plots yet: no trial completed", *notes[1:]]
    for key, name, draw in drawings:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                axes = draw()
            figure = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
            figure.tight_layout()
            with writing(out / name, "wb") as image:
                figure.savefig(image, format="png", dpi=100)
            plt.close(figure)
            files[key] = out / name
        except Exception as exc:  # a plot is a convenience: never lose the study over one
            notes.append(f"no {name}: {type(exc).__name__}: {exc}".splitlines()[0])
    return files, notes


def _key(trial: Any, name: str) -> str:
    return json.dumps(trial.params.get(name), default=str)


def _print_trials(console: Any, study: Any, settings: Settings, limit: int = 20) -> None:
    """The trials, best first (the first ``limit`` of them), and how many ended how."""
    from rich.table import Table

    trials = list(study.get_trials(deepcopy=False))

    sign = -1.0 if settings.direction == "maximize" else 1.0

    def order(t: Any) -> tuple[int, float]:
        value = t.value if t.value is not None else _last_intermediate(t)
        rank = {"COMPLETE": 0, "PRUNED": 1}.get(t.state.name, 2)
        return rank, sign * value if value is not None else math.inf

    trials.sort(key=order)
    counts = ", ".join(f"{n} {state}" for state, n in sorted(_counts(study).items()))
    table = Table(
        "trial",
        "state",
        settings.metric,
        "steps",
        "hyperparameters",
        title=f"trials of {settings.study_name!r}: {counts}",
    )
    for t in trials[:limit]:
        value = t.value if t.value is not None else _last_intermediate(t)
        table.add_row(
            str(t.number),
            t.state.name.lower(),
            f"{value:.4g}" if value is not None else "-",
            f"{t.user_attrs.get('env_steps', 0):,}",
            ", ".join(f"{key}={_show(v)}" for key, v in t.params.items()),
        )
    if len(trials) > limit:
        table.caption = f"the best {limit} of {len(trials)}; all of them are in trials.csv"
    console.print(table)
