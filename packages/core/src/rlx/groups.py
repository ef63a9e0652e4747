"""Seed groups: one configuration trained with many seeds, each seed an ordinary run.

``rlx run AGENT --env ENV --seeds 0-15`` (:func:`new_group`) trains every seed as its own
recorded run, ``rlx.trainer.new_run(..., seed=k, out=GROUP/seed-k)``, in worker processes
(``--jobs``, default one per core): a seed of a group is the single-seed run of that seed,
and ``rlx eval``, ``rlx plot``, ``rlx.load``, ``--init-from`` and ``--resume`` take it as any
run. When the agent batches seeds (:class:`rlx.protocols.BatchesSeeds`: VPG, A2C, PPO,
the DQNs, DDPG, TD3 and SAC), each worker trains its share of the seeds as one batched
computation, their trainers advancing in turn (:meth:`rlx.trainer.Trainer.steps`);
otherwise, and with ``--no-batched``, each worker trains one seed at a time. Layout::

    GROUP/
      .rlx-group      the marker that makes the folder a group (written first)
      group.json      agent, env, seeds, settings, hyperparameters, wrappers, env_kwargs, tuned
      seed-<k>/       the run directory of seed k
      summary.json    per seed: stop reason, steps, final and best evaluation returns (or
                      the error), and the aggregate of the final returns (rlx.statistics)
      .lock           held by the process training the group

In Python::

    from rlx.groups import GroupTrainer, new_group

    group = new_group("q-learning", "FrozenLake-v1", seeds=range(4), settings={"steps": 20_000})
    result = group.fit()
    print(result.summary["aggregate"]["iqm"], result.results[0].final_eval)
    GroupTrainer.resume(result.path, steps=40_000).fit()   # every seed goes on

Workers start with SIGINT ignored; a Ctrl-C reaches the main process, which asks every
seed to stop after its iteration (``final/`` saved, stop reason ``interrupted``), so that
``rlx run --resume GROUP`` continues each one exactly. A seed that fails stops alone; the
others go on and ``summary.json`` records its error.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import queue
import re
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from rlx.callbacks import Callback
from rlx.errors import CheckpointError, ConfigError, NotBatchable, RlxError
from rlx.memory import shared_by
from rlx.runs import GROUP_FILE, GROUP_MARKER, is_group
from rlx.statistics import iqm, median

if TYPE_CHECKING:
    from rlx.evaluation import TrainResult
    from rlx.protocols import Iteration
    from rlx.protocols import Trainer as TrainerView
    from rlx.trainer import Trainer

SUMMARY_FILE = "summary.json"
#: More seeds than this in one ``--seeds`` is surely a typo (``0-100000``).
MAX_SEEDS = 10_000
#: Seconds between two progress reports of one seed.
REPORT_EVERY = 0.5
#: Environment variables that keep BLAS to one thread per worker (set unless the user did).
ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def parse_seeds(text: str) -> list[int]:
    """``"0-15"``, ``"0,3,7"`` or ``"0-3,9"`` as the list of seeds, in the order given.

    Ranges include both ends. An empty, negative, reversed, duplicate or malformed entry is
    one :class:`~rlx.errors.ConfigError`.
    """
    from rlx.seeding import MAX_SEED

    example = "give seeds as a range A-B, a list 0,3,7 or both (0-3,9)"
    seeds: list[int] = []
    for token in text.split(","):
        match = re.fullmatch(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", token)
        if match is None:
            shown = token.strip()
            what = "an empty entry" if not shown else f"{shown!r} is not a seed or a range"
            raise ConfigError(f"--seeds {text!r}: {what}; {example}")
        first, last = int(match[1]), int(match[2] if match[2] is not None else match[1])
        if last < first:
            raise ConfigError(f"--seeds {text!r}: the range {token.strip()} goes down; {example}")
        if last > MAX_SEED:
            raise ConfigError(f"--seeds {text!r}: seeds must lie in [0, {MAX_SEED}]")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise ConfigError(f"--seeds {text!r}: more than {MAX_SEEDS} seeds")
        seeds += range(first, last + 1)
    return check_seeds(seeds, f"--seeds {text!r}")


def check_seeds(seeds: Iterable[Any], what: str = "seeds") -> list[int]:
    """``seeds`` as a list of distinct valid seeds, or one ConfigError."""
    from rlx.seeding import check_seed

    listed = list(seeds)
    if not listed:
        raise ConfigError(f"{what}: no seeds given")
    if len(listed) > MAX_SEEDS:
        raise ConfigError(f"{what}: more than {MAX_SEEDS} seeds")
    checked = [check_seed(seed, f"{what}: a seed") for seed in listed]
    repeated = sorted(seed for seed, count in collections.Counter(checked).items() if count > 1)
    if repeated:
        raise ConfigError(f"{what}: seed {repeated[0]} is given twice; each seed runs once")
    return checked


def check_jobs(jobs: Any, seeds: int) -> int:
    """The number of worker processes: ``jobs``, or one per core; at most one per seed."""
    if jobs is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        return max(1, min(cores or os.cpu_count() or 1, seeds))
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= seeds:
        raise ConfigError(
            f"--jobs must be an integer from 1 to the number of seeds ({seeds}), got {jobs!r}"
        )
    return jobs


def default_group_path(root: str | Path, agent: str, env_id: str, seeds: Sequence[int]) -> Path:
    """``ROOT/<agent>-<env>-seeds<first>-<last>-<UTC time>``, unsafe characters replaced."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{agent}-{env_id}-seeds{seeds[0]}-{seeds[-1]}-{stamp}")
    path, suffix = Path(root) / name, 1
    while path.exists():
        suffix += 1
        path = Path(root) / f"{name}-{suffix}"
    return path


