"""Action distributions as plain functions on tensors, each with a NumPy twin.

``params`` is a policy head's output ``(batch, param_dim)``; a Gaussian also takes a learned
``log_std`` ``(action_dim,)``. Log-probabilities and entropies also take leading axes,
``(K, batch, param_dim)`` with ``log_std`` ``(K, 1, action_dim)``: K seeds batched
(:mod:`rlx.nn.stacked`). These are not ``torch.distributions`` objects: building one
(with argument validation) per environment step costs more than a small network does. The
NumPy twins (``sample_numpy``) let a sampler act on the CPU without torch's dispatch cost;
tests check each against its torch version and against ``torch.distributions``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch.nn import functional as F

from rlx.errors import SpaceError

SUPPORTED_ACTIONS = "Discrete, MultiDiscrete and Box"


class ActionDistribution:
    """Sampling, log-probabilities, entropies and greedy actions for one action space.

    ``params`` is the actor head's output ``(batch, param_dim)``; a Gaussian also takes the
    learned ``log_std`` ``(action_dim,)``. Actions are tensors shaped like the buffer stores
    them: ``(batch,)`` int64 for Discrete, ``(batch, k)`` int64 for MultiDiscrete,
    ``(batch, action_dim)`` float32 (unclipped) for Box.
    """

    param_dim: int
    has_log_std = False

    def sample(
        self, params: torch.Tensor, log_std: torch.Tensor | None, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Actions and their log-probabilities."""
        raise NotImplementedError

    def log_prob_entropy(
        self,
        params: torch.Tensor,
        log_std: torch.Tensor | None,
        actions: torch.Tensor,
        entropy: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-probabilities of ``actions`` and (unless ``entropy=False``) the entropies."""
        raise NotImplementedError

    def mode(self, params: torch.Tensor) -> torch.Tensor:
        """The most likely action (used for deterministic evaluation)."""
        raise NotImplementedError

    def kl(
        self,
        old_params: torch.Tensor,
        old_log_std: torch.Tensor | None,
        params: torch.Tensor,
        log_std: torch.Tensor | None,
    ) -> torch.Tensor:
        """The divergence KL(old || new) of each row, from the old distribution's parameters to
        the new one's (TRPO's trust region)."""
        raise NotImplementedError

    def sample_numpy(
        self, params: np.ndarray, log_std: np.ndarray | None, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`sample` in NumPy, for the sampler's NumPy forward pass."""
        raise NotImplementedError

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        """Buffer actions -> what the environment accepts (Box actions are clipped)."""
        return actions


