"""One trial: an ordinary rlx run (or one per seed) whose evaluations go to Optuna, which
may prune it; ``trial.json`` in its folder says how it ended."""

from __future__ import annotations

import json
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlx.callbacks import Callback
from rlx.errors import RlxError
from rlx.files import write_text_atomic
from rlx.tune.outputs import _best, _last_intermediate
from rlx.tune.settings import Settings, _jsonable, _metric_value, trial_seeds, trial_value
from rlx.tune.space import Space, _show
from rlx.tune.storage import _optuna, redact
from rlx.tune.study import OVER_BUDGET, WORKER, _done, within_budget


def _trial_loggers(entries: tuple[Any, ...], run_name: str) -> tuple[Any, ...]:
    """The ``--logger`` entries of one trial: trackers that take a ``run_name`` (mlflow, wandb)
    name the trial's tracker run after the study and the trial, unless the entry sets one."""
    import inspect

    from rlx.discovery import get_registry

    named = []
    for entry in entries:
        kwargs = dict(entry["kwargs"])
        try:
            takes = (
                "run_name"
                in inspect.signature(get_registry().logger(entry["name"]).load()).parameters
            )
        except (TypeError, ValueError):
            takes = False
        if takes and "run_name" not in kwargs:
            kwargs["run_name"] = run_name
        named.append({"name": entry["name"], "kwargs": kwargs})
    return tuple(named)


class _Pruning(Callback):
    """A trial's evaluations: each return kept, reported to Optuna, and the trial pruned when
    Optuna says so (not on an agent's metric, read at the end; not at the final evaluation,
    when nothing is left to prune; not for one seed of several, whose trial reports after
    each whole seed)."""

    def __init__(self, trial: Any, settings: Settings) -> None:
        self.trial, self.settings = trial, settings
        self.returns: list[float] = []

    def on_evaluation(self, trainer: Any, result: Any) -> str | None:
        self.returns.append(result.mean_return)
        if not self.settings.from_evaluations or trainer.stop_reason or self.settings.seeds > 1:
            return None
        self.trial.report(_metric_value(self.settings.metric, self.returns), trainer.env_steps)
        return "pruned" if self.trial.should_prune() else None


class OverBudget(RlxError):
    """A trial that a race between workers created past ``--trials``: failed before it trains."""


def _record_error(trial: Any, exc: Exception, where: str = "") -> None:
    """Keep the first line of what made a trial fail, for the study's table."""
    trial.set_user_attr("error", f"{where}{type(exc).__name__}: {exc}".splitlines()[0])