def seed_dir(group: Path, seed: int) -> Path:
    """The run directory of ``seed`` in the group at ``group``: ``<group>/seed-<seed>``."""
    return group / f"seed-{seed}"


@dataclass
class GroupResult:
    """How a group ended: the seeds' results, their failures, and summary.json's content."""

    path: Path
    #: The TrainResult of every seed that trained in this call, by seed.
    results: dict[int, TrainResult]
    #: The error message of every seed that failed, by seed.
    failed: dict[int, str]
    summary: dict[str, Any]
    interrupted: bool = False
    #: Whether a seed failed with something other than an rlx error (a bug: exit code 1).
    crashed: bool = False
    #: Seeds skipped because they had finished their budget already (resume).
    skipped: list[int] = field(default_factory=list)

    def describe(self) -> str:
        """How the group ended, in a few lines: the seeds' outcomes and the aggregate of
        their final evaluation returns."""
        runs = self.summary["runs"]
        finals = [e["final_return"] for e in runs if isinstance(e.get("final_return"), float)]
        counts = collections.Counter(
            e["stop_reason"]
            if e["stop_reason"] in ("failed", "not started")
            else f"stopped ({e['stop_reason']})"
            for e in runs
        )
        lines = [f"{len(runs)} seeds: " + ", ".join(f"{n} {how}" for how, n in counts.items())]
        aggregate = self.summary.get("aggregate")
        if isinstance(aggregate, dict) and {"iqm", "mean", "median"} <= aggregate.keys():
            shown = ", ".join(
                f"{name} {aggregate[name]['value']:.4g} "
                f"[{aggregate[name]['low']:.4g}, {aggregate[name]['high']:.4g}]"
                for name in ("iqm", "mean", "median")
            )
            lines.append(f"final return over {len(finals)} seeds (95% intervals): {shown}")
        elif finals:
            lines.append(
                f"final return over {len(finals)} seeds: IQM {iqm(finals):.4g}, "
                f"median {median(finals):.4g}"
            )
        lines.append(f"group directory: {self.path} ({SUMMARY_FILE})")
        return "\n".join(lines)

    def failure_text(self) -> str:
        """One message naming the seeds that failed and the first one's error."""
        first = min(self.failed)
        message = self.failed[first].strip().splitlines()[0] if self.failed[first] else ""
        return (
            f"{len(self.failed)} of {len(self.summary['runs'])} seeds failed (seed {first}: "
            f"{message}); the others finished, and {self.path / SUMMARY_FILE} records each "
            "seed's error"
        )


class _Report(Callback):
    """A worker's callback: the seed's progress for the group's display (rate-limited), and
    the group's stop request, which stops the run as a Ctrl-C would."""

    key = "rlx-group-report"

    def __init__(self, seed: int, events: Any, stop: Any) -> None:
        self.seed, self.events, self.stop = seed, events, stop
        self._next = 0.0

    def on_iteration(self, trainer: TrainerView, iteration: Iteration) -> str | None:
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + REPORT_EVERY
        self.events.put(("progress", self.seed, trainer.env_steps, trainer.recent_mean()))
        return "interrupted" if self.stop.is_set() else None


class _Lines:
    """A text file for a worker's console: each line goes to the main process, which prints
    it above the group's progress bar as ``seed k: line``."""

    def __init__(self, events: Any, seed: int | None) -> None:
        self.events, self.seed, self._buffer = events, seed, ""

    def write(self, text: str) -> int:
        self._buffer += text
        *lines, self._buffer = self._buffer.split("\n")
        for line in lines:
            if line.strip():
                self.events.put(("line", self.seed, line))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _trainer_for(task: dict[str, Any], console: Any, report: Callback) -> Trainer:
    from rlx.trainer import Trainer, new_run

    if task["mode"] == "resume":
        return Trainer.resume(
            task["path"],
            console=console,
            trust_code=task["trust_code"],
            device=task["device"],
            callbacks=[report],
            **task["overrides"],
        )
    return new_run(**task["run"], console=console, callbacks=[report])


def _worker_main(
    worker: int, tasks: Any, events: Any, stop: Any, workers: int = 1, batched: bool = True
) -> None:
    """A worker process (started with SIGINT ignored): the chunks of seeds it takes, one
    after another, until the main process's sentinel; each seed's outcome is one message on
    ``events``. The seeds of a chunk train as one batched computation when their agent
    batches seeds (:class:`rlx.protocols.BatchesSeeds`), else one after another.

    What a seed prints (its console, and anything written to stdout or stderr: warnings,
    an evaluation's progress bar, which sees no terminal here) goes to the main process as
    lines, so that the group's own display stays whole."""
    while (chunk := tasks.get()) is not None:
        if stop.is_set():
            for task in chunk:
                events.put(("skipped", worker, task["seed"]))
            continue
        seeds = [task["seed"] for task in chunk]
        events.put(("started", worker, seeds))
        sys.stdout = sys.stderr = cast(
            TextIO, _Lines(events, seeds[0] if len(seeds) == 1 else None)
        )
        # the seeds of the other workers, or of this batch, train at the same time
        with shared_by(workers):
            trainers = {}
            for task in chunk:
                try:
                    trainers[task["seed"]] = _build(task, events, stop)
                except Exception as exc:
                    _failed(worker, task["seed"], events, exc)
            _train_chunk(worker, trainers, events, batched)


def _build(task: dict[str, Any], events: Any, stop: Any) -> Trainer:
    from rich.console import Console

    lines = _Lines(events, task["seed"])
    console = Console(
        file=cast(TextIO, lines), force_terminal=False, highlight=False, soft_wrap=True
    )
    return _trainer_for(task, console, _Report(task["seed"], events, stop))


