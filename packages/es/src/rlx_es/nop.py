"""NOP: a fixed policy, evaluated and never updated (garage's ``garage.np.algos.NOP``).

garage keeps it next to its gradient-free NumPy algorithms (CEM, CMA-ES), as the run in
which no optimisation is performed: the returns of a policy that stays what it is, to compare
a learning run with, or to measure an environment. Here the fixed policy plays one action
whatever it observes: ``constant_action``, by default the zero action (0 clipped into a
Box's bounds, a Discrete space's first action). One training step plays
``episodes_per_step`` episodes with it; its parameters, the action, never change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

from rlx.agents import Saveable
from rlx.config import hyperparameter
from rlx.errors import ConfigError, SpaceError
from rlx.protocols import AgentState, Iteration
from rlx.seeding import env_rng_state, restore_env_rng
from rlx.spaces import observation_batch
from rlx.vector import info_numbers


@dataclass
class NOPConfig:
    """Which fixed action the policy plays, and how many episodes a step plays (nothing here
    is searched by ``rlx tune``: the policy does not learn)."""

    constant_action: tuple[float, ...] = hyperparameter(
        (),
        "the action played: empty, the zero action (0 in every dimension clipped into a Box's "
        "bounds, a Discrete space's first action); else one number per dimension of a Box "
        "(one number: every dimension), or a Discrete action",
    )
    episodes_per_step: int = hyperparameter(1, "episodes one training step plays", low=1)


def fixed_action(space: gymnasium.Space, config: NOPConfig) -> np.ndarray | int:
    """The action ``config`` names in ``space``: a Discrete action as an int, a Box action
    of the space's shape and dtype; one outside the space is a :class:`ConfigError`."""
    if isinstance(space, gymnasium.spaces.Discrete):
        if not config.constant_action:
            return int(space.start)
        if len(config.constant_action) != 1 or config.constant_action[0] % 1:
            raise ConfigError(
                f"constant_action={list(config.constant_action)}: {space} takes one whole "
                "number, an action"
            )
        action = int(config.constant_action[0])
        if not space.contains(action):
            raise ConfigError(
                f"constant_action={action} is not an action of {space}: use {space.start} "
                f"to {space.start + space.n - 1}"
            )
        return action
    if isinstance(space, gymnasium.spaces.Box):
        if not config.constant_action:
            zeros = np.zeros(space.shape)
            return np.clip(zeros, space.low, space.high).astype(space.dtype)
        values = np.asarray(config.constant_action, dtype=np.float64)
        size = int(np.prod(space.shape))
        if values.size not in (1, size):
            raise ConfigError(
                f"constant_action has {values.size} numbers; {space} takes {size} (one per "
                "dimension) or one for every dimension"
            )
        action = np.broadcast_to(values, (size,)).reshape(space.shape).astype(space.dtype)
        if not space.contains(action):
            raise ConfigError(
                f"constant_action={list(config.constant_action)} lies outside {space}: "
                f"low {space.low.ravel().tolist()}, high {space.high.ravel().tolist()}"
            )
        return action
    raise SpaceError(f"nop plays Discrete or Box actions, got {space}")


class NOPAgent(Saveable):
    """A fixed policy, evaluated and never updated (garage's NOP); one step plays
    ``episodes_per_step`` episodes with it."""

    Config = NOPConfig

    def __init__(self, env: Any, config: NOPConfig | None = None, seed: int = 0) -> None:
        self.env = env
        self.config = config if config is not None else NOPConfig()
        self.seed = seed
        #: The action the policy plays, whatever it observes.
        self.action = fixed_action(env.action_space, self.config)
        self._started = False

    def step(self) -> Iteration:
        """Play ``episodes_per_step`` episodes with the fixed action; only the run's first
        reset is seeded (with the agent's seed), as for the random agent."""
        returns, lengths, infos = [], [], []
        for _ in range(self.config.episodes_per_step):
            self.env.reset(seed=None if self._started else self.seed)
            self._started = True
            total, length, done, info = 0.0, 0, False, {}
            while not done:
                _, reward, terminated, truncated, info = self.env.step(self.action)
                total += float(reward)
                length += 1
                done = terminated or truncated
            returns.append(total)
            lengths.append(length)
            infos.append(info_numbers(info))
        return Iteration(
            env_steps=sum(lengths),
            episode_returns=returns,
            episode_lengths=lengths,
            episode_infos=infos,
        )

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """The fixed action for one observation, or ``n`` copies of it for a batch of ``n``."""
        batch = observation_batch(self.env.observation_space, observation)
        if batch.single:
            return self.action if isinstance(self.action, int) else self.action.copy()
        return np.stack([np.asarray(self.action)] * batch.size)

    def policy_state(self) -> AgentState:
        """The fixed action: the whole policy."""
        return AgentState(arrays={"action": np.atleast_1d(np.asarray(self.action))})

    def load_policy_state(self, state: AgentState) -> None:
        """Play the saved action."""
        saved = np.array(state.arrays["action"])
        if isinstance(self.env.action_space, gymnasium.spaces.Discrete):
            self.action = int(saved.reshape(-1)[0])
        else:
            self.action = saved.reshape(self.env.action_space.shape)

    def resume_state(self) -> AgentState:
        """Whether the first, seeded episode was played, and the environment's generators."""
        return AgentState(meta={"started": self._started, "rng": env_rng_state(self.env)})

    def load_resume_state(self, state: AgentState) -> None:
        """Restore what :meth:`resume_state` returned: the next episode is the saved run's."""
        self._started = bool(state.meta["started"])
        restore_env_rng(self.env, state.meta["rng"])
