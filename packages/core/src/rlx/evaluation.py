"""Deterministic evaluation of a policy on fixed environment seeds, on one environment or a
gymnasium vector environment."""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rlx.protocols import Agent


#: The steps after which an evaluation episode is cut short (reported truncated) on an
#: environment with no time limit of its own: the Arcade Learning Environment's limit of
#: 108,000 frames (30 minutes of play) at a frame skip of 4 (Machado et al. 2018), so that a
#: policy that never ends its episode (a greedy one that never serves the ball again) cannot
#: hold an evaluation forever, and episodes of environments with a time limit are untouched.
DEFAULT_MAX_EPISODE_STEPS = 27_000

#: ``report(episodes_done, steps)``: an evaluation's progress, the steps counted over all its
#: episodes so far; called when an episode ends and every :data:`REPORT_EVERY` steps.
EvalProgress = Callable[[int, int], None]

#: Steps between two progress reports within episodes.
REPORT_EVERY = 256


@dataclass(frozen=True)
class EvalResult:
    """Returns and lengths of the evaluation episodes, and their summary; ``truncated`` tells
    which episodes a time limit (the environment's, or the evaluation's step cap) ended."""

    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    truncated: tuple[bool, ...] = ()

    @property
    def episodes(self) -> int:
        """The number of evaluation episodes."""
        return len(self.returns)

    @property
    def mean_return(self) -> float:
        """The mean return of the episodes."""
        return float(np.mean(self.returns))

    @property
    def std_return(self) -> float:
        """The standard deviation of the returns (over the episodes, ``ddof=0``)."""
        return float(np.std(self.returns))

    @property
    def mean_length(self) -> float:
        """The mean length of the episodes, in steps."""
        return float(np.mean(self.lengths))

    def to_dict(self) -> dict[str, Any]:
        """The summary (``mean_return``, ``std_return``, ``mean_length``, ``episodes``) and the
        ``returns``, ``lengths`` and ``truncated`` lists, as JSON values."""
        return {
            "mean_return": self.mean_return,
            "std_return": self.std_return,
            "mean_length": self.mean_length,
            "episodes": self.episodes,
            **{key: list(value) for key, value in asdict(self).items()},
        }


def has_time_limit(env: Any) -> bool:
    """Whether ``env`` (or the first environment of a vector one) ends its episodes by itself
    after a number of steps: a ``TimeLimit`` wrapper, a spec's ``max_episode_steps``, or the
    Arcade Learning Environment's own frame limit."""
    import gymnasium

    single = env
    if isinstance(env, gymnasium.vector.VectorEnv):
        envs = getattr(env.unwrapped, "envs", None)  # a SyncVectorEnv's own environments
        single = envs[0] if envs else env.unwrapped
    layer = single
    while layer is not None:
        if isinstance(layer, gymnasium.wrappers.TimeLimit):
            return True
        layer = getattr(layer, "env", None)
    spec = getattr(single, "spec", None)
    if spec is None:
        return False
    return spec.max_episode_steps is not None or bool(spec.kwargs.get("max_num_frames_per_episode"))


def episode_step_cap(env: Any, max_episode_steps: int | None) -> int | None:
    """The steps after which :func:`evaluate` cuts an episode short: ``max_episode_steps`` when
    given; else none on an environment with a time limit, and :data:`DEFAULT_MAX_EPISODE_STEPS`
    on one without."""
    if max_episode_steps is not None:
        if max_episode_steps < 1:
            from rlx.errors import ConfigError

            raise ConfigError(f"max_episode_steps must be at least 1, got {max_episode_steps}")
        return max_episode_steps
    return None if has_time_limit(env) else DEFAULT_MAX_EPISODE_STEPS