def _failed(worker: int, seed: int, events: Any, exc: Exception) -> None:
    """The "failed" message of a seed that raised ``exc``; a bug (not an RlxError or a
    MemoryError) is reported with its type, and the other seeds go on."""
    if isinstance(exc, RlxError):
        events.put(("failed", worker, seed, str(exc), False))
    elif isinstance(exc, MemoryError):
        events.put(("failed", worker, seed, f"not enough memory ({exc or 'MemoryError'})", False))
    else:
        events.put(("failed", worker, seed, f"{type(exc).__name__}: {exc}", True))


def _train_chunk(worker: int, trainers: dict[int, Trainer], events: Any, batched: bool) -> None:
    """Train a worker's chunk of seeds (:func:`train_side_by_side`), each outcome one
    message on ``events``."""
    batch = None
    if batched:
        batch, why = link_seeds([trainer.agent for trainer in trainers.values()])
        if why:
            events.put(("line", None, f"notice: these seeds train one by one: {why}"))
    for seed, outcome in train_side_by_side(trainers, batch):
        if isinstance(outcome, Exception):
            _failed(worker, seed, events, outcome)
        else:
            events.put(("finished", worker, seed, outcome))


def batches_seeds(agent: str) -> bool:
    """Whether the registered agent ``agent`` can batch its seeds (its class has
    ``seed_batch``, :class:`rlx.protocols.BatchesSeeds`); imports the class, makes nothing."""
    from rlx.discovery import agent_spec

    return callable(getattr(agent_spec(agent).load(), "seed_batch", None))


def link_seeds(agents: Sequence[Any]) -> tuple[Any, str | None]:
    """The seed batch of ``agents`` (one seed each, one class and settings) when their agent
    batches seeds (:class:`rlx.protocols.BatchesSeeds`) and its batches pay
    (``seed_batches_pay``), else None; and why they are not batched, when their agent batches
    seeds but not these or not faster (None otherwise)."""
    from rlx.protocols import BatchesSeeds

    if len(agents) < 2 or not isinstance(agents[0], BatchesSeeds):
        return None, None
    if not getattr(type(agents[0]), "seed_batches_pay", True):
        return None, (
            f"{type(agents[0]).__name__}'s seeds measured faster one after another than as "
            "one batch (benchmarks/results/seeds_contrib.md in rlx's repository)"
        )
    try:
        return type(agents[0]).seed_batch(agents), None
    except NotBatchable as exc:
        return None, str(exc)


def train_side_by_side(
    trainers: Mapping[Any, Trainer], batch: Any = None
) -> Iterator[tuple[Any, TrainResult | Exception]]:
    """Train ``trainers`` (key -> trainer), yielding ``(key, result)``, or ``(key,
    exception)`` for one that failed, as each ends. With ``batch`` (their agents'
    :func:`link_seeds`) they advance in lockstep, each stepping once a round
    (:meth:`rlx.trainer.Trainer.steps`) and leaving the batch when it ends; without, one
    after another. A Ctrl-C is the caller's (Python's KeyboardInterrupt, or the trainers'
    ``interrupt()``)."""
    if batch is None:
        for key, trainer in trainers.items():
            try:
                yield key, trainer.fit()
            except Exception as exc:
                yield key, exc
        return
    running = {key: trainer.steps(catch_interrupt=False) for key, trainer in trainers.items()}
    while running:
        for key, steps in list(running.items()):
            try:
                next(steps)
                continue
            except StopIteration as done:
                outcome: TrainResult | Exception = done.value
            except Exception as exc:
                outcome = exc
            batch.leave(trainers[key].agent)
            del running[key]
            yield key, outcome


@contextlib.contextmanager
def _starting_workers() -> Iterator[None]:
    """Workers inherit SIGINT ignored (Python then installs no KeyboardInterrupt handler, so
    they are safe from their first instruction) and one BLAS thread each."""
    added = {name: "1" for name in ONE_THREAD if name not in os.environ}
    os.environ.update(added)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        for name in added:
            os.environ.pop(name, None)


