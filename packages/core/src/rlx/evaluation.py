"""Deterministic evaluation of a policy on fixed environment seeds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


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
    agent: Any,
    env: Any,
    episodes: int = 10,
    seed: int = 0,
    deterministic: bool = True,
    max_episode_steps: int = 1_000_000,
    on_step: Callable[[int, int], None] | None = None,
) -> EvalResult:
    """Play ``episodes`` episodes with ``agent.act`` on ``env``; training state is not touched.

    Each episode is determined by its seed: the environment is reset with it, and an agent
    that acts at random (``deterministic=False``, or a random policy) and has the optional
    hook :class:`~rlx.protocols.SeedsEvaluation` is reseeded with it too.
    ``max_episode_steps`` guards against environments without a time limit.
    ``on_step(episode, step)``, when given, is called after each reset (step 0) and after
    each step (:mod:`rlx.video` renders a frame there).
    """
    from rlx.protocols import SeedsEvaluation

    seed_agent = agent.seed_evaluation if isinstance(agent, SeedsEvaluation) else None
    returns, lengths = [], []
    for episode, env_seed in enumerate(evaluation_seeds(seed, episodes)):
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
    return EvalResult(tuple(returns), tuple(lengths))
