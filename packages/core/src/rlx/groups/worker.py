"""What trains a chunk of a group's seeds, wherever it runs (a local worker process or a Ray
task): the seeds' trainers, built new or resumed, trained side by side (one batched
computation where the agent batches seeds), each outcome one message to the driver."""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from rlx.callbacks import Callback
from rlx.errors import NotBatchable, RlxError
from rlx.executors.base import Placement
from rlx.files import write_inside
from rlx.memory import shared_by

if TYPE_CHECKING:
    from rlx.evaluation import TrainResult
    from rlx.protocols import Iteration
    from rlx.protocols import Trainer as TrainerView
    from rlx.trainer import Trainer

#: Seconds between two progress reports of one seed.
REPORT_EVERY = 0.5
#: Seconds between two copies of a remote chunk's changed files to the driver.
SYNC_EVERY = 1.0
#: Files of a run directory that stay where they are: its lock is the worker's own.
NOT_SENT = frozenset({".lock", ".lock.pid"})


class _Report(Callback):
    """A worker's callback: the seed's progress for the group's display (rate-limited), and
    the group's stop request, which stops the run as a Ctrl-C would."""

    key = "rlx-group-report"

    def __init__(self, seed: int, emit: Callable[[Any], None], stop: Any) -> None:
        self.seed, self.emit, self.stop = seed, emit, stop
        self._next = 0.0

    def on_iteration(self, trainer: TrainerView, iteration: Iteration) -> str | None:
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + REPORT_EVERY
        self.emit(("progress", self.seed, trainer.env_steps, trainer.recent_mean()))
        return "interrupted" if self.stop.is_set() else None


class _Lines:
    """A text file for a worker's console: each line goes to the driver, which prints it above
    the group's progress bar as ``seed k: line``."""

    def __init__(self, emit: Callable[[Any], None], seed: int | None) -> None:
        self.emit, self.seed, self._buffer = emit, seed, ""

    def write(self, text: str) -> int:
        self._buffer += text
        *lines, self._buffer = self._buffer.split("\n")
        for line in lines:
            if line.strip():
                self.emit(("line", self.seed, line))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class _Mirror:
    """A remote chunk's seed directories as last sent to the driver: each :meth:`sync` emits
    the files written or removed since (``("files", seed, {path: bytes}, [gone paths])``),
    paths relative to the seed's directory. Called between rounds, when no seed is inside a
    step, so that the driver always holds checkpoints the seeds of a batch reached together."""

    def __init__(self, emit: Callable[[Any], None]) -> None:
        self.emit = emit
        self.seen: dict[int, dict[str, tuple[int, int]]] = {}
        self.roots: dict[int, Path] = {}
        self.last = time.monotonic()

    def _scan(self, root: Path) -> dict[str, tuple[int, int]]:
        found = {}
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink() and path.name not in NOT_SENT:
                stat = path.stat()
                found[path.relative_to(root).as_posix()] = (stat.st_size, stat.st_mtime_ns)
        return found

    def known(self, seed: int, root: Path) -> None:
        """``root`` holds what the driver sent for ``seed``: only changes from it are sent."""
        self.roots[seed], self.seen[seed] = root, self._scan(root)

    def sync(self, seeds: Iterable[int] | None = None, force: bool = False) -> None:
        if not force and time.monotonic() - self.last < SYNC_EVERY:
            return
        self.last = time.monotonic()
        for seed in self.roots if seeds is None else seeds:
            root, seen = self.roots[seed], self.seen.setdefault(seed, {})
            now = self._scan(root)
            changed = {
                rel: (root / rel).read_bytes() for rel, key in now.items() if seen.get(rel) != key
            }
            gone = sorted(set(seen) - set(now))
            if changed or gone:
                self.emit(("files", seed, changed, gone))
            self.seen[seed] = now


def _trainer_for(
    task: dict[str, Any], console: Any, report: Callback, where: Path | None, mirror: Any = None
) -> Trainer:
    """The seed's trainer, new or resumed: in its directory on the driver's machine, or (a
    remote chunk) in ``where``, a folder of the worker's own, from the files the driver sent."""
    from rlx.trainer import Trainer, new_run

    if task["mode"] == "resume":
        path = Path(task["path"])
        if where is not None:
            path = where / path.name
            for rel, data in task["files"].items():
                write_inside(path, rel, data)
            if mirror is not None:
                mirror.known(task["seed"], path)
        return Trainer.resume(
            path,
            console=console,
            trust_code=task["trust_code"],
            device=task["device"],
            callbacks=[report],
            **task["overrides"],
        )
    run = dict(task["run"])
    if where is not None:
        run["out"] = str(where / Path(run["out"]).name)
    return new_run(**run, console=console, callbacks=[report])


