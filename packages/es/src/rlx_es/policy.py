"""A population of MLP policies evaluated in one batched forward pass, and virtual batch norm.

Every member's weights live in one flat vector; a population is a matrix ``(m, n_params)``
that :class:`PopulationPolicy` turns into per-layer weight tensors ``(m, in, out)`` and runs
with ``torch.baddbmm``: one call per layer for the whole population. On a CUDA device the
weights are uploaded once per generation and stay there; each step uploads the observations
once and downloads the actions once.
"""

from __future__ import annotations

import itertools
from typing import Any

import gymnasium
import numpy as np
import torch

from rlx.errors import SpaceError


class VirtualBatchNorm:
    """Observation normalisation with statistics of a fixed reference batch.

    Salimans et al. (2016, 2017): normalising by a batch chosen once at the start (instead of
    the current batch) keeps each member's output independent of the other members, which
    makes the population's evaluation reproducible and the perturbations comparable.
    ``mean`` and ``std`` have the observation's shape.
    """

    def __init__(self, reference: np.ndarray | None = None, dim: int = 0, eps: float = 1e-2):
        if reference is None:
            self.mean = np.zeros(dim, dtype=np.float32)
            self.std = np.ones(dim, dtype=np.float32)
        else:
            reference = np.asarray(reference, dtype=np.float64)
            self.mean = reference.mean(axis=0).astype(np.float32)
            self.std = np.maximum(reference.std(axis=0), eps).astype(np.float32)

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        return (observations - self.mean) / self.std


def collect_reference_batch(
    env_spec: Any, size: int, rng: np.random.Generator, max_steps: int = 1000
) -> np.ndarray:
    """``size`` observations ``(size, obs_dim)`` visited by uniformly random actions.

    The episodes and actions are seeded from ``rng``, so the batch is part of the run's seed.
    """
    env = gymnasium.make(env_spec)
    env.action_space.seed(int(rng.integers(2**31)))
    observations = []
    observation, _ = env.reset(seed=int(rng.integers(2**31)))
    for _ in range(min(size * 4, max_steps * 4)):
        observations.append(np.asarray(observation, dtype=np.float32).ravel())
        observation, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            observation, _ = env.reset(seed=int(rng.integers(2**31)))
    env.close()
    picked = rng.choice(len(observations), size=min(size, len(observations)), replace=False)
    return np.stack([observations[i] for i in np.sort(picked)])


class PopulationPolicy:
    """MLP policies ``obs -> tanh hidden layers -> action`` for a whole population at once.

    Discrete actions: the argmax of one output per action. Box actions: ``tanh`` outputs
    scaled to the action bounds (clipped when unbounded). Observations are flattened
    Box observations, normalised by ``normalizer`` when one is given. The forward pass runs on
    ``device``; observations come in and actions go out as NumPy arrays.
    """

    def __init__(
        self,
        observation_space: gymnasium.Space,
        action_space: gymnasium.Space,
        hidden_sizes: tuple[int, ...],
        normalizer: VirtualBatchNorm | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        self.device = torch.device(device)
        if not isinstance(observation_space, gymnasium.spaces.Box):
            raise SpaceError(f"evolution strategies need Box observations, got {observation_space}")
        if isinstance(action_space, gymnasium.spaces.Discrete):
            self.discrete, out = True, int(action_space.n)
            self.action_offset = int(action_space.start)
        elif isinstance(action_space, gymnasium.spaces.Box):
            self.discrete, out = False, int(np.prod(action_space.shape))
            low = action_space.low.ravel().astype(np.float32)
            high = action_space.high.ravel().astype(np.float32)
            bounded = np.isfinite(low) & np.isfinite(high)
            self.action_low, self.action_high = low, high
            self.action_centre = np.where(bounded, (low + high) / 2, 0.0).astype(np.float32)
            self.action_radius = np.where(bounded, (high - low) / 2, 1.0).astype(np.float32)
            self.action_shape = action_space.shape
        else:
            raise SpaceError(
                f"evolution strategies need Discrete or Box actions, got {action_space}"
            )
        self.obs_dim = int(np.prod(observation_space.shape))
        self.normalizer = normalizer
        sizes = (self.obs_dim, *hidden_sizes, out)
        self.n_outputs = out
        self.layers = list(itertools.pairwise(sizes))
        self.n_params = sum(i * o + o for i, o in self.layers)

    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        """Weights ``(n_params,)`` with unit-variance rows scaled by ``1/sqrt(fan_in)``, zero biases
        (the normc-style initialisation of Salimans et al.'s reference code, output layer x0.1)."""
        chunks = []
        for index, (fan_in, fan_out) in enumerate(self.layers):
            gain = 0.1 if index == len(self.layers) - 1 else 1.0
            chunks.append(gain * rng.standard_normal(fan_in * fan_out) / np.sqrt(fan_in))
            chunks.append(np.zeros(fan_out))
        return np.concatenate(chunks)

    def bind(self, parameters: np.ndarray) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per-layer float32 weights ``(m, in, out)`` and biases ``(m, 1, out)`` of
        ``parameters`` ``(m, n_params)`` on the policy's device, made once per generation
        (one upload). Each is contiguous: ``baddbmm`` would copy strided views at every step,
        which made the forward pass of 4,096 members twice as slow on the CPU."""
        flat = torch.as_tensor(parameters, dtype=torch.float32).to(self.device)
        m, layers, offset = flat.shape[0], [], 0
        for fan_in, fan_out in self.layers:
            weight = flat[:, offset : offset + fan_in * fan_out].reshape(m, fan_in, fan_out)
            offset += fan_in * fan_out
            bias = flat[:, offset : offset + fan_out].reshape(m, 1, fan_out)
            offset += fan_out
            layers.append((weight.contiguous(), bias.contiguous()))
        return layers

    def select(
        self, layers: list[tuple[torch.Tensor, torch.Tensor]], members: np.ndarray
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The rows ``members`` of bound ``layers``, gathered where they live (no upload of
        weights): what :meth:`bind` of those members' parameters gives."""
        index = torch.as_tensor(members, dtype=torch.long).to(self.device)
        return [(weight[index], bias[index]) for weight, bias in layers]

    @torch.no_grad()
    def actions(
        self, layers: list[tuple[torch.Tensor, torch.Tensor]], observations: np.ndarray
    ) -> np.ndarray:
        """Actions of every member for its own observation, ``(m, obs_dim)`` -> ``(m,)`` int64
        or ``(m, *action_shape)`` float32."""
        x = observations.reshape(observations.shape[0], -1).astype(np.float32, copy=False)
        if self.normalizer is not None:
            x = self.normalizer(x)
        h = torch.from_numpy(np.ascontiguousarray(x)).to(self.device).unsqueeze(1)
        for index, (weight, bias) in enumerate(layers):
            h = torch.baddbmm(bias, h, weight)
            if index < len(layers) - 1:
                h = torch.tanh(h)
        out = h.squeeze(1)
        # One download per step: the argmax, or the tanh outputs scaled in NumPy.
        if self.discrete:
            return out.argmax(dim=1).cpu().numpy() + self.action_offset
        action = self.action_centre + self.action_radius * torch.tanh(out).cpu().numpy()
        action = np.clip(action, self.action_low, self.action_high).astype(np.float32)
        return action.reshape(-1, *self.action_shape)
