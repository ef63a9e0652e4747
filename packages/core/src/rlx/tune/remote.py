"""``rlx tune --backend ray``: the trials of one command as Ray tasks, Optuna asked and told by
the command itself (the driver).

The driver asks the study for a trial, whose hyperparameters its sampler draws, and hands them
to a Ray task; the task trains the trial wherever Ray places it, in a temporary folder there,
and sends back what the trial reported (its curve, value, state and attributes) and its run
folder's files, which the driver alone writes under ``OUT/trials/<number>``: no shared file
system is assumed, and what comes back is data, checked before it is written. Inside the task
the trial is pruned by the study's pruner against a copy of the curves of the trials finished
when it was sent. Ray retries a task whose worker died; Ray and Optuna are imported inside
functions only.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from rlx.errors import ConfigError, RlxError
from rlx.files import write_bytes_atomic
from rlx.tune.objective import _Objective
from rlx.tune.settings import DONE_STATES, Settings
from rlx.tune.space import Space
from rlx.tune.storage import _optuna, open_storage
from rlx.tune.study import OVER_BUDGET, WORKER, _done, fail_dead_trials, places_held, within_budget
from rlx.tune.workers import _pruner, _sampler

#: How often Ray runs a trial's task again after the worker running it died.
TASK_RETRIES = 2


def connect(address: str | None) -> Any:
    """Ray, connected: to the cluster at ``address`` (``auto``, ``HOST:PORT``, ``ray://...``),
    or started on this machine when ``address`` is None. A process already connected stays so."""
    try:
        import ray
    except ImportError:
        raise RlxError("rlx tune --backend ray needs Ray: pip install 'ray[default]'") from None
    if ray.is_initialized():
        return ray
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        lines = str(exc).strip().splitlines()
        raise ConfigError(
            f"cannot connect to the Ray cluster at {address}: "
            f"{lines[0] if lines else type(exc).__name__}; start one with `ray start --head` "
            "and give its address (HOST:6379, or auto on one of its machines)"
        ) from None
    return ray


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
            key: value
            for key, value in trial.user_attrs.items()
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


def _tell(study: Any, trial: Any, result: dict[str, Any], run_dir: Path) -> None:
    """What a task sent back, recorded in the study (curve, attributes, state) and its run
    folder written by the driver."""
    optuna = _optuna()
    _write_run(run_dir, result.get("files", {}))
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


def run_on_ray(
    settings: Settings, space: Space, console: Any, address: str | None, concurrency: int
) -> bool:
    """Trials of the study as Ray tasks, ``concurrency`` at once, until the study holds
    ``settings.trials`` finished trials or this driver saw as many trials fail; True when
    interrupted (Ctrl-C cancels the tasks and fails their trials)."""
    ray = connect(address)
    optuna = _optuna()
    storage = open_storage(settings.storage)  # Optuna beats only inside Study.optimize
    started = len(optuna.load_study(study_name=settings.study_name, storage=storage).trials)
    study = optuna.load_study(
        study_name=settings.study_name,
        storage=storage,
        sampler=_sampler(dataclasses.replace(settings, shared=True), 0, started),
        pruner=_pruner(settings),
    )
    task = ray.remote(train_trial).options(num_cpus=1, max_retries=TASK_RETRIES)
    reporter = _Objective(settings, space, console)
    running: dict[Any, Any] = {}
    failures = 0
    try:
        while True:
            fail_dead_trials(study)
            while len(running) < concurrency and places_held(study) < settings.trials:
                trial = study.ask()
                if not within_budget(study, trial.number, settings.trials):
                    trial.set_user_attr(OVER_BUDGET, True)
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    break
                run_dir = Path(settings.out).absolute() / "trials" / str(trial.number)
                host = socket.gethostname()
                trial.set_user_attr("host", host)
                trial.set_user_attr(
                    WORKER, {"host": host, "pid": os.getpid(), "trial": trial.number}
                )
                trial.set_user_attr("run_dir", str(run_dir))
                space.sample(trial)  # the sampler draws them here; the task is given them
                running[
                    task.remote(settings, space, trial.number, dict(trial.params), _curves(study))
                ] = trial
            if not running:
                break
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                trial = running.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:  # the task raised, or Ray gave up on it
                    result = {
                        "state": "FAIL",
                        "error": f"{type(exc).__name__}: {exc}".splitlines()[0],
                    }
                _tell(study, trial, result, Path(settings.out) / "trials" / str(trial.number))
                frozen = study.get_trials(deepcopy=False)[trial.number]
                failures += frozen.state == optuna.trial.TrialState.FAIL
                reporter.report(study, frozen)
            if _done(study) >= settings.trials or failures >= max(5, settings.trials):
                break
    except KeyboardInterrupt:
        for ref, trial in running.items():
            ray.cancel(ref, force=True)
            try:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            except Exception:  # told already
                pass
        return True
    # tasks still running after the budget filled (a race with other workers) are waited for
    for ref, trial in running.items():
        try:
            result = ray.get(ref)
        except Exception as exc:
            result = {"state": "FAIL", "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        _tell(study, trial, result, Path(settings.out) / "trials" / str(trial.number))
    return False
