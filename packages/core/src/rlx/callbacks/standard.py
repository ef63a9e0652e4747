"""The trainer's own callbacks: what every run does around its loop.

:class:`~rlx.trainer.Trainer` builds them from its :class:`~rlx.trainer.TrainerConfig`, in
this order (the order of their work within an iteration and at the end): metrics rows and
loggers (:class:`Logging`), evaluations and ``best/`` (:class:`Evaluation`), the stop at
``target_return`` (:class:`~rlx.callbacks.StopAtReturn`), videos (:class:`Videos`), periodic
checkpoints (:class:`~rlx.callbacks.CheckpointEvery`), then the user's callbacks, the
progress bar (:class:`ProgressBar`) and the plot (:class:`Plot`). Their state joins the
trainer state of every checkpoint under the names it has always had there.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlx.callbacks import Callback, CheckpointEvery, StopAtReturn, next_multiple
from rlx.checkpoint import is_count, is_number
from rlx.errors import CheckpointError, ConfigError, did_you_mean
from rlx.loggers import (
    CsvLogger,
    RunInfo,
    TableLogger,
    build_loggers,
    finish_loggers,
    log_row,
    standard_loggers,
)

if TYPE_CHECKING:
    from rlx.evaluation import EvalProgress, EvalResult, TrainResult
    from rlx.protocols import Iteration, Trainer


def own_callbacks(
    config: Any, eval_env: Any = None
) -> tuple[RunRecord, Logging, Evaluation, list[Callback]]:
    """The trainer's own callbacks for ``config``: the run record, logging and evaluation
    (which the trainer keeps at hand), and all of them in order: those three, then the stop at
    the target return, videos and periodic checkpoints where the settings ask for them."""
    record, logging, evaluation = RunRecord(), Logging(config), Evaluation(config, eval_env)
    own: list[Callback] = [record, logging, evaluation]
    if config.target_return is not None:
        own.append(StopAtReturn(config.target_return))
    if config.video_every:
        own.append(Videos(config.video_every, config.video_tiles))
    if config.checkpoint_every:
        own.append(CheckpointEvery(config.checkpoint_every, config.keep_checkpoints))
    return record, logging, evaluation, own


def run_config(trainer: Trainer) -> dict[str, Any]:
    """What config.json records: the identity, the warm start, the tuned settings the run
    started from, settings and versions."""
    from rlx.config import to_dict
    from rlx.runs import package_versions

    return {
        **trainer.identity.to_json(),
        **({"init_from": trainer.init_from} if trainer.init_from is not None else {}),
        **({"tuned": trainer.tuned} if trainer.tuned is not None else {}),
        "trainer": to_dict(trainer.config),
        "versions": package_versions(),
    }


class RunRecord(Callback):
    """The run directory's bookkeeping: a new run is written when it starts, a resumed run's
    config.json takes its new budgets then; a run that fails before its first checkpoint
    leaves the directory as it found it (a new run removes what it wrote, a resumed one puts
    config.json back); the directory is unlocked at the end."""

    def __init__(self, unwritten: bool = False) -> None:
        #: Whether the run directory is still to be written (a new run, or one started again).
        self.unwritten = unwritten
        #: config.json of a resumed run, written when it starts.
        self.new_config: dict[str, Any] | None = None
        self.created = self.checkpointed = False

    def on_start(self, trainer: Trainer) -> None:
        for notice in trainer.notices:
            trainer.console.print(f"notice: {notice}")
        trainer.notices = []
        if trainer.run is not None and self.new_config is not None:
            trainer.run.write_config(self.new_config)
        if trainer.run is not None and self.unwritten:
            trainer.run.create(run_config(trainer))
            self.created, self.unwritten = True, False

    def on_checkpoint(self, trainer: Trainer, path: Path) -> None:
        self.checkpointed = self.checkpointed or (
            trainer.run is not None and path != trainer.run.best
        )

    def on_end(self, trainer: Trainer, result: TrainResult | None) -> None:
        run = trainer.run
        if run is None:
            return
        if result is None and self.created and not run.has_checkpoint():
            run.remove_unstarted()  # never started: leave nothing, lose nothing
        elif result is None and not self.checkpointed:
            run.restore_config()  # a resume that failed at once changes nothing
        run.unlock()


#: The final-info key whose mean over episodes is logged as ``train/success_rate``.
SUCCESS_KEY = "is_success"


def check_info_keywords(keys: Any) -> tuple[str, ...]:
    """The ``info_keywords`` setting as a tuple of distinct keys (one string is one key); a key
    that is empty or not a string is a :class:`~rlx.errors.ConfigError`."""
    if isinstance(keys, str):
        keys = (keys,)
    if not isinstance(keys, (list, tuple)):
        raise ConfigError(f"info_keywords must be a list of info keys, got {keys!r}")
    checked: list[str] = []
    for key in keys:
        if not isinstance(key, str) or not key.strip():
            raise ConfigError(f"info_keywords: {key!r} is not the name of an info key")
        if key.strip() not in checked:
            checked.append(key.strip())
    return tuple(checked)


@dataclass
class Window:
    """Training statistics gathered between two rows of metrics.csv: ``info_sums`` and
    ``info_counts`` sum the logged final-info keys over the episodes that had them."""

    return_sum: float = 0.0
    length_sum: int = 0
    episodes: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    info_sums: dict[str, float] = field(default_factory=dict)
    info_counts: dict[str, int] = field(default_factory=dict)


class Logging(Callback):
    """A row of metrics.csv every ``log_every`` steps (training returns and lengths averaged
    since the last row, the success rate and ``info_keywords`` of the episodes' final infos,
    the agent's metrics) and the rows others log (evaluations), given to metrics.csv,
    TensorBoard and the configured trackers (:mod:`rlx.loggers`).

    An ``info_keywords`` key that no episode's final info has had as a number by the first
    row with episodes is one warning (with the keys that were there), not an error: it is
    logged from when it appears."""

    def __init__(self, config: Any) -> None:
        #: Built now, so that a missing library or a bad option stops the run before
        #: anything is written; started with the built-in ones by :meth:`on_start`.
        self.configured = build_loggers(config.loggers)
        self.config = config
        self.loggers: list[Any] = []
        self.csv: CsvLogger | None = None
        self.window = Window()
        self.last_log_step = 0
        self._next = math.inf
        #: The keys averaged over episodes: the success flag and the ``info_keywords``.
        self.info_keys = (SUCCESS_KEY, *(k for k in config.info_keywords if k != SUCCESS_KEY))
        self._seen_info: set[str] = set()
        self._checked_keys = False

    def on_start(self, trainer: Trainer) -> None:
        """The configured loggers first (a tracker that cannot start stops the run before
        metrics.csv is touched), then csv and TensorBoard for a recorded run."""
        loggers = standard_loggers(
            self.configured,
            (entry["name"] for entry in self.config.loggers),
            recorded=trainer.run is not None,
            tensorboard=self.config.tensorboard,
        )
        if self.config.table_every:
            loggers.append(TableLogger(self.config.table_every, trainer.console))
        info = RunInfo(
            run_dir=trainer.run.path if trainer.run is not None else None,
            identity=trainer.identity,
            config=run_config(trainer),
            resumed=trainer.resumed,
        )
        for logger in loggers:
            logger.start(info)
            self.loggers.append(logger)
            if isinstance(logger, CsvLogger):
                self.csv = logger
        self._next = next_multiple(self.config.log_every, self.last_log_step)

    def on_iteration(self, trainer: Trainer, iteration: Iteration) -> None:
        window = self.window
        for episode_return, length in zip(
            iteration.episode_returns, iteration.episode_lengths, strict=True
        ):
            window.return_sum += float(episode_return)
            window.length_sum += int(length)
            window.episodes += 1
        for info in iteration.episode_infos:
            self._seen_info.update(info)
            for key in self.info_keys:
                if key in info:
                    window.info_sums[key] = window.info_sums.get(key, 0.0) + info[key]
                    window.info_counts[key] = window.info_counts.get(key, 0) + 1
        window.metrics.update(iteration.metrics)
        if trainer.env_steps >= self._next:
            self.row(trainer)
            self._next = next_multiple(self.config.log_every, trainer.env_steps)

    def row(self, trainer: Trainer) -> None:
        """Log the window's averages and start a new window."""
        window, row = self.window, trainer.counters()
        if window.episodes:
            row["train/return_mean"] = window.return_sum / window.episodes
            row["train/length_mean"] = window.length_sum / window.episodes
            self._check_keys(trainer)
        for key, count in window.info_counts.items():
            name = "train/success_rate" if key == SUCCESS_KEY else f"train/info/{key}"
            row[name] = window.info_sums[key] / count
        row.update({f"agent/{key}": float(value) for key, value in window.metrics.items()})
        self.emit(trainer, row)
        self.window = Window()
        self.last_log_step = trainer.env_steps

    def _check_keys(self, trainer: Trainer) -> None:
        """Warn once about the ``info_keywords`` that no final info has held so far."""
        if self._checked_keys:
            return
        self._checked_keys = True
        seen = sorted(self._seen_info)
        for key in self.config.info_keywords:
            if key not in self._seen_info:
                there = f" (it had: {', '.join(seen)})" if seen else " (it had no numbers)"
                trainer.warn(
                    f"info key {key!r} was not a number in the final info of any training "
                    f"episode so far{there}; train/info/{key} is logged from when it appears."
                    + did_you_mean(key, seen)
                )

    def emit(self, trainer: Trainer, row: dict[str, Any]) -> None:
        """Give a row to every logger; a tracker that fails is dropped with a warning
        (training goes on), while metrics.csv, the run's own record, must be written."""
        log_row(self.loggers, trainer.env_steps, row, trainer.warn)

    def on_stop(self, trainer: Trainer, reason: str) -> None:
        if self.window.episodes or self.window.metrics:
            self.row(trainer)

    def on_end(self, trainer: Trainer, result: TrainResult | None) -> None:
        """Finish every started logger once; one that fails to finish is reported and the
        others are still finished."""
        finish_loggers(self.loggers, result, trainer.warn)

    def state(self) -> dict[str, Any]:
        return {
            "last_log_step": self.last_log_step,
            "window": self.window.__dict__,
            "csv_rows": len(self.csv.rows) if self.csv else 0,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        for key in ("last_log_step", "csv_rows"):
            if not is_count(state.get(key)):
                raise CheckpointError(f"has {key}={state.get(key)!r}, not a count")
        window = state.get("window")
        fields = {"return_sum", "length_sum", "episodes", "metrics"}
        infos = {"info_sums", "info_counts"}  # (checkpoints of rlx-core 0.2 have none)
        if isinstance(window, dict) and infos <= set(window):
            sums, counts = window["info_sums"], window["info_counts"]
            if (
                not isinstance(sums, dict)
                or not isinstance(counts, dict)
                or set(sums) != set(counts)
                or not all(is_number(v) for v in sums.values())
                or not all(is_count(v) for v in counts.values())
            ):
                raise CheckpointError("has a window of info statistics that is not the trainer's")
            fields |= infos
        if (
            not isinstance(window, dict)
            or set(window) != fields
            or not is_number(window["return_sum"])
            or not is_count(window["length_sum"])
            or not is_count(window["episodes"])
            or not isinstance(window["metrics"], dict)
            or not all(isinstance(v, (int, float)) for v in window["metrics"].values())
        ):
            raise CheckpointError("has a window of statistics that is not the trainer's")
        self.last_log_step = state["last_log_step"]
        self.window = Window(**window)


class Evaluation(Callback):
    """Evaluate the greedy policy every ``eval_every`` steps on the run's evaluation seeds
    (and at the end), log it, keep the best policy in ``best/`` and print a line per
    evaluation; every other callback sees each result (``on_evaluation``)."""

    def __init__(self, config: Any, env: Any = None) -> None:
        self.config = config
        self.env = env
        self.best_return: float | None = None
        self.last_eval_step = 0
        self.last: EvalResult | None = None
        #: The final evaluation (None when the run was interrupted or never evaluates).
        self.final: EvalResult | None = None
        self._next = math.inf

    def on_start(self, trainer: Trainer) -> None:
        c = self.config
        every = c.eval_every if c.eval_episodes else 0
        self._next = next_multiple(every, self.last_eval_step)

    def on_iteration(self, trainer: Trainer, iteration: Iteration) -> str | None:
        if trainer.env_steps < self._next:
            return None
        result = self.evaluate(trainer)
        self._next = next_multiple(self.config.eval_every, trainer.env_steps)
        return trainer.dispatch("on_evaluation", result) or None

    def measure(self, trainer: Trainer) -> EvalResult:
        """Evaluate the greedy policy on the run's evaluation seeds (deterministic), episodes
        capped at ``eval_max_episode_steps``; with the ``progress`` setting, the episodes and
        steps done show on the training progress bar, or on their own (:func:`evaluate`)."""
        from rlx.evaluation import evaluate

        if self.env is None:
            from rlx.api import evaluation_env

            self.env = evaluation_env(trainer.agent, trainer.identity)
        episodes = self.config.eval_episodes
        callbacks = getattr(trainer, "callbacks", ())
        bar = next((c for c in callbacks if isinstance(c, ProgressBar)), None)
        with bar.evaluating(episodes) if bar is not None else contextlib.nullcontext() as report:
            return evaluate(
                trainer.agent,
                self.env,
                episodes,
                seed=trainer.identity.seed,
                max_episode_steps=self.config.eval_max_episode_steps,
                progress=report or self.config.progress,
            )

    def evaluate(self, trainer: Trainer) -> EvalResult:
        """Evaluate, log the row, keep a new best policy and print the line."""
        result = self.measure(trainer)
        self.last_eval_step, self.last = trainer.env_steps, result
        row = {
            "eval/return_mean": result.mean_return,
            "eval/return_std": result.std_return,
            "eval/length_mean": result.mean_length,
        }
        trainer.log(row)
        improved = self.best_return is None or result.mean_return > self.best_return
        if improved:
            self.best_return = result.mean_return
            if trainer.run is not None:
                trainer.save(trainer.run.best, resume=False)
        if self.config.verbose:
            recent = trainer.recent_mean()
            train = f"{recent:.3g}" if not math.isnan(recent) else "-"
            trainer.console.print(
                f"step {trainer.env_steps:>10,} | eval return {result.mean_return:9.3f} "
                f"± {result.std_return:.3f} | train return {train} | "
                f"{trainer.counters()['time/steps_per_second']:,.0f} steps/s"
                + (" | new best" if improved else "")
            )
        return result

    def on_stop(self, trainer: Trainer, reason: str) -> None:
        """The final evaluation, unless interrupted; a run that evaluated at this very step
        (before an interruption, when it was resumed) takes that result again."""
        if reason == "interrupted" or not self.config.eval_episodes:
            return
        if self.last_eval_step != trainer.env_steps:  # (the training bar is gone by now)
            self.final = self.evaluate(trainer)
            trainer.dispatch("on_evaluation", self.final)  # the run ends anyway
        else:
            self.final = self.last or self.measure(trainer)

    def state(self) -> dict[str, Any]:
        return {"best_return": self.best_return, "last_eval_step": self.last_eval_step}

    def load_state(self, state: dict[str, Any]) -> None:
        if not is_count(state.get("last_eval_step")):
            raise CheckpointError(
                f"has last_eval_step={state.get('last_eval_step')!r}, not a count"
            )
        best = state.get("best_return")
        if best is not None and not is_number(best):
            raise CheckpointError(f"has best_return={best!r}, not a number")
        self.best_return, self.last_eval_step = best, state["last_eval_step"]


class Videos(Callback):
    """One greedy episode every ``every`` steps on the first evaluation seed, as
    ``videos/step-<env steps>-return-<return>.mp4`` (``.gif`` without ffmpeg); with ``tiles``
    above 1, that many episodes (the first evaluation seeds) side by side in one tiled frame,
    the name holding their mean return."""

    def __init__(self, every: int, tiles: int = 1) -> None:
        self.every = every
        self.tiles = tiles
        self.env: Any = None
        self.suffix = ""
        self._next = math.inf

    def on_start(self, trainer: Trainer) -> None:
        """Check that videos can be written; make the rendering environment (apart from the
        evaluation one: training is not touched)."""
        if trainer.run is None:
            raise ConfigError("video_every writes videos into the run directory: give run_dir")
        from rlx.video import check_writer, default_suffix, video_env

        self.suffix = default_suffix()
        check_writer(self.suffix)
        self.env = video_env(trainer.agent, trainer.identity, copies=self.tiles)
        self._next = next_multiple(self.every, trainer.env_steps)

    def on_iteration(self, trainer: Trainer, iteration: Iteration) -> None:
        if trainer.env_steps < self._next:
            return
        from rlx.video import RETURN_FIELD, record_episodes

        assert trainer.run is not None
        name = f"step-{trainer.env_steps}-return-{RETURN_FIELD}{self.suffix}"
        recording = record_episodes(
            trainer.agent,
            self.env,
            trainer.run.videos / name,
            self.tiles,
            seed=trainer.identity.seed,
            metadata={"env_steps": trainer.env_steps},
        )
        if trainer.config.verbose:
            trainer.console.print(
                f"step {trainer.env_steps:>10,} | video return "
                f"{recording.result.mean_return:9.3f} | {recording.path}"
            )
        self._next = next_multiple(self.every, trainer.env_steps)

    def on_end(self, trainer: Trainer, result: TrainResult | None) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


class ProgressBar(Callback):
    """A progress bar on stderr with the live training return and the best evaluation, when
    the output is a terminal and the ``progress`` setting is on; it comes right after the run
    record, so that it is gone before the final evaluation shows its own bar."""

    def __init__(self) -> None:
        self.progress: Any = None
        self.task: Any = None
        self._shown = 0.0

    def on_start(self, trainer: Trainer) -> None:
        from rich.progress import (
            BarColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=trainer.console,
            disable=not (trainer.config.progress and trainer.console.is_terminal),
        )
        self.progress.start()
        total, _ = self._done(trainer)
        self.task = self.progress.add_task(
            f"{trainer.identity.agent} on {trainer.identity.env}", total=total, stats=""
        )
        self._update(trainer)

    def on_iteration(self, trainer: Trainer, iteration: Iteration) -> None:
        if trainer.elapsed - self._shown > 0.1:
            self._shown = trainer.elapsed
            self._update(trainer)

    def on_stop(self, trainer: Trainer, reason: str) -> None:
        self._update(trainer)
        self.on_end(trainer, None)

    def on_end(self, trainer: Trainer, result: TrainResult | None) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    @contextlib.contextmanager
    def evaluating(self, episodes: int) -> Iterator[EvalProgress | None]:
        """A line under the training bar that follows an evaluation of ``episodes`` (its
        :data:`~rlx.evaluation.EvalProgress` report), while the bar shows; else None."""
        progress = self.progress
        if progress is None or progress.disable:
            yield None
            return
        task = progress.add_task("evaluating", total=episodes, stats="")

        def report(done: int, steps: int) -> None:
            progress.update(
                task, completed=done, stats=f"{done}/{episodes} episodes, {steps:,} steps"
            )

        try:
            yield report
        finally:
            progress.remove_task(task)

    def _update(self, trainer: Trainer) -> None:
        _, done = self._done(trainer)
        recent = trainer.recent_mean()
        stats = f"return {recent:.3g}" if not math.isnan(recent) else "return -"
        if trainer.best_return is not None:
            stats += f" | best eval {trainer.best_return:.3g}"
        self.progress.update(self.task, completed=done, stats=stats)

    @staticmethod
    def _done(trainer: Trainer) -> tuple[float, float]:
        """The total and the part done of the first budget: steps, iterations or seconds."""
        c = trainer.config
        if c.steps is not None:
            return float(c.steps), float(min(trainer.env_steps, c.steps))
        if c.iterations is not None:
            return float(c.iterations), float(trainer.iterations)
        return float(c.time_limit or 0), trainer.elapsed


class Plot(Callback):
    """``learning_curve.png`` in the run directory when the run ends (not when interrupted;
    needs matplotlib, and rows to draw)."""

    def on_stop(self, trainer: Trainer, reason: str) -> None:
        import importlib.util

        if trainer.run is None or reason == "interrupted":
            return
        if importlib.util.find_spec("matplotlib") is None:
            return
        from rlx.errors import RlxError
        from rlx.plotting import plot_run

        try:
            plot_run(trainer.run.path)
        except RlxError:  # nothing to draw yet
            pass
