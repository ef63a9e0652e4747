"""A vector environment and the rollouts collected from it with a policy.

A :class:`Sampler` owns everything that runs on between two iterations: the vector
environment (built from ``env.spec`` with ``gymnasium.make_vec``) in the middle of its
episodes, the last observations, which environments reset at the next step, the running
sums of the unfinished episodes, the observation and reward normalisers, and the
:class:`~rlx_onpolicy.rollout.RolloutBuffer` it fills. VPG, A2C and PPO have one; SVPG has
one per particle. :meth:`Sampler.state` and :meth:`Sampler.load` make it exactly resumable
(see :mod:`rlx_onpolicy.envstate`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.errors import ConfigError
from rlx_onpolicy import envstate
from rlx_onpolicy.normalization import ObservationNormalizer, RewardScaler
from rlx_onpolicy.policies import ActionDistribution, ActorCritic, is_image_space
from rlx_onpolicy.rollout import RolloutBuffer


def make_vector_env(env: Any, n_envs: int, vectorization: str) -> Any:
    """``n_envs`` copies of ``env`` (from its spec) with gymnasium's NEXT_STEP autoreset."""
    if env.spec is None:
        raise ConfigError(
            "the on-policy agents build their vector environments from env.spec; make the "
            "environment with gymnasium.make (or rlx.make_env), or register it first"
        )
    mode = None if vectorization == "auto" else vectorization
    vector = gym.make_vec(env.spec, num_envs=n_envs, vectorization_mode=mode)
    autoreset = vector.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if autoreset != gym.vector.AutoresetMode.NEXT_STEP:
        vector.close()
        raise ConfigError(f"the rollout buffer needs NEXT_STEP autoreset, got {autoreset}")
    return vector


