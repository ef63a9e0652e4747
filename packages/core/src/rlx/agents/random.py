"""The do-nothing baseline: uniform random actions, no learning."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from gymnasium.spaces import Discrete

from rlx.agents import Saveable
from rlx.protocols import AgentState, Iteration
from rlx.seeding import derive, env_rng_state, restore_env_rng
from rlx.spaces import observation_batch
from rlx.vector import info_numbers


@dataclass
class RandomConfig:
    """The random agent has no hyperparameters."""


class RandomAgent(Saveable):
    """Samples actions uniformly from the action space; one iteration is one episode.

    Every family compares with it: a learning agent that does not beat it learns nothing.
    """

    Config = RandomConfig

    def __init__(self, env: Any, config: RandomConfig, seed: int) -> None:
        self.env = env
        self.config = config
        self.env.action_space.seed(seed)
        # act() samples from its own copy so that evaluation never moves the training RNG.
        self._eval_space = copy.deepcopy(env.action_space)
        self._eval_space.seed(derive(seed, "evaluation actions"))
        self.seed = seed
        self._started = False

    def step(self) -> Iteration:
        """One episode of uniformly random actions, drawn from the environment's action space
        (seeded with the agent seed); only the first reset is seeded."""
        seed = None if self._started else self.seed
        self._started = True
        self.env.reset(seed=seed)
        total, length, done, info = 0.0, 0, False, {}
        while not done:
            _, reward, terminated, truncated, info = self.env.step(self.env.action_space.sample())
            total += float(reward)
            length += 1
            done = terminated or truncated
        return Iteration(
            env_steps=length,
            episode_returns=[total],
            episode_lengths=[length],
            episode_infos=[info_numbers(info)],
        )

    def seed_evaluation(self, seed: int) -> None:
        """Make an evaluation episode's actions depend on its seed alone."""
        self._eval_space.seed(seed)

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """A uniformly random action for one observation, or ``n`` of them (drawn one after
        another, stacked with a leading axis) for a batch of ``n``."""
        batch = observation_batch(self.env.observation_space, observation)
        if batch.single:
            action = self._eval_space.sample()
            return int(action) if isinstance(self._eval_space, Discrete) else action
        from gymnasium.vector.utils import concatenate, create_empty_array

        samples = [self._eval_space.sample() for _ in range(batch.size)]
        out: Any = create_empty_array(self._eval_space, batch.size)
        return concatenate(self._eval_space, samples, out)

    def policy_state(self) -> AgentState:
        """Nothing: a random policy has no parameters."""
        return AgentState()

    def load_policy_state(self, state: AgentState) -> None:
        """Nothing to restore: a random policy has no parameters."""

    def resume_state(self) -> AgentState:
        """Whether the first, seeded episode was played, and the state of the environment's and its
        action space's generators."""
        return AgentState(meta={"started": self._started, "rng": env_rng_state(self.env)})

    def load_resume_state(self, state: AgentState) -> None:
        """Restore what :meth:`resume_state` returned, so that the next episode is the one the saved
        run would have played."""
        self._started = bool(state.meta["started"])
        restore_env_rng(self.env, state.meta["rng"])
