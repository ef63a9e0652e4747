"""Callbacks: code that runs at the events of a training run, and may stop it.

A callback subclasses :class:`Callback` and overrides the events it needs::

    class StopWhenSolved(rlx.callbacks.Callback):
        def on_evaluation(self, trainer, result):
            if result.mean_return >= 475:
                return "solved"                # the run stops with stop_reason "solved"

    rlx.Trainer(agent, callbacks=[StopWhenSolved()]).fit()

The trainer is itself made of callbacks (:mod:`rlx.callbacks.standard`: metrics rows and
loggers, evaluations, periodic checkpoints, videos, the progress bar, the plot); a user's
callbacks run after them, in the order given. On the command line, ``rlx run --callback
'NAME,key=value'`` adds one: a built-in name (:data:`BUILT_IN`) or ``package.module:Class``,
recorded in config.json and built again on resume (a ``module:Class`` only with
``--trust-code``, since it imports code).

A callback whose state matters for what happens later (a patience counter, a best value)
returns it from :meth:`Callback.state` as JSON; it is saved in every checkpoint the run can
resume from and given back to :meth:`Callback.load_state`, so that a resumed run stays
exactly the uninterrupted one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rlx.checkpoint import is_count, is_number
from rlx.errors import CheckpointError, ConfigError

if TYPE_CHECKING:
    from rlx.evaluation import EvalResult, TrainResult
    from rlx.protocols import Iteration, Trainer


class Callback:
    """The events of a run, in the order it sees them; each does nothing by default.

    ``on_iteration`` and ``on_evaluation`` may return a stop reason (a non-empty string):
    the run then stops after the iteration with that ``stop_reason``, its final checkpoint
    is written and ``on_stop`` and ``on_end`` follow as for any other stop. An exception
    raised by a user's callback stops the run as a :class:`~rlx.errors.TrainingError` naming
    the callback and the last good checkpoint.
    """

    #: Where :meth:`state` goes in a checkpoint's trainer state (default: the class name).
    key: ClassVar[str] = ""
    # A built-in callback also declares ``trust_arguments``: which of its arguments name code,
    # an environment or a destination (:data:`rlx.trust.KINDS`), so that a value recorded in
    # a run directory goes through the trust check before the callback is built again.

    def on_start(self, trainer: Trainer) -> None:
        """Training is about to start (or go on, after a resume); the run directory exists."""

    def on_iteration(self, trainer: Trainer, iteration: Iteration) -> str | None:
        """After every learning iteration, the trainer's counters updated."""
        return None

    def on_evaluation(self, trainer: Trainer, result: EvalResult) -> str | None:
        """After every evaluation of the greedy policy, the final one included."""
        return None

    def on_checkpoint(self, trainer: Trainer, path: Path) -> None:
        """After every checkpoint written (periodic, ``best/`` and ``final/``)."""

    def on_stop(self, trainer: Trainer, reason: str) -> None:
        """Training stopped (``final/`` is written): the last rows and the final evaluation."""

    def on_end(self, trainer: Trainer, result: TrainResult | None) -> None:
        """The run ended: ``result``, or None when it failed. Always called once started."""

    def state(self) -> dict[str, Any] | None:
        """JSON state that exact resume needs, or None for none."""
        return None

    def load_state(self, state: dict[str, Any]) -> None:
        """Take back what :meth:`state` returned (a checkpoint's copy: check it)."""

    @property
    def name(self) -> str:
        """The callback's name: :attr:`key`, or the class name. It keys :meth:`state` in a
        checkpoint and names the callback in messages."""
        return self.key or type(self).__name__


class CallbackList:
    """The callbacks of a run, called as the trainer meets each event: every callback that
    overrides the event, in order (found once per event). The trainer's own callbacks
    (``own``) raise their errors as they are; a user's callback that raises stops the run as
    one :class:`~rlx.errors.TrainingError` naming it and the last good checkpoint."""

    def __init__(self, callbacks: Sequence[Callback], own: Sequence[Callback] = ()) -> None:
        self.callbacks = list(callbacks)
        self.own = list(own)
        self.started: list[Callback] = []
        self._hooks: dict[str, list[tuple[Callback, Any]]] = {}

    def start(self, trainer: Trainer) -> None:
        """``on_start`` for every callback, in order; :meth:`end` ends those that started."""
        for callback in self.callbacks:
            self.started.append(callback)
            self._call(trainer, callback, "on_start")

    def dispatch(self, trainer: Trainer, event: str, *args: Any) -> str:
        """Call ``event``; the first stop reason a callback returned, or ""."""
        hooks = self._hooks.get(event)
        if hooks is None:
            base = getattr(Callback, event)
            hooks = [
                (callback, getattr(callback, event))
                for callback in self.callbacks
                if getattr(type(callback), event) is not base
            ]
            self._hooks[event] = hooks
        reason = ""
        for callback, method in hooks:
            try:
                said = method(trainer, *args)
            except Exception as exc:
                self._failed(trainer, callback, event, exc)
            if said and not reason:
                reason = str(said)
        return reason

    def end(self, trainer: Trainer, result: TrainResult | None) -> None:
        """``on_end`` for every started callback, once, the last started first; after a
        failure (``result`` None) none may hide it, and a failing one is only reported."""
        while self.started:
            callback = self.started.pop()
            try:
                self._call(trainer, callback, "on_end", result)
            except Exception as exc:
                if result is not None:
                    raise
                trainer.warn(f"{callback.name} failed to finish: {exc}")

    def _call(self, trainer: Trainer, callback: Callback, event: str, *args: Any) -> Any:
        try:
            return getattr(callback, event)(trainer, *args)
        except Exception as exc:
            self._failed(trainer, callback, event, exc)

    def _failed(self, trainer: Trainer, callback: Callback, event: str, exc: Exception) -> None:
        from rlx.errors import TrainingError
        from rlx.runs import last_good

        if type(callback).__module__ == "rlx.callbacks.standard" or callback in self.own:
            raise exc
        raise TrainingError(
            f"callback {callback.name} failed in {event}: {exc}. {last_good(trainer.run)}"
        ) from exc


