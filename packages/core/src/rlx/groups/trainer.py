"""The driver of a seed group: :func:`new_group` and :meth:`GroupTrainer.resume` make a
:class:`GroupTrainer`, whose :meth:`~GroupTrainer.fit` hands the seeds' chunks to an executor
(:mod:`rlx.executors`: local worker processes, or Ray tasks), shows their progress, writes
summary.json, and keeps the promises of Ctrl-C."""

from __future__ import annotations

import collections
import json
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlx.errors import CheckpointError, ConfigError, RlxError
from rlx.groups.record import (
    SUMMARY_FILE,
    _budget_spent,
    _check_new_group,
    _check_trusted,
    _entry_from_state,
    _final_state,
    _layout_on_resume,
    _new_task,
    _read_group,
    _read_json,
    _read_summary,
)
from rlx.groups.seeds import check_jobs, check_seeds, default_group_path, parse_seeds, seed_dir
from rlx.groups.worker import batches_seeds
from rlx.memory import shared_by
from rlx.runs import GROUP_FILE, GROUP_MARKER
from rlx.statistics import iqm, median

if TYPE_CHECKING:
    from rlx.evaluation import TrainResult

#: How often the seeds of one chunk may lose their Ray worker before they are failed.
MAX_ATTEMPTS = 3
#: The most seeds a Ray task trains by default (as one batch where the agent batches seeds).
RAY_CHUNK = 16


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
        backend: str = "local",
        address: str | None = None,
        cpus_per_task: float = 1.0,
        gpus_per_task: float = 0.0,
        chunk_size: int | None = None,
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
        #: Where the chunks run (:mod:`rlx.executors`) and what each Ray task is given.
        self.backend, self.address = backend, address
        self.cpus_per_task, self.gpus_per_task = cpus_per_task, gpus_per_task
        #: The seeds of one chunk (None: the group's seeds shared out among ``jobs`` workers,
        #: or :data:`RAY_CHUNK` at most on Ray).
        self.chunk_size = chunk_size
        #: How many chunks train at once: ``jobs``, or what the Ray cluster can place.
        self.slots = jobs

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
        add_seeds: Iterable[int] | str | None = None,
        backend: str = "local",
        address: str | None = None,
        cpus_per_task: float = 1.0,
        gpus_per_task: float = 0.0,
        chunk_size: int | None = None,
        **overrides: Any,
    ) -> GroupTrainer:
        """Continue every seed of the group at ``path``; ``overrides`` (trainer settings such
        as ``steps``) apply to all. Seeds that already used their budget are skipped, and a
        seed whose directory is missing starts again from scratch. ``add_seeds`` grows the
        group: those seeds (none of the group's already) start from scratch with the group's
        configuration and ``overrides``. ``backend`` and the rest place the chunks as for
        :func:`new_group`. A batched group resumes
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
        added = _added_seeds(add_seeds, seeds, group)
        where = check_placement(
            backend, cpus_per_task, gpus_per_task, chunk_size, len(seeds) + len(added)
        )
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
        for seed in added:
            tasks.append(_new_task(record, seed, seed_dir(group, seed), settings, trust_code))
        if not tasks:
            raise ConfigError(
                f"every seed of {group} already used its budget; raise it (e.g. --steps) to "
                "continue, or add seeds (--seeds with seeds the group does not have)"
            )
        layout, workers, said = _layout_on_resume(record, jobs, batched, tasks)
        notices += said
        if added:
            notices.append(f"{len(added)} seeds join the group: {_seed_list(added)}")
        seeds = [*seeds, *added]
        record = {**record, "settings": settings, "seeds": seeds}
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
            address=address,
            **where,
        )

    def fit(self) -> GroupResult:
        """Train the seeds (``jobs`` at a time) until each stops; write summary.json."""
        from rlx.executors import executor_for
        from rlx.groups.worker import run_chunk
        from rlx.runs import RunDirectory

        # Ray is reached (or refused) before anything is written
        executor = executor_for(
            self.backend,
            run_chunk,
            workers=self.jobs,
            address=self.address,
            cpus_per_task=self.cpus_per_task,
            gpus_per_task=self.gpus_per_task,
        )
        self.slots = executor.slots()
        lock = None
        try:
            lock = self._create() if self.new else self._lock()
            for notice in self.notices:
                self.console.print(f"notice: {notice}", markup=False)
            results, failed, crashed, interrupted = self._train(executor)
            summary = self._summarize(results, failed)
            from rlx.files import write_json_atomic

            try:
                write_json_atomic(self.path / SUMMARY_FILE, summary)
            except OSError as exc:
                raise CheckpointError(f"could not write {self.path / SUMMARY_FILE}: {exc}") from exc
        finally:
            executor.close()
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

    def _train(self, executor: Any) -> tuple[dict[int, TrainResult], dict[int, str], bool, bool]:
        """Hand the chunks to the executor and follow them, showing progress; a remote chunk's
        files are written into the group as they come, and a chunk lost with its Ray worker
        goes on elsewhere from its seeds' newest checkpoints. Ctrl-C asks the seeds to stop
        after their iteration, a second one stops them at once."""
        chunks = self.chunks()
        at_once = min(self.slots, len(chunks)) * max(len(chunk) for chunk in chunks)
        jobs: dict[int, tuple[list[dict[str, Any]], int]] = {}  # id -> its tasks, attempt

        def submit(chunk: list[dict[str, Any]], attempt: int) -> None:
            if not executor.shares_files:  # a resumed seed's files go with it
                chunk = [self._with_files(task) for task in chunk]
            payload = {"chunk": chunk, "at_once": at_once, "batched": self.batched}
            jobs[executor.submit(payload)] = (chunk, attempt)

        results: dict[int, TrainResult] = {}
        failed: dict[int, str] = {}
        crashed = interrupted = False

        def unfinished(chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [t for t in chunk if t["seed"] not in results and t["seed"] not in failed]

        def fail(seeds: Iterable[int], why: str) -> None:
            for seed in seeds:
                failed[seed] = why
                display.failed(seed, why)

        def interrupt(signum: int, frame: Any) -> None:
            nonlocal interrupted
            if interrupted:
                raise KeyboardInterrupt
            interrupted = True
            executor.stop()
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
                for chunk in chunks:
                    submit(chunk, 1)
                while executor.pending():
                    for number, message in executor.poll(0.2):
                        kind = message[0]
                        if kind == "progress":
                            display.update(message[1], message[2], message[3])
                        elif kind == "line":
                            seed = message[1]
                            display.print(
                                message[2] if seed is None else f"seed {seed}: {message[2]}"
                            )
                        elif kind == "files":
                            self._receive(message[1], message[2], message[3])
                        elif kind == "finished":
                            results[message[1]] = message[2]
                            display.finished(message[1], message[2])
                        elif kind == "failed":
                            crashed = crashed or message[3]
                            fail([message[1]], message[2])
                        elif kind == "ended":
                            left = unfinished(jobs.pop(number)[0])
                            if left and (message[1] is not None or not interrupted):
                                crashed = True
                                fail([t["seed"] for t in left], message[1] or "ended unreported")
                        elif kind == "lost":
                            chunk, attempt = jobs.pop(number)
                            left = unfinished(chunk)
                            if not left:
                                continue
                            if executor.shares_files or interrupted or attempt >= MAX_ATTEMPTS:
                                crashed = True
                                fail([t["seed"] for t in left], message[1])
                                continue
                            display.print(
                                f"notice: seeds {', '.join(str(t['seed']) for t in left)} lost "
                                f"their Ray worker ({message[1]}); they go on elsewhere from "
                                f"their newest checkpoints (attempt {attempt + 1} of "
                                f"{MAX_ATTEMPTS})"
                            )
                            submit([self._again(task) for task in left], attempt + 1)
        except KeyboardInterrupt:  # the second Ctrl-C: the seeds stop where they are
            interrupted = True
            executor.terminate()
            for chunk, _ in jobs.values():
                for task in unfinished(chunk):
                    failed[task["seed"]] = (
                        "stopped at once by a second Ctrl-C; --resume continues it from its "
                        "last checkpoint"
                    )
        finally:
            if catch:
                signal.signal(signal.SIGINT, previous)
        return results, failed, crashed, interrupted

    def _receive(self, seed: int, changed: Mapping[str, bytes], gone: Sequence[str]) -> None:
        """Write what a remote chunk sent of ``seed``'s directory into the group (through
        :mod:`rlx.files`: never through a link someone left in it)."""
        from rlx.files import remove_inside, write_inside

        root = seed_dir(self.path, seed)
        try:
            for relative, data in changed.items():
                write_inside(root, relative, data)
            for relative in gone:
                remove_inside(root, relative)
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"cannot write seed {seed}'s files into {root}: {exc}") from exc

    def _again(self, task: dict[str, Any]) -> dict[str, Any]:
        """The task that continues ``task``'s seed after its worker was lost: a resume from the
        newest checkpoint the group holds, with that seed's files; from scratch without one."""
        from rlx.runs import RunDirectory

        root = seed_dir(self.path, task["seed"])
        if task["mode"] == "new":
            again = {"trust_code": task["run"]["trust_code"], "device": None, "overrides": {}}
        else:
            again = {k: task[k] for k in ("trust_code", "device", "overrides")}
        try:
            resumable = RunDirectory(root).has_resumable()
        except CheckpointError:
            resumable = False
        if not resumable:
            if root.is_dir() and not root.is_symlink():
                shutil.rmtree(root)  # what the lost worker sent before its first checkpoint
            return task
        return {"seed": task["seed"], "mode": "resume", "path": str(root), **again}

    @staticmethod
    def _with_files(task: dict[str, Any]) -> dict[str, Any]:
        """A resume task with its run directory's files, for a worker that cannot read them
        here (lock files, which are this machine's, and links, which rlx never follows, apart)."""
        from rlx.runs import LOCK_FILE, PID_FILE

        if task["mode"] != "resume":
            return task
        root = Path(task["path"])
        files = {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file() and not path.is_symlink() and path.name not in (LOCK_FILE, PID_FILE)
        }
        return {**task, "files": files}

    def chunks(self) -> list[list[dict[str, Any]]]:
        """The tasks as the executor takes them: when seeds are batched and their agent
        batches seeds, chunks of consecutive seeds, each trained as one batch (``chunk_size``
        seeds, by default ``jobs`` chunks locally and at most :data:`RAY_CHUNK` seeds on Ray);
        without batches, one seed a chunk locally and ``chunk_size`` (default 1) on Ray."""
        batches = self.batched and batches_seeds(self.record["agent"])
        if self.layout is not None and batches:  # a resumed group: the batches it started with
            by_seed = {task["seed"]: task for task in self.tasks}
            chunks = [[by_seed.pop(s) for s in chunk if s in by_seed] for chunk in self.layout]
            rest = list(by_seed.values())  # seeds added to the group: batches of their own
            size = self.chunk_size or math.ceil(len(rest) / max(1, self.slots))
            if self.backend == "ray" and self.chunk_size is None:
                size = min(size, RAY_CHUNK)
            size = max(1, size)
            return [c for c in chunks if c] + [
                rest[i : i + size] for i in range(0, len(rest), size)
            ]
        if self.chunk_size is not None and (batches or self.backend == "ray"):
            size = self.chunk_size
        elif batches:
            size = math.ceil(len(self.tasks) / max(1, self.slots))
            if self.backend == "ray":
                size = min(size, RAY_CHUNK)
        else:
            size = 1
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


