"""``rlx tune --backend ray``: the trials of one command as Ray tasks, Optuna asked and told by
the command itself (the driver).

The driver asks the study for a trial, whose hyperparameters its sampler draws, and hands them
to a Ray task; the task trains the trial wherever Ray places it, in a temporary folder there,
and sends back what the trial reported (its curve, value, state and attributes) and its run
folder's files, which the driver alone writes under ``OUT/trials/<number>``: no shared file
system is assumed, and what comes back is data, checked before it is written. Inside the task
the trial is pruned by the study's pruner against a copy of the curves of the trials finished
when it was sent. The tasks go through the executor seam (:mod:`rlx.executors`), which
connects to Ray; a task whose worker died is sent again. Ray and Optuna are imported inside
functions only.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from rlx.errors import RlxError
from rlx.files import write_bytes_atomic
from rlx.tune.objective import _Objective
from rlx.tune.settings import DONE_STATES, Settings
from rlx.tune.space import Space
from rlx.tune.storage import _optuna, open_storage
from rlx.tune.study import OVER_BUDGET, WORKER, _done, fail_dead_trials, places_held, within_budget
from rlx.tune.workers import _pruner, _sampler

#: How often a trial's task is sent again after the worker running it died.
TASK_RETRIES = 2


def _curves(study: Any) -> list[dict[str, Any]]:
    """The finished trials' curves, for the pruner of a task: state, value, intermediate values."""
    return [
        {"state": t.state.name, "value": t.value, "curve": dict(t.intermediate_values)}
        for t in study.get_trials(deepcopy=False)
        if t.state.name in DONE_STATES
    ]


def train_trial(
    settings: Settings,
    space: Space,
    number: int,
    params: dict[str, Any],
    curves: list[dict[str, Any]],
) -> dict[str, Any]:
    """A Ray task: trial ``number`` with Optuna's ``params``, trained here in a temporary
    folder, in a study of this task's own that holds ``curves`` for the pruner. Returns the
    trial's state, value, curve, user attributes, error, this machine's name and the files of
    its run folder (relative POSIX path -> bytes)."""
    from rich.console import Console

    optuna = _optuna()
    with tempfile.TemporaryDirectory(prefix="rlx-tune-trial-") as folder:
        here = dataclasses.replace(settings, out=folder)
        study = optuna.create_study(direction=settings.direction, pruner=_pruner(here))
        for record in curves:
            study.add_trial(
                optuna.trial.create_trial(
                    state=optuna.trial.TrialState[record["state"]],
                    value=record["value"] if record["state"] == "COMPLETE" else None,
                    intermediate_values={int(k): v for k, v in record["curve"].items()},
                )
            )
        study.enqueue_trial(params)
        trial = study.ask()
        objective = _Objective(here, space, Console(stderr=True, quiet=True))
        state, value, error = "COMPLETE", None, ""
        try:
            value = objective.run(trial, number)
        except optuna.TrialPruned:
            state = "PRUNED"
        except KeyboardInterrupt:
            state, error = "FAIL", "interrupted"
        except Exception as exc:
            state, error = "FAIL", f"{type(exc).__name__}: {exc}".splitlines()[0]
        run_dir = Path(folder) / "trials" / str(number)
        files = {
            path.relative_to(run_dir).as_posix(): path.read_bytes()
            for path in sorted(run_dir.rglob("*"))
            if path.is_file() and not path.is_symlink()
        }
        attrs = {
            key: attr
            for key, attr in trial.user_attrs.items()
            if key not in ("host", "run_dir", WORKER)
        }
        return {
            "state": state,
            "value": value,
            "curve": dict(study.trials[-1].intermediate_values),
            "user_attrs": attrs,
            "error": error or attrs.get("error", ""),
            "host": socket.gethostname(),
            "files": files,
        }


def _write_run(run_dir: Path, files: Any) -> None:
    """A task's run folder written under ``run_dir`` by the driver: only relative paths that
    stay inside it, and bytes; anything else is refused as a worker's bad data."""
    if not isinstance(files, dict):
        raise RlxError("a Ray task sent back a trial's files as something else than a table")
    for name, data in files.items():
        path = PurePosixPath(name) if isinstance(name, str) else None
        if (
            path is None
            or path.is_absolute()
            or not path.parts
            or any(part in ("", ".", "..") for part in path.parts)
            or not isinstance(data, bytes)
        ):
            raise RlxError(f"a Ray task sent back a file {name!r} outside its trial's folder")
    for name, data in files.items():
        target = run_dir.joinpath(*PurePosixPath(name).parts)
        for parent in reversed(target.relative_to(run_dir).parents):
            folder = run_dir / parent
            if folder.is_symlink():
                raise RlxError(f"{folder} is a symbolic link, which rlx never writes through")
            folder.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, data)