class _Display:
    """The group's progress in the main process: a line per finished seed and, on a terminal,
    a bar of the total environment steps, their rate, and the median and IQM of the seeds'
    latest training returns."""

    def __init__(self, console: Any, show_bar: bool, seeds: int, total: int | None) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.console, self.seeds, self.done = console, seeds, 0
        self.steps: dict[int, int] = {}
        self.returns: dict[int, float] = {}
        self.progress = Progress(
            TextColumn("seeds {task.fields[done]}/{task.fields[seeds]}"),
            BarColumn(),
            TextColumn("{task.completed:,.0f} env steps"),
            TextColumn("| {task.fields[stats]}"),
            TimeElapsedColumn(),
            console=console,
            disable=not (show_bar and console.is_terminal),
        )
        self.task = self.progress.add_task("", total=total, done=0, seeds=seeds, stats="")
        #: When the display started, and the steps resumed seeds had done by then.
        self.started, self.first_steps = time.monotonic(), 0

    def __enter__(self) -> _Display:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def update(self, seed: int, env_steps: int, recent: float | None = None) -> None:
        self.steps[seed] = env_steps
        if recent is not None and math.isfinite(recent):
            self.returns[seed] = recent
        values = list(self.returns.values())
        total = sum(self.steps.values())
        rate = (total - self.first_steps) / max(time.monotonic() - self.started, 1e-9)
        stats = f"{rate:,.0f} steps/s"
        if values:
            stats += f", return median {median(values):.3g}, IQM {iqm(values):.3g}"
        self.progress.update(self.task, completed=total, done=self.done, stats=stats)

    def print(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def finished(self, seed: int, result: TrainResult) -> None:
        self.done += 1
        final = result.final_eval.mean_return if result.final_eval is not None else None
        rate = result.env_steps / result.elapsed if result.elapsed > 0 else 0.0
        shown = f"final return {final:.4g}" if final is not None else "no final evaluation"
        self.print(
            f"seed {seed}: stopped ({result.stop_reason}) after {result.env_steps:,} environment "
            f"steps, {shown}, {rate:,.0f} steps/s"
        )
        self.update(seed, result.env_steps)

    def failed(self, seed: int, message: str) -> None:
        self.done += 1
        self.print(f"seed {seed}: failed: {message}")
        self.update(seed, self.steps.get(seed, 0))


def _done(current: dict[int, list[int]], worker: int, seed: int) -> None:
    """Seed ``seed`` of ``worker`` has finished or failed."""
    seeds = current.get(worker, [])
    if seed in seeds:
        seeds.remove(seed)
    if not seeds:
        current.pop(worker, None)


def _entry(seed: int, result: TrainResult) -> dict[str, Any]:
    return {
        "seed": seed,
        "run_dir": str(result.run_dir),
        "stop_reason": result.stop_reason,
        "env_steps": result.env_steps,
        "final_return": result.final_eval.mean_return if result.final_eval else None,
        "best_return": result.best_return,
    }


def _aggregate(values: Sequence[float]) -> dict[str, Any] | None:
    """``rlx.statistics.summarize`` of the final returns, when that module is installed."""
    try:
        from rlx.statistics import summarize
    except ImportError:
        return None
    if not values:
        return None
    try:
        return dict(summarize(values))
    except RlxError:
        return None


class GroupTrainer:
    """Trains the seeds of a group in worker processes (with ``batched``, each worker's
    seeds as one batched computation where the agent can); :meth:`fit` returns a
    :class:`GroupResult`. Made by :func:`new_group` or :meth:`GroupTrainer.resume`."""

    def __init__(
        self,
        path: Path,
        record: dict[str, Any],
        tasks: list[dict[str, Any]],
        jobs: int,
        console: Any = None,
        progress: bool = True,
        new: bool = True,
        previous: Mapping[int, dict[str, Any]] | None = None,
        notices: Sequence[str] = (),
        total_steps: int | None = None,
        done_steps: Mapping[int, int] | None = None,
        batched: bool = True,
        layout: Sequence[Sequence[int]] | None = None,
    ) -> None:
        from rich.console import Console

        self.path, self.record, self.tasks, self.jobs = path, record, tasks, jobs
        self.console = console or Console(stderr=True)
        self.progress, self.new = progress, new
        self.previous = dict(previous or {})
        self.notices = list(notices)
        self.total_steps = total_steps
        self.batched = batched
        self.done_steps = dict(done_steps or {})
        #: The seeds of each batch to keep (a resume follows group.json's ``chunks``).
        self.layout = [list(chunk) for chunk in layout] if layout is not None else None

    @property
    def seeds(self) -> list[int]:
        """The group's seeds, in the order group.json lists them."""
        return list(self.record["seeds"])

    @staticmethod
    def read_record(path: str | Path) -> dict[str, Any]:
        """The group.json of the group at ``path``, checked (a CheckpointError otherwise)."""
        return _read_group(Path(path))

    @classmethod
    def resume(
        cls,
        path: str | Path,
        jobs: int | None = None,
        console: Any = None,
        trust_code: bool = False,
        device: str | None = None,
        progress: bool = True,
        batched: bool = True,
        **overrides: Any,
    ) -> GroupTrainer:
        """Continue every seed of the group at ``path``; ``overrides`` (trainer settings such
        as ``steps``) apply to all. Seeds that already used their budget are skipped, and a
        seed whose directory is missing starts again from scratch. A batched group resumes
        exactly when its seeds are batched again in the same chunks (the same ``jobs``)."""
        from rlx.config import build_config
        from rlx.trainer import TrainerConfig

        group = Path(path)
        record = _read_group(group)
        if not trust_code:
            _check_trusted(record, group, given=overrides)
        settings = {**record["settings"], **overrides}
        build_config(TrainerConfig, settings)  # bad overrides are refused before any work
        seeds = record["seeds"]
        previous = {entry["seed"]: entry for entry in _read_summary(group)}
        tasks, notices, skipped, done = [], [], {}, {}
        from rlx.group_results import check_seed_runs

        for seed, directory in zip(seeds, check_seed_runs(group, record), strict=True):
            # no link, no other run: checked for every seed before any trains
            config_file = directory / "config.json"
            if not trust_code and config_file.is_file():  # refused here, before any seed trains
                from rlx.recorded import check_record

                check_record(_read_json(config_file), str(config_file), given=overrides)
            if not directory.exists():
                notice = f"{directory} is missing; starting seed {seed} again from scratch"
                notices.append(notice)
                tasks.append(_new_task(record, seed, directory, settings, trust_code))
                continue
            state = _final_state(directory)
            steps = int(state.get("env_steps", 0)) if state else 0
            done[seed] = steps
            if state is not None and _budget_spent(state, directory, overrides):
                skipped[seed] = previous.get(seed) or _entry_from_state(seed, directory, state)
                notices.append(f"seed {seed} already used its budget ({steps:,} steps); skipped")
                continue
            tasks.append(
                {
                    "seed": seed,
                    "mode": "resume",
                    "path": str(directory),
                    "trust_code": trust_code,
                    "device": device,
                    "overrides": dict(overrides),
                }
            )
        if not tasks:
            raise ConfigError(
                f"every seed of {group} already used its budget; raise it (e.g. --steps) to "
                "continue"
            )
        layout, workers, said = _layout_on_resume(record, jobs, batched, tasks)
        notices += said
        record = {**record, "settings": settings}
        budget = settings.get("steps")
        return cls(
            group,
            record,
            tasks,
            workers,
            console=console,
            progress=progress and settings.get("progress", True) is not False,
            new=False,
            previous=skipped,
            notices=notices,
            total_steps=budget * len(seeds) if budget else None,
            done_steps=done,
            batched=batched,
            layout=layout,
        )

    def fit(self) -> GroupResult:
        """Train the seeds (``jobs`` at a time) until each stops; write summary.json."""
        from rlx.runs import RunDirectory

        lock = self._create() if self.new else self._lock()
        try:
            for notice in self.notices:
                self.console.print(f"notice: {notice}", markup=False)
            results, failed, crashed, interrupted = self._train()
            summary = self._summarize(results, failed)
            from rlx.files import write_json_atomic

            try:
                write_json_atomic(self.path / SUMMARY_FILE, summary)
            except OSError as exc:
                raise CheckpointError(f"could not write {self.path / SUMMARY_FILE}: {exc}") from exc
        finally:
            if isinstance(lock, RunDirectory):
                lock.unlock()
        return GroupResult(
            self.path,
            results,
            failed,
            summary,
            interrupted,
            crashed,
            sorted(self.previous),
        )

    def _create(self) -> Any:
        """Write the group: the marker first, then group.json, under the group's lock."""
        from rlx.files import write_json_atomic
        from rlx.runs import RunDirectory

        _check_new_group(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path / GROUP_MARKER, {"format": "rlx-group", "version": 1})
            lock = RunDirectory(self.path)
            lock.lock()
            write_json_atomic(self.path / GROUP_FILE, {**self.record, **self.recorded_layout()})
        except OSError as exc:
            raise CheckpointError(f"cannot create the group directory {self.path}: {exc}") from exc
        return lock

    def _lock(self) -> Any:
        from rlx.files import write_json_atomic
        from rlx.runs import RunDirectory

        lock = RunDirectory(self.path)
        lock.lock()
        try:
            # the new budgets, and the batches as this resume trains them
            write_json_atomic(self.path / GROUP_FILE, {**self.record, **self.recorded_layout()})
        except OSError as exc:
            lock.unlock()
            raise CheckpointError(f"cannot write {self.path / GROUP_FILE}: {exc}") from exc
        return lock

    def _train(self) -> tuple[dict[int, TrainResult], dict[int, str], bool, bool]:
        """Run the tasks in worker processes, showing progress; Ctrl-C asks the seeds to stop
        after their iteration, a second one stops the workers at once."""
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        tasks, events, stop = context.Queue(), context.Queue(), context.Event()
        chunks = self.chunks()
        for chunk in chunks:
            tasks.put(chunk)
        for _ in range(self.jobs):
            tasks.put(None)
        at_once = self.jobs * max(len(chunk) for chunk in chunks)
        workers = [
            context.Process(
                target=_worker_main, args=(worker, tasks, events, stop, at_once, self.batched)
            )
            for worker in range(self.jobs)
        ]
        results: dict[int, TrainResult] = {}
        failed: dict[int, str] = {}
        current: dict[int, list[int]] = {}  # worker -> the seeds it trains
        crashed = interrupted = False

        def interrupt(signum: int, frame: Any) -> None:
            nonlocal interrupted
            if interrupted:
                raise KeyboardInterrupt
            interrupted = True
            stop.set()
            display.print(
                "interrupted: each seed finishes its iteration and saves final/ "
                "(Ctrl-C again stops at once)"
            )

        main = threading.current_thread() is threading.main_thread()
        catch = main and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        display = _Display(self.console, self.progress, len(self.seeds), self.total_steps)
        for seed, steps in self.done_steps.items():
            display.steps[seed] = steps
        display.first_steps = sum(self.done_steps.values())
        previous = signal.signal(signal.SIGINT, interrupt) if catch else None
        try:
            with display:
                with _starting_workers():
                    for process in workers:
                        process.start()
                dead: set[int] = set()  # seen dead once, with a seed unfinished
                while True:
                    try:
                        message = events.get(timeout=0.2)
                    except queue.Empty:
                        message = None
                    if message is not None:
                        kind = message[0]
                        if kind == "progress":
                            display.update(message[1], message[2], message[3])
                        elif kind == "line":
                            seed = message[1]
                            display.print(
                                message[2] if seed is None else f"seed {seed}: {message[2]}"
                            )
                        elif kind == "started":
                            current[message[1]] = list(message[2])
                        elif kind == "finished":
                            _done(current, message[1], message[2])
                            results[message[2]] = message[3]
                            display.finished(message[2], message[3])
                        elif kind == "failed":
                            _done(current, message[1], message[2])
                            failed[message[2]] = message[3]
                            crashed = crashed or message[4]
                            display.failed(message[2], message[3])
                    if message is None:  # a dead worker's last messages are all read now
                        for worker, process in enumerate(workers):
                            if not process.is_alive() and worker in current:
                                if worker not in dead:
                                    dead.add(worker)
                                    continue
                                for seed in current.pop(worker):
                                    failed[seed] = (
                                        f"its worker process died (exit code {process.exitcode})"
                                    )
                                    crashed = True
                                    display.failed(seed, failed[seed])
                        if not current and not any(p.is_alive() for p in workers):
                            break
                if not interrupted:  # workers that died before they took a seed leave it untrained
                    codes = ", ".join(sorted({str(p.exitcode) for p in workers}))
                    for seed in (task["seed"] for chunk in chunks for task in chunk):
                        if seed not in results and seed not in failed:
                            failed[seed] = (
                                f"never trained: the worker processes ended (exit codes {codes})"
                            )
                            crashed = True
                            display.failed(seed, failed[seed])
        except KeyboardInterrupt:  # the second Ctrl-C: the seeds stop where they are
            interrupted = True
            for process in workers:
                if process.is_alive():
                    process.terminate()
            for seed in [seed for seeds in current.values() for seed in seeds]:
                failed[seed] = (
                    "stopped at once by a second Ctrl-C; --resume continues it from its last "
                    "checkpoint"
                )
        finally:
            if catch:
                signal.signal(signal.SIGINT, previous)
            tasks.cancel_join_thread()
            for process in workers:
                # one that never started (the start raised) has nothing to join; joining it
                # would hide the start's own error behind an AssertionError
                if process.pid is not None:
                    process.join(timeout=10)
        return results, failed, crashed, interrupted

    def chunks(self) -> list[list[dict[str, Any]]]:
        """The tasks as the workers take them: when seeds are batched and their agent batches
        seeds, ``jobs`` chunks of consecutive seeds, each trained as one batch; else one
        seed a chunk."""
        batches = self.batched and batches_seeds(self.record["agent"])
        if not batches or len(self.tasks) == 1:
            return [[task] for task in self.tasks]
        if self.layout is not None:  # a resumed group: the batches it was started with
            by_seed = {task["seed"]: task for task in self.tasks}
            chunks = [[by_seed.pop(s) for s in chunk if s in by_seed] for chunk in self.layout]
            return [chunk for chunk in chunks if chunk] + [[task] for task in by_seed.values()]
        size = math.ceil(len(self.tasks) / self.jobs)
        return [self.tasks[i : i + size] for i in range(0, len(self.tasks), size)]

    def recorded_layout(self) -> dict[str, Any]:
        """How the seeds are batched, for group.json (``chunks``: the seeds of each batch,
        ``jobs``, ``batched``), so that a resume without ``--jobs`` batches them again alike:
        a batch's floating-point rounding depends on which seeds share it."""
        chunks = [[task["seed"] for task in chunk] for chunk in self.chunks()]
        if self.layout is not None:  # seeds done before this resume keep their batch
            training = {seed for chunk in chunks for seed in chunk}
            kept = [[s for s in chunk if s not in training] for chunk in self.layout]
            chunks = [*chunks, *[chunk for chunk in kept if chunk]]
        return {"chunks": chunks, "jobs": self.jobs, "batched": self.batched}

    def _summarize(self, results: Mapping[int, TrainResult], failed: Mapping[int, str]) -> dict:
        runs = []
        for seed in self.seeds:
            if seed in results:
                runs.append(_entry(seed, results[seed]))
            elif seed in failed:
                runs.append(
                    {
                        "seed": seed,
                        "run_dir": str(seed_dir(self.path, seed)),
                        "stop_reason": "failed",
                        "env_steps": None,
                        "final_return": None,
                        "best_return": None,
                        "error": failed[seed],
                    }
                )
            elif seed in self.previous:
                runs.append(self.previous[seed])
            else:
                runs.append(
                    {
                        "seed": seed,
                        "run_dir": str(seed_dir(self.path, seed)),
                        "stop_reason": "not started",
                        "env_steps": 0,
                        "final_return": None,
                        "best_return": None,
                    }
                )
        summary: dict[str, Any] = {
            "agent": self.record["agent"],
            "env": self.record["env"],
            "runs": runs,
        }
        finals = [
            float(entry["final_return"])
            for entry in runs
            if isinstance(entry.get("final_return"), (int, float))
            and math.isfinite(entry["final_return"])
        ]
        aggregate = _aggregate(finals)
        if aggregate is not None:
            summary["aggregate"] = aggregate
        return summary


def new_group(
    agent: str,
    env: str,
    *,
    seeds: Iterable[int] | str,
    jobs: int | None = None,
    hyperparameters: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    wrappers: Sequence[Any] = (),
    env_kwargs: Mapping[str, Any] | None = None,
    init_from: str | Path | None = None,
    trust_code: bool = False,
    out: str | Path | None = None,
    console: Any = None,
    batched: bool = True,
    tuned: bool = False,
) -> GroupTrainer:
    """A new group of recorded runs, one per seed, as ``rlx run --seeds`` starts one; call
    :meth:`GroupTrainer.fit` on it.

    The keyword arguments are :func:`rlx.trainer.new_run`'s, for every seed; ``seeds`` is a
    list or a ``--seeds`` string (``"0-15"``), ``jobs`` the number of worker processes
    (default one per core, at most one per seed); ``batched`` trains the seeds of each
    worker as one batched computation where the agent can (``batched=False``: one seed at a
    time in each worker); ``tuned`` starts every seed from the agent's tuned settings on
    ``env`` (:func:`rlx.tuned.merge`); ``out`` defaults to
    ``runs/<agent>-<env>-seeds<first>-<last>-<time>``. Everything is checked (the first
    seed's run is built here, then dropped) before anything is written.
    """
    import multiprocessing

    from rlx.config import to_dict
    from rlx.protocols import Closes
    from rlx.trainer import new_run
    from rlx.wrappers import normalize

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        # a spawned worker importing the user's script again (Python's own check, earlier)
        raise ConfigError(
            "a seed group's worker processes import the script that starts the group again: "
            'start the group under `if __name__ == "__main__":` in that script'
        )
    listed = parse_seeds(seeds) if isinstance(seeds, str) else check_seeds(seeds)
    workers = check_jobs(jobs, len(listed))
    group = Path(out) if out is not None else default_group_path("runs", agent, str(env), listed)
    _check_new_group(group)
    run: dict[str, Any] = {
        "agent": agent,
        "env": env,
        "hyperparameters": dict(hyperparameters or {}),
        "settings": dict(settings or {}),
        "wrappers": list(normalize(wrappers)),
        "env_kwargs": dict(env_kwargs or {}),
        "init_from": None if init_from is None else str(init_from),
        "trust_code": trust_code,
        "tuned": tuned,
    }
    at_once = len(listed) if batched else workers
    with shared_by(at_once):  # each of the seeds that train at once gets its share
        probe = new_run(**run, seed=listed[0], out=seed_dir(group, listed[0]), console=console)
    if isinstance(probe.agent, Closes):
        probe.agent.close()
    resolved = to_dict(probe.config)
    record = {
        "agent": agent,
        "env": env,
        "seeds": listed,
        "settings": resolved,
        "hyperparameters": run["hyperparameters"],
        "wrappers": run["wrappers"],
        "env_kwargs": run["env_kwargs"],
        "init_from": run["init_from"],
        "tuned": tuned,
    }
    try:
        json.dumps(record)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"the group's settings cannot be recorded as JSON: {exc}") from exc
    tasks = [
        _new_task(record, seed, seed_dir(group, seed), resolved, trust_code) for seed in listed
    ]
    steps = resolved.get("steps")
    return GroupTrainer(
        group,
        record,
        tasks,
        workers,
        console=console,
        progress=resolved.get("progress", True) is not False,
        total_steps=steps * len(listed) if steps else None,
        batched=batched,
    )