# -- the callbacks users reach for ------------------------------------------------------------


class StopAtReturn(Callback):
    """Stop as soon as an evaluation's mean return reaches ``threshold`` (``stop_reason``
    ``"target"``; the trainer setting ``target_return`` adds this callback)."""

    key = "stop-at-return"
    trust_arguments: ClassVar[dict[str, str]] = {}

    def __init__(self, threshold: float) -> None:
        if not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
            raise ConfigError(
                f"stop-at-return: threshold must be a finite number, got {threshold!r}"
            )
        self.threshold = float(threshold)

    def on_evaluation(self, trainer: Trainer, result: EvalResult) -> str | None:
        return "target" if result.mean_return >= self.threshold else None


class StopOnPlateau(Callback):
    """Stop when ``patience`` evaluations in a row have not improved on the best mean return
    by more than ``min_delta`` (``stop_reason`` ``"plateau"``)."""

    key = "stop-on-plateau"
    trust_arguments: ClassVar[dict[str, str]] = {}

    def __init__(self, patience: int = 5, min_delta: float = 0.0) -> None:
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ConfigError(
                f"stop-on-plateau: patience must be an integer >= 1, got {patience!r}"
            )
        if not isinstance(min_delta, (int, float)) or not min_delta >= 0:
            raise ConfigError(f"stop-on-plateau: min_delta must be >= 0, got {min_delta!r}")
        self.patience, self.min_delta = patience, float(min_delta)
        self.best: float | None = None
        self.stale = 0

    def on_evaluation(self, trainer: Trainer, result: EvalResult) -> str | None:
        if self.best is None or result.mean_return > self.best + self.min_delta:
            self.best, self.stale = result.mean_return, 0
            return None
        self.stale += 1
        return "plateau" if self.stale >= self.patience else None

    def state(self) -> dict[str, Any]:
        return {"best": self.best, "stale": self.stale}

    def load_state(self, state: dict[str, Any]) -> None:
        best, stale = state.get("best"), state.get("stale")
        if (best is not None and not is_number(best)) or not is_count(stale):
            raise CheckpointError(f"stop-on-plateau state {state!r} is not its own")
        self.best = None if best is None else float(best)
        self.stale = int(stale)  # type: ignore[arg-type]  # checked by _is_count above


class CheckpointEvery(Callback):
    """A checkpoint (policy and resume state) every ``steps`` environment steps in
    ``RUN_DIR/checkpoints/<steps>`` of a recorded run, the newest ``keep`` kept (the trainer setting
    ``checkpoint_every`` adds one; a second with other ``steps`` checkpoints more often)."""

    key = "checkpoint-every"
    trust_arguments: ClassVar[dict[str, str]] = {}

    def __init__(self, steps: int, keep: int = 3) -> None:
        for name, value in (("steps", steps), ("keep", keep)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"checkpoint-every: {name} must be an integer >= 1, got {value!r}"
                )
        self.steps, self.keep = steps, keep
        self._next = math.inf

    def on_start(self, trainer: Trainer) -> None:
        if trainer.run is not None:  # a run without a directory writes nothing
            self._next = next_multiple(self.steps, trainer.env_steps)

    def on_iteration(self, trainer: Trainer, iteration: Iteration) -> None:
        if trainer.env_steps >= self._next:
            assert trainer.run is not None
            trainer.save(trainer.run.checkpoint_path(trainer.env_steps))
            trainer.run.prune_checkpoints(self.keep)
            self._next = next_multiple(self.steps, trainer.env_steps)