def _warn_cut_short(env: Any, result: EvalResult, cap: int) -> None:
    """One warning (per environment) that the default cap cut episodes short."""
    if not any(
        cut and length >= cap for cut, length in zip(result.truncated, result.lengths, strict=True)
    ):
        return
    name = getattr(getattr(env, "spec", None), "id", None) or type(env.unwrapped).__name__
    warnings.warn(
        f"evaluation on {name}, an environment without a time limit: episodes that did not "
        f"end within {cap:,} steps were cut short (reported truncated); set max_episode_steps "
        "(the trainer's eval_max_episode_steps, rlx eval --max-episode-steps) to choose "
        "another cap",
        UserWarning,
        stacklevel=3,
    )


def evaluation_seeds(seed: int, episodes: int) -> list[int]:
    """Environment seeds for ``episodes`` evaluation episodes, fixed for a run's seed.

    They are drawn apart from the training seed so that evaluation never replays the
    exact episodes the agent was trained on, and are the same at every evaluation so that
    successive evaluations are comparable.
    """
    from rlx.seeding import check_seed

    check_seed(seed, "evaluation seed")
    state = np.random.SeedSequence([seed, 0x5EED]).generate_state(episodes, dtype=np.uint32)
    return [int(s) for s in state]


#: The key of an environment's info that holds its valid actions when it has no
#: ``action_masks()`` method (PettingZoo's convention, and many gymnasium environments').
INFO_MASK_KEY = "action_mask"


def action_masks(env: Any, info: Any = None, ignored: Any = None) -> np.ndarray | None:
    """The valid actions of ``env`` now, as a bool array (one row per copy of a gymnasium
    vector environment), or None when the environment gives none.

    They come from the environment's ``action_masks()`` method (sb3-contrib's convention,
    reached through wrappers; ``call("action_masks")`` on a vector environment) when it has
    one, else from ``info["action_mask"]`` (:data:`INFO_MASK_KEY`), where ``info`` is what the
    environment's latest ``reset`` or ``step`` returned: on a vector environment gymnasium's
    layout, the copies' masks stacked and ``info["_action_mask"]`` flagging the copies that gave
    one. The latest info always describes the observation the policy acts on next: under
    NEXT_STEP autoreset the step that ends an episode returns its final observation and info
    and the next step's info is the reset's; under SAME_STEP the ending step returns the new
    episode's first observation and reset info.

    ``ignored`` (a vector environment's, a bool per copy): the copies whose next action the
    environment ignores (a NEXT_STEP autoreset, an evaluation's finished episode). They get
    every action valid, whatever their source says (a final state may have no valid action),
    and their info need not hold a mask; any other copy whose info has none is one
    :class:`~rlx.errors.SpaceError`.
    """
    import gymnasium

    vector = isinstance(env, gymnasium.vector.VectorEnv)
    masks = _method_masks(env, vector) if _has_masks_method(env, vector) else None
    if masks is None:
        masks = _info_masks(info, int(env.num_envs) if vector else None, ignored)
    if masks is not None and ignored is not None and np.any(ignored):
        masks = masks.reshape(len(ignored), -1).copy()
        masks[np.asarray(ignored, dtype=bool)] = True
    return masks


#: Whether each asynchronous vector environment's copies have an ``action_masks()`` method,
#: found once on a copy of its own: asking its workers for a method they lack ends them.
_async_has_method: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _has_masks_method(env: Any, vector: bool) -> bool:
    """Whether ``env`` (a vector environment: its copies) has an ``action_masks()`` method."""
    import gymnasium

    def has(single: Any) -> bool:
        try:
            return callable(single.get_wrapper_attr("action_masks"))
        except AttributeError:
            return False

    if not vector:
        return has(env)
    base = env.unwrapped
    if isinstance(base, gymnasium.vector.SyncVectorEnv):
        return has(base.envs[0])
    if isinstance(base, gymnasium.vector.AsyncVectorEnv):
        if base not in _async_has_method:
            probe = base.env_fns[0]()
            try:
                _async_has_method[base] = has(probe)
            finally:
                probe.close()
        return _async_has_method[base]
    return callable(getattr(env, "call", None))  # another vector environment: ask it