def _new_task(
    record: Mapping[str, Any],
    seed: int,
    directory: Path,
    settings: Mapping[str, Any],
    trust_code: bool,
) -> dict[str, Any]:
    return {
        "seed": seed,
        "mode": "new",
        "run": {
            "agent": record["agent"],
            "env": record["env"],
            "seed": seed,
            "hyperparameters": dict(record.get("hyperparameters") or {}),
            "settings": dict(settings),
            "wrappers": list(record.get("wrappers") or ()),
            "env_kwargs": dict(record.get("env_kwargs") or {}),
            "init_from": record.get("init_from"),
            "trust_code": trust_code,
            "tuned": bool(record.get("tuned", False)),
            "out": str(directory),
        },
    }


def _check_new_group(path: Path) -> None:
    from rlx.runs import RunDirectory

    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        hint = f"; continue that group with --resume {path}" if is_group(path) else ""
        raise CheckpointError(f"{path} already exists and is not empty; pass another --out{hint}")
    RunDirectory.check_new(path)  # a file in its place, a parent that is not writable


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path} is unreadable: {exc}") from exc


def _read_group(group: Path) -> dict[str, Any]:
    """group.json of the group at ``group``, checked."""
    if not is_group(group):
        from rlx.runs import group_marker_problem

        raise CheckpointError(f"{group} is not a seed group: {group_marker_problem(group)}")
    record = _read_json(group / GROUP_FILE)
    if not isinstance(record, dict):
        raise CheckpointError(f"{group / GROUP_FILE} is not a JSON object")
    for key, kind in (("agent", str), ("env", str), ("seeds", list), ("settings", dict)):
        if not isinstance(record.get(key), kind):
            raise CheckpointError(
                f"{group / GROUP_FILE}: {key} is missing or not a {kind.__name__}"
            )
    try:
        check_seeds(record["seeds"])
    except ConfigError as exc:
        raise CheckpointError(f"{group / GROUP_FILE}: {exc}") from None
    for key in ("hyperparameters", "env_kwargs"):
        if not isinstance(record.get(key) or {}, dict):
            raise CheckpointError(f"{group / GROUP_FILE}: {key} must be a JSON object")
    wrappers = record.get("wrappers") or []
    if not isinstance(wrappers, list) or not all(
        isinstance(entry, dict) and isinstance(entry.get("name"), str) for entry in wrappers
    ):
        raise CheckpointError(f"{group / GROUP_FILE}: wrappers must be a list of tables")
    if not isinstance(record.get("init_from"), (str, type(None))):
        raise CheckpointError(f"{group / GROUP_FILE}: init_from must be a path or null")
    if not isinstance(record.get("tuned", False), bool):
        raise CheckpointError(f"{group / GROUP_FILE}: tuned must be true or false")
    _check_layout(record, group / GROUP_FILE)
    return record


