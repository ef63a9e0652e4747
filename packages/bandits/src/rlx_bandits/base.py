"""What every bandit agent shares: one round per learning iteration, exact regret, checkpoints.

A bandit agent implements three decisions and its learned state:

- ``select(context)``: the arm to pull while learning (may explore, draws from ``self.rng``);
- ``greedy(context)``: the arm it believes best, without exploring or drawing random numbers;
- ``update(context, action, reward)``: learn from the reward of the pulled arm;
- ``learned_state()`` / ``load_learned_state(state)``: what ``greedy`` needs (statistics,
  networks) as an :class:`rlx.protocols.AgentState`: the agent's policy part;
- optionally ``training_state()`` / ``load_training_state(state)``: what learning needs on
  top (a neural agent's replay data and optimisers), part of the resume state.

:class:`BanditLearner` turns that into an :class:`rlx.protocols.Agent` that the generic
trainer drives: one :meth:`step` is one round on a gymnasium bandit environment whose
``info`` carries ``regret`` (the expected reward of the best arm minus that of the pulled
one), so cumulative regret is exact. Environments come from rlx-envs or any gymnasium
environment with a Box context, a Discrete action space and that ``info`` key.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rlx.agents import Saveable
from rlx.errors import RlxError
from rlx.memory import check_allocations
from rlx.protocols import AgentState, Iteration
from rlx.seeding import (
    agent_generator,
    env_rng_state,
    generator_state,
    restore_env_rng,
    restore_generator,
)
from rlx.spaces import observation_batch


class BanditLearner(Saveable):
    """Base class of rlx bandit agents; subclasses set ``Config`` and the methods above."""

    Config: ClassVar[type]
    #: Bandits learn from every round: no episodic evaluation, frequent log rows.
    trainer_defaults: ClassVar[dict[str, Any]] = {"eval_episodes": 0, "log_every": 100}

    def __init__(self, env: Any, config: Any, seed: int) -> None:
        self.env = env
        self.config = config
        self.seed = seed
        self.n_arms = int(env.action_space.n)
        self.context_dim = int(np.prod(env.observation_space.shape))
        self._context_shape = (self.context_dim,)
        self.rng = agent_generator(seed)
        self.rounds = 0
        self.cumulative_regret = 0.0
        self.cumulative_reward = 0.0
        self._context: np.ndarray | None = None
        self._episode_return = 0.0
        self._episode_length = 0
        check_allocations(self.memory_estimate())

    def memory_estimate(self) -> dict[str, tuple[int, str]]:
        """Bytes of the statistics, tables and networks the agent is about to allocate, and
        what lowers them, from the spaces and settings alone: checked (:mod:`rlx.memory`) at
        the end of this constructor, before a subclass allocates anything."""
        return {}

    # -- implemented by each agent ------------------------------------------------------

    def select(self, context: np.ndarray) -> int:
        """The arm to pull for ``context`` (flat, ``(d,)`` float64) while learning; it may explore,
        drawing from ``self.rng``."""
        raise NotImplementedError

    def greedy(self, context: np.ndarray) -> int:
        """The arm believed best for ``context``, without exploring: what :meth:`act` plays in
        evaluation; it draws no random numbers."""
        raise NotImplementedError

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        """Learn from ``reward``, observed for pulling arm ``action`` in ``context``."""
        raise NotImplementedError

    def learned_state(self) -> AgentState:
        """What :meth:`greedy` needs (statistics, tables, networks): the policy part of a
        checkpoint."""
        raise NotImplementedError

    def load_learned_state(self, state: AgentState) -> None:
        """Restore what :meth:`learned_state` returned; :meth:`greedy` then plays as it did."""
        raise NotImplementedError

    def training_state(self) -> AgentState:
        """What learning needs beyond the policy (nothing, unless an agent says otherwise)."""
        return AgentState()

    def load_training_state(self, state: AgentState) -> None:
        """Restore what :meth:`training_state` returned (nothing to restore, unless an agent says
        otherwise)."""

    def record_round(
        self, context: np.ndarray, action: int, reward: float, regret: float
    ) -> dict[str, float]:
        """Called each round after the pull and before :meth:`update`: record what an agent
        keeps of it and return extra metrics of the round (nothing, unless an agent says
        otherwise)."""
        return {}

    # -- the rlx Agent protocol ---------------------------------------------------------

    def step(self) -> Iteration:
        """One round: observe the context, pull an arm, learn from the reward."""
        if self._context is None:
            first = self.rounds == 0
            context, _ = self.env.reset(seed=self.seed if first else None)
            self._context = np.asarray(context, dtype=np.float64).ravel()
        context = self._context
        action = int(self.select(context))
        next_context, reward, terminated, truncated, info = self.env.step(action)
        reward = float(reward)
        if "regret" not in info:
            raise RlxError(
                f"{type(self.env.unwrapped).__name__} is not a bandit environment: its step() "
                "info has no 'regret' (use an rlx-envs bandit such as rlx/BernoulliMAB-v0)"
            )
        regret = float(info["regret"])
        recorded = self.record_round(context, action, reward, regret)
        self.update(context, action, reward)
        self.rounds += 1
        self.cumulative_regret += regret
        self.cumulative_reward += reward
        self._episode_return += reward
        self._episode_length += 1
        returns, lengths = [], []
        if terminated or truncated:
            returns, lengths = [self._episode_return], [self._episode_length]
            self._episode_return, self._episode_length = 0.0, 0
            self._context = None
        else:
            self._context = np.asarray(next_context, dtype=np.float64).ravel()
        return Iteration(
            env_steps=1,
            episode_returns=returns,
            episode_lengths=lengths,
            metrics={
                "cumulative_regret": self.cumulative_regret,
                "cumulative_reward": self.cumulative_reward,
                **recorded,
            },
        )

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """The greedy arm for a context (evaluation never explores or draws random numbers):
        an ``int`` for one context of the observation space's shape, an int64 array ``(n,)``
        for a batch ``(n, *shape)``."""
        batch = observation_batch(self.env.observation_space, observation)
        contexts = np.asarray(batch.observations, dtype=np.float64).reshape(batch.size, -1)
        arms = [int(self.greedy(context)) for context in contexts]
        return arms[0] if batch.single else np.array(arms, dtype=np.int64)

    def check_context(self, context: Any) -> np.ndarray:
        """``context`` as a flat float array, or a ValueError naming the expected shape."""
        if isinstance(context, np.ndarray) and context.shape == self._context_shape:
            if context.dtype == np.float64:  # the common case, checked cheaply: every round
                return context
        array = np.asarray(context, dtype=np.float64)
        if array.size != self.context_dim:
            raise ValueError(
                f"context has shape {array.shape}, but this agent was built for contexts of "
                f"{self.context_dim} features"
            )
        return array.ravel()

    def policy_state(self) -> AgentState:
        """The agent's :meth:`learned_state`: a bandit's policy is its learned statistics or
        networks."""
        return self.learned_state()

    def load_policy_state(self, state: AgentState) -> None:
        """Restore the policy through :meth:`load_learned_state`."""
        self.load_learned_state(state)

    def resume_state(self) -> AgentState:
        """What exact resume needs on top of the policy: :meth:`training_state` (its arrays under
        ``training/``), the pending context, the round, regret and reward counters, the open
        episode, the agent's and the environment's random generators, and the environment's own
        ``state_dict`` when it has one."""
        training = self.training_state()
        arrays = {f"training/{key}": value for key, value in training.arrays.items()}
        if self._context is not None:
            arrays["context"] = self._context
        env = self.env.unwrapped
        return AgentState(
            arrays=arrays,
            meta={
                "training": training.meta,
                "rounds": self.rounds,
                "cumulative_regret": self.cumulative_regret,
                "cumulative_reward": self.cumulative_reward,
                "episode": [self._episode_return, self._episode_length],
                "rng": generator_state(self.rng),
                "env_rng": env_rng_state(self.env),
                "env_state": env.state_dict() if hasattr(env, "state_dict") else None,
            },
        )

    def load_resume_state(self, state: AgentState) -> None:
        """Restore what :meth:`resume_state` returned, the environment's generator and state
        included, so that the next round is the one the saved run would have played."""
        # gymnasium's order enforcing refuses step() before reset(); the saved RNG and
        # environment state restored below then replace whatever this reset did.
        self.env.reset()
        prefix = "training/"
        self.load_training_state(
            AgentState(
                arrays={
                    k[len(prefix) :]: v for k, v in state.arrays.items() if k.startswith(prefix)
                },
                meta=state.meta["training"],
            )
        )
        self._context = state.arrays.get("context")
        self.rounds = int(state.meta["rounds"])
        self.cumulative_regret = float(state.meta["cumulative_regret"])
        self.cumulative_reward = float(state.meta["cumulative_reward"])
        self._episode_return, self._episode_length = state.meta["episode"]
        restore_generator(self.rng, state.meta["rng"])
        restore_env_rng(self.env, state.meta["env_rng"])
        if state.meta["env_state"] is not None:
            self.env.unwrapped.load_state_dict(state.meta["env_state"])