def _method_masks(env: Any, vector: bool) -> np.ndarray | None:
    """The masks the ``action_masks()`` method of ``env`` (of each copy) returns, or None."""
    try:
        if vector:
            return np.asarray(env.call("action_masks"), dtype=bool)
        return np.asarray(env.get_wrapper_attr("action_masks")(), dtype=bool)
    except AttributeError:
        return None


def _info_masks(info: Any, copies: int | None, ignored: Any) -> np.ndarray | None:
    """The masks in ``info`` (:func:`action_masks`): ``copies`` rows of a vector environment's
    info, or one environment's (``copies`` None); None when it holds none."""
    if not isinstance(info, dict) or INFO_MASK_KEY not in info:
        return None
    value = info[INFO_MASK_KEY]
    if copies is None:
        return np.asarray(value).astype(bool, copy=False)
    flags = np.asarray(info.get(f"_{INFO_MASK_KEY}", np.ones(copies, bool)), dtype=bool)
    skip = np.zeros(copies, bool) if ignored is None else np.asarray(ignored, dtype=bool)
    missing = ~flags & ~skip
    if missing.any():
        from rlx.errors import SpaceError

        raise SpaceError(
            f"copy {int(np.argmax(missing))} of the vector environment returned an info without "
            f"{INFO_MASK_KEY!r} while the others have one: an environment that gives its valid "
            "actions in its info gives them after every reset and step"
        )
    value = np.asarray(value)
    rows = [
        np.ones(0, bool) if not flag else np.asarray(value[i]).reshape(-1).astype(bool)
        for i, flag in enumerate(flags)
    ]
    width = max(len(row) for row in rows)
    return np.stack([row if len(row) else np.ones(width, bool) for row in rows])


def evaluate(
    agent: Agent,
    env: Any,
    episodes: int = 10,
    seed: int = 0,
    deterministic: bool = True,
    max_episode_steps: int | None = None,
    on_step: Callable[[int, int], None] | None = None,
    progress: bool | EvalProgress = False,
) -> EvalResult:
    """Play ``episodes`` episodes with ``agent.act`` on ``env``; training state is not touched.

    Each episode is determined by its seed (:func:`evaluation_seeds`): the environment is
    reset with it, and an agent that acts at random (``deterministic=False``, or a random
    policy) and has the optional hook :class:`~rlx.protocols.SeedsEvaluation` is reseeded
    with it too. ``max_episode_steps`` cuts every episode short after that many steps; by
    default an environment with a time limit plays its episodes out and one without is capped
    at :data:`DEFAULT_MAX_EPISODE_STEPS` with a warning (:func:`episode_step_cap`). A cut
    episode is reported truncated. ``on_step(episode, step)``, when given, is called after
    each reset (step 0) and after each step of episode ``episode`` (:mod:`rlx.video` renders
    a frame there); on a vector environment, once per sub-environment still playing its
    episode, in the order of the sub-environments.

    ``env`` may be a gymnasium vector environment of ``k`` copies: the episodes are played
    in rounds of ``k``, one per sub-environment, the agent acting on the batch of their
    observations (one ``act`` call per step). Episode ``i`` is played by sub-environment
    ``i % k`` in round ``i // k``. Seeds: a synchronous or asynchronous vector environment
    (``SyncVectorEnv``, ``AsyncVectorEnv``) resets each sub-environment with the seed the
    episode has on one environment, so a deterministic agent gets exactly the single-env
    returns, in the same order; a vector environment that takes one seed for all its copies
    (gymnasium's own vectorised CartPole) is reset with the round's first episode seed. An
    agent that acts at random is reseeded once per round, with that same seed, so its
    results are reproducible for a given ``k`` but not equal to the single-env ones.
    Sub-environments whose episode ended wait (autoreset, ignored) until the round ends.

    ``progress=True`` shows the episodes done and the steps played on stderr: a progress bar
    on a terminal, else a line per episode once the evaluation has lasted a few seconds. A
    callable ``progress(episodes_done, steps)`` gets the same reports instead (the trainer
    shows them on its own progress bar).
    """
    import gymnasium

    from rlx.protocols import ActsInEpisodes, SeedsEvaluation, TakesActionMasks

    seed_agent: Callable[[int], None] | None = (
        agent.seed_evaluation if isinstance(agent, SeedsEvaluation) else None
    )
    if isinstance(agent, ActsInEpisodes):
        seed_agent = _beginning_episodes(agent, seed_agent)
    masked = agent if isinstance(agent, TakesActionMasks) and agent.takes_action_masks else None

    def act(observation: Any, info: Any, ignored: Any = None) -> Any:
        """The agent's action; one that takes masks gets the environment's (from ``info``, the
        latest reset's or step's, when it has no ``action_masks()`` method)."""
        if masked is None:
            return agent.act(observation, deterministic=deterministic)
        masks = action_masks(env, info, ignored)
        return masked.act(observation, deterministic=deterministic, action_masks=masks)

    seeds = evaluation_seeds(seed, episodes)
    cap = episode_step_cap(env, max_episode_steps)
    limit = cap if cap is not None else sys.maxsize
    if isinstance(env, gymnasium.vector.VectorEnv):
        with _progress_display(progress, episodes) as report:
            result = _evaluate_vector(act, env, seeds, limit, on_step, seed_agent, report)
    else:
        with _progress_display(progress, episodes) as report:
            result = _evaluate_single(act, env, seeds, limit, on_step, seed_agent, report)
    if max_episode_steps is None and cap is not None:
        _warn_cut_short(env, result, cap)
    return result