def run_chunk(
    payload: dict[str, Any], emit: Callable[[Any], None], stop: Any, placement: Placement
) -> Iterator[None]:
    """The job of a seed group (:mod:`rlx.executors`): train one chunk of seeds, as one
    batched computation when their agent batches seeds (:class:`rlx.protocols.BatchesSeeds`)
    and ``payload["batched"]``, else one after another; each seed's outcome is one message.

    What a seed prints (its console, and anything written to stdout or stderr: warnings,
    an evaluation's progress bar, which sees no terminal here) goes to the driver as lines,
    so that the group's own display stays whole. A remote chunk trains in a folder of its own
    and sends each seed's files to the driver as they change (:class:`_Mirror`)."""
    chunk: list[dict[str, Any]] = payload["chunk"]
    seeds = [task["seed"] for task in chunk]
    where = Path(tempfile.mkdtemp(prefix="rlx-chunk-")) if placement.remote else None
    mirror = _Mirror(emit) if where is not None else None
    out, err = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = cast(TextIO, _Lines(emit, seeds[0] if len(seeds) == 1 else None))
    try:
        # the seeds of the other workers, or of this batch, train at the same time
        with shared_by(payload["at_once"]):
            trainers = {}
            for task in chunk:
                try:
                    trainers[task["seed"]] = _build(task, emit, stop, where, placement, mirror)
                except Exception as exc:
                    _failed(task["seed"], emit, exc)
                if mirror is not None and task["seed"] in trainers:
                    mirror.roots[task["seed"]] = Path(cast(Any, trainers[task["seed"]].run).path)
            batch = None
            if payload["batched"]:
                batch, why = link_seeds([trainer.agent for trainer in trainers.values()])
                if why:
                    emit(("line", None, f"notice: these seeds train one by one: {why}"))
            for seed, outcome in _rounds(trainers, batch):
                if seed is None:  # between two rounds
                    if mirror is not None:
                        mirror.sync()
                    yield
                    continue
                if mirror is not None and seed in mirror.roots:
                    mirror.sync([seed], force=True)
                if isinstance(outcome, Exception):
                    _failed(seed, emit, outcome)
                else:
                    home = next(t for t in chunk if t["seed"] == seed)
                    home_dir = home["path"] if home["mode"] == "resume" else home["run"]["out"]
                    emit(
                        (
                            "finished",
                            seed,
                            dataclasses.replace(cast(Any, outcome), run_dir=Path(home_dir)),
                        )
                    )
    finally:
        sys.stdout, sys.stderr = out, err
        if where is not None:
            shutil.rmtree(where, ignore_errors=True)


def _build(
    task: dict[str, Any],
    emit: Callable[[Any], None],
    stop: Any,
    where: Path | None,
    placement: Placement,
    mirror: Any = None,
) -> Trainer:
    from rich.console import Console

    if placement.gpus and task["mode"] == "resume" and task.get("device") is None:
        task = {**task, "device": "cuda"}  # a task given GPUs trains on them
    elif placement.gpus and task["mode"] == "new" and _has_device(task["run"]["agent"]):
        hyperparameters = task["run"]["hyperparameters"]
        if "device" not in hyperparameters:
            run = {**task["run"], "hyperparameters": {**hyperparameters, "device": "cuda"}}
            task = {**task, "run": run}
    lines = _Lines(emit, task["seed"])
    console = Console(
        file=cast(TextIO, lines), force_terminal=False, highlight=False, soft_wrap=True
    )
    return _trainer_for(task, console, _Report(task["seed"], emit, stop), where, mirror)


def _has_device(agent: str) -> bool:
    """Whether the agent has a ``device`` hyperparameter (the torch agents)."""
    import dataclasses

    from rlx.discovery import agent_spec

    config = getattr(agent_spec(agent).load(), "Config", None)
    return config is not None and any(f.name == "device" for f in dataclasses.fields(config))


def _failed(seed: int, emit: Callable[[Any], None], exc: Exception) -> None:
    """The "failed" message of a seed that raised ``exc``; a bug (not an RlxError or a
    MemoryError) is reported with its type, and the other seeds go on."""
    if isinstance(exc, RlxError):
        emit(("failed", seed, str(exc), False))
    elif isinstance(exc, MemoryError):
        emit(("failed", seed, f"not enough memory ({exc or 'MemoryError'})", False))
    else:
        emit(("failed", seed, f"{type(exc).__name__}: {exc}", True))


def _rounds(
    trainers: Mapping[Any, Trainer], batch: Any
) -> Iterator[tuple[Any, TrainResult | Exception | None]]:
    """:func:`train_side_by_side`, with ``(None, None)`` after every round (every step of a
    seed trained alone): the points where no seed is inside a step."""
    if batch is None:
        for key, trainer in trainers.items():
            steps = trainer.steps(catch_interrupt=False)
            while True:
                try:
                    next(steps)
                except StopIteration as done:
                    yield key, done.value
                    break
                except Exception as exc:
                    yield key, exc
                    break
                yield None, None
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
        yield None, None


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
    for key, outcome in _rounds(trainers, batch):
        if key is not None:
            yield key, cast("TrainResult | Exception", outcome)
