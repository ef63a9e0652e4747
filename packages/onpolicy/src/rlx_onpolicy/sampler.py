"""Rollouts of a policy on a vector environment.

A :class:`Sampler` puts together what one rollout needs: a :class:`rlx.vector.VectorRunner`
(the environments in the middle of their episodes, autoreset and episode bookkeeping), the
running observation and reward normalisers, and the
:class:`~rlx_onpolicy.rollout.RolloutBuffer` it fills. VPG, A2C and PPO have one; SVPG has
one per particle. :meth:`Sampler.state` and :meth:`Sampler.load` make it exactly resumable.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlx.errors import ConfigError
from rlx.nn.distributions import ActionDistribution
from rlx.nn.layers import is_image_space
from rlx.normalization import ObservationNormalizer, RewardScaler
from rlx.observations import coder_for
from rlx.vector import VectorRunner
from rlx_onpolicy.masks import apply_masks, apply_masks_numpy, mask_widths, vector_masks
from rlx_onpolicy.policies import ActorCritic
from rlx_onpolicy.rollout import RolloutBuffer


def exploration_log_std(log_std: Any, config: Any) -> Any:
    """The log standard deviations of the actions acted on in training: ``log_std`` (a tensor or
    an array), or with ``action_noise=gaussian`` those of the policy's Gaussian plus the
    independent noise N(0, s^2), ``log sqrt(exp(2 log_std) + s^2)``.

    Why the noise is counted in the log-probabilities: an on-policy gradient needs the
    probability of the action the environment got. Noise added to a Gaussian sample outside the
    policy (GenRL's way) leaves that probability the policy's, which it is not, and biases the
    gradient; PPO's ratio would then compare the new policy with a distribution that did not
    act. The sum of the two Gaussians is the Gaussian of variance ``std^2 + s^2``, so sampling
    from it acts exactly as the noisy policy and its log-probability is exact: the policy
    trained is the policy with its noise, whose exploration cannot fall below ``s`` however the
    learned std shrinks. Its mean is the policy's, so the deterministic action (evaluation) is
    unchanged; ``act(deterministic=False)`` samples the policy without the noise. The noise
    comes before the clip to the action bounds, as the policy's own samples do.
    """
    if log_std is None or getattr(config, "action_noise", "none") == "none":
        return log_std
    std = 0.1 if config.action_noise_std is None else config.action_noise_std
    if isinstance(log_std, torch.Tensor):
        return 0.5 * torch.logaddexp(2.0 * log_std, log_std.new_tensor(2.0 * math.log(std)))
    return (0.5 * np.logaddexp(2.0 * log_std, np.float32(2.0 * math.log(std)))).astype(
        log_std.dtype
    )


class Sampler:
    """The rollout side of an on-policy agent: the environments (a
    :class:`~rlx.vector.VectorRunner`), the running observation and reward normalisers, and the
    :class:`~rlx_onpolicy.rollout.RolloutBuffer` that :meth:`collect` fills with ``n_steps`` steps
    of ``n_envs`` environments (or until ``min_episodes`` episodes end)."""

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
        self.steps = 0
        #: Episodes that ended in the current rollout (what ``min_episodes`` counts).
        self.episodes = 0
        #: Episodes a rollout lasts for at least (``min_episodes``), or None: ``n_steps`` steps.
        self.min_episodes: int | None = getattr(c, "min_episodes", None)
        #: Packs and encodes observations that are not a Box (Discrete, Dict, ...), or None.
        self.coder = coder_for(env.observation_space)
        self.runner = VectorRunner(
            env, c.n_envs, c.vectorization, seed, None if self.coder is None else self.coder.pack
        )
        if c.normalize_observations and self.coder is not None:
            raise ConfigError(
                f"normalize_observations standardises Box observations; {env.observation_space} "
                "is not one: drop normalize_observations"
            )
        self.obs_normalizer = (
            ObservationNormalizer(env.observation_space.shape, c.clip_observations)
            if c.normalize_observations and not self.image
            else None
        )
        self.reward_scaler = (
            RewardScaler(c.n_envs, c.gamma, c.clip_rewards) if c.normalize_rewards else None
        )
        #: The actions of each categorical component when acting on valid actions only
        #: (``action_masks``, :mod:`rlx_onpolicy.masks`), else None.
        self.mask_nvec = mask_widths(distribution) if getattr(c, "action_masks", False) else None
        if self.mask_nvec is not None:
            self.action_masks()  # an environment without masks is refused here, not mid-run
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
            tuple(
                (env.observation_space if self.coder is None else self.coder.encoded_space).shape
            ),
            np.dtype(np.uint8 if self.image else np.float32),
            action_shape,
            np.dtype(np.float32 if isinstance(space, gym.spaces.Box) else np.int64),
            device,
            mask_width=0 if self.mask_nvec is None else sum(self.mask_nvec),
        )

    def preprocess(self, observations: np.ndarray, update: bool) -> np.ndarray:
        """Normalised float32 observations (image frames stay uint8: the CNN scales them;
        packed rows are encoded), always C-ordered: a matrix product may round differently on
        another layout, and gymnasium's vectorised CartPole returns Fortran-ordered
        observations that a checkpoint gives back C-ordered, so exact resume needs one layout."""
        if self.coder is not None:
            inputs = self.coder.encode(observations)
        elif self.obs_normalizer is not None:
            inputs = self.obs_normalizer(observations, update)
        else:
            inputs = observations if self.image else observations.astype(np.float32, copy=False)
        return np.ascontiguousarray(inputs)

    @torch.no_grad()
    def collect(
        self, policy: ActorCritic, generator: torch.Generator, rng: np.random.Generator
    ) -> tuple[list[float], list[int], int]:
        """Fill the buffer with a rollout (:meth:`done`); returns finished episodes and valid
        steps.

        With ``min_episodes`` the rollout lasts until that many episodes have ended: its
        length varies from one rollout to the next. The episodes still running when it stops
        are cut there, as at the end of a rollout of ``n_steps``: their last step is
        bootstrapped with the value of the observation it returned, and they go on in the
        next rollout.

        The MLP policy on the CPU acts through :meth:`ActorCritic.numpy_forward` and draws
        actions from ``rng``; other policies run in torch and draw from ``generator``.
        A seed batch (:mod:`rlx_onpolicy.batched`) drives :meth:`begin`, :meth:`observe`,
        :meth:`record` and :meth:`finish` itself, with one forward pass for all its seeds.
        """
        act = self._actor(policy, generator, rng)
        self.begin()
        while not self.done():
            inputs = self.observe()
            masks = self.action_masks()
            self.record(inputs, *act(inputs, masks=masks), masks=masks)
        return self.finish(act(self.observe(update=False), sample=False)[2])

    def begin(self) -> None:
        """Start a rollout."""
        self.buffer.reset()
        self.steps = 0
        self.episodes = 0

    def done(self) -> bool:
        """Whether the rollout is complete: ``n_steps`` steps, or with ``min_episodes`` that many
        episodes ended."""
        if self.min_episodes is None:
            return self.buffer.pos >= self.config.n_steps
        return self.episodes >= self.min_episodes

    def observe(self, update: bool = True) -> np.ndarray:
        """The policy's inputs: the environments' observations, normalised."""
        return self.preprocess(self.runner.observations, update)

    def action_masks(self) -> np.ndarray | None:
        """The environments' valid actions now (``action_masks``): from their
        ``action_masks()`` method, else from the info of their latest reset or step; None
        without masking."""
        if self.mask_nvec is None:
            return None
        runner = self.runner
        return vector_masks(runner.envs, self.mask_nvec, runner.infos, runner.autoreset)

    def record(
        self,
        inputs: np.ndarray,
        actions: np.ndarray,
        log_probs: np.ndarray,
        values: np.ndarray,
        masks: np.ndarray | None = None,
    ) -> None:
        """Step the environments with ``actions`` and store the transition (with the ``masks``
        the actions were drawn under, when masking).

        Under NEXT_STEP autoreset the step after an episode's end only resets that
        environment: it is stored with ``valid=False`` and not counted as a step.
        """
        step = self.runner.step(self.distribution.to_env(actions))
        self.steps += int(step.valid.sum())
        self.episodes += int(step.done.sum())
        rewards = step.rewards
        if self.reward_scaler is not None:
            rewards = self.reward_scaler(rewards, step.done)
        self.buffer.add(
            observations=inputs,
            actions=actions,
            log_probs=log_probs,
            values=values,
            rewards=rewards,
            terminated=step.terminated,
            truncated=step.truncated,
            valid=step.valid,
            action_masks=masks,
        )

    def finish(self, last_values: np.ndarray) -> tuple[list[float], list[int], int]:
        """Advantages and returns (``last_values``: V of the observations after the last
        step); returns the episodes finished and the valid steps of the rollout."""
        self.buffer.finish(last_values, self.config.gamma, self.config.gae_lambda)
        finished_returns, finished_lengths = self.runner.pop_finished()
        return finished_returns, finished_lengths, self.steps

    def _actor(self, policy: ActorCritic, generator: torch.Generator, rng: np.random.Generator):
        """``act(inputs) -> (actions, log_probs, values)`` as NumPy arrays, for this policy."""
        distribution, device = self.distribution, self.device
        numpy_forward = policy.numpy_forward() if device.type == "cpu" else None
        if numpy_forward is not None:
            log_std = None if policy.log_std is None else policy.log_std.detach().numpy()
            log_std = exploration_log_std(log_std, self.config)

            def act_numpy(inputs: np.ndarray, sample: bool = True, masks: Any = None):
                params, values = numpy_forward(inputs)
                if not sample:
                    return None, None, values
                params = apply_masks_numpy(params, masks)
                actions, log_probs = distribution.sample_numpy(params, log_std, rng)
                return actions, log_probs, values

            return act_numpy

        def act_torch(inputs: np.ndarray, sample: bool = True, masks: Any = None):
            params, values = policy(torch.as_tensor(inputs, device=device))
            if not sample:
                return None, None, values.cpu().numpy()
            if masks is not None:
                params = apply_masks(params, torch.as_tensor(masks, device=device))
            log_std = exploration_log_std(policy.log_std, self.config)
            actions, log_probs = distribution.sample(params, log_std, generator)
            return actions.cpu().numpy(), log_probs.cpu().numpy(), values.cpu().numpy()

        return act_torch

    # -- checkpoints --------------------------------------------------------------------------

    def policy_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The observation normaliser's statistics, which acting needs."""
        if self.obs_normalizer is None:
            return {}
        return self.obs_normalizer.stats.arrays(f"{prefix}/obs_norm")

    def load_policy_arrays(self, arrays: dict[str, np.ndarray], prefix: str) -> None:
        """Restore the observation normaliser's statistics that :meth:`policy_arrays` saved."""
        if self.obs_normalizer is not None:
            self.obs_normalizer.stats.load(arrays, f"{prefix}/obs_norm")

    def state(self, prefix: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """What resume needs: the runner and the reward normaliser."""
        arrays, meta = self.runner.state(prefix)
        if self.reward_scaler is not None:
            arrays.update(self.reward_scaler.state(f"{prefix}/reward_norm"))
        return arrays, meta

    def load(
        self, arrays: dict[str, np.ndarray], meta: dict[str, Any], prefix: str, seed: int
    ) -> None:
        """Restore :meth:`state`; asynchronous environments restart their episodes with ``seed``."""
        if self.reward_scaler is not None:
            self.reward_scaler.load(arrays, f"{prefix}/reward_norm")
        self.runner.load(arrays, meta, prefix, seed)

    def close(self) -> None:
        """Release the environments (worker processes of async ones); the next rollout
        reopens them where they were."""
        self.runner.close()