class _Objective:
    """One trial: an rlx run in ``OUT/trials/<number>`` whose evaluations go to Optuna, or
    with ``--seeds K`` one run per seed in ``OUT/trials/<number>/seed-<k>``."""

    def __init__(
        self,
        settings: Settings,
        space: Space,
        console: Any,
        show_done: Callable[[int], None] | None = None,
    ) -> None:
        self.settings = settings
        self.space = space
        self.console = console
        #: Moves the bar of finished trials (in-process on a terminal only).
        self.show_done = show_done
        self.current: int | None = None
        #: The study's number of the trial under way (its run folder, seeds and names).
        self.number = -1
        #: Whether the notice that the seeds cannot be batched was printed.
        self.told_unbatched = False

    def __call__(self, trial: Any) -> float:
        s = self.settings
        self.current = trial.number
        if not within_budget(trial.study, trial.number, s.trials):
            trial.set_user_attr(OVER_BUDGET, True)
            raise OverBudget(f"trial {trial.number} was created past --trials {s.trials}")
        return self.run(trial, trial.number)

    def run(self, trial: Any, number: int) -> float:
        """Trial ``number`` of the study, reported to ``trial``: the study's own trial, or
        on a Ray worker a stand-in in a study of that worker's (:mod:`rlx.tune.remote`)."""
        s = self.settings
        self.number = number
        seeds = trial_seeds(s.seed, self.number, s.seeds)
        trial_dir = Path(s.out).absolute() / "trials" / str(self.number)
        # where the trial runs, for outputs written on other machines and for a worker on this
        # one that finds the trial running after its process died (storages without heartbeats)
        host = socket.gethostname()
        trial.set_user_attr("host", host)
        # which process runs it, with the trial's number: a retry copies its failed trial's
        # attributes, and must not be taken for a trial of that trial's dead worker
        trial.set_user_attr(WORKER, {"host": host, "pid": os.getpid(), "trial": self.number})
        trial.set_user_attr("run_dir", str(trial_dir))
        trial.set_user_attr("seed", seeds[0])
        if s.seeds > 1:
            trial.set_user_attr("seeds", seeds)
        params = self.space.sample(trial)
        if s.seeds == 1:
            return self._one_seed(trial, params, seeds[0], trial_dir)
        return self._several_seeds(trial, params, seeds, trial_dir)

    def _trainer(
        self,
        trial: Any,
        params: dict[str, Any],
        seed: int,
        run_dir: Path,
        tracker_name: str,
        agent: Any = None,
    ) -> tuple[Any, _Pruning]:
        """One run of the trial, ready to train (``agent`` made here unless given), and the
        callback that keeps its evaluations."""
        import rlx
        from rlx.trainer import Trainer

        s = self.settings
        pruning = _Pruning(trial, s)
        if agent is None:
            agent = rlx.make(s.agent, s.env, seed=seed, env_kwargs=s.env_kwargs, **params)
        trainer = Trainer(
            agent,
            run_dir=run_dir,
            console=self.console,
            steps=s.steps,
            eval_every=s.eval_every,
            eval_episodes=s.eval_episodes,
            checkpoint_every=0,
            progress=False,
            verbose=False,
            plot=False,
            tensorboard=False,
            loggers=_trial_loggers(s.loggers, tracker_name),
            callbacks=[pruning],
        )
        return trainer, pruning

    def _value(self, result: Any, pruning: _Pruning) -> float | None:
        """A run's value of the metric (None when it has none: never evaluated, or the agent
        did not log it)."""
        s = self.settings
        if s.from_evaluations:
            return _metric_value(s.metric, pruning.returns) if pruning.returns else None
        value = result.metrics.get(s.metric)
        return None if value is None else float(value)

    def _fit(
        self, trial: Any, params: dict[str, Any], seed: int, run_dir: Path, tracker_name: str
    ) -> tuple[Any, float | None]:
        """Train one run of the trial; its result and its value of the metric."""
        try:
            trainer, pruning = self._trainer(trial, params, seed, run_dir, tracker_name)
            result = trainer.fit()
        except Exception as exc:
            _record_error(trial, exc)
            raise
        return result, self._value(result, pruning)

    def _one_seed(self, trial: Any, params: dict[str, Any], seed: int, run_dir: Path) -> float:
        """The trial as one run in ``run_dir``, pruned at its evaluations."""
        optuna = _optuna()
        s = self.settings
        result, value = self._fit(
            trial, params, seed, run_dir, f"{s.study_name}/trial-{self.number}"
        )
        trial.set_user_attr("env_steps", result.env_steps)
        trial.set_user_attr("stop_reason", result.stop_reason)
        state = {"interrupted": "interrupted", "pruned": "pruned"}.get(result.stop_reason)
        self._mark(
            run_dir, self.number, state or "complete", value, params, [seed], [], result.env_steps
        )
        if result.stop_reason == "interrupted":
            raise KeyboardInterrupt
        if result.stop_reason == "pruned":
            raise optuna.TrialPruned(f"pruned at {result.env_steps} environment steps")
        if value is None:
            self._missing_value()
        assert value is not None
        return float(value)

    def _several_seeds(
        self, trial: Any, params: dict[str, Any], seeds: list[int], trial_dir: Path
    ) -> float:
        """The trial as one run per seed in ``trial_dir/seed-<k>``, trained one after another
        in this process (``--workers`` runs trials side by side already). Its value is the IQM
        of the seeds' values. After each seed but the last, the IQM of the seeds done so far
        goes to Optuna at step = seeds done, so a trial is pruned between seeds, never inside
        one: every seed's value counts whole, and trials compare at equal numbers of seeds."""
        optuna = _optuna()
        s = self.settings
        if s.batched:
            value = self._batched_seeds(trial, params, seeds, trial_dir)
            if value is not None:
                return value
        values: list[float] = []
        env_steps = 0
        for k, seed in enumerate(seeds):
            result, value = self._fit(
                trial,
                params,
                seed,
                trial_dir / f"seed-{k}",
                f"{s.study_name}/trial-{self.number}/seed-{k}",
            )
            env_steps += result.env_steps
            trial.set_user_attr("env_steps", env_steps)
            trial.set_user_attr("stop_reason", result.stop_reason)
            if result.stop_reason == "interrupted":
                so_far = trial_value(values) if values else None
                self._mark(
                    trial_dir, self.number, "interrupted", so_far, params, seeds, values, env_steps
                )
                raise KeyboardInterrupt
            if value is None:
                self._missing_value(f"seed-{k}: ")
            assert value is not None
            values.append(float(value))
            trial.set_user_attr("seed_values", values)
            running = trial_value(values)
            if k + 1 < len(seeds):
                trial.report(running, k + 1)
                if trial.should_prune():
                    self._mark(
                        trial_dir, self.number, "pruned", running, params, seeds, values, env_steps
                    )
                    raise optuna.TrialPruned(f"pruned after {k + 1} of {len(seeds)} seeds")
        self._mark(trial_dir, self.number, "complete", running, params, seeds, values, env_steps)
        return running

    def _batched_seeds(
        self, trial: Any, params: dict[str, Any], seeds: list[int], trial_dir: Path
    ) -> float | None:
        """The trial's seeds trained as one batched computation, in lockstep
        (:func:`rlx.groups.train_side_by_side`), when their agent batches them; None when it
        cannot, and the caller trains them one after another. Every seed ends at once, so
        such a trial is not pruned: its value is the IQM of all its seeds."""
        import rlx
        from rlx.groups import batches_seeds, link_seeds, train_side_by_side
        from rlx.memory import shared_by
        from rlx.protocols import Closes
        from rlx.trainer import catch_interrupt_of

        s = self.settings
        if not batches_seeds(s.agent):
            return None
        try:
            with shared_by(len(seeds)):  # the seeds' buffers are all allocated at once
                agents = [
                    rlx.make(s.agent, s.env, seed=seed, env_kwargs=s.env_kwargs, **params)
                    for seed in seeds
                ]
        except Exception as exc:
            _record_error(trial, exc)
            raise
        batch, why = link_seeds(agents)
        if batch is None:
            for agent in agents:
                if isinstance(agent, Closes):
                    agent.close()
            if why and not self.told_unbatched:
                self.console.print(f"notice: each trial's seeds train one by one: {why}")
                self.told_unbatched = True
            return None
        trainers, prunings = {}, {}
        for k, (seed, agent) in enumerate(zip(seeds, agents, strict=True)):
            name = f"{s.study_name}/trial-{self.number}/seed-{k}"
            trainers[k], prunings[k] = self._trainer(
                trial, params, seed, trial_dir / f"seed-{k}", name, agent
            )
        results, errors = {}, {}
        previous = catch_interrupt_of(*trainers.values())
        try:
            for k, outcome in train_side_by_side(trainers, batch):
                if isinstance(outcome, Exception):
                    errors[k] = outcome
                else:
                    results[k] = outcome
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        if errors:
            k, error = min(errors.items())
            _record_error(trial, error, f"seed-{k}: ")
            raise error
        env_steps = sum(result.env_steps for result in results.values())
        trial.set_user_attr("env_steps", env_steps)
        reasons = {result.stop_reason for result in results.values()}
        reason = "interrupted" if "interrupted" in reasons else reasons.pop()
        trial.set_user_attr("stop_reason", reason)
        if reason == "interrupted":
            self._mark(
                trial_dir, self.number, "interrupted", None, params, seeds, [], env_steps, True
            )
            raise KeyboardInterrupt
        values: list[float] = []
        for k in range(len(seeds)):
            value = self._value(results[k], prunings[k])
            if value is None:
                self._missing_value(f"seed-{k}: ")
            assert value is not None
            values.append(value)
        trial.set_user_attr("seed_values", values)
        result = trial_value(values)
        self._mark(
            trial_dir, self.number, "complete", result, params, seeds, values, env_steps, True
        )
        return result

    def _missing_value(self, where: str = "") -> None:
        if not self.settings.from_evaluations:
            raise RlxError(f"{where}the run's last iteration logged no {self.settings.metric}")
        raise RlxError(f"{where}the trial was never evaluated")

    def _mark(
        self,
        trial_dir: Path,
        number: int,
        state: str,
        value: float | None,
        params: dict[str, Any],
        seeds: list[int],
        seed_values: list[float],
        env_steps: int,
        batched: bool = False,
    ) -> None:
        """``trial.json`` in the trial's directory: which trial of which study it was, and how
        it ended (a pruned or interrupted trial's runs stay, marked so). With several seeds,
        ``value`` is the IQM of ``seed_values`` (one per seed done, in the order of
        ``seeds``, whose runs are ``seed-<k>``), and ``batched`` whether they trained as one
        computation."""
        s = self.settings
        document = {
            "study": s.study_name,
            "storage": redact(s.storage),
            "trial": number,
            "state": state,
            "metric": s.metric,
            "value": value,
            "seed": seeds[0],
            "env_steps": env_steps,
            "params": _jsonable(params),
        }
        if s.seeds > 1:
            document.update(statistic="iqm", seeds=seeds, seed_values=seed_values, batched=batched)
        if trial_dir.is_dir():
            write_text_atomic(trial_dir / "trial.json", json.dumps(document, indent=2) + "\n")

    def report(self, study: Any, trial: Any) -> None:
        """An Optuna callback: one line per finished trial, with the best value so far (the
        least one when the study minimises) and how many of the study's trials are done,
        every worker's included."""
        if self.console is None:
            return
        done = _done(study)
        if self.show_done is not None:
            self.show_done(done)
        state = trial.state.name.lower()
        seconds = trial.duration.total_seconds() if trial.duration else 0.0
        if trial.user_attrs.get(OVER_BUDGET):
            self.console.print(
                f"trial {trial.number} not run: other workers hold the study's "
                f"{self.settings.trials} trials",
                markup=False,
            )
            return
        if state == "fail":
            error = trial.user_attrs.get("error", "interrupted")
            self.console.print(f"trial {trial.number} failed: {error}", markup=False)
            return
        shown = ", ".join(f"{key}={_show(value)}" for key, value in trial.params.items())
        value = trial.value if trial.value is not None else _last_intermediate(trial)
        number = f"{value:.4g}" if value is not None else "-"
        best = _best(study)
        best_so_far = f"best {best.value:.4g} (trial {best.number})" if best else "no best yet"
        over = f" (IQM of {self.settings.seeds} seeds)" if self.settings.seeds > 1 else ""
        self.console.print(
            f"trial {trial.number} {state}: {self.settings.metric}{over} {number} after "
            f"{trial.user_attrs.get('env_steps', 0):,} steps, {seconds:.1f} s; {best_so_far}; "
            f"{done}/{self.settings.trials} done | {shown}",
            markup=False,
        )
