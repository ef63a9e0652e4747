"""The one generic training loop every family uses.

A family implements :meth:`rlx.protocols.Agent.step`; :class:`Trainer` calls it until a
budget runs out (environment steps, iterations or wall time) or a callback stops it, and
stops cleanly on Ctrl-C. Everything around the loop is a callback (:mod:`rlx.callbacks`):
metrics rows and loggers, evaluations, checkpoints, videos, the progress bar and the plot
are the trainer's own (:mod:`rlx.callbacks.standard`), and users add theirs.
"""

from __future__ import annotations

import collections
import math
import signal
import threading
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from rlx.callbacks import Callback, CallbackList, build
from rlx.callbacks import normalize as normalize_callbacks
from rlx.callbacks.standard import Plot, ProgressBar, check_info_keywords, own_callbacks
from rlx.checkpoint import is_count, is_number, load_checkpoint, save_checkpoint
from rlx.config import build_config, hyperparameter, to_dict
from rlx.errors import CheckpointError, ConfigError, TrainingError
from rlx.evaluation import TrainResult
from rlx.loggers import check_loggers
from rlx.protocols import (
    Agent,
    Closes,
    Iteration,
    RunIdentity,
    SuggestsTrainerDefaults,
    TakesTrainingBudget,
)
from rlx.runs import MARKER_FILE, RunDirectory, last_good

#: Training episodes averaged for the live return on the progress bar.
RECENT_EPISODES = 100


@dataclass
class TrainerConfig:
    """Budgets and bookkeeping of a run; any budget that is reached stops it."""

    steps: int | None = hyperparameter(100_000, "budget in environment steps", low=1)
    iterations: int | None = hyperparameter(None, "budget in learning iterations", low=1)
    time_limit: float | None = hyperparameter(
        None, "budget in seconds of wall-clock time", low=0, low_open=True
    )
    eval_every: int = hyperparameter(
        10_000, "environment steps between evaluations (0: evaluate only at the end)", low=0
    )
    eval_episodes: int = hyperparameter(10, "episodes per evaluation (0: never evaluate)", low=0)
    eval_max_episode_steps: int | None = hyperparameter(
        None,
        "steps after which an evaluation episode is cut short, reported truncated (none: only "
        "on an environment without a time limit, at rlx.evaluation.DEFAULT_MAX_EPISODE_STEPS "
        "= 27,000)",
        low=1,
    )
    video_every: int = hyperparameter(
        0,
        "environment steps between videos of one greedy evaluation episode, written to "
        "RUN_DIR/videos (0: no videos; needs rlx-core[video])",
        low=0,
    )
    video_tiles: int = hyperparameter(
        1,
        "greedy evaluation episodes in each video of video_every, played side by side by "
        "copies of the environment and tiled into one frame (a near-square grid; at most 16)",
        low=1,
        high=16,
    )
    checkpoint_every: int = hyperparameter(
        50_000, "environment steps between checkpoints (0: only at the end)", low=0
    )
    keep_checkpoints: int = hyperparameter(3, "periodic checkpoints kept on disk", low=1)
    log_every: int = hyperparameter(1_000, "environment steps between rows of metrics.csv", low=1)
    info_keywords: tuple[str, ...] = hyperparameter(
        (),
        "keys of the final info of training episodes to log, each the mean over the episodes "
        "that ended since the last row, as train/info/KEY (rlx run --info-keyword KEY); "
        "train/success_rate is logged anyway where the final info has is_success",
    )
    table_every: int = hyperparameter(
        0,
        "environment steps between tables of every current metric on the run's console, "
        "printed with the first metrics row at or after each multiple (0: no tables)",
        low=0,
    )
    target_return: float | None = hyperparameter(
        None, "stop as soon as the mean evaluation return reaches this value"
    )
    progress: bool = hyperparameter(True, "show a progress bar when the output is a terminal")
    verbose: bool = hyperparameter(True, "print one line per evaluation")
    plot: bool = hyperparameter(
        True, "save learning_curve.png in the run directory at the end (needs matplotlib)"
    )
    tensorboard: bool = hyperparameter(
        True, "write TensorBoard events when tensorboard is installed"
    )
    loggers: tuple[Any, ...] = hyperparameter(
        (),
        "more loggers (experiment trackers) besides metrics.csv and TensorBoard: names or "
        "'name,key=value,...' strings (rlx run --logger), or tables with name and kwargs; "
        "'rlx list loggers' shows them",
    )
    callbacks: tuple[Any, ...] = hyperparameter(
        (),
        "callbacks (rlx.callbacks): built-in names or package.module:Class, as "
        "'name,key=value,...' strings (rlx run --callback) or tables with name and kwargs; "
        "a module:Class is built again on resume only with --trust-code",
    )

    def __post_init__(self) -> None:
        if self.steps is None and self.iterations is None and self.time_limit is None:
            raise ConfigError("set at least one budget: steps, iterations or time_limit")
        self.loggers = check_loggers(self.loggers)
        self.info_keywords = check_info_keywords(self.info_keywords)
        self.callbacks = normalize_callbacks(self.callbacks)


