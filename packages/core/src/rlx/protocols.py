"""The contracts between rlx-core and the algorithm families.

A family implements one learning iteration (:meth:`Agent.step`: one episode, one rollout
and update, one ES generation, one bandit round); the generic :class:`rlx.trainer.Trainer`
owns everything around it (budgets, progress, evaluation, logging, checkpoints, resume).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np


@dataclass
class Iteration:
    """What one call of :meth:`Agent.step` did.

    ``env_steps`` counts environment transitions consumed (summed over vector
    environments and population members); ``episode_returns`` and ``episode_lengths``
    list the training episodes that finished during the iteration; ``metrics`` holds
    scalar diagnostics (losses, epsilon, ...) that the trainer logs as they are.
    ``episode_infos``, one per finished episode when given, holds the numbers of each
    episode's final ``info`` (:func:`rlx.vector.info_numbers`), from which the trainer logs
    the success rate and the ``info_keywords`` setting's keys; when it is not given, it is
    taken from ``episode_returns`` where that is a :class:`rlx.vector.EpisodeReturns`
    (what :meth:`rlx.vector.VectorRunner.pop_finished` returns), so that every agent built
    on a vector runner reports them.
    """

    env_steps: int
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    episode_infos: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.episode_infos:
            self.episode_infos = list(getattr(self.episode_returns, "infos", ()))


@dataclass
class AgentState:
    """One part of an agent's state: arrays go to safetensors, ``meta`` to JSON.

    An agent has two parts (see :class:`Agent`): its policy, and what exact resume needs on
    top. ``meta`` must hold only JSON values (numbers, strings, lists, dicts, booleans, None).
    """

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunIdentity:
    """What a run is: the agent's name, the environment, its keyword arguments, the seed and
    the hyperparameters. With these :func:`rlx.make` rebuilds the same agent.

    ``agent`` is a registered name or a ``"module:Class"`` target; ``env`` a gymnasium id;
    ``wrappers`` the run's environment wrappers as given (see :mod:`rlx.wrappers`).
    ``family`` and ``distribution`` say where the agent came from (informational).
    ``spaces`` records the environment's observation and action spaces as JSON
    (``{"observation": ..., "action": ...}``, see :mod:`rlx.spaces`; None when they have no
    JSON form or the record predates it): ``rlx.load(path, make_env=False)`` builds the agent
    from them. It is derived from the environment, so identities compare without it.
    """

    agent: str
    env: str
    seed: int = 0
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    family: str = ""
    distribution: str = ""
    wrappers: tuple[Mapping[str, Any], ...] = ()
    spaces: Mapping[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "env_kwargs", MappingProxyType(dict(self.env_kwargs)))
        object.__setattr__(self, "hyperparameters", MappingProxyType(dict(self.hyperparameters)))
        object.__setattr__(
            self, "wrappers", tuple(MappingProxyType(dict(entry)) for entry in self.wrappers)
        )
        if self.spaces is not None:
            object.__setattr__(self, "spaces", MappingProxyType(dict(self.spaces)))

    def to_json(self) -> dict[str, Any]:
        """The identity as JSON values, as config.json and checkpoints record it (``spaces`` only
        when known)."""
        return {
            "agent": self.agent,
            "env": self.env,
            "seed": self.seed,
            "env_kwargs": dict(self.env_kwargs),
            "hyperparameters": dict(self.hyperparameters),
            "family": self.family,
            "distribution": self.distribution,
            "wrappers": [
                {**entry, "kwargs": dict(entry.get("kwargs") or {})} for entry in self.wrappers
            ],
            **({"spaces": dict(self.spaces)} if self.spaces is not None else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunIdentity:
        """The identity that :meth:`to_json` wrote; missing optional fields take their defaults."""
        return cls(
            agent=str(data["agent"]),
            env=str(data["env"]),
            seed=int(data["seed"]),
            env_kwargs=dict(data.get("env_kwargs") or {}),
            hyperparameters=dict(data.get("hyperparameters") or {}),
            family=str(data.get("family", "")),
            distribution=str(data.get("distribution", "")),
            wrappers=tuple(data.get("wrappers") or ()),
            spaces=dict(data["spaces"]) if data.get("spaces") is not None else None,
        )


@runtime_checkable
class Agent(Protocol):
    """A learning agent bound to one environment.

    Constructed as ``AgentClass(env, config, seed)`` where ``config`` is an instance of the
    class attribute ``Config`` (a dataclass of hyperparameters, see :mod:`rlx.config`).
    Agents that need several copies of the environment build them from ``env.spec``.

    Its state has two parts. The policy (:meth:`policy_state`) is what acting needs:
    networks, tables, observation normalisers; ``best/`` checkpoints and evaluation use it
    alone. The resume part (:meth:`resume_state`) is what exact resume needs on top:
    optimisers, RNGs, counters, environments in mid-episode, replay buffers. Restoring is
    :meth:`load_policy_state`, then :meth:`load_resume_state`.

    :meth:`save` writes the policy as a checkpoint that :func:`rlx.load` reads; inherit it from
    :class:`rlx.agents.Saveable` (it calls :func:`rlx.save`).

    Optional hooks, each declared below with its signature: :class:`SeedsEvaluation`,
    :class:`ActsInEpisodes`, :class:`TakesActionMasks`, :class:`TakesTrainingBudget`,
    :class:`SuggestsTrainerDefaults` and :class:`Closes`.
    """

    Config: ClassVar[type]
    config: Any
    env: Any
    seed: int

    def step(self) -> Iteration:
        """Run one learning iteration; must leave the agent at a point where it can be saved."""
        ...

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """Choose actions: one action for one observation, a batch for a batch.

        One observation has the shape of the observation space (a Box of shape ``(4,)``:
        ``(4,)``; Discrete: a scalar integer) and gives one action (an ``int`` for Discrete
        actions, an array of the action space's shape otherwise). A batch has one leading axis
        more (``(n, 4)``; Discrete: ``(n,)``; Dict and Tuple: each part) and gives ``n``
        actions with that leading axis (``(n,)`` int64 for Discrete, ``(n, *action_shape)``
        otherwise). Anything else is one :class:`rlx.errors.SpaceError` naming the shapes
        taken and the one given (:func:`rlx.spaces.observation_batch` classifies and checks).
        ``deterministic=False`` explores as the agent's policy does.
        """
        ...

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the policy (what acting needs) and the run identity with the spaces as a
        checkpoint directory at ``path``, which ``rlx.load(path)`` rebuilds; returns ``path``."""
        ...

    def policy_state(self) -> AgentState:
        """What acting needs (networks, tables, observation normalisers)."""
        ...

    def load_policy_state(self, state: AgentState) -> None:
        """Restore what :meth:`policy_state` returned; ``act`` then behaves as it did."""
        ...

    def resume_state(self) -> AgentState:
        """What exact resume needs on top of the policy (optimisers, RNGs, environments)."""
        ...

    def load_resume_state(self, state: AgentState) -> None:
        """Restore :meth:`resume_state` (after :meth:`load_policy_state`); later steps then
        match an uninterrupted run."""
        ...


@runtime_checkable
class ActsInEpisodes(Protocol):
    """An agent whose ``act`` carries something from one step of an episode to the next (a
    recurrent policy's state): :func:`rlx.evaluate` calls ``begin_episodes`` after every reset,
    so that ``act``'s next observations start new episodes."""

    def begin_episodes(self) -> None:
        """Forget what ``act`` carried: the observations it gets next start new episodes."""
        ...


@runtime_checkable
class SeedsEvaluation(Protocol):
    """An agent whose ``act`` draws random numbers: :func:`rlx.evaluate` reseeds it at the
    start of each evaluation episode, so evaluation never moves the training RNG."""

    def seed_evaluation(self, seed: int) -> None:
        """Reseed what ``act`` draws from, so that an evaluation episode depends on ``seed``
        alone."""
        ...


@runtime_checkable
class TakesActionMasks(Protocol):
    """An agent that may act on valid actions only (invalid-action masking): when
    ``takes_action_masks`` is true, :func:`rlx.evaluate` gives ``act`` the environment's
    valid actions as ``action_masks``: its ``action_masks()``, or else the ``action_mask`` of
    the info its latest reset or step returned (:func:`rlx.evaluation.action_masks`)."""

    takes_action_masks: bool

    def act(self, observation: Any, deterministic: bool = True, action_masks: Any = None) -> Any:
        """:meth:`Agent.act`, choosing among the actions ``action_masks`` marks valid (a bool
        array: one row per observation, the flags of every action, MultiDiscrete components
        one after the other)."""
        ...


@runtime_checkable
class TakesTrainingBudget(Protocol):
    """An agent that sizes something (a schedule) by the run's budget: the trainer calls
    ``set_training_budget`` with its step budget (None when the budget is not in steps)
    before the first iteration."""

    def set_training_budget(self, steps: int | None) -> None:
        """The run's step budget, or None when its budget is not in steps."""
        ...


@runtime_checkable
class SuggestsTrainerDefaults(Protocol):
    """An agent class that suggests trainer settings (evaluation and log intervals, a step
    budget); anything the user sets wins over them."""

    trainer_defaults: ClassVar[dict[str, Any]]


@runtime_checkable
class Closes(Protocol):
    """An agent that holds resources (worker processes, async environments, Ray actors):
    the trainer calls ``close`` when ``fit`` ends, whatever the reason. A closed agent can
    still act and be saved; training it again reopens what it needs or says why not."""

    def close(self) -> None:
        """Release the agent's resources; it can still act and be saved."""
        ...


class SeedBatch(Protocol):
    """K agents of one configuration, one seed each, linked so that they train as one
    batched computation (what :meth:`BatchesSeeds.seed_batch` returns).

    Each agent keeps its own ``step``: a group's driver (:mod:`rlx.groups`) calls the step of
    every agent still training once per round, and the batch computes the round for all of
    them at the first call. An agent whose run ends, or fails, leaves the batch (``leave``).
    """

    def leave(self, agent: Any) -> None:
        """Take ``agent`` out of the batch (its run ended or failed); the others train on
        together."""
        ...


@runtime_checkable
class BatchesSeeds(Protocol):
    """An agent class whose seeds can train as one batched computation: ``seed_batch``
    links K agents made with the same settings (one seed each) into a :class:`SeedBatch`,
    or raises :class:`rlx.errors.NotBatchable` saying why their settings cannot be
    batched. Plugins declare batched support by having this classmethod; without it, the
    seeds of ``rlx run --seeds`` train in worker processes, with nothing to write. A class
    whose batches measured slower than its seeds one after another sets
    ``seed_batches_pay = False``: ``rlx run --seeds`` and ``rlx tune --seeds`` then train its
    seeds one after another, and ``seed_batch`` still links them for whoever calls it."""

    @classmethod
    def seed_batch(cls, agents: Sequence[Any]) -> SeedBatch:
        """Link ``agents`` (the same settings, one seed each) into one :class:`SeedBatch`, or raise
        :class:`rlx.errors.NotBatchable` saying why they cannot be."""
        ...


@runtime_checkable
class Trainer(Protocol):
    """Drives an agent under a budget (:class:`rlx.trainer.Trainer`): what its callbacks
    (:mod:`rlx.callbacks`) see of it and may call."""

    agent: Any
    identity: Any
    #: The :class:`~rlx.trainer.TrainerConfig` of the run.
    config: Any
    #: The :class:`~rlx.runs.RunDirectory`, or None when nothing is recorded.
    run: Any
    console: Any
    env_steps: int
    iterations: int
    episodes: int
    elapsed: float
    #: Why the run stopped ("" while it trains).
    stop_reason: str
    notices: list[str]
    init_from: dict[str, Any] | None
    #: The tuned settings the run started from (:meth:`rlx.tuned.Tuned.to_dict`), or None.
    tuned: dict[str, Any] | None
    resumed: dict[str, Any] | None

    @property
    def best_return(self) -> float | None:
        """The best mean return of an evaluation so far, or None before the first."""
        ...

    def fit(self) -> Any:
        """Train until a budget or a callback stops the run; return a summary."""
        ...

    def dispatch(self, event: str, *args: Any) -> str:
        """Call ``event`` on every callback that has it; the first stop reason, or ""."""
        ...

    def save(self, path: Any, resume: bool = True) -> None:
        """Write a checkpoint of the policy at ``path``, and of what exact resume needs unless
        ``resume=False``."""
        ...

    def log(self, row: dict[str, Any]) -> None:
        """Log ``row`` (names to numbers) with the counters, to metrics.csv and every logger."""
        ...

    def counters(self) -> dict[str, Any]:
        """The counters every metrics row starts with: ``env_steps``, ``iterations``, ``episodes``
        and the ``time/`` ones."""
        ...

    def recent_mean(self) -> float:
        """The mean return of the last training episodes (NaN before the first)."""
        ...

    def warn(self, message: str) -> None:
        """Show ``message`` as a warning on the run's console."""
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

    def context(self) -> np.ndarray:
        """The context of the current round, ``(context_dim,)``."""
        ...

    def pull(self, action: int) -> float:
        """Pull arm ``action``: its reward; the bandit moves on to the next round."""
        ...

    def optimal_reward(self) -> float:
        """The expected reward of the best arm for the current context."""
        ...


@runtime_checkable
class BanditAgent(Protocol):
    """Chooses arms from contexts and learns from the rewards."""

    def select(self, context: np.ndarray) -> int:
        """Choose an arm for this context."""
        ...

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        """Learn from the reward of the chosen arm."""
        ...