class EvaluateOn(Callback):
    """Evaluate the greedy policy on another environment ``env`` (its own keyword arguments
    ``env_kwargs``; the run's evaluation wrappers) every ``every`` environment steps (by
    default with each of the trainer's evaluations), logged as ``eval/<env>/return_mean`` and
    ``eval/<env>/return_std``."""

    key = "evaluate-on"
    trust_arguments: ClassVar[dict[str, str]] = {"env": "env", "env_kwargs": "env_kwargs"}

    def __init__(
        self,
        env: str,
        every: int | None = None,
        episodes: int = 10,
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(env, str) or not env:
            raise ConfigError(f"evaluate-on: env must be an environment id, got {env!r}")
        if every is not None and (
            isinstance(every, bool) or not isinstance(every, int) or every < 1
        ):
            raise ConfigError(f"evaluate-on: every must be an integer >= 1, got {every!r}")
        if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
            raise ConfigError(f"evaluate-on: episodes must be an integer >= 1, got {episodes!r}")
        self.env_id, self.every, self.episodes = env, every, episodes
        self.env_kwargs = dict(env_kwargs or {})
        self._env: Any = None
        self._next = math.inf

    def on_start(self, trainer: Trainer) -> None:
        from rlx.api import make_env

        wrappers = trainer.identity.wrappers if trainer.identity is not None else ()
        self._env = make_env(self.env_id, wrappers=wrappers, training=False, **self.env_kwargs)
        if self.every is not None:
            self._next = next_multiple(self.every, trainer.env_steps)

    def on_iteration(self, trainer: Trainer, iteration: Iteration) -> None:
        if trainer.env_steps >= self._next:
            self._evaluate(trainer)
            self._next = next_multiple(self.every or 1, trainer.env_steps)

    def on_evaluation(self, trainer: Trainer, result: EvalResult) -> None:
        if self.every is None:
            self._evaluate(trainer)

    def _evaluate(self, trainer: Trainer) -> None:
        from rlx.evaluation import evaluate

        seed = trainer.identity.seed if trainer.identity is not None else 0
        result = evaluate(trainer.agent, self._env, self.episodes, seed=seed)
        prefix = f"eval/{self.env_id}"
        trainer.log(
            {f"{prefix}/return_mean": result.mean_return, f"{prefix}/return_std": result.std_return}
        )

    def on_end(self, trainer: Trainer, result: TrainResult | None) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


class LogMetrics(Callback):
    """Log what ``metrics(trainer)`` returns (a mapping of names to numbers) with every row of
    metrics.csv, under ``custom/`` (Python only: a function cannot be given on the command
    line)."""

    trust_arguments: ClassVar[dict[str, str]] = {"metrics": "code"}

    def __init__(self, metrics: Callable[[Trainer], Mapping[str, float]]) -> None:
        if not callable(metrics):
            raise ConfigError("LogMetrics takes a function of the trainer returning metrics")
        self.metrics = metrics
        self._next = math.inf

    def on_start(self, trainer: Trainer) -> None:
        self._next = next_multiple(trainer.config.log_every, trainer.env_steps)

    def on_iteration(self, trainer: Trainer, iteration: Iteration) -> None:
        if trainer.env_steps >= self._next:
            values = self.metrics(trainer)
            trainer.log({f"custom/{key}": float(value) for key, value in values.items()})
            self._next = next_multiple(trainer.config.log_every, trainer.env_steps)


#: The callbacks ``rlx run --callback NAME,key=value`` knows by name.
BUILT_IN: dict[str, type[Callback]] = {
    cls.key: cls for cls in (StopAtReturn, StopOnPlateau, CheckpointEvery, EvaluateOn)
}


def normalize(entries: Any) -> tuple[dict[str, Any], ...]:
    """Callback entries as ``{"name", "kwargs"}`` dicts (``"name,key=value"`` strings parsed),
    as the command line, a TOML ``[trainer] callbacks`` list or config.json gives them."""
    from rlx.wrappers import parse

    if isinstance(entries, (str, Mapping)):
        entries = [entries]
    result = []
    for entry in entries or ():
        if isinstance(entry, str):
            entry = parse(entry, option="--callback")
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ConfigError(
                f"a callback is 'name,key=value,...' or a table with name and kwargs; got {entry!r}"
            )
        kwargs = entry.get("kwargs") or {}
        if not isinstance(kwargs, Mapping):
            raise ConfigError(f"callback {entry['name']}: kwargs must be a table, got {kwargs!r}")
        result.append({"name": entry["name"], "kwargs": dict(kwargs)})
    return tuple(result)


def build(entry: Mapping[str, Any]) -> Callback:
    """The callback an entry names: a built-in name or ``package.module:Class`` (imported:
    check trust first where the entry comes from saved files)."""
    from rlx.config import load_setting
    from rlx.errors import did_you_mean

    name, kwargs = entry["name"], entry["kwargs"]
    if ":" in name:
        cls = load_setting(name, "callback")
        if not (isinstance(cls, type) and issubclass(cls, Callback)):
            raise ConfigError(f"callback {name!r} is not a subclass of rlx.callbacks.Callback")
    elif name in BUILT_IN:
        cls = BUILT_IN[name]
    else:
        raise ConfigError(
            f"unknown callback {name!r}.{did_you_mean(name, BUILT_IN)} Built-in: "
            f"{', '.join(BUILT_IN)}; or give package.module:Class"
        )
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except TypeError as exc:
        raise ConfigError(f"callback {name}: {exc}") from exc


def next_multiple(every: int, last: int) -> float:
    """The first multiple of ``every`` after step ``last`` (derived: resume needs no state)."""
    return (last // every + 1) * every if every else math.inf