class Trainer:
    """Trains ``agent`` under the budgets of ``config`` (or keyword overrides of it).

    With ``run_dir`` the run is recorded (config, metrics, checkpoints) and can be resumed
    with :meth:`Trainer.resume`; without it nothing is written. ``identity`` is the run's
    :class:`~rlx.protocols.RunIdentity` (by default the one :func:`rlx.make` gave the agent).
    ``init_from`` is the record of a warm start (what :func:`rlx.api.warm_start` returned),
    written to config.json, as ``tuned`` is, the tuned settings the run started from.
    ``callbacks`` (:class:`rlx.callbacks.Callback`) run after the trainer's own and those
    the ``callbacks`` setting names, and may stop the run.
    """

    def __init__(
        self,
        agent: Agent,
        config: TrainerConfig | None = None,
        *,
        run_dir: str | Path | None = None,
        eval_env: Any = None,
        console: Any = None,
        identity: RunIdentity | None = None,
        init_from: dict[str, Any] | None = None,
        callbacks: Sequence[Callback] = (),
        tuned: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> None:
        from rich.console import Console

        from rlx.api import identity_of

        base = to_dict(config) if config is not None else trainer_defaults(agent)
        self.config = build_config(TrainerConfig, {**base, **overrides})
        self.agent, self.identity = agent, identity or identity_of(agent)
        self.init_from = dict(init_from) if init_from is not None else None
        #: The tuned settings the run started from (:meth:`rlx.tuned.Tuned.to_dict`), if any.
        self.tuned = dict(tuned) if tuned is not None else None
        self.console = console or Console(stderr=True)
        self.env_steps = self.iterations = self.episodes = 0
        self.elapsed, self.stop_reason = 0.0, ""
        self.recent_returns: collections.deque[float] = collections.deque(maxlen=RECENT_EPISODES)
        self.run: RunDirectory | None = None
        #: The trainer state of the checkpoint a resumed run continues from.
        self.resumed: dict[str, Any] | None = None
        self.notices: list[str] = []
        self._interrupted = False
        self._last_metrics: dict[str, float] = {}
        self.record, self.logging, self.evaluations, self.own = own_callbacks(self.config, eval_env)
        self.callbacks = [
            self.record,
            ProgressBar(),
            *self.own[1:],
            *map(build, self.config.callbacks),
        ]
        self.callbacks += [*callbacks, *([Plot()] if self.config.plot else [])]
        self.events = CallbackList(self.callbacks, own=self.own)
        if run_dir is not None:  # checked now, written when fit() starts (RunRecord)
            notice = RunDirectory.check_new(run_dir)
            self.notices += [notice] if notice else []
            self.run, self.record.unwritten = RunDirectory(run_dir), True

    @classmethod
    def resume(
        cls,
        run_dir: str | Path,
        console: Any = None,
        trust_code: bool = False,
        device: str | None = None,
        callbacks: Sequence[Callback] = (),
        **overrides: Any,
    ) -> Trainer:
        """Continue a recorded run from its newest checkpoint; ``overrides`` may raise budgets.

        The run may name only registered agents, environments and callbacks unless
        ``trust_code``; ``device`` continues it on another device than it was saved from.
        ``callbacks`` are Callback objects added to the run's; entries (``"name,key=value"``
        strings or tables, as ``rlx run --callback`` gives them) are the ``callbacks``
        setting instead, and replace the recorded ones.
        """
        if any(not isinstance(callback, Callback) for callback in callbacks):
            overrides = {**overrides, "callbacks": tuple(callbacks)}
            callbacks = ()
        return _resume(cls, run_dir, console, trust_code, device, callbacks, overrides)

    def fit(self) -> TrainResult:
        """Train until a budget, a callback or Ctrl-C stops the run."""
        steps = self.steps()
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return cast(TrainResult, done.value)

    def steps(self, catch_interrupt: bool = True) -> Generator[None, None, TrainResult]:
        """:meth:`fit`, one iteration at a time: pauses before each step of the agent, and
        returns the result. Seeds trained side by side in one process (:mod:`rlx.groups`)
        advance their trainers in turn this way, so that every seed still training steps
        once a round; ``catch_interrupt=False`` leaves Ctrl-C to their driver."""
        if isinstance(self.agent, TakesTrainingBudget):
            self.agent.set_training_budget(self.config.steps)
        previous_handler = catch_interrupt_of(self) if catch_interrupt else None
        try:
            self.events.start(self)
            result = yield from self._loop()
            self.events.end(self, result)
        except BaseException:
            self.events.end(self, None)
            raise
        finally:
            if previous_handler is not None:
                signal.signal(signal.SIGINT, previous_handler)
            if isinstance(self.agent, Closes):
                self.agent.close()
        return result

    def _loop(self) -> Generator[None, None, TrainResult]:
        start = time.perf_counter() - self.elapsed
        reason = self.budget_spent()
        while not reason:
            yield
            try:
                iteration = self.agent.step()
            except TrainingError as exc:
                raise TrainingError(f"{exc}\n{last_good(self.run)}") from exc
            self._record(iteration)
            self.elapsed = time.perf_counter() - start
            reason = self.dispatch("on_iteration", iteration)
            reason = "interrupted" if self._interrupted else reason or self.budget_spent()
        # final/ is written before the end-of-run row and evaluation (on_stop), so that a
        # resumed run's metrics.csv equals an uninterrupted run's.
        self.stop_reason = reason
        if self.run is not None:
            self.save(self.run.final)
        self.dispatch("on_stop", reason)
        return TrainResult(
            self.env_steps,
            self.iterations,
            self.episodes,
            self.elapsed,
            reason,
            self.evaluations.final,
            self.best_return,
            self.run.path if self.run else None,
            dict(self._last_metrics),
        )

    def _record(self, iteration: Iteration) -> None:
        self.iterations += 1
        self.env_steps += int(iteration.env_steps)
        self.episodes += len(iteration.episode_returns)
        for episode_return in iteration.episode_returns:
            self.recent_returns.append(float(episode_return))
        self._last_metrics = iteration.metrics

    def dispatch(self, event: str, *args: Any) -> str:
        """Call ``event`` on every callback that has it; the first stop reason, or ""."""
        return self.events.dispatch(self, event, *args)

    def save(self, path: Path, resume: bool = True) -> None:
        """A checkpoint of the policy, and of what exact resume needs unless ``resume=False``
        (``best/``: a new best never rewrites a replay buffer)."""
        from safetensors import SafetensorError

        try:
            save_checkpoint(
                path,
                self.agent.policy_state(),
                self.agent.resume_state() if resume else None,
                run=self.identity.to_json(),
                trainer=trainer_state(self),
            )
        except (OSError, SafetensorError) as exc:  # safetensors reports a full disk its own way
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            kept = f"the previous {path.name}/ is intact" if path.exists() else "nothing was lost"
            raise CheckpointError(
                f"could not write the checkpoint {path} ({reason}); {kept}. {last_good(self.run)}"
            ) from exc
        self.dispatch("on_checkpoint", path)

    def log(self, row: dict[str, Any]) -> None:
        """Log ``row`` (names to numbers) with the counters, to metrics.csv and every logger."""
        self.logging.emit(self, {**self.counters(), **row})

    def budget_spent(self) -> str:
        """The name of the budget that is used up ("steps", "iterations", "time"), or ""."""
        c = self.config
        if c.steps is not None and self.env_steps >= c.steps:
            return "steps"
        if c.iterations is not None and self.iterations >= c.iterations:
            return "iterations"
        if c.time_limit is not None and self.elapsed >= c.time_limit:
            return "time"
        return ""

    @property
    def best_return(self) -> float | None:
        """The best mean return of an evaluation so far, or None before the first."""
        return self.evaluations.best_return

    def counters(self) -> dict[str, Any]:
        """The counters every metrics row starts with: ``env_steps``, ``iterations``, ``episodes``,
        ``time/elapsed_s`` and ``time/steps_per_second``."""
        return {
            "env_steps": self.env_steps,
            "iterations": self.iterations,
            "episodes": self.episodes,
            "time/elapsed_s": round(self.elapsed, 3),
            "time/steps_per_second": self.env_steps / self.elapsed if self.elapsed > 0 else 0.0,
        }

    def recent_mean(self) -> float:
        """The mean return of the last training episodes (NaN before the first)."""
        returns = self.recent_returns
        return sum(returns) / len(returns) if returns else math.nan

    def warn(self, message: str) -> None:
        """Print ``message`` as a warning on the run's console."""
        self.console.print(f"warning: {message}", markup=False)

    def __repr__(self) -> str:
        return f"Trainer({self.identity.agent} on {self.identity.env}, steps={self.env_steps})"


def trainer_state(trainer: Trainer) -> dict[str, Any]:
    """The trainer state saved in checkpoints: counters and the callbacks' states."""
    state: dict[str, Any] = {
        "env_steps": trainer.env_steps,
        "iterations": trainer.iterations,
        "episodes": trainer.episodes,
        "elapsed": trainer.elapsed,
        "recent_returns": list(trainer.recent_returns),
        "stop_reason": trainer.stop_reason,
        "callbacks": {},
    }
    for callback in trainer.callbacks:  # the trainer's own under the names they always had
        saved = callback.state()
        if saved is not None and callback in trainer.own:
            state.update(saved)
        elif saved is not None:
            state["callbacks"][callback.name] = saved
    return state


def _restore(trainer: Trainer, state: dict[str, Any]) -> None:
    """Take a checkpoint's trainer state (its counters checked by :func:`_check_state`)."""
    trainer.env_steps, trainer.iterations = int(state["env_steps"]), int(state["iterations"])
    trainer.episodes, trainer.elapsed = int(state["episodes"]), float(state["elapsed"])
    trainer.recent_returns.extend(state["recent_returns"])
    saved = state.get("callbacks") or {}
    for callback in trainer.callbacks:
        if callback in trainer.own:
            callback.load_state(state)
        elif isinstance(saved, dict) and isinstance(saved.get(callback.name), dict):
            try:
                callback.load_state(saved[callback.name])
            except Exception as exc:
                raise CheckpointError(f"is not callback {callback.name}'s: {exc}") from exc


def new_run(
    agent: str,
    env: str,
    *,
    seed: int = 0,
    hyperparameters: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    wrappers: Sequence[Any] = (),
    env_kwargs: Mapping[str, Any] | None = None,
    init_from: str | Path | None = None,
    trust_code: bool = False,
    out: str | Path | None = None,
    console: Any = None,
    callbacks: Sequence[Callback] = (),
    tuned: bool = False,
) -> Trainer:
    """A new recorded run, as ``rlx run`` starts one; call :meth:`Trainer.fit` on it.

    The agent is made with :func:`rlx.make` (``hyperparameters``, ``wrappers``,
    ``env_kwargs``); ``settings`` (:class:`TrainerConfig`) go on top of the agent's suggested
    ones and are checked before anything is made; ``init_from`` warm-starts the policy from
    another run (:func:`rlx.api.warm_start`); ``out`` defaults to
    ``runs/<agent>-<env>-s<seed>-<time>``. With ``tuned`` the run starts from the agent's
    tuned settings on ``env`` when its family has them (:func:`rlx.tuned.merge`; what is
    given here goes on top), and config.json records them. Nothing is written before
    :meth:`Trainer.fit`.
    """
    from rlx.api import make, warm_start
    from rlx.runs import default_run_path
    from rlx.tuned import merge

    entry = None
    if tuned:
        entry, hyperparameters, settings, wrappers, env_kwargs = merge(
            agent, env, hyperparameters, settings, wrappers, env_kwargs
        )
    settings = dict(settings or {})
    build_config(TrainerConfig, settings)  # bad settings are refused before any work
    made = make(
        agent,
        env,
        seed=seed,
        env_kwargs=env_kwargs,
        wrappers=wrappers,
        **dict(hyperparameters or {}),
    )
    config = build_config(TrainerConfig, {**trainer_defaults(made), **settings})
    from rlx.api import check_iteration_budget

    overshoot = ""
    try:  # one iteration larger than the whole budget overshoots it: said before training
        check_iteration_budget(agent, getattr(made, "config", None), config.steps)
    except ConfigError as exc:
        overshoot = str(exc)
    started_from = None if init_from is None else warm_start(made, init_from, trust_code)
    run_dir = out if out is not None else default_run_path("runs", agent, str(env), seed)
    trainer = Trainer(
        made,
        config,
        run_dir=run_dir,
        console=console,
        init_from=started_from,
        callbacks=callbacks,
        tuned=None if entry is None else entry.to_dict(),
    )
    if overshoot:
        trainer.notices.append(overshoot)
    return trainer


def catch_interrupt_of(*trainers: Trainer) -> Any:
    """First Ctrl-C: every trainer finishes its iteration, saves and stops. A second one
    interrupts at once. Returns the previous SIGINT handler, for the caller to put back
    (None when nothing was installed).

    A SIGINT ignored when training starts (a script's background job) stays ignored, as
    Python leaves it."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return None

    def handler(signum: int, frame: Any) -> None:
        if any(trainer._interrupted for trainer in trainers):
            raise KeyboardInterrupt
        for trainer in trainers:
            trainer._interrupted = True

    return signal.signal(signal.SIGINT, handler)


def _resume(
    cls: type[Trainer],
    run_dir: str | Path,
    console: Any,
    trust_code: bool,
    device: str | None,
    callbacks: Sequence[Callback],
    overrides: dict[str, Any],
) -> Trainer:
    """:meth:`Trainer.resume`: the run directory opened, checked and locked, the agent
    rebuilt and restored, the trainer's counters and callbacks' states taken back."""
    run = RunDirectory.open(run_dir)
    saved = run.read_config()
    identity = run.read_identity(saved)
    config = build_config(TrainerConfig, {**(saved.get("trainer") or {}), **overrides})
    if not run.is_run() and not run.has_resumable():
        raise CheckpointError(
            f"{run.path} holds no checkpoint and was not started by rlx (its {MARKER_FILE} "
            "file is missing), so there is nothing to resume; start a new run with --out"
        )
    if not trust_code:  # what the user gives again replaces the recorded callbacks, loggers
        from rlx.recorded import check_record

        check_record(saved, str(run.config_file), given=overrides)
    run.lock()
    try:
        return _resume_locked(
            cls, run, saved, identity, config, console, trust_code, device, callbacks
        )
    except BaseException:
        run.unlock()
        raise


def _resume_locked(
    cls: type[Trainer],
    run: RunDirectory,
    saved: dict[str, Any],
    identity: RunIdentity,
    config: TrainerConfig,
    console: Any,
    trust_code: bool,
    device: str | None,
    callbacks: Sequence[Callback],
) -> Trainer:
    from rlx.api import check_same_run, checkpoint_identity, make_from_identity, restore

    notices = run.tidy()
    source = str(run.config_file)
    if not run.has_resumable():
        agent = make_from_identity(identity, trust_code, source=source, device=device)
        init_from = _warm_start_again(agent, saved, run, trust_code)
        trainer = cls(agent, config, console=console, identity=identity, callbacks=callbacks)
        trainer.init_from, trainer.run, trainer.record.unwritten = init_from, run, True
        trainer.tuned = saved.get("tuned")
        trainer.notices = [
            *notices,
            f"{run.path} holds no checkpoint (the run stopped before its first); "
            "starting it again from scratch",
        ]
        return trainer
    checkpoint_path = run.latest_checkpoint()
    checkpoint = load_checkpoint(checkpoint_path)
    document = checkpoint.document
    if not isinstance(document.get("trainer"), dict) or checkpoint.resume is None:
        raise CheckpointError(f"checkpoint {checkpoint_path} has no trainer or resume state")
    check_same_run(
        checkpoint_identity(checkpoint, checkpoint_path), identity, checkpoint_path, run.config_file
    )
    agent = make_from_identity(identity, trust_code, source=source, device=device)
    restore(agent, checkpoint, checkpoint_path)
    trainer = cls(agent, config, console=console, identity=identity, callbacks=callbacks)
    trainer.run, trainer.notices = run, notices
    state = document["trainer"]
    try:
        problem = _check_state(state)
        if problem:
            raise CheckpointError(problem)
        _restore(trainer, state)
    except CheckpointError as exc:
        raise CheckpointError(f"checkpoint {checkpoint_path}: its trainer state {exc}") from None
    spent = trainer.budget_spent()
    if spent and state.get("stop_reason") != "interrupted":
        # (a run interrupted in its last iteration resumes to its final evaluation)
        raise ConfigError(
            f"{run.path} already used its {spent} budget ({trainer.env_steps} environment "
            f"steps, {trainer.iterations} iterations); raise it (e.g. --steps) to continue"
        )
    # fit() cuts metrics.csv back to the checkpoint's rows (the csv logger's start) and
    # records the new budgets in config.json once the run has started.
    trainer.resumed = dict(state)
    trainer.record.new_config = {**saved, "trainer": to_dict(config)}
    return trainer


def _check_state(state: dict[str, Any]) -> str:
    """What is wrong with a checkpoint's trainer counters, or "" (the callbacks check
    their own parts)."""
    for key in ("env_steps", "iterations", "episodes"):
        if not is_count(state.get(key)):
            return f"has {key}={state.get(key)!r}, not a count"
    if not is_number(state.get("elapsed")) or state["elapsed"] < 0:
        return f"has elapsed={state.get('elapsed')!r}, not a duration"
    returns = state.get("recent_returns")
    if not isinstance(returns, list) or not all(is_number(r) for r in returns):
        return "has recent_returns that are not a list of numbers"
    if not isinstance(state.get("stop_reason", ""), str):
        return f"has stop_reason={state['stop_reason']!r}, not a string"
    if not isinstance(state.get("callbacks", {}), dict):
        return "has callbacks that are not a table"
    return ""


def _warm_start_again(
    agent: Any, saved: dict[str, Any], run: RunDirectory, trust_code: bool
) -> dict[str, Any] | None:
    """For a warm-started run that stopped before its first checkpoint: load the policy it
    started from again (the checkpoint its config.json records), or say why it cannot."""
    record = saved.get("init_from")
    if record is None:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("checkpoint"), str):
        raise CheckpointError(f"{run.config_file}: init_from must record a checkpoint path")
    from rlx.api import warm_start

    again = warm_start(agent, record["checkpoint"], trust_code)
    if record.get("policy_sha256") not in (None, again["policy_sha256"]):
        raise CheckpointError(
            f"{run.path} started from the policy in {record['checkpoint']}, which has changed "
            "since; start a new run with --init-from instead"
        )
    return {**again, "path": record.get("path", again["path"])}


def trainer_defaults(agent: Any) -> dict[str, Any]:
    """Trainer settings an agent suggests (:class:`~rlx.protocols.SuggestsTrainerDefaults`).

    A bandit agent, for example, logs more often and skips episodic evaluation; anything
    the user sets explicitly wins over these.
    """
    return dict(agent.trainer_defaults) if isinstance(agent, SuggestsTrainerDefaults) else {}
