"""Running the trials: this process or worker processes on the shared storage, each asking
Optuna for trials until the study holds its budget; the sampler and the pruner."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from rlx.errors import RlxError
from rlx.tune.objective import _Objective
from rlx.tune.settings import DONE_STATES, Settings
from rlx.tune.space import Space
from rlx.tune.storage import _optuna, open_storage
from rlx.tune.study import OVER_BUDGET, fail_dead_trials, places_held


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


def _sampler(settings: Settings, worker: int, started: int) -> Any:
    """The ``--sampler``, seeded apart for each worker and each continuation of the study (the
    same seed in two workers would propose the same first trials). Where other processes may
    share the study, the process id goes in too; a lone ``rlx tune`` is reproducible. TPE is
    told that trials run in parallel there (constant liar: a running trial counts as a bad
    one, so that workers do not all sample around the same point)."""
    from rlx.seeding import MAX_SEED, derive

    optuna = _optuna()
    salt = os.getpid() if settings.shared else 0
    seed = derive(settings.seed, "tune-sampler", worker, started, salt) % (MAX_SEED + 1)
    samplers = optuna.samplers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant_liar and QMC are marked experimental
        if settings.sampler == "random":
            return samplers.RandomSampler(seed=seed)
        if settings.sampler == "cmaes":
            return samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
        if settings.sampler == "qmc":
            return samplers.QMCSampler(seed=seed, warn_independent_sampling=False)
        return samplers.TPESampler(seed=seed, constant_liar=settings.shared)


def _pruner(settings: Settings) -> Any:
    """The ``--pruner``. The median pruner (the default): after 5 finished trials, a trial
    whose curve is below the median of the others at the same step stops; no trial stops in
    its first quarter. Hyperband and successive halving start from the first evaluation and
    end at the budget. With several seeds a step is a number of seeds done, and a trial may
    stop after any of them but the last."""
    optuna = _optuna()
    if not settings.prune or settings.pruner == "none":
        return optuna.pruners.NopPruner()
    one = settings.seeds == 1
    first, budget = (settings.eval_every, settings.steps) if one else (1, settings.seeds)
    if settings.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=first, max_resource=budget)
    if settings.pruner == "successive-halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=first)
    warmup = settings.steps // 4 if one else 0
    return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=warmup)


def check_sampler_and_pruner(sampler: str, pruner: str) -> None:
    """Refuse an unknown ``--sampler`` or ``--pruner`` (with the closest name), and a sampler
    whose library is missing, before anything is written."""
    import importlib.util

    from rlx.errors import ConfigError, did_you_mean
    from rlx.tune.settings import PRUNERS, SAMPLERS

    for option, name, known in (("--sampler", sampler, SAMPLERS), ("--pruner", pruner, PRUNERS)):
        if name not in known:
            raise ConfigError(
                f"unknown {option} {name!r}.{did_you_mean(name, known)} "
                + "; ".join(f"{key}: {meaning}" for key, meaning in known.items())
            )
    needs = {"cmaes": "cmaes", "qmc": "scipy"}.get(sampler)
    if needs and importlib.util.find_spec(needs) is None:
        raise ConfigError(f"--sampler {sampler} needs {needs}: pip install {needs}")


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
    storage = open_storage(settings.storage, settings.heartbeat)
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

    def retry_dead(study: Any, trial: Any) -> None:
        # before the next trial is asked for, so that it is the retry of a dead one
        fail_dead_trials(study)

    def stop_after_failures(study: Any, trial: Any) -> None:
        nonlocal failures
        if trial.user_attrs.get(OVER_BUDGET):
            # a race with another worker: stop once every place of the budget is held (done,
            # running or queued); a place freed later is the next ``rlx tune``'s to fill
            if places_held(study) >= settings.trials:
                study.stop()
            return
        failures += trial.state == optuna.trial.TrialState.FAIL
        if failures >= max(5, settings.trials):
            study.stop()

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            fail_dead_trials(study)
            study.optimize(
                objective,
                catch=(Exception,),
                callbacks=[objective.report, done, stop_after_failures, retry_dead],
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