def _beginning_episodes(
    agent: Any, seed_agent: Callable[[int], None] | None
) -> Callable[[int], None]:
    """What evaluation calls after each reset for an agent that carries state across an
    episode's steps (:class:`~rlx.protocols.ActsInEpisodes`): ``begin_episodes``, then the
    reseeding ``seed_agent`` when there is one."""

    def begin(seed: int) -> None:
        agent.begin_episodes()
        if seed_agent is not None:
            seed_agent(seed)

    return begin


def _evaluate_single(
    act: Callable[..., Any],
    env: Any,
    seeds: list[int],
    max_episode_steps: int,
    on_step: Callable[[int, int], None] | None,
    seed_agent: Callable[[int], None] | None,
    report: EvalProgress,
) -> EvalResult:
    """:func:`evaluate` on one environment, episode after episode; ``act(observation, info)``
    acts."""
    returns, lengths, cut = [], [], []
    played = 0
    for episode, env_seed in enumerate(seeds):
        observation, info = env.reset(seed=env_seed)
        if seed_agent is not None:
            seed_agent(env_seed)
        total, length, terminated, truncated = 0.0, 0, False, False
        if on_step is not None:
            on_step(episode, length)
        while not (terminated or truncated) and length < max_episode_steps:
            action = act(observation, info)
            observation, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            length += 1
            if on_step is not None:
                on_step(episode, length)
            if length % REPORT_EVERY == 0:
                report(episode, played + length)
        played += length
        returns.append(total)
        lengths.append(length)
        cut.append(bool(truncated) or not terminated)
        report(episode + 1, played)
    return EvalResult(tuple(returns), tuple(lengths), tuple(cut))