class Sampler:
    def __init__(
        self,
        env: Any,
        config: Any,
        distribution: ActionDistribution,
        device: torch.device,
        seed: int,
    ) -> None:
        c = config
        self.config = config
        self.distribution = distribution
        self.device = device
        self.image = is_image_space(env.observation_space)
        self.envs = make_vector_env(env, c.n_envs, c.vectorization)
        self.obs_normalizer = (
            ObservationNormalizer(env.observation_space.shape, c.clip_observations)
            if c.normalize_observations and not self.image
            else None
        )
        self.reward_scaler = (
            RewardScaler(c.n_envs, c.gamma, c.clip_rewards) if c.normalize_rewards else None
        )
        space = env.action_space
        if isinstance(space, gym.spaces.Discrete):
            action_shape: tuple[int, ...] = ()
        elif isinstance(space, gym.spaces.MultiDiscrete):
            action_shape = (int(space.nvec.size),)
        else:
            action_shape = (int(np.prod(space.shape)),)
        self.buffer = RolloutBuffer(
            c.n_steps,
            c.n_envs,
            tuple(env.observation_space.shape),
            np.dtype(np.uint8 if self.image else np.float32),
            action_shape,
            np.dtype(np.float32 if isinstance(space, gym.spaces.Box) else np.int64),
            device,
        )
        self.observations, _ = self.envs.reset(seed=seed)
        self.autoreset = np.zeros(c.n_envs, bool)
        self.episode_returns = np.zeros(c.n_envs)
        self.episode_lengths = np.zeros(c.n_envs, np.int64)

    def preprocess(self, observations: np.ndarray, update: bool) -> np.ndarray:
        """Normalised float32 observations (image frames stay uint8: the CNN scales them)."""
        if self.obs_normalizer is not None:
            return self.obs_normalizer(observations, update)
        return observations if self.image else observations.astype(np.float32, copy=False)

    @torch.no_grad()
    def collect(
        self, policy: ActorCritic, generator: torch.Generator, rng: np.random.Generator
    ) -> tuple[list[float], list[int], int]:
        """Fill the buffer with ``n_steps`` steps; returns finished episodes and valid steps.

        The MLP policy on the CPU acts through :meth:`ActorCritic.numpy_forward` and draws
        actions from ``rng``; other policies run in torch and draw from ``generator``.
        Under NEXT_STEP autoreset the step after an episode's end only resets that
        environment: it is stored with ``valid=False`` and not counted as a step.
        """
        c = self.config
        distribution, envs, buffer = self.distribution, self.envs, self.buffer
        act = self._actor(policy, generator, rng)
        finished_returns: list[float] = []
        finished_lengths: list[int] = []
        buffer.reset()
        steps = 0
        observations = self.observations
        for _ in range(c.n_steps):
            inputs = self.preprocess(observations, update=True)
            actions, log_probs, values = act(inputs)
            next_observations, rewards, terminated, truncated, _ = envs.step(
                distribution.to_env(actions)
            )
            valid = ~self.autoreset
            rewards = np.asarray(rewards, np.float64)
            self.episode_returns += rewards
            self.episode_lengths += valid
            steps += int(valid.sum())
            done = terminated | truncated
            if done.any():
                for i in np.flatnonzero(done):
                    finished_returns.append(float(self.episode_returns[i]))
                    finished_lengths.append(int(self.episode_lengths[i]))
                self.episode_returns[done] = 0.0
                self.episode_lengths[done] = 0
            if self.reward_scaler is not None:
                rewards = self.reward_scaler(rewards, done)
            buffer.add(
                observations=inputs,
                actions=actions,
                log_probs=log_probs,
                values=values,
                rewards=rewards,
                terminated=terminated,
                truncated=truncated,
                valid=valid,
            )
            self.autoreset = done
            observations = next_observations
        self.observations = observations
        _, _, last_values = act(self.preprocess(observations, update=False), sample=False)
        buffer.finish(last_values, c.gamma, c.gae_lambda)
        return finished_returns, finished_lengths, steps

    def _actor(self, policy: ActorCritic, generator: torch.Generator, rng: np.random.Generator):
        """``act(inputs) -> (actions, log_probs, values)`` as NumPy arrays, for this policy."""
        distribution, device = self.distribution, self.device
        numpy_forward = policy.numpy_forward() if device.type == "cpu" else None
        if numpy_forward is not None:
            log_std = None if policy.log_std is None else policy.log_std.detach().numpy()

            def act_numpy(inputs: np.ndarray, sample: bool = True):
                params, values = numpy_forward(inputs)
                if not sample:
                    return None, None, values
                actions, log_probs = distribution.sample_numpy(params, log_std, rng)
                return actions, log_probs, values

            return act_numpy

        def act_torch(inputs: np.ndarray, sample: bool = True):
            params, values = policy(torch.as_tensor(inputs, device=device))
            if not sample:
                return None, None, values.cpu().numpy()
            actions, log_probs = distribution.sample(params, policy.log_std, generator)
            return actions.cpu().numpy(), log_probs.cpu().numpy(), values.cpu().numpy()

        return act_torch

    # -- checkpoints --------------------------------------------------------------------------

    def state(self, prefix: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays: dict[str, np.ndarray] = {
            f"{prefix}/observations": np.array(self.observations),
            f"{prefix}/autoreset": self.autoreset.copy(),
            f"{prefix}/episode_returns": self.episode_returns.copy(),
            f"{prefix}/episode_lengths": self.episode_lengths.copy(),
        }
        if self.obs_normalizer is not None:
            arrays.update(self.obs_normalizer.stats.arrays(f"{prefix}/obs_norm"))
        if self.reward_scaler is not None:
            arrays.update(self.reward_scaler.state(f"{prefix}/reward_norm"))
        env_arrays, env_meta = envstate.snapshot(self.envs)
        arrays.update({f"{prefix}/envs/{key}": value for key, value in env_arrays.items()})
        return arrays, {"envs": env_meta}

    def load(
        self, arrays: dict[str, np.ndarray], meta: dict[str, Any], prefix: str, seed: int
    ) -> None:
        """Restore :meth:`state`; asynchronous environments restart their episodes with ``seed``."""
        if self.obs_normalizer is not None:
            self.obs_normalizer.stats.load(arrays, f"{prefix}/obs_norm")
        if self.reward_scaler is not None:
            self.reward_scaler.load(arrays, f"{prefix}/reward_norm")
        if meta["envs"] is None or not envstate.can_restore(self.envs):
            self.observations, _ = self.envs.reset(seed=seed)
            self.autoreset[:] = False
            self.episode_returns[:] = 0.0
            self.episode_lengths[:] = 0
            return
        marker = f"{prefix}/envs/"
        envstate.restore(
            self.envs,
            {k[len(marker) :]: v for k, v in arrays.items() if k.startswith(marker)},
            meta["envs"],
        )
        self.observations = arrays[f"{prefix}/observations"].copy()
        self.autoreset = arrays[f"{prefix}/autoreset"].copy()
        self.episode_returns = arrays[f"{prefix}/episode_returns"].copy()
        self.episode_lengths = arrays[f"{prefix}/episode_lengths"].copy()

    def close(self) -> None:
        self.envs.close()
