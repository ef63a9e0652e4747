"""The one generic training loop every family uses.

A family implements :meth:`rlx.protocols.Agent.step`; :class:`Trainer` calls it until a
budget runs out (environment steps, iterations or wall time) or a target evaluation
return is reached, and around it shows progress, evaluates the greedy policy on fixed
seeds, logs to stdout and to its loggers (``metrics.csv``, TensorBoard, and the trackers of
the ``loggers`` setting, see :mod:`rlx.loggers`), checkpoints, resumes exactly and stops
cleanly on Ctrl-C.
"""

from __future__ import annotations

import collections
import copy
import math
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlx.checkpoint import load_checkpoint, save_checkpoint
from rlx.config import build_config, hyperparameter, to_dict
from rlx.errors import CheckpointError, ConfigError, TrainingError
from rlx.evaluation import EvalResult, evaluate
from rlx.loggers import CsvLogger, RunInfo, TensorBoardLogger, build_loggers, check_loggers
from rlx.protocols import Closes, RunIdentity, SuggestsTrainerDefaults, TakesTrainingBudget
from rlx.runs import MARKER_FILE, RunDirectory, package_versions

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
    video_every: int = hyperparameter(
        0,
        "environment steps between videos of one greedy evaluation episode, written to "
        "RUN_DIR/videos (0: no videos; needs rlx-core[video])",
        low=0,
    )
    checkpoint_every: int = hyperparameter(
        50_000, "environment steps between checkpoints (0: only at the end)", low=0
    )
    keep_checkpoints: int = hyperparameter(3, "periodic checkpoints kept on disk", low=1)
    log_every: int = hyperparameter(1_000, "environment steps between rows of metrics.csv", low=1)
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

    def __post_init__(self) -> None:
        if self.steps is None and self.iterations is None and self.time_limit is None:
            raise ConfigError("set at least one budget: steps, iterations or time_limit")
        self.loggers = check_loggers(self.loggers)


@dataclass
class TrainResult:
    """How a run ended."""

    env_steps: int
    iterations: int
    episodes: int
    elapsed: float
    stop_reason: str
    final_eval: EvalResult | None
    best_return: float | None
    run_dir: Path | None
    #: The agent's metrics of the last iteration (a bandit's cumulative regret, ...).
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_steps": self.env_steps,
            "iterations": self.iterations,
            "episodes": self.episodes,
            "elapsed": self.elapsed,
            "stop_reason": self.stop_reason,
            "final_eval": self.final_eval.to_dict() if self.final_eval else None,
            "best_return": self.best_return,
            "run_dir": str(self.run_dir) if self.run_dir else None,
            "metrics": self.metrics,
        }


@dataclass
class _Window:
    """Training statistics gathered between two rows of metrics.csv."""

    return_sum: float = 0.0
    length_sum: int = 0
    episodes: int = 0
    metrics: dict[str, float] = field(default_factory=dict)


