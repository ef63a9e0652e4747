"""Deterministic evaluation of a policy on fixed environment seeds, on one environment or a
gymnasium vector environment."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rlx.protocols import Agent


@dataclass(frozen=True)
class EvalResult:
    """Returns and lengths of the evaluation episodes, and their summary."""

    returns: tuple[float, ...]
    lengths: tuple[int, ...]

    @property
    def episodes(self) -> int:
        return len(self.returns)

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std_return(self) -> float:
        return float(np.std(self.returns))

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths))

    def to_dict(self) -> dict[str, Any]:
        return {
            "mean_return": self.mean_return,
            "std_return": self.std_return,
            "mean_length": self.mean_length,
            "episodes": self.episodes,
            **{key: list(value) for key, value in asdict(self).items()},
        }


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


def evaluate(
    agent: Agent,
    env: Any,
    episodes: int = 10,
    seed: int = 0,
    deterministic: bool = True,
    max_episode_steps: int = 1_000_000,
    on_step: Callable[[int, int], None] | None = None,
    progress: bool = False,
) -> EvalResult:
    """Play ``episodes`` episodes with ``agent.act`` on ``env``; training state is not touched.

    Each episode is determined by its seed (:func:`evaluation_seeds`): the environment is
    reset with it, and an agent that acts at random (``deterministic=False``, or a random
    policy) and has the optional hook :class:`~rlx.protocols.SeedsEvaluation` is reseeded
    with it too. ``max_episode_steps`` guards against environments without a time limit.
    ``on_step(episode, step)``, when given, is called after each reset (step 0) and after
    each step (:mod:`rlx.video` renders a frame there; one environment only).

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

    ``progress=True`` shows a progress bar of the episodes done on stderr when stderr is a
    terminal (nothing otherwise).
    """
    import gymnasium

    from rlx.errors import ConfigError
    from rlx.protocols import SeedsEvaluation

    seed_agent = agent.seed_evaluation if isinstance(agent, SeedsEvaluation) else None
    seeds = evaluation_seeds(seed, episodes)
    if isinstance(env, gymnasium.vector.VectorEnv):
        if on_step is not None:
            raise ConfigError("on_step follows one environment: evaluate on a single one")
        with _progress_bar(progress, episodes) as advance:
            return _evaluate_vector(
                agent, env, seeds, deterministic, max_episode_steps, seed_agent, advance
            )
    returns, lengths = [], []
    with _progress_bar(progress, episodes) as advance:
        for episode, env_seed in enumerate(seeds):
            observation, _ = env.reset(seed=env_seed)
            if seed_agent is not None:
                seed_agent(env_seed)
            total, length, done = 0.0, 0, False
            if on_step is not None:
                on_step(episode, length)
            while not done and length < max_episode_steps:
                action = agent.act(observation, deterministic=deterministic)
                observation, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                length += 1
                done = terminated or truncated
                if on_step is not None:
                    on_step(episode, length)
            returns.append(total)
            lengths.append(length)
            advance()
    return EvalResult(tuple(returns), tuple(lengths))


def _evaluate_vector(
    agent: Any,
    env: Any,
    seeds: list[int],
    deterministic: bool,
    max_episode_steps: int,
    seed_agent: Callable[[int], None] | None,
    advance: Callable[[], None],
) -> EvalResult:
    """:func:`evaluate` on a vector environment: rounds of one episode per sub-environment."""
    import gymnasium

    k = int(env.num_envs)
    per_env_seeds = isinstance(
        env.unwrapped, (gymnasium.vector.SyncVectorEnv, gymnasium.vector.AsyncVectorEnv)
    )
    returns, lengths = [0.0] * len(seeds), [0] * len(seeds)
    for first in range(0, len(seeds), k):
        count = min(k, len(seeds) - first)
        round_seeds = seeds[first : first + count]
        if per_env_seeds:
            observations, _ = env.reset(seed=[*round_seeds, *[None] * (k - count)])
        else:
            observations, _ = env.reset(seed=round_seeds[0])
        if seed_agent is not None:
            seed_agent(round_seeds[0])
        playing = np.zeros(k, dtype=bool)
        playing[:count] = True
        totals, steps = np.zeros(k), np.zeros(k, dtype=np.int64)
        while playing.any():
            actions = agent.act(observations, deterministic=deterministic)
            observations, rewards, terminated, truncated, _ = env.step(actions)
            totals[playing] += np.asarray(rewards, dtype=np.float64)[playing]
            steps[playing] += 1
            ended = playing & (
                np.asarray(terminated) | np.asarray(truncated) | (steps >= max_episode_steps)
            )
            for index in np.flatnonzero(ended):
                returns[first + index] = float(totals[index])
                lengths[first + index] = int(steps[index])
                advance()
            playing &= ~ended
    return EvalResult(tuple(returns), tuple(lengths))


@contextlib.contextmanager
def _progress_bar(show: bool, episodes: int) -> Iterator[Callable[[], None]]:
    """``advance()``, which moves a rich progress bar of ``episodes`` on stderr when ``show``
    and stderr is a terminal, and does nothing otherwise."""
    if not (show and sys.stderr.isatty()):
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = ("evaluating", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("episodes", total=episodes)
        yield lambda: bar.advance(task)


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
