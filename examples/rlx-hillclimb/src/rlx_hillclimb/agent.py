"""Hill climbing with adaptive noise scaling: policy search without gradients.

The policy is linear, ``action = argmax(W @ obs + b)``. Each iteration perturbs the best
parameters found so far with Gaussian noise, plays a few episodes with the candidate and
keeps it when its mean return is at least the best one. The noise shrinks after an
improvement, to search closer to a good point, and grows after a failure, to get off a
plateau, within ``[noise_min, noise_max]``. This is the "hill climbing with adaptive noise
scaling" of the Udacity deep reinforcement learning course; Mania, Guy and Recht, "Simple
random search provides a competitive approach to reinforcement learning" (2018,
https://arxiv.org/abs/1803.07055) show how far such random search over linear policies goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.agents import Saveable
from rlx.config import hyperparameter
from rlx.protocols import AgentState, Iteration
from rlx.seeding import (
    agent_generator,
    env_rng_state,
    generator_state,
    restore_env_rng,
    restore_generator,
)
from rlx.spaces import observation_batch

#: The noise is divided by this after an improvement and multiplied by it after a failure.
NOISE_FACTOR = 2.0


@dataclass
class HillClimbingConfig:
    """Hyperparameters of :class:`HillClimbingAgent`."""

    noise_scale: float = hyperparameter(
        0.1, "initial standard deviation of the Gaussian weight perturbation", low=0, low_open=True
    )
    noise_min: float = hyperparameter(
        1e-3, "smallest noise scale, reached after repeated improvements", low=0, low_open=True
    )
    noise_max: float = hyperparameter(
        2.0, "largest noise scale, reached after repeated failures", low=0, low_open=True
    )
    episodes_per_candidate: int = hyperparameter(
        5, "episodes played to score one candidate (more: less luck, more steps)", low=1
    )

    def __post_init__(self) -> None:
        if not self.noise_min <= self.noise_scale <= self.noise_max:
            raise ValueError(
                "noise_min <= noise_scale <= noise_max must hold, got "
                f"{self.noise_min} <= {self.noise_scale} <= {self.noise_max}"
            )


class HillClimbingAgent(Saveable):
    """A linear policy ``argmax(W @ obs + b)`` improved by hill climbing with adaptive noise.

    It needs a Box observation space and a Discrete action space (its spec declares them and
    ``rlx.make`` checks). ``W`` has shape ``(n_actions, obs_size)`` and ``b`` shape
    ``(n_actions,)``; observations are flattened. One :meth:`step` scores one candidate over
    ``episodes_per_candidate`` whole episodes. Logged metrics: ``candidate_return`` (the
    candidate's mean return), ``best_return`` (the best mean return so far), ``accepted`` (1
    when the candidate became the best) and ``noise_scale`` (the noise for the next candidate).
    """

    Config = HillClimbingConfig

    def __init__(self, env: Any, config: HillClimbingConfig, seed: int) -> None:
        self.env = env
        self.config = config
        self.seed = seed
        self._started = False
        self._rng = agent_generator(seed)
        obs_size = int(np.prod(env.observation_space.shape))
        n_actions = int(env.action_space.n)
        self._first_action = int(env.action_space.start)
        self.weights = np.zeros((n_actions, obs_size))
        self.bias = np.zeros(n_actions)
        self.best_return = -np.inf
        self.noise_scale = config.noise_scale

    def step(self) -> Iteration:
        """Score one perturbation of the best parameters and keep it if it is no worse."""
        noise = self.noise_scale
        weights = self.weights + noise * self._rng.standard_normal(self.weights.shape)
        bias = self.bias + noise * self._rng.standard_normal(self.bias.shape)
        episodes = [self._play(weights, bias) for _ in range(self.config.episodes_per_candidate)]
        returns = [episode_return for episode_return, _ in episodes]
        lengths = [length for _, length in episodes]
        candidate_return = float(np.mean(returns))
        accepted = candidate_return >= self.best_return
        if accepted:
            self.weights, self.bias, self.best_return = weights, bias, candidate_return
            self.noise_scale = max(self.config.noise_min, noise / NOISE_FACTOR)
        else:
            self.noise_scale = min(self.config.noise_max, noise * NOISE_FACTOR)
        return Iteration(
            env_steps=sum(lengths),
            episode_returns=returns,
            episode_lengths=lengths,
            metrics={
                "candidate_return": candidate_return,
                "best_return": float(self.best_return),
                "accepted": float(accepted),
                "noise_scale": self.noise_scale,
            },
        )

    def _play(self, weights: np.ndarray, bias: np.ndarray) -> tuple[float, int]:
        """One training episode with the given parameters; the environment is seeded once."""
        seed = None if self._started else self.seed
        self._started = True
        observation, _ = self.env.reset(seed=seed)
        total, length, done = 0.0, 0, False
        while not done:
            action = self._greedy_action(weights, bias, observation)
            observation, reward, terminated, truncated, _ = self.env.step(action)
            total += float(reward)
            length += 1
            done = terminated or truncated
        return total, length

    def _greedy_action(self, weights: np.ndarray, bias: np.ndarray, observation: Any) -> int:
        scores = weights @ np.ravel(observation) + bias
        return self._first_action + int(np.argmax(scores))

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """The action of the best parameters so far: an ``int`` for one observation, an int64
        array ``(n,)`` for a batch ``(n, *obs_shape)`` (checked by rlx.spaces).

        The policy is deterministic, so ``deterministic`` changes nothing; no random number
        is drawn, which keeps evaluation from disturbing training.
        """
        batch = observation_batch(self.env.observation_space, observation)
        flat = np.asarray(batch.observations, dtype=np.float64).reshape(batch.size, -1)
        actions = self._first_action + np.argmax(flat @ self.weights.T + self.bias, axis=1)
        return int(actions[0]) if batch.single else actions.astype(np.int64)

    def policy_state(self) -> AgentState:
        """The best parameters so far: all that acting needs."""
        return AgentState(arrays={"weights": self.weights.copy(), "bias": self.bias.copy()})

    def load_policy_state(self, state: AgentState) -> None:
        """Take the saved best weights and bias as the policy."""
        self.weights = np.array(state.arrays["weights"], dtype=np.float64)
        self.bias = np.array(state.arrays["bias"], dtype=np.float64)

    def resume_state(self) -> AgentState:
        """What exact resume needs on top of the policy: the best mean return and the noise scale,
        whether the environment was seeded yet, and the agent's and the environment's generators."""
        return AgentState(
            arrays={
                "best_return": np.array(self.best_return),
                "noise_scale": np.array(self.noise_scale),
            },
            meta={
                "started": self._started,
                "rng": generator_state(self._rng),
                "env_rng": env_rng_state(self.env),
            },
        )

    def load_resume_state(self, state: AgentState) -> None:
        """Restore what :meth:`resume_state` returned, so that the next candidate is the one the
        saved run would have drawn."""
        self.best_return = float(state.arrays["best_return"].item())
        self.noise_scale = float(state.arrays["noise_scale"].item())
        self._started = bool(state.meta["started"])
        restore_generator(self._rng, state.meta["rng"])
        restore_env_rng(self.env, state.meta["env_rng"])
