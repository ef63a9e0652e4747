"""The contracts between rlx-core and the algorithm families.

A family implements one learning iteration (:meth:`Agent.step`: one episode, one rollout
and update, one ES generation, one bandit round); the generic :class:`rlx.trainer.Trainer`
owns everything around it (budgets, progress, evaluation, logging, checkpoints, resume).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np


@dataclass
class Iteration:
    """What one call of :meth:`Agent.step` did.

    ``env_steps`` counts environment transitions consumed (summed over vector
    environments and population members); ``episode_returns`` and ``episode_lengths``
    list the training episodes that finished during the iteration; ``metrics`` holds
    scalar diagnostics (losses, epsilon, ...) that the trainer logs as they are.
    """

    env_steps: int
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class AgentState:
    """Everything needed to restore an agent exactly: arrays go to safetensors, ``meta`` to JSON.

    ``meta`` must hold only JSON values (numbers, strings, lists, dicts, booleans, None).
    """

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Agent(Protocol):
    """A learning agent bound to one environment.

    Constructed as ``AgentClass(env, config, seed)`` where ``config`` is an instance of the
    class attribute ``Config`` (a dataclass of hyperparameters, see :mod:`rlx.config`).
    Agents that need several copies of the environment build them from ``env.spec``.
    An agent whose ``act`` draws random numbers may define ``seed_evaluation(seed)``;
    :func:`rlx.evaluate` calls it at the start of each evaluation episode.
    """

    Config: ClassVar[type]
    config: Any
    env: Any

    def step(self) -> Iteration:
        """Run one learning iteration; must leave the agent at a point where it can be saved."""
        ...

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """Choose an action for one (unbatched) observation."""
        ...

    def state_dict(self) -> AgentState:
        """Learned parameters, optimiser and RNG state (including the environment's RNG)."""
        ...

    def load_state_dict(self, state: AgentState) -> None:
        """Restore what :meth:`state_dict` returned; later steps then match an uninterrupted run."""
        ...


@runtime_checkable
class Trainer(Protocol):
    """Drives an agent under a budget; see :class:`rlx.trainer.Trainer`."""

    def fit(self) -> Any:
        """Train until a budget or the target return is reached; return a summary."""
        ...


@runtime_checkable
class Buffer(Protocol):
    """Storage of transitions (replay or rollout buffers)."""

    def add(self, **transition: np.ndarray) -> None:
        """Store one transition (or one batch of them, one row per vector environment)."""
        ...

    def sample(self, batch_size: int) -> Mapping[str, np.ndarray]:
        """``batch_size`` transitions; each field is an array with leading axis ``batch_size``."""
        ...

    def __len__(self) -> int: ...


@runtime_checkable
class Bandit(Protocol):
    """A (contextual) bandit problem with exact regret.

    Each round: read :meth:`context` (shape ``(context_dim,)``; a multi-armed bandit
    returns the one-hot index of the bandit played, ``[1.0]`` when there is only one),
    then :meth:`pull` one of ``n_arms`` arms, which returns the reward and moves to the
    next round. :meth:`optimal_reward` is the expected reward of the best arm for the
    current context, so regret is exact.
    """

    n_arms: int
    context_dim: int

    def context(self) -> np.ndarray: ...

    def pull(self, action: int) -> float: ...

    def optimal_reward(self) -> float: ...


@runtime_checkable
class BanditAgent(Protocol):
    """Chooses arms from contexts and learns from the rewards."""

    def select(self, context: np.ndarray) -> int:
        """Choose an arm for this context."""
        ...

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        """Learn from the reward of the chosen arm."""
        ...