def _check_layout(record: Mapping[str, Any], source: Path) -> None:
    """group.json's batches (``chunks``, ``jobs``, ``batched``), when recorded: each seed of
    the group in at most one batch, a whole number of workers."""
    if "chunks" not in record:
        return
    chunks, seeds, seen = record["chunks"], set(record["seeds"]), set()
    if not isinstance(chunks, list) or not all(isinstance(c, list) for c in chunks):
        raise CheckpointError(f"{source}: chunks must be a list of lists of seeds")
    for seed in (seed for chunk in chunks for seed in chunk):
        if seed not in seeds or seed in seen or isinstance(seed, bool):
            raise CheckpointError(
                f"{source}: chunks names seed {seed!r} twice or outside the group's seeds"
            )
        seen.add(seed)
    jobs = record.get("jobs")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise CheckpointError(f"{source}: jobs must be a whole number >= 1, got {jobs!r}")
    if not isinstance(record.get("batched", True), bool):
        raise CheckpointError(f"{source}: batched must be true or false")


def _check_trusted(record: dict[str, Any], group: Path, given: Iterable[str] = ()) -> None:
    """Refuse, without ``trust_code``, a group.json that would import code, make an
    unregistered environment or send data outside the group when its seeds are built from it
    (:func:`rlx.recorded.check_record`: only registered names load by default, as for any run)."""
    from rlx.recorded import check_record

    check_record(record, str(group / GROUP_FILE), given)