def gumbel_max(logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One sample per row of ``softmax(logits)``: ``argmax(logits + Gumbel noise)``.

    ``-log(E)`` with ``E ~ Exponential(1)`` is Gumbel(0, 1)-distributed; this costs a third
    of ``torch.multinomial`` on small batches.
    """
    noise = torch.empty_like(logits).exponential_(generator=generator).log_()
    return (logits - noise).argmax(-1)


class Categorical(ActionDistribution):
    """Categorical actions of a Discrete space of ``n`` actions: ``params`` are the logits
    ``(batch, n)``, sampled by the Gumbel-max trick."""

    def __init__(self, n: int) -> None:
        self.param_dim = n

    def sample(self, params, log_std, generator):
        actions = gumbel_max(params, generator)
        log_p = F.log_softmax(params, dim=-1)
        return actions, log_p.gather(-1, actions[:, None]).squeeze(-1)

    def log_prob_entropy(self, params, log_std, actions, entropy=True):
        log_p = F.log_softmax(params, dim=-1)
        log_prob = log_p.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        return log_prob, -(log_p.exp() * log_p).sum(-1) if entropy else None

    def mode(self, params):
        return params.argmax(-1)

    def kl(self, old_params, old_log_std, params, log_std):
        return _categorical_kl(old_params, params)

    def sample_numpy(self, params, log_std, rng):
        return categorical_numpy(params, rng)


def _categorical_kl(old_logits: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """KL(softmax(old_logits) || softmax(logits)) over the last axis (an action of old
    probability 0 adds nothing)."""
    old_log_p = F.log_softmax(old_logits, dim=-1)
    return (old_log_p.exp() * (old_log_p - F.log_softmax(logits, dim=-1))).sum(-1)


def categorical_numpy(
    logits: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Gumbel-max samples of ``softmax(logits)`` rows and their log-probabilities, in NumPy."""
    actions = (logits - np.log(rng.standard_exponential(logits.shape))).argmax(-1)
    shifted = logits - logits.max(-1, keepdims=True)
    log_normaliser = np.log(np.exp(shifted).sum(-1))
    log_probs = np.take_along_axis(shifted, actions[:, None], -1)[:, 0] - log_normaliser
    return actions, log_probs.astype(np.float32)


class MultiCategorical(ActionDistribution):
    """Independent categoricals, one per MultiDiscrete component."""

    def __init__(self, nvec: Sequence[int]) -> None:
        self.nvec = [int(n) for n in nvec]
        self.param_dim = sum(self.nvec)

    def _split(self, params: torch.Tensor) -> list[torch.Tensor]:
        return [F.log_softmax(p, dim=-1) for p in torch.split(params, self.nvec, dim=-1)]

    def sample(self, params, log_std, generator):
        parts = self._split(params)
        actions = torch.stack([gumbel_max(lp, generator) for lp in parts], 1)
        log_prob = sum(lp.gather(-1, actions[:, i, None]).squeeze(-1) for i, lp in enumerate(parts))
        return actions, log_prob

    def log_prob_entropy(self, params, log_std, actions, entropy=True):
        parts = self._split(params)
        log_prob = sum(
            lp.gather(-1, actions[..., i, None]).squeeze(-1) for i, lp in enumerate(parts)
        )
        if not entropy:
            return log_prob, None
        return log_prob, sum(-(lp.exp() * lp).sum(-1) for lp in parts)

    def mode(self, params):
        return torch.stack([p.argmax(-1) for p in torch.split(params, self.nvec, dim=-1)], 1)

    def kl(self, old_params, old_log_std, params, log_std):
        parts = zip(
            torch.split(old_params, self.nvec, dim=-1),
            torch.split(params, self.nvec, dim=-1),
            strict=True,
        )
        return sum(_categorical_kl(old, new) for old, new in parts)

    def sample_numpy(self, params, log_std, rng):
        parts = [
            categorical_numpy(part, rng)
            for part in np.split(params, np.cumsum(self.nvec)[:-1], axis=-1)
        ]
        return np.stack([a for a, _ in parts], 1), sum(lp for _, lp in parts)


class DiagonalGaussian(ActionDistribution):
    """A Gaussian with state-independent learned log standard deviations.

    Samples are stored unclipped (their log-probability is the Gaussian's); only the action
    sent to the environment is clipped to the bounds, as in the PPO paper's experiments.
    """

    has_log_std = True
    _LOG_2PI = math.log(2 * math.pi)

    def __init__(self, space: gym.spaces.Box) -> None:
        self.param_dim = int(np.prod(space.shape))
        self.shape = space.shape
        self.low = space.low.astype(np.float32)
        self.high = space.high.astype(np.float32)

    def _log_prob(self, mean, log_std, actions):
        z = (actions - mean) * torch.exp(-log_std)
        return (-0.5 * z.square() - log_std - 0.5 * self._LOG_2PI).sum(-1)

    def sample(self, params, log_std, generator):
        noise = torch.randn(params.shape, generator=generator, device=params.device)
        actions = params + noise * log_std.exp()
        log_prob = (-0.5 * noise.square() - log_std - 0.5 * self._LOG_2PI).sum(-1)
        return actions, log_prob

    def log_prob_entropy(self, params, log_std, actions, entropy=True):
        log_prob = self._log_prob(params, log_std, actions)
        if not entropy:
            return log_prob, None
        return log_prob, (log_std + 0.5 * (1.0 + self._LOG_2PI)).sum(-1).expand(params.shape[:-1])

    def mode(self, params):
        return params

    def kl(self, old_params, old_log_std, params, log_std):
        # per dimension: log(s1 / s0) + (s0^2 + (m0 - m1)^2) / (2 s1^2) - 1/2
        variance_ratio = torch.exp(2.0 * (old_log_std - log_std))
        scaled_gap = (old_params - params) * torch.exp(-log_std)
        return (log_std - old_log_std + 0.5 * (variance_ratio + scaled_gap.square() - 1.0)).sum(-1)

    def sample_numpy(self, params, log_std, rng):
        noise = rng.standard_normal(params.shape, dtype=np.float32)
        actions = params + noise * np.exp(log_std)
        log_prob = (-0.5 * noise**2 - log_std - np.float32(0.5 * self._LOG_2PI)).sum(-1)
        return actions, log_prob

    def to_env(self, actions):
        return np.clip(actions.reshape((-1, *self.shape)), self.low, self.high)


def action_distribution(space: gym.Space) -> ActionDistribution:
    """The distribution of a policy over ``space`` (Discrete, MultiDiscrete or Box)."""
    if isinstance(space, gym.spaces.Discrete):
        if space.start != 0:
            raise SpaceError(f"Discrete action spaces must start at 0, got start={space.start}")
        return Categorical(int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        if np.any(space.start != 0):
            raise SpaceError("MultiDiscrete action spaces must start at 0")
        return MultiCategorical(space.nvec.reshape(-1).tolist())
    if isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating):
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise SpaceError(
                f"the Box action space {space} has infinite bounds; the Gaussian policy clips "
                "actions to the bounds, so give it finite ones (e.g. gymnasium's RescaleAction)"
            )
        return DiagonalGaussian(space)
    raise SpaceError(f"action space {space} is not supported; supported: {SUPPORTED_ACTIONS}")