def _added_seeds(given: Iterable[int] | str | None, seeds: Sequence[int], group: Path) -> list[int]:
    """The seeds ``--seeds`` adds to a resumed group: none it has, none whose folder exists."""
    if given is None:
        return []
    listed = parse_seeds(given) if isinstance(given, str) else check_seeds(given)
    new = [seed for seed in listed if seed not in seeds]
    if not new:
        raise ConfigError(
            f"the group {group} has every seed of --seeds already ({_seed_list(listed)}); give "
            "seeds it does not have to add them, or leave --seeds out to continue its seeds"
        )
    for seed in new:
        if os.path.lexists(seed_dir(group, seed)):
            raise ConfigError(
                f"{seed_dir(group, seed)} exists but group.json does not list seed {seed}: "
                "move it aside before adding that seed"
            )
    return new


def _seed_list(seeds: Sequence[int]) -> str:
    """Seeds as a short text: ``0-15`` for a run of consecutive ones, else listed."""
    parts, start = [], 0
    for i in range(1, len(seeds) + 1):
        if i == len(seeds) or seeds[i] != seeds[i - 1] + 1:
            first, last = seeds[start], seeds[i - 1]
            parts.append(str(first) if first == last else f"{first}-{last}")
            start = i
    return ",".join(parts)