class Trainer:
    """Trains ``agent`` under the budgets of ``config`` (or keyword overrides of it).

    With ``run_dir`` the run is recorded (config, metrics, checkpoints) and can be
    resumed with :meth:`Trainer.resume`; without it nothing is written. ``identity`` is the
    run's :class:`~rlx.protocols.RunIdentity` (by default the one :func:`rlx.make` gave the
    agent, or one read off the agent). ``init_from`` is the record of a warm start (what
    :func:`rlx.api.warm_start` returned), written to config.json as ``"init_from"``; it is not
    part of the run's identity. ``on_evaluation(env_steps, result)`` is called after every
    evaluation; when it returns a reason (a non-empty string) the run stops with that
    ``stop_reason`` (``rlx tune`` prunes trials this way). The setting ``loggers`` adds
    experiment trackers to metrics.csv and TensorBoard (``loggers=["wandb,mode=offline"]``,
    see :mod:`rlx.loggers`); they are built here, so that a missing library stops the run
    before anything is written.
    """

    def __init__(
        self,
        agent: Any,
        config: TrainerConfig | None = None,
        *,
        run_dir: str | Path | None = None,
        eval_env: Any = None,
        console: Any = None,
        identity: RunIdentity | None = None,
        init_from: dict[str, Any] | None = None,
        on_evaluation: Callable[[int, EvalResult], str | None] | None = None,
        **overrides: Any,
    ) -> None:
        from rlx.api import identity_of

        if config is not None and overrides:
            config = build_config(TrainerConfig, {**to_dict(config), **overrides})
        self.config = config or build_config(
            TrainerConfig, {**trainer_defaults(agent), **overrides}
        )
        self.agent = agent
        self.identity = identity or identity_of(agent)
        self.init_from = dict(init_from) if init_from is not None else None
        self.on_evaluation = on_evaluation
        self.console = console
        self._eval_env = eval_env
        self._video_env: Any = None
        self._video_suffix = ""
        self.env_steps = self.iterations = self.episodes = 0
        self.elapsed = 0.0
        self.best_return: float | None = None
        self.last_eval_step = self.last_log_step = self.last_checkpoint_step = 0
        self.recent_returns: collections.deque[float] = collections.deque(maxlen=RECENT_EPISODES)
        self._window = _Window()
        self._interrupted = False
        #: Why the run stopped ("" while it runs), saved in final/ so that a run interrupted
        #: in its last iteration can be resumed to its final evaluation.
        self._stop_reason = ""
        #: Whether this process wrote a checkpoint to resume from (periodic or final/).
        self._checkpointed = False
        #: config.json of a resumed run, written when fit() has started it.
        self._new_config: dict[str, Any] | None = None
        self._last_eval: EvalResult | None = None
        self._last_metrics: dict[str, float] = {}
        self.run: RunDirectory | None = None
        #: The configured loggers, built now so that a missing library or a bad option stops
        #: the run before anything is written; started by fit() with the built-in ones.
        self._configured_loggers = build_loggers(self.config.loggers)
        self._loggers: list[Any] = []
        self._csv: CsvLogger | None = None
        #: The trainer state of the checkpoint a resumed run continues from.
        self._resumed: dict[str, Any] | None = None
        #: A new run directory is checked now and written when fit() starts, so that a run
        #: that cannot start leaves nothing behind.
        self._unwritten = False
        self.notices: list[str] = []
        if run_dir is not None:
            notice = RunDirectory.check_new(run_dir)
            self.notices += [notice] if notice else []
            self.run = RunDirectory(run_dir)
            self._unwritten = True

    # -- resume ---------------------------------------------------------------------------

    @classmethod
    def resume(
        cls,
        run_dir: str | Path,
        console: Any = None,
        trust_code: bool = False,
        device: str | None = None,
        **overrides: Any,
    ) -> Trainer:
        """Continue a recorded run from its newest checkpoint; ``overrides`` may raise budgets.

        The run may name only registered agents and environments unless ``trust_code``.
        ``device`` continues it on another device than the one it was saved from.
        """

        run = RunDirectory.open(run_dir)
        saved = run.read_config()
        identity = run.read_identity(saved)
        settings = {**(saved.get("trainer") or {}), **overrides}
        config = build_config(TrainerConfig, settings)
        if not run.is_run() and not run.has_resumable():
            raise CheckpointError(
                f"{run.path} holds no checkpoint and was not started by rlx (its {MARKER_FILE} "
                "file is missing), so there is nothing to resume; start a new run with --out"
            )
        run.lock()
        try:
            return cls._resume_locked(run, saved, identity, config, console, trust_code, device)
        except BaseException:
            run.unlock()
            raise

    @classmethod
    def _resume_locked(
        cls,
        run: RunDirectory,
        saved: dict[str, Any],
        identity: RunIdentity,
        config: TrainerConfig,
        console: Any,
        trust_code: bool,
        device: str | None = None,
    ) -> Trainer:
        from rlx.api import check_same_run, checkpoint_identity, make_from_identity, restore

        notices = run.tidy()
        if not run.has_resumable():
            agent = make_from_identity(
                identity, trust_code, source=str(run.config_file), device=device
            )
            init_from = _warm_start_again(agent, saved, run, trust_code)
            trainer = cls(agent, config, console=console, identity=identity, init_from=init_from)
            trainer.run, trainer._unwritten = run, True
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
            checkpoint_identity(checkpoint, checkpoint_path),
            identity,
            checkpoint_path,
            run.config_file,
        )
        agent = make_from_identity(identity, trust_code, source=str(run.config_file), device=device)
        restore(agent, checkpoint, checkpoint_path)
        trainer = cls(agent, config, console=console, identity=identity)
        trainer.run, trainer.notices = run, notices
        problem = _check_state(document["trainer"])
        if problem:
            raise CheckpointError(f"checkpoint {checkpoint_path}: its trainer state {problem}")
        trainer._restore(document["trainer"])
        spent = trainer.budget_spent()
        if spent and document["trainer"].get("stop_reason") != "interrupted":
            # (a run interrupted in its last iteration resumes to its final evaluation)
            raise ConfigError(
                f"{run.path} already used its {spent} budget ({trainer.env_steps} environment "
                f"steps, {trainer.iterations} iterations); raise it (e.g. --steps) to continue"
            )
        # fit() cuts metrics.csv back to the checkpoint's rows (the csv logger's start) and
        # records the new budgets in config.json once the run has started.
        trainer._resumed = dict(document["trainer"])
        trainer._new_config = {**saved, "trainer": to_dict(config)}
        return trainer

    def _trainer_state(self) -> dict[str, Any]:
        return {
            "env_steps": self.env_steps,
            "iterations": self.iterations,
            "episodes": self.episodes,
            "elapsed": self.elapsed,
            "best_return": self.best_return,
            "last_eval_step": self.last_eval_step,
            "last_log_step": self.last_log_step,
            "recent_returns": list(self.recent_returns),
            "window": self._window.__dict__,
            "csv_rows": len(self._csv.rows) if self._csv else 0,
            "stop_reason": self._stop_reason,
        }

    def _restore(self, state: dict[str, Any]) -> None:
        """Take the counters of a checkpoint's trainer state (checked by :func:`_check_state`)."""
        self.env_steps = int(state["env_steps"])
        self.iterations = int(state["iterations"])
        self.episodes = int(state["episodes"])
        self.elapsed = float(state["elapsed"])
        self.best_return = state["best_return"]
        self.last_eval_step = int(state["last_eval_step"])
        self.last_log_step = int(state["last_log_step"])
        self.last_checkpoint_step = self.env_steps
        self.recent_returns.extend(state["recent_returns"])
        self._window = _Window(**state["window"])

    def _run_config(self) -> dict[str, Any]:
        return {
            **self.identity.to_json(),
            **({"init_from": self.init_from} if self.init_from is not None else {}),
            "trainer": to_dict(self.config),
            "versions": package_versions(),
        }

    # -- the loop -------------------------------------------------------------------------

    def fit(self) -> TrainResult:
        """Train until a budget, the target return or Ctrl-C stops the run."""
        if isinstance(self.agent, TakesTrainingBudget):
            self.agent.set_training_budget(self.config.steps)
        previous_handler = self._catch_interrupt()
        created = False
        result: TrainResult | None = None
        try:
            self._prepare_video()
            created = self._start_run()
            self._start_loggers()
            result = self._loop()
            return result
        except BaseException:
            self._finish_loggers(None)
            if created and self.run is not None and not self.run.has_checkpoint():
                # The run never reached a checkpoint: leave nothing behind, lose nothing.
                self.run.remove_unstarted()
            elif self.run is not None and not self._checkpointed:
                self.run.restore_config()  # a resume that failed at once changes nothing
            raise
        finally:
            self._restore_interrupt(previous_handler)
            self._finish_loggers(result)
            if isinstance(self.agent, Closes):
                self.agent.close()
            if self._video_env is not None:
                self._video_env.close()
                self._video_env = None
            if self.run is not None:
                self.run.unlock()

    def _start_run(self) -> bool:
        """Write the run directory if it is new (True then); show the notices."""
        if self.notices:
            from rich.console import Console

            console = self.console or Console(stderr=True)
            for notice in self.notices:
                console.print(f"notice: {notice}")
            self.notices = []
        if self.run is not None and self._new_config is not None:
            self.run.write_config(self._new_config)
            self._new_config = None
        if self.run is None or not self._unwritten:
            return False
        self.run.create(self._run_config())
        self._unwritten = False
        return True

    def _loop(self) -> TrainResult:
        start = time.perf_counter() - self.elapsed
        last_refresh = 0.0
        stop_reason = ""
        final_eval: EvalResult | None = None
        c = self.config
        next_log = self._next(c.log_every, self.last_log_step)
        evaluating = c.eval_every and c.eval_episodes
        next_eval = self._next(c.eval_every, self.last_eval_step) if evaluating else math.inf
        next_checkpoint = (
            self._next(c.checkpoint_every, self.last_checkpoint_step)
            if c.checkpoint_every and self.run is not None
            else math.inf
        )
        next_video = self._next(c.video_every, self.env_steps) if c.video_every else math.inf
        with self._progress() as progress:
            task = progress.add_task(
                self._description(), total=self._progress_total(), stats=self._stats()
            )
            while not (stop_reason := self.budget_spent()):
                try:
                    iteration = self.agent.step()
                except TrainingError as exc:
                    raise TrainingError(f"{exc}\n{self._last_good()}") from exc
                self._record(iteration)
                self.elapsed = time.perf_counter() - start
                if self.env_steps >= next_log:
                    self._log_row()
                    next_log = self._next(c.log_every, self.env_steps)
                if self.env_steps >= next_eval:
                    result = self._evaluate(progress.console)
                    next_eval = self._next(c.eval_every, self.env_steps)
                    if self._target_reached(result):
                        stop_reason, final_eval = "target", result
                    elif self.on_evaluation is not None:
                        if reason := self.on_evaluation(self.env_steps, result):
                            stop_reason, final_eval = str(reason), result
                if self.env_steps >= next_video:
                    self._record_video(progress.console)
                    next_video = self._next(c.video_every, self.env_steps)
                if self.env_steps >= next_checkpoint:
                    self._save_periodic()
                    next_checkpoint = self._next(c.checkpoint_every, self.env_steps)
                if self._interrupted:
                    stop_reason = "interrupted"
                if stop_reason:
                    break
                if self.elapsed - last_refresh > 0.1:
                    last_refresh = self.elapsed
                    progress.update(task, completed=self._progress_done(), stats=self._stats())
            progress.update(task, completed=self._progress_done(), stats=self._stats())
            # The final checkpoint is taken before the end-of-run row and evaluation,
            # so that a resumed run's metrics.csv equals an uninterrupted run's.
            self._stop_reason = stop_reason
            if self.run is not None:
                self._save(self.run.final)
            if self._window.episodes or self._window.metrics:
                self._log_row()
            if stop_reason != "interrupted" and final_eval is None and c.eval_episodes:
                if self.last_eval_step != self.env_steps:
                    final_eval = self._evaluate(progress.console)
                else:  # evaluated at this step already (before an interruption, if resumed)
                    final_eval = self._last_eval or self._evaluation()
        if self.run is not None and self.config.plot and stop_reason != "interrupted":
            self._plot()
        return TrainResult(
            self.env_steps,
            self.iterations,
            self.episodes,
            self.elapsed,
            stop_reason,
            final_eval,
            self.best_return,
            self.run.path if self.run else None,
            dict(self._last_metrics),
        )

    def _last_good(self) -> str:
        """Where the last good state of a stopped run is."""
        if self.run is None:
            return "The run was not recorded (no run directory), so nothing was saved."
        checkpoints = self.run.saved_checkpoints()
        if not checkpoints:
            return "No checkpoint had been written yet; nothing was saved."
        return f"The run stopped; its last good checkpoint is {checkpoints[-1]}."

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

    @staticmethod
    def _next(every: int, last: int) -> int:
        """The first multiple of ``every`` after step ``last`` (derived: resume needs no state)."""
        return (last // every + 1) * every

    def _record(self, iteration: Any) -> None:
        self.iterations += 1
        self.env_steps += int(iteration.env_steps)
        window = self._window
        for episode_return, length in zip(
            iteration.episode_returns, iteration.episode_lengths, strict=True
        ):
            self.recent_returns.append(float(episode_return))
            window.return_sum += float(episode_return)
            window.length_sum += int(length)
            window.episodes += 1
        self.episodes += len(iteration.episode_returns)
        window.metrics.update(iteration.metrics)
        self._last_metrics = iteration.metrics

    # -- logging and evaluation ------------------------------------------------------------

    def _counters(self) -> dict[str, Any]:
        return {
            "env_steps": self.env_steps,
            "iterations": self.iterations,
            "episodes": self.episodes,
            "time/elapsed_s": round(self.elapsed, 3),
            "time/steps_per_second": self.env_steps / self.elapsed if self.elapsed > 0 else 0.0,
        }

    def _log_row(self) -> None:
        window, row = self._window, self._counters()
        if window.episodes:
            row["train/return_mean"] = window.return_sum / window.episodes
            row["train/length_mean"] = window.length_sum / window.episodes
        row.update({f"agent/{key}": float(value) for key, value in window.metrics.items()})
        self._emit(row)
        self._window = _Window()
        self.last_log_step = self.env_steps

    def _emit(self, row: dict[str, Any]) -> None:
        """Give a metrics row to every logger; a tracker that fails is dropped with a warning
        (training goes on), while metrics.csv, the run's own record, must be written."""
        for logger in list(self._loggers):
            if logger is self._csv:
                logger.log(self.env_steps, row)
                continue
            try:
                logger.log(self.env_steps, row)
            except Exception as exc:
                self._loggers.remove(logger)
                self._warn(f"logger {type(logger).__name__} failed and is left out: {exc}")

    def _evaluation(self) -> EvalResult:
        """Evaluate the greedy policy on the run's evaluation seeds (deterministic)."""
        if self._eval_env is None:
            from rlx.api import evaluation_env

            self._eval_env = evaluation_env(self.agent, self.identity)
        return evaluate(
            self.agent, self._eval_env, self.config.eval_episodes, seed=self.identity.seed
        )

    def _evaluate(self, console: Any) -> EvalResult:
        """Evaluate, log the row, keep a new best policy and print the line."""
        result = self._evaluation()
        self.last_eval_step = self.env_steps
        self._last_eval = result
        self._emit(
            {
                **self._counters(),
                "eval/return_mean": result.mean_return,
                "eval/return_std": result.std_return,
                "eval/length_mean": result.mean_length,
            }
        )
        improved = self.best_return is None or result.mean_return > self.best_return
        if improved:
            self.best_return = result.mean_return
            if self.run is not None:
                self._save(self.run.best, resume=False)
        if console is not None and self.config.verbose:
            train = f"{self._recent_mean():.3g}" if self.recent_returns else "-"
            console.print(
                f"step {self.env_steps:>10,} | eval return {result.mean_return:9.3f} "
                f"± {result.std_return:.3f} | train return {train} | "
                f"{self._counters()['time/steps_per_second']:,.0f} steps/s"
                + (" | new best" if improved else "")
            )
        return result

    def _prepare_video(self) -> None:
        """Check, before anything is written, that ``video_every`` can record; make its
        rendering environment (apart from the evaluation one: training is not touched)."""
        if not self.config.video_every or self._video_env is not None:
            return
        if self.run is None:
            raise ConfigError("video_every writes videos into the run directory: give run_dir")
        from rlx.video import check_writer, default_suffix, video_env

        self._video_suffix = default_suffix()
        check_writer(self._video_suffix)
        self._video_env = video_env(self.agent, self.identity)

    def _record_video(self, console: Any) -> None:
        """One greedy episode on the first evaluation seed, as
        ``videos/step-<env steps>-return-<return>.mp4`` (``.gif`` without ffmpeg)."""
        from rlx.video import RETURN_FIELD, record_episodes

        assert self.run is not None
        name = f"step-{self.env_steps}-return-{RETURN_FIELD}{self._video_suffix}"
        recording = record_episodes(
            self.agent,
            self._video_env,
            self.run.videos / name,
            1,
            seed=self.identity.seed,
            metadata={"env_steps": self.env_steps},
        )
        if console is not None and self.config.verbose:
            console.print(
                f"step {self.env_steps:>10,} | video return {recording.returns[0]:9.3f} | "
                f"{recording.path}"
            )

    def _target_reached(self, result: EvalResult) -> bool:
        target = self.config.target_return
        return target is not None and result.mean_return >= target

    def _recent_mean(self) -> float:
        return (
            sum(self.recent_returns) / len(self.recent_returns) if self.recent_returns else math.nan
        )

    # -- checkpoints ------------------------------------------------------------------------

    def _save(self, path: Path, resume: bool = True) -> None:
        """A checkpoint of the policy, and of what exact resume needs unless ``resume=False``
        (``best/``: a new best never rewrites a replay buffer)."""
        from safetensors import SafetensorError

        try:
            save_checkpoint(
                path,
                self.agent.policy_state(),
                self.agent.resume_state() if resume else None,
                run=self.identity.to_json(),
                trainer=self._trainer_state(),
            )
        except (OSError, SafetensorError) as exc:  # safetensors reports a full disk its own way
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            kept = f"the previous {path.name}/ is intact" if path.exists() else "nothing was lost"
            raise CheckpointError(
                f"could not write the checkpoint {path} ({reason}); {kept}. {self._last_good()}"
            ) from exc
        self._checkpointed = self._checkpointed or resume

    def _save_periodic(self) -> None:
        if self.run is None:
            return
        self._save(self.run.checkpoint_path(self.env_steps))
        self.last_checkpoint_step = self.env_steps
        self.run.prune_checkpoints(self.config.keep_checkpoints)

    def _plot(self) -> None:
        import importlib.util

        from rlx.errors import RlxError
        from rlx.plotting import plot_run

        if importlib.util.find_spec("matplotlib") is None:
            return
        try:
            plot_run(self.run.path)
        except RlxError:  # nothing to draw yet
            pass

    # -- Ctrl-C -----------------------------------------------------------------------------

    def _catch_interrupt(self) -> Any:
        """First Ctrl-C: finish the iteration, save, stop. A second one interrupts at once."""
        if threading.current_thread() is not threading.main_thread():
            return None

        def handler(signum: int, frame: Any) -> None:
            if self._interrupted:
                raise KeyboardInterrupt
            self._interrupted = True

        return signal.signal(signal.SIGINT, handler)

    @staticmethod
    def _restore_interrupt(previous: Any) -> None:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)

    # -- display ------------------------------------------------------------------------------

    # -- loggers ------------------------------------------------------------------------------

    def _start_loggers(self) -> None:
        """Start the loggers: the configured ones first (a tracker that cannot start stops the
        run before metrics.csv is touched), then csv and TensorBoard for a recorded run."""
        named = {entry["name"] for entry in self.config.loggers}
        loggers = list(self._configured_loggers)
        if self.run is not None and "csv" not in named:
            loggers.append(CsvLogger())
        if (
            self.run is not None
            and "tensorboard" not in named
            and self.config.tensorboard
            and TensorBoardLogger.available()
        ):
            loggers.append(TensorBoardLogger())
        info = RunInfo(
            run_dir=self.run.path if self.run is not None else None,
            identity=self.identity,
            config=self._run_config(),
            resumed=self._resumed,
        )
        for logger in loggers:
            logger.start(info)
            self._loggers.append(logger)
            if isinstance(logger, CsvLogger):
                self._csv = logger

    def _finish_loggers(self, result: TrainResult | None) -> None:
        """Finish every started logger once (``result`` is None when training failed); a
        logger that fails to finish is reported, and the others are still finished."""
        while self._loggers:
            logger = self._loggers.pop(0)
            try:
                logger.finish(result)
            except Exception as exc:
                if logger is self._csv:
                    raise
                self._warn(f"logger {type(logger).__name__} failed to finish: {exc}")

    def _warn(self, message: str) -> None:
        from rich.console import Console

        (self.console or Console(stderr=True)).print(f"warning: {message}", markup=False)

    def _description(self) -> str:
        return f"{self.identity.agent} on {self.identity.env}"

    def _progress_total(self) -> float:
        c = self.config
        if c.steps is not None:
            return float(c.steps)
        if c.iterations is not None:
            return float(c.iterations)
        return float(c.time_limit or 0)

    def _progress_done(self) -> float:
        c = self.config
        if c.steps is not None:
            return float(min(self.env_steps, c.steps))
        if c.iterations is not None:
            return float(self.iterations)
        return self.elapsed

    def _stats(self) -> str:
        ret = f"return {self._recent_mean():.3g}" if self.recent_returns else "return -"
        best = f" | best eval {self.best_return:.3g}" if self.best_return is not None else ""
        return ret + best

    def _progress(self) -> Any:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = self.console or Console(stderr=True)
        return Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not (self.config.progress and console.is_terminal),
        )

    def __repr__(self) -> str:
        return f"Trainer({self._description()}, steps={self.env_steps})"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_state(state: dict[str, Any]) -> str:
    """What is wrong with a checkpoint's trainer state (as :meth:`Trainer._trainer_state`
    writes it), or "" when nothing is."""
    counts = ("env_steps", "iterations", "episodes", "last_eval_step", "last_log_step", "csv_rows")
    for key in counts:
        if not _is_count(state.get(key)):
            return f"has {key}={state.get(key)!r}, not a count"
    if not _is_number(state.get("elapsed")) or state["elapsed"] < 0:
        return f"has elapsed={state.get('elapsed')!r}, not a duration"
    if state.get("best_return") is not None and not _is_number(state["best_return"]):
        return f"has best_return={state['best_return']!r}, not a number"
    returns = state.get("recent_returns")
    if not isinstance(returns, list) or not all(_is_number(r) for r in returns):
        return "has recent_returns that are not a list of numbers"
    if not isinstance(state.get("stop_reason", ""), str):
        return f"has stop_reason={state['stop_reason']!r}, not a string"
    window = state.get("window")
    fields = {"return_sum", "length_sum", "episodes", "metrics"}
    if (
        not isinstance(window, dict)
        or set(window) != fields
        or not _is_number(window["return_sum"])
        or not _is_count(window["length_sum"])
        or not _is_count(window["episodes"])
        or not isinstance(window["metrics"], dict)
        or not all(isinstance(v, (int, float)) for v in window["metrics"].values())
    ):
        return "has a window of statistics that is not the trainer's"
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


def copy_env(env: Any) -> Any:
    """A fresh copy of a gymnasium environment for evaluation, rebuilt from its spec if any."""
    import gymnasium

    spec = getattr(env, "spec", None)
    if spec is not None:
        return gymnasium.make(spec)
    return copy.deepcopy(env)