def _check_result(result: Any) -> None:
    """Refuse what a task sent back unless it is a trial's record: a known state, a finite
    value for a complete trial, a curve of numbers at integer steps, a table of attributes."""
    import math

    if not isinstance(result, dict) or result.get("state") not in ("COMPLETE", "PRUNED", "FAIL"):
        raise RlxError("a Ray task sent back something else than a trial's record")
    value = result.get("value")
    if result["state"] == "COMPLETE" and not (
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ):
        raise RlxError(f"a Ray task sent back a complete trial whose value is {value!r}")
    curve = result.get("curve", {})
    if not isinstance(curve, dict) or not all(
        isinstance(step, int) and isinstance(point, (int, float)) for step, point in curve.items()
    ):
        raise RlxError("a Ray task sent back a trial's curve that is not numbers by step")
    if not isinstance(result.get("user_attrs", {}), dict):
        raise RlxError("a Ray task sent back a trial's attributes as something else than a table")


def _tell(study: Any, trial: Any, result: Any, run_dir: Path) -> None:
    """What a task sent back, recorded in the study (curve, attributes, state) and its run
    folder written by the driver; a record or files it had no business sending fail the
    trial."""
    optuna = _optuna()
    try:
        _check_result(result)
        _write_run(run_dir, result.get("files", {}))
    except RlxError as exc:
        result = {"state": "FAIL", "error": str(exc)}
    for key, value in result.get("user_attrs", {}).items():
        trial.set_user_attr(key, value)
    if result.get("error"):
        trial.set_user_attr("error", result["error"])
    trial.set_user_attr("trained_on", result.get("host", ""))
    for step, value in sorted(result.get("curve", {}).items()):
        trial.report(value, int(step))
    state = optuna.trial.TrialState[result["state"]]
    if state == optuna.trial.TrialState.COMPLETE:
        study.tell(trial, result["value"])
    else:
        study.tell(trial, state=state)


def _trial_job(payload: Any, emit: Any, stop: Any, placement: Any) -> Iterator[None]:
    """The executor's job of one trial (:mod:`rlx.executors`): train it, send back the result."""
    emit(("trial", train_trial(*payload)))
    yield


def run_on_ray(
    settings: Settings, space: Space, console: Any, address: str | None, concurrency: int | None
) -> bool:
    """Trials of the study as Ray tasks through :class:`rlx.executors.ray.RayExecutor`,
    ``concurrency`` at once (None: as many as the cluster places, one CPU each), until the
    study holds ``settings.trials`` finished trials or this driver saw as many trials fail;
    True when interrupted (Ctrl-C ends the tasks at once and fails their trials). A task
    whose worker died is sent again, :data:`TASK_RETRIES` times."""
    from rlx.executors import executor_for

    optuna = _optuna()
    executor = executor_for("ray", _trial_job, address=address)
    if concurrency is None:
        concurrency = executor.slots()
    storage = open_storage(settings.storage)  # Optuna beats only inside Study.optimize
    started = len(optuna.load_study(study_name=settings.study_name, storage=storage).trials)
    study = optuna.load_study(
        study_name=settings.study_name,
        storage=storage,
        sampler=_sampler(dataclasses.replace(settings, shared=True), 0, started),
        pruner=_pruner(settings),
    )
    reporter = _Objective(settings, space, console)
    folder = Path(settings.out).absolute() / "trials"
    running: dict[int, tuple[Any, Any]] = {}  # job id -> (trial, payload)
    results: dict[int, dict[str, Any]] = {}
    tries: dict[int, int] = {}  # trial number -> tasks lost so far
    failures = 0

    def finish(job: int, result: dict[str, Any]) -> None:
        nonlocal failures
        trial, _ = running.pop(job)
        _tell(study, trial, result, folder / str(trial.number))
        frozen = study.get_trials(deepcopy=False)[trial.number]
        failures += frozen.state == optuna.trial.TrialState.FAIL
        reporter.report(study, frozen)

    def collect() -> None:
        """Take the executor's events: results kept, lost tasks sent again, ends told."""
        for job, (kind, what) in executor.poll(timeout=1.0):
            if kind == "trial":
                results[job] = what
            elif job not in running:
                continue
            elif kind == "lost" and tries.get(running[job][0].number, 0) < TASK_RETRIES:
                trial, payload = running.pop(job)
                tries[trial.number] = tries.get(trial.number, 0) + 1
                running[executor.submit(payload)] = (trial, payload)
            elif kind in ("ended", "lost"):
                error = what or "the task ended without a result"
                finish(job, results.pop(job, {}) or {"state": "FAIL", "error": error})

    try:
        while True:
            fail_dead_trials(study)
            while len(running) < concurrency and places_held(study) < settings.trials:
                trial = study.ask()
                if not within_budget(study, trial.number, settings.trials):
                    trial.set_user_attr(OVER_BUDGET, True)
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    break
                host = socket.gethostname()
                trial.set_user_attr("host", host)
                trial.set_user_attr(
                    WORKER, {"host": host, "pid": os.getpid(), "trial": trial.number}
                )
                trial.set_user_attr("run_dir", str(folder / str(trial.number)))
                space.sample(trial)  # the sampler draws them here; the task is given them
                payload = (settings, space, trial.number, dict(trial.params), _curves(study))
                running[executor.submit(payload)] = (trial, payload)
            if not running:
                break
            collect()
            if _done(study) >= settings.trials or failures >= max(5, settings.trials):
                break
        while running:  # tasks still under way once the budget filled: wait for them
            collect()
    except KeyboardInterrupt:
        executor.terminate()
        for trial, _ in running.values():
            try:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            except Exception:  # told already
                pass
        return True
    finally:
        executor.close()
    return False