def check_placement(
    backend: str, cpus_per_task: Any, gpus_per_task: Any, chunk_size: Any, seeds: int
) -> dict[str, Any]:
    """Where a group's chunks run, checked: one ConfigError for a bad backend or share."""
    from rlx.executors import check_backend, check_share

    check_backend(backend)
    if backend != "ray" and (cpus_per_task != 1.0 or gpus_per_task != 0.0):
        raise ConfigError("--cpus-per-task and --gpus-per-task apply to --backend ray")
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or not 1 <= chunk_size
    ):
        raise ConfigError(f"--chunk-size must be a whole number >= 1, got {chunk_size!r}")
    return {
        "backend": backend,
        "cpus_per_task": check_share(cpus_per_task, "--cpus-per-task", 0.01),
        "gpus_per_task": check_share(gpus_per_task, "--gpus-per-task", 0.0),
        "chunk_size": None if chunk_size is None else min(chunk_size, seeds),
    }


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
    backend: str = "local",
    address: str | None = None,
    cpus_per_task: float = 1.0,
    gpus_per_task: float = 0.0,
    chunk_size: int | None = None,
) -> GroupTrainer:
    """A new group of recorded runs, one per seed, as ``rlx run --seeds`` starts one; call
    :meth:`GroupTrainer.fit` on it.

    The keyword arguments are :func:`rlx.trainer.new_run`'s, for every seed; ``seeds`` is a
    list or a ``--seeds`` string (``"0-15"``), ``jobs`` the number of worker processes
    (default one per core, at most one per seed); ``batched`` trains the seeds of each
    worker as one batched computation where the agent can (``batched=False``: one seed at a
    time in each worker); ``tuned`` starts every seed from the agent's tuned settings on
    ``env`` (:func:`rlx.tuned.merge`); ``out`` defaults to
    ``runs/<agent>-<env>-seeds<first>-<last>-<time>``. ``backend="ray"`` trains the chunks
    as Ray tasks (:class:`rlx.executors.ray.RayExecutor`) of ``cpus_per_task`` CPUs and
    ``gpus_per_task`` GPUs on the cluster at ``address``; ``chunk_size`` seeds a chunk (see
    :meth:`GroupTrainer.chunks`). Everything is checked (the first seed's run is built here,
    then dropped) before anything is written.
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
    where = check_placement(backend, cpus_per_task, gpus_per_task, chunk_size, len(listed))
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
        address=address,
        **where,
    )
