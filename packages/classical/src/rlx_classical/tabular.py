"""What the tabular agents share: the Q table, epsilon-greedy exploration, checkpoints.

Q-learning, SARSA, SARSA(lambda) and Dyna-Q differ only in how one episode updates the
table, which each algorithm's ``step()`` spells out in its own module. The Q table is a list
of rows of Python floats (one row of ``n_actions`` values per state) because the inner loop
reads and writes single entries: list indexing costs a fraction of NumPy's per-element
overhead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rlx.agents import Saveable
from rlx.config import hyperparameter
from rlx.errors import CheckpointError, SpaceError
from rlx.memory import check_allocations
from rlx.protocols import AgentState
from rlx.schedules import linear as linear_schedule
from rlx.seeding import (
    agent_generator,
    env_rng_state,
    generator_state,
    restore_env_rng,
    restore_generator,
)
from rlx.spaces import observation_batch

#: Uniform numbers drawn from the generator per NumPy call (two per environment step).
UNIFORM_BLOCK = 128


@dataclass
class TabularConfig:
    """Hyperparameters every tabular agent has."""

    learning_rate: float = hyperparameter(
        0.2, "step size alpha of the update", low=0, high=1, low_open=True, search=(0.01, 1.0)
    )
    gamma: float = hyperparameter(0.99, "discount factor", low=0, high=1, search=(0.9, 0.9999))
    epsilon_start: float = hyperparameter(
        1.0,
        "probability of a random action at the first environment step",
        low=0,
        high=1,
        search=(0.5, 1.0),
    )
    epsilon_end: float = hyperparameter(
        0.01,
        "probability of a random action once the decay is over",
        low=0,
        high=1,
        search=(0.0, 0.2),
    )
    epsilon_decay_steps: int = hyperparameter(
        50_000,
        "environment steps from the start of training over which epsilon falls linearly "
        "to epsilon_end",
        low=0,
    )
    initial_q: float = hyperparameter(
        0.0, "initial value of every Q entry (values above any return explore optimistically)"
    )
    start_steps: int = hyperparameter(
        0,
        "environment steps of uniformly random actions at the start of training, before the "
        "epsilon-greedy policy acts; the table learns from them as usual, and they count "
        "towards epsilon_decay_steps",
        low=0,
    )

    def __post_init__(self) -> None:
        if self.epsilon_end > self.epsilon_start:
            raise ValueError(
                f"epsilon_end ({self.epsilon_end}) must not exceed epsilon_start "
                f"({self.epsilon_start}): epsilon decays"
            )


def epsilon_greedy(values: list[float], epsilon: float, explore: float, pick: float) -> int:
    """A uniformly random action with probability ``epsilon``, else a greedy one.

    ``explore`` and ``pick`` are independent uniform numbers in [0, 1): the first decides
    whether to explore, the second picks the action among all of them, or among the tied
    best (a zero-initialised table would otherwise always choose action 0).
    """
    if explore < epsilon:
        return int(pick * len(values))
    best = max(values)
    if values.count(best) == 1:
        return values.index(best)
    ties = [action for action, value in enumerate(values) if value == best]
    return ties[int(pick * len(ties))]


def uniform_stream(rng: np.random.Generator, block: int = UNIFORM_BLOCK) -> Iterator[float]:
    """Uniform numbers in [0, 1) from ``rng``, drawn ``block`` at a time.

    One NumPy call per block instead of one per number; the agents open one stream per
    episode and drop its leftovers, so the generator's state between episodes is all that
    a checkpoint needs.
    """
    while True:
        yield from rng.random(block).tolist()


def discrete_sizes(env: Any) -> tuple[int, int]:
    """``(n_states, n_actions)`` of an environment with Discrete spaces starting at 0."""
    from gymnasium.spaces import Discrete

    for role, space in (("observation", env.observation_space), ("action", env.action_space)):
        if not isinstance(space, Discrete) or int(space.start) != 0:
            raise SpaceError(
                f"tabular agents need a Discrete {role} space starting at 0, got {space}"
            )
    return int(env.observation_space.n), int(env.action_space.n)


class TabularAgent(Saveable):
    """A Q table for Discrete observations and actions, explored epsilon-greedily.

    Subclasses implement ``step()``: one training episode with their algorithm's update.
    Training draws only from ``self.rng`` (seeded with the agent seed), which checkpoints
    save. ``act(deterministic=False)`` draws from a generator of its own, which
    :func:`rlx.evaluate` reseeds for each episode, so evaluating never changes training.
    """

    Config: ClassVar[type[TabularConfig]] = TabularConfig

    def __init__(self, env: Any, config: TabularConfig, seed: int) -> None:
        self.env = env
        self.config = config
        self.seed = seed
        self.n_states, self.n_actions = discrete_sizes(env)
        check_allocations(self.memory_estimate())
        self.q = [[float(config.initial_q)] * self.n_actions for _ in range(self.n_states)]
        self.rng = agent_generator(seed)
        self._act_rng = agent_generator(seed, stream=1)
        self.env_steps = 0
        self.episodes = 0

    def memory_estimate(self) -> dict[str, tuple[int, str]]:
        """Bytes of the Q table, and what lowers them, checked (:mod:`rlx.memory`) before it
        is allocated: a list per state (56 bytes) of a slot and, once learned, a float object
        per action (32 bytes), and its float64 copy in a checkpoint."""
        entries = self.n_states * self.n_actions
        return {
            f"a Q table of {self.n_states:,} states x {self.n_actions:,} actions": (
                56 * self.n_states + (32 + 8) * entries,
                "use an environment with fewer states or actions (or a function approximator: "
                "dqn, ppo)",
            )
        }

    def epsilon_schedule(self) -> Callable[[int], float]:
        """The exploration rate as a function of the environment step count: 1 (a uniformly
        random action) for the first ``start_steps`` steps, then the linear decay from
        ``epsilon_start`` to ``epsilon_end``, counted from the first step.

        The agents' ``step()`` call it once per environment step, so it closes over the
        settings rather than reading them from the config each time.
        """
        c = self.config
        start, end, decay_steps, start_steps = (
            c.epsilon_start,
            c.epsilon_end,
            c.epsilon_decay_steps,
            c.start_steps,
        )

        def epsilon_at(step: int) -> float:
            if step < start_steps:
                return 1.0
            return linear_schedule(step, start, end, decay_steps)

        return epsilon_at

    @property
    def epsilon(self) -> float:
        """The exploration rate of the next training step (1 during the ``start_steps``)."""
        return self.epsilon_schedule()(self.env_steps)

    @property
    def q_table(self) -> np.ndarray:
        """A copy of the Q table, shape ``(n_states, n_actions)``."""
        return np.array(self.q, dtype=np.float64)

    def begin_episode(self) -> int:
        """Reset the environment and return the first state.

        Only the very first reset is seeded; later ones continue the environment's RNG, so
        the sequence of training episodes is fixed by the agent seed alone.
        """
        observation, _ = self.env.reset(seed=self.seed if self.episodes == 0 else None)
        return int(observation)

    def seed_evaluation(self, seed: int) -> None:
        """Make the exploratory actions of an evaluation episode depend on its seed alone."""
        self._act_rng = agent_generator(seed, stream=1)

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """The greedy action (lowest index among ties), or an epsilon-greedy one: an ``int``
        for one state, an int64 array ``(n,)`` for a batch of states ``(n,)``."""
        batch = observation_batch(self.env.observation_space, observation)
        if batch.single:
            return self._act_one(int(batch.observations[0]), deterministic)
        actions = [self._act_one(int(state), deterministic) for state in batch.observations]
        return np.array(actions, dtype=np.int64)

    def _act_one(self, state: int, deterministic: bool) -> int:
        values = self.q[state]
        if deterministic:
            return values.index(max(values))
        explore, pick = self._act_rng.random(2).tolist()
        return epsilon_greedy(values, self.epsilon, explore, pick)

    def policy_state(self) -> AgentState:
        """The Q table, and the step count that sets epsilon for exploratory acting."""
        return AgentState(arrays={"q": self.q_table}, meta={"env_steps": self.env_steps})

    def load_policy_state(self, state: AgentState) -> None:
        """Restore the Q table and the step count that :meth:`policy_state` saved; a table of
        another shape than this environment's is a :class:`~rlx.errors.CheckpointError`."""
        q = state.arrays["q"]
        if q.shape != (self.n_states, self.n_actions):
            raise CheckpointError(
                f"the saved Q table has shape {q.shape}, but this environment has "
                f"{self.n_states} states and {self.n_actions} actions"
            )
        self.q = q.astype(np.float64).tolist()
        self.env_steps = int(state.meta["env_steps"])

    def resume_state(self) -> AgentState:
        """What exact resume needs on top of the policy: the episode count, and the states of the
        training generator and of the environment's generator."""
        return AgentState(
            meta={
                "episodes": self.episodes,
                "rng": generator_state(self.rng),
                "env_rng": env_rng_state(self.env),
            },
        )

    def load_resume_state(self, state: AgentState) -> None:
        """Restore what :meth:`resume_state` returned, so that the next episode is the one the saved
        run would have played."""
        self.episodes = int(state.meta["episodes"])
        restore_generator(self.rng, state.meta["rng"])
        restore_env_rng(self.env, state.meta["env_rng"])