def _layout_on_resume(
    record: Mapping[str, Any], jobs: int | None, batched: bool, tasks: Sequence[dict[str, Any]]
) -> tuple[list[list[int]] | None, int, list[str]]:
    """The batches a resumed group trains its seeds in, its number of workers and notices.

    Without ``--jobs`` (or with the recorded one) the seeds are batched as group.json records,
    so that the group ends as an uninterrupted one; another ``--jobs`` batches them anew, and
    a notice says the result will differ. A batch whose seeds' newest checkpoints are at
    different steps (the group was killed between them) cannot resume exactly: a notice says
    that too."""
    recorded, recorded_jobs = record.get("chunks"), record.get("jobs")
    recorded_batched = record.get("batched", True)
    notices: list[str] = []
    if recorded is None or not isinstance(recorded_jobs, int):  # written before rlx recorded it
        return None, check_jobs(jobs, len(tasks)), notices
    batches = batches_seeds(record["agent"]) and (batched or recorded_batched)
    if (jobs is None or jobs == recorded_jobs) and batched == recorded_batched:
        layout: list[list[int]] | None = recorded
        workers = max(1, min(recorded_jobs, len(tasks)))  # fewer seeds left than recorded
    else:
        layout, workers = None, check_jobs(jobs, len(tasks))
        if batches:
            given = f"--jobs {jobs}" if jobs is not None else "--no-batched"
            notices.append(
                f"{given} batches the seeds otherwise than the group was started with "
                f"(--jobs {recorded_jobs}{'' if recorded_batched else ', --no-batched'}): "
                "a seed's rounding depends on the seeds batched with it, so the result will "
                "differ from an uninterrupted group's"
            )
    if batches:
        steps = {
            task["seed"]: _newest_iteration(Path(task["path"])) for task in tasks if "path" in task
        }
        for chunk in recorded:
            reached = {steps[seed] for seed in chunk if seed in steps}
            if len(reached) > 1:
                shown = ", ".join(f"{n:,}" for n in sorted(reached))
                notices.append(
                    f"seeds {', '.join(map(str, chunk))} train as one batch, but their newest "
                    f"checkpoints are at different iterations ({shown}): "
                    "the group stopped between them, so these seeds will not equal an "
                    "uninterrupted group's"
                )
    return layout, workers, notices