def _evaluate_vector(
    act: Callable[..., Any],
    env: Any,
    seeds: list[int],
    max_episode_steps: int,
    on_step: Callable[[int, int], None] | None,
    seed_agent: Callable[[int], None] | None,
    report: EvalProgress,
) -> EvalResult:
    """:func:`evaluate` on a vector environment: rounds of one episode per sub-environment;
    ``act(observations, info, ignored)`` acts (``ignored``: the sub-environments that wait)."""
    import gymnasium

    k = int(env.num_envs)
    per_env_seeds = isinstance(
        env.unwrapped, (gymnasium.vector.SyncVectorEnv, gymnasium.vector.AsyncVectorEnv)
    )
    returns, lengths = [0.0] * len(seeds), [0] * len(seeds)
    cut = [False] * len(seeds)
    done_episodes, played = 0, 0
    for first in range(0, len(seeds), k):
        count = min(k, len(seeds) - first)
        round_seeds = seeds[first : first + count]
        if per_env_seeds:
            observations, info = env.reset(seed=[*round_seeds, *[None] * (k - count)])
        else:
            observations, info = env.reset(seed=round_seeds[0])
        if seed_agent is not None:
            seed_agent(round_seeds[0])
        playing = np.zeros(k, dtype=bool)
        playing[:count] = True
        totals, steps = np.zeros(k), np.zeros(k, dtype=np.int64)
        round_steps = 0
        if on_step is not None:
            for copy in range(count):
                on_step(first + copy, 0)
        while playing.any():
            actions = act(observations, info, ~playing)
            observations, rewards, terminated, truncated, info = env.step(actions)
            totals[playing] += np.asarray(rewards, dtype=np.float64)[playing]
            steps[playing] += 1
            if on_step is not None:
                for copy in map(int, np.flatnonzero(playing)):
                    on_step(first + copy, int(steps[copy]))
            terminated = np.asarray(terminated)
            ended = playing & (terminated | np.asarray(truncated) | (steps >= max_episode_steps))
            for index in np.flatnonzero(ended):
                returns[first + index] = float(totals[index])
                lengths[first + index] = int(steps[index])
                cut[first + index] = not bool(terminated[index])
                done_episodes += 1
                report(done_episodes, played + int(steps.sum()))
            playing &= ~ended
            round_steps += 1
            if round_steps % REPORT_EVERY == 0:
                report(done_episodes, played + int(steps.sum()))
        played += int(steps.sum())
    return EvalResult(tuple(returns), tuple(lengths), tuple(cut))


@contextlib.contextmanager
def _progress_display(progress: bool | EvalProgress, episodes: int) -> Iterator[EvalProgress]:
    """``report(episodes_done, steps)`` for :func:`evaluate`: ``progress`` itself when it is
    a callable; with ``True``, a rich progress bar on stderr when it is a terminal, or else a
    line on stderr per episode once the evaluation has run :data:`QUIET_SECONDS`; with
    ``False``, nothing."""
    if callable(progress):
        yield progress
        return
    if not progress:
        yield lambda done, steps: None
        return
    if not sys.stderr.isatty():
        yield _lines_on_stderr(episodes)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        "evaluating",
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("episodes, {task.fields[steps]:,} steps"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("episodes", total=episodes, steps=0)
        yield lambda done, steps: bar.update(task, completed=done, steps=steps)


#: Seconds an evaluation runs before a non-terminal stderr is told about it.
QUIET_SECONDS = 5.0


def _lines_on_stderr(episodes: int) -> EvalProgress:
    """Reports written as lines on stderr (a log file, a pipe): none for an evaluation that
    ends within :data:`QUIET_SECONDS`, then one per finished episode, and one every 30 s of a
    long episode."""
    start = time.perf_counter()
    last_line = [start - 30.0, 0]  # (time, episodes done) of the last line

    def report(done: int, steps: int) -> None:
        now = time.perf_counter()
        if now - start < QUIET_SECONDS:
            return
        if done == last_line[1] and now - last_line[0] < 30.0:
            return
        last_line[:] = [now, done]
        print(
            f"evaluating: {done}/{episodes} episodes, {steps:,} steps, {now - start:.0f} s",
            file=sys.stderr,
            flush=True,
        )

    return report


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
        """The result as JSON values: the final evaluation's :meth:`EvalResult.to_dict`, the run
        directory as a string."""
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
