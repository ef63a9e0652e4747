"""The study and its folder: ``--out`` checked, the study created or continued as the same
study, the trial budget and the agent's metric checked before any trial runs."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError, did_you_mean
from rlx.tune.settings import _IDENTITY_DEFAULTS, DONE_STATES, METRICS, Settings, _jsonable
from rlx.tune.space import Space
from rlx.tune.storage import _optuna, _storage_key, redact, retry_callback


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


#: The user attribute of a trial that a race between workers created past ``--trials``: it was
#: failed before it trained, and no output lists it.
OVER_BUDGET = "over_budget"
#: The user attribute naming the process that runs a trial: ``{host, pid, trial}``.
WORKER = "worker"
#: States of a trial that holds one of the study's ``--trials`` places: done, under way, or
#: queued to run (a retry of a trial whose worker died).
HOLDING_STATES = (*DONE_STATES, "RUNNING", "WAITING")


def listed(study: Any) -> list[Any]:
    """The study's trials as its outputs list them: all but those created past the budget."""
    return [t for t in study.get_trials(deepcopy=False) if not t.user_attrs.get(OVER_BUDGET)]


def shown(study: Any) -> list[Any]:
    """The trials the outputs list: :func:`listed`, less the running ones that have not yet
    taken their place (one may still turn out to be past the budget)."""
    return [t for t in listed(study) if t.state.name != "RUNNING" or WORKER in t.user_attrs]


def places_held(study: Any, before: int | None = None) -> int:
    """How many of the study's trials (numbered below ``before``, when given) hold a place of
    the budget: done, running or waiting, and not created past the budget themselves."""
    return sum(
        t.state.name in HOLDING_STATES and (before is None or t.number < before)
        for t in listed(study)
    )


def within_budget(study: Any, number: int, budget: int) -> bool:
    """Whether trial ``number``, already created, may train: fewer than ``budget`` trials
    numbered below it hold a place. Trials are numbered in the order they are created, and a
    trial checks once it exists, so of two that race for the last place the later one always
    sees the earlier (running or done) and gives way: no more than ``budget`` trials are ever
    done, whatever the number of workers, machines and storages' latencies."""
    return places_held(study, before=number) < budget


def fail_dead_trials(study: Any) -> list[int]:
    """Fail the running trials whose worker process died on this machine, and queue each again
    as a new trial with its hyperparameters (Optuna's retry callback, as often as a database's
    heartbeats would); the numbers of the failed trials. This stands in for heartbeats on
    storages that have none (the journal file and the gRPC proxy in Optuna 5.1) and for
    trials that never sent one, for this machine's workers: a trial whose worker died on
    another machine is found by its heartbeats alone, on a database storage."""
    import socket

    optuna = _optuna()
    host, failed = socket.gethostname(), []
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = trial.user_attrs.get(WORKER)
        if not isinstance(worker, dict) or worker.get("trial") != trial.number:
            continue  # not started yet, or a retry that holds its failed trial's attributes
        pid = worker.get("pid")
        if worker.get("host") != host or not isinstance(pid, int) or _alive(pid):
            continue
        try:
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        except Exception:  # another worker failed it first
            continue
        retry_callback(optuna)(study, study.get_trials(deepcopy=False)[trial.number])
        failed.append(trial.number)
    return failed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _counts(study: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for trial in listed(study):
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