def _newest_iteration(directory: Path) -> int:
    """The iterations of a run's newest checkpoint (0 when it has none): the seeds of one
    batch step together, so theirs are equal unless the group stopped between checkpoints."""
    from rlx.checkpoint import STATE_FILE
    from rlx.runs import RunDirectory

    try:
        run = RunDirectory(directory)
        if not run.has_resumable():
            return 0
        return int(_read_json(run.latest_checkpoint() / STATE_FILE)["trainer"]["iterations"])
    except (CheckpointError, KeyError, TypeError, ValueError):
        return -1


def _read_summary(group: Path) -> list[dict[str, Any]]:
    """The per-seed entries of an earlier summary.json (none when it is missing or odd)."""
    try:
        summary = json.loads((group / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    runs = summary.get("runs") if isinstance(summary, dict) else None
    if not isinstance(runs, list):
        return []
    return [e for e in runs if isinstance(e, dict) and isinstance(e.get("seed"), int)]


def _final_state(directory: Path) -> dict[str, Any] | None:
    """The trainer state of the run's final/ checkpoint when it is the newest, else None."""
    from rlx.checkpoint import STATE_FILE
    from rlx.runs import RunDirectory

    run = RunDirectory(directory)
    try:
        if not run.has_resumable() or run.latest_checkpoint().name != "final":
            return None
    except CheckpointError:
        return None
    document = _read_json(run.final / STATE_FILE)
    state = document.get("trainer") if isinstance(document, dict) else None
    return state if isinstance(state, dict) else None


def _budget_spent(state: dict[str, Any], directory: Path, overrides: Mapping[str, Any]) -> bool:
    """Whether the run stopped on its own (not interrupted) with a budget used up under its
    settings with ``overrides``: :meth:`rlx.trainer.Trainer.resume` would refuse it."""
    from rlx.config import build_config
    from rlx.runs import RunDirectory
    from rlx.trainer import TrainerConfig

    if state.get("stop_reason") == "interrupted":
        return False
    saved = RunDirectory(directory).read_config().get("trainer") or {}
    config = build_config(TrainerConfig, {**saved, **overrides})
    counts = {key: state.get(key) for key in ("env_steps", "iterations", "elapsed")}
    if not all(isinstance(value, (int, float)) for value in counts.values()):
        return False
    return (
        (config.steps is not None and counts["env_steps"] >= config.steps)
        or (config.iterations is not None and counts["iterations"] >= config.iterations)
        or (config.time_limit is not None and counts["elapsed"] >= config.time_limit)
    )


def _entry_from_state(seed: int, directory: Path, state: dict[str, Any]) -> dict[str, Any]:
    """A summary entry of a finished seed that no earlier summary.json records."""
    best = state.get("best_return")
    return {
        "seed": seed,
        "run_dir": str(directory),
        "stop_reason": state.get("stop_reason"),
        "env_steps": state.get("env_steps"),
        "final_return": None,
        "best_return": best if isinstance(best, (int, float)) else None,
    }
