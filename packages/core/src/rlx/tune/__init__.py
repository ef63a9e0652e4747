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
periodic evaluation; every evaluation is reported to Optuna, whose pruner (``--pruner``, the
median pruner by default) stops unpromising trials. With ``--seeds K`` a trial is scored over
K seeds instead of one (a setting tuned on one seed is often tuned to that seed's luck): K
runs in ``OUT/trials/<number>/seed-<k>``, and the trial's value is the interquartile mean of
their values (:func:`trial_value`). When the agent batches seeds
(:class:`rlx.protocols.BatchesSeeds`) the K seeds train as one batched computation;
otherwise (and with ``--no-batched``) one after another, and a trial may be pruned between
two of them. The study lives in an Optuna storage (``OUT/study.db`` by default), so an
interrupted ``rlx tune`` continues where it stopped and several processes or machines can
share one study: exactly ``--trials`` trials in total, a dead worker's trial run again
(:mod:`rlx.tune.storage`). Optuna and Ray are imported inside functions, never by
``import rlx``.

The package reads in the order a study runs: :mod:`rlx.tune.space` (what is searched),
:mod:`rlx.tune.storage` (where the study lives), :mod:`rlx.tune.settings` (what every worker
shares), :mod:`rlx.tune.study` (the study and its folder, checked), :mod:`rlx.tune.objective`
(one trial), :mod:`rlx.tune.workers` (trials in this process or in worker processes),
:mod:`rlx.tune.remote` (trials as Ray tasks) and :mod:`rlx.tune.outputs` (what the user
gets). :func:`tune` ties them together.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError, RlxError
from rlx.executors import check_backend
from rlx.tune.outputs import _best, _print_space, best_config, best_entry, write_outputs
from rlx.tune.settings import (
    DONE_STATES,
    METRICS,
    PRUNERS,
    SAMPLERS,
    Settings,
    TuneResult,
    parse_trial_seeds,
    trial_seeds,
    trial_value,
)
from rlx.tune.space import (
    SKIP_REASONS,
    SPACE_FILE_KEY,
    Dimension,
    Space,
    _declared,  # noqa: F401  (tests import it from rlx.tune)
    build_space,
    read_space_file,
)
from rlx.tune.storage import _optuna, check_storage, normal_storage, open_storage, redact
from rlx.tune.study import (
    _check_agent_metric,
    _check_out,
    _check_study_of_out,
    _counts,
    _done,
    _make_out,
    _open_study,
    _trainer_settings,
)
from rlx.tune.workers import _optimize, _run_workers, _trials_bar, check_sampler_and_pruner

__all__ = [
    "DONE_STATES",
    "METRICS",
    "PRUNERS",
    "SAMPLERS",
    "SKIP_REASONS",
    "SPACE_FILE_KEY",
    "Dimension",
    "Settings",
    "Space",
    "TuneResult",
    "best_config",
    "best_entry",
    "build_space",
    "check_storage",
    "open_storage",
    "parse_trial_seeds",
    "read_space_file",
    "redact",
    "trial_seeds",
    "trial_value",
    "tune",
    "write_outputs",
]


def tune(
    agent: str,
    env: str,
    *,
    trials: int = 20,
    storage: str | None = None,
    workers: int | None = None,
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
    pruner: Any = "median",
    sampler: str = "tpe",
    heartbeat: int | None = 60,
    backend: str = "local",
    address: str | None = None,
    loggers: Any = (),
    console: Any = None,
    seeds: int = 1,
    batched: bool = True,
    env_kwargs: Mapping[str, Any] | None = None,
) -> TuneResult:
    """Tune ``agent`` on ``env`` until the study holds ``trials`` finished (complete or
    pruned) trials in total; continues the study when the storage already holds it.

    ``space`` is a TOML space file or its entries as a mapping. ``storage`` is a database URL,
    ``journal:PATH`` (Optuna's journal file) or ``grpc://HOST:PORT`` (Optuna's gRPC proxy):
    every worker on every machine that runs the same call on it shares the study, and the
    study holds ``trials`` finished trials in total. ``sampler`` and ``pruner`` name Optuna's
    (:data:`SAMPLERS`, :data:`PRUNERS`); ``pruner`` may also be an Optuna pruner object
    (in-process runs only, ``workers=1``). ``heartbeat`` is the seconds between a running
    trial's heartbeats on a database storage: a trial silent for twice as long is failed and
    run again (None: no heartbeats). ``backend="ray"`` runs the trials as Ray tasks,
    ``workers`` of them at once (default: as many as the cluster's CPUs), on the cluster at
    ``address`` (None: Ray on this machine;
    :mod:`rlx.tune.remote`). ``loggers`` are
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
    ray_slots = backend == "ray" and workers is None  # as many trials at once as Ray can place
    workers = 1 if workers is None else workers
    for value, what in ((trials, "--trials"), (workers, "--workers")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{what} must be a positive integer, got {value!r}")
    if direction not in ("maximize", "minimize"):
        raise ConfigError(f"--direction is maximize or minimize, got {direction!r}")
    if storage is not None:
        check_storage(storage)
        storage = normal_storage(storage)
    if heartbeat is not None and (
        isinstance(heartbeat, bool) or not isinstance(heartbeat, int) or heartbeat < 1
    ):
        raise ConfigError(f"--heartbeat must be a positive number of seconds, got {heartbeat!r}")
    check_sampler_and_pruner(sampler, pruner if isinstance(pruner, str) else "median")
    check_backend(backend)
    if address is not None and backend != "ray":
        raise ConfigError("--address names a Ray cluster: give it with --backend ray")
    if backend == "ray" and not isinstance(pruner, str):
        raise ConfigError("a pruner object works in-process only: give a --pruner name with Ray")
    seeds = parse_trial_seeds(seeds)
    if seeds > 1:
        import importlib.util

        if importlib.util.find_spec("scipy") is None:
            raise RlxError(
                "rlx tune --seeds scores a trial by the IQM of its seeds, which needs scipy: "
                "pip install 'rlx-core[stats]'"
            )
    if not isinstance(pruner, str) and workers > 1:
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
        sampler=sampler,
        pruner=pruner if isinstance(pruner, str) else "median",
        heartbeat=heartbeat,
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
    elif backend == "ray":
        from rlx.tune.remote import run_on_ray

        at_once = None if ray_slots else min(workers, remaining)
        interrupted = run_on_ray(settings, search, console, address, at_once)
    elif workers == 1:
        try:
            with _trials_bar(console, done, trials) as show_done:
                _optimize(
                    settings,
                    search,
                    0,
                    console,
                    None if isinstance(pruner, str) else pruner,
                    show_done,
                )
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
