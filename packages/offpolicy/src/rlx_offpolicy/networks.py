"""The networks of the actor-critic agents (DDPG, TD3, SAC), in one place.

- :class:`DeterministicActor`: ``s -> tanh(mu(s))`` in ``[-1, 1]`` (DDPG, TD3);
- :class:`GaussianActor`: ``s -> (mean, log_std)`` of the pre-squashing Gaussian (SAC);
- :class:`CriticEnsemble`: ``n`` independent Q-networks ``Q_i(s, a)`` computed in one batched
  pass (DDPG: one; TD3 and SAC: the twin critics), their weights stacked on a leading axis
  so that every layer of every critic is one ``torch.baddbmm`` (:func:`rlx.nn.stacked.mlp`); with
  a CNN or a user's network each critic first encodes the observations with its own body
  (:func:`critic_ensemble`);
- :class:`FlatNetwork`: a network whose parameters live in one flat vector (one flat Adam
  per network), and its target copy, moved by Polyak averaging in one ``lerp_``
  (:func:`soft_update`, which DQN's target network and the seed batches' stacks use too);
- :func:`feature_body`: the ``network`` setting (mlp, cnn or a user's
  ``package.module:factory``) turned into a body that maps observations to features; the
  actors put their heads on one;
- :func:`retain_freed_memory`: keeps glibc from handing the update's activations back to the
  system after every update (and faulting them in again at the next).

The actors on an MLP body have NumPy twins of their forward passes
(:func:`rlx.nn.layers.numpy_linear_stack`) for acting on the CPU, where torch's dispatch would
cost more than the arithmetic; the other bodies act through torch.
"""

from __future__ import annotations

import copy
import ctypes
import ctypes.util
import functools
import itertools
import math
import platform
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlx.errors import ConfigError, SpaceError
from rlx.nn import stacked
from rlx.nn.layers import (
    MLP,
    NatureCNN,
    is_image_space,
    load_network,
    numpy_linear_stack,
)
from rlx.nn.optim import flatten_parameters

#: The activations of :data:`rlx.nn.layers.ACTIVATIONS`, in place: each overwrites the output
#: of a linear map, which no backward pass needs (their own backward uses their result).
INPLACE_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu_,
    "tanh": torch.tanh_,
    "elu": F.elu_,
}


def hidden_features(body: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``body(x)``; an MLP's with in-place activations (one tensor fewer per layer; a noisy
    MLP's layers add their noise in their own forward passes)."""
    if not isinstance(body, MLP) or body.noisy:
        return body(x)
    activation = INPLACE_ACTIVATIONS[body.activation_name]
    for layer in body.layers:
        x = activation(F.linear(x, layer.weight, layer.bias))
    return x


def resolve_network(network: str, observation_space: Any, combined: Any = None) -> str:
    """The ``network`` setting with ``auto`` resolved: ``cnn`` for image observations,
    ``combined`` for Dict or Tuple observations with images or the user's encoders
    (``combined`` builds their extractor, :func:`rlx.nn.layers.combined_factory`), else
    ``mlp``; other settings as given."""
    if network != "auto":
        return network
    if combined is not None:
        return "combined"
    return "cnn" if is_image_space(observation_space) else "mlp"


def feature_body(
    network: str,
    observation_space: Any,
    action_space: Any,
    hidden: tuple[int, ...],
    activation: str,
    noisy: bool = False,
    network_kwargs: dict[str, Any] | None = None,
    combined: Callable[[], nn.Module] | None = None,
) -> tuple[nn.Module, int]:
    """The body named by the ``network`` setting and its number of output features
    (``network_kwargs`` go to a user's factory).

    ``auto`` is ``cnn`` for image observations and ``mlp`` otherwise; ``mlp`` is an
    :class:`~rlx.nn.layers.MLP` over the flattened observations (``noisy``: of noisy
    layers); ``cnn`` the Nature CNN over ``uint8`` frames; ``package.module:factory`` is
    called as ``factory(observation_space, action_space)`` and must return a module mapping
    ``(batch, *observation_shape)`` to ``(batch, features)``.
    """
    image = is_image_space(observation_space)
    shape = tuple(observation_space.shape)
    network = resolve_network(network, observation_space, combined)
    if network == "combined":
        if combined is None:
            raise SpaceError(
                "network=combined is for Dict or Tuple observations holding images or given "
                "encoders; use network=mlp"
            )
        extractor = combined()
        head = MLP([extractor.features_dim, *hidden], activation, noisy=noisy)
        return nn.Sequential(extractor, head), hidden[-1]
    if network == "mlp":
        body: nn.Module = MLP([int(np.prod(shape)), *hidden], activation, noisy=noisy)
        return body, hidden[-1]
    if network == "cnn":
        if not image:
            raise SpaceError(
                f"network=cnn needs image observations (uint8 frames of 3 dimensions); got "
                f"{observation_space}. Use network=mlp for vector observations"
            )
        body = NatureCNN(shape)
        return body, body.features_dim
    if ":" not in network:
        raise ConfigError(
            f"network must be 'auto', 'mlp', 'cnn' or 'package.module:factory', got {network!r}"
        )
    body = load_network(
        network, observation_space, action_space, what="network", **(network_kwargs or {})
    )
    probe = torch.as_tensor(
        observation_space.sample()[None], dtype=torch.uint8 if image else torch.float32
    )
    training = body.training
    body.eval()  # one probe row: batch normalisation would neither work nor should it learn
    with torch.no_grad():
        features = body(probe)
    body.train(training)
    if features.ndim != 2:
        raise ConfigError(
            f"network {network!r} must map (batch, *observation_shape) to (batch, features); "
            f"it returned shape {tuple(features.shape)}"
        )
    return body, int(features.shape[1])


class DeterministicActor(nn.Module):
    """``mu(s) = tanh(W h(s) + b)`` on a feature ``body`` ``h`` (:func:`feature_body`, with
    ``features`` outputs): observations -> actions ``(batch, action_dim)`` in ``[-1, 1]``, the
    scale the replay buffer stores."""

    def __init__(self, body: nn.Module, features: int, action_dim: int) -> None:
        super().__init__()
        self.body = body
        self.head = nn.Linear(features, action_dim)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.head(hidden_features(self.body, observations)))

    def numpy_forward(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """:meth:`forward` in NumPy, on the (CPU) parameters themselves, for an MLP body on
        flattened observations; None for other bodies (they act through torch)."""
        if not isinstance(self.body, MLP):
            return None
        linear = numpy_linear_stack([*self.body.layers, self.head], self.body.activation_name)
        return lambda observations: np.tanh(linear(observations))


class GaussianActor(nn.Module):
    """Observations -> the mean and the log standard deviation ``(batch, action_dim)`` each
    of a diagonal Gaussian over the pre-squashing action ``u``.

    One linear head on the feature ``body`` (:func:`feature_body`, with ``features`` outputs)
    gives both (its first half the mean); ``log_std`` depends on the state and is clamped to
    ``[log_std_min, log_std_max]``.
    """

    def __init__(
        self,
        body: nn.Module,
        features: int,
        action_dim: int,
        log_std_bounds: tuple[float, float],
    ) -> None:
        super().__init__()
        self.body = body
        self.head = nn.Linear(features, 2 * action_dim)
        self.action_dim = action_dim
        self.log_std_min, self.log_std_max = log_std_bounds

    def forward(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = hidden_features(self.body, observations)
        mean, log_std = self.head(features).split(self.action_dim, -1)
        return mean, log_std.clamp(self.log_std_min, self.log_std_max)

    def numpy_forward(self) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None:
        """:meth:`forward` in NumPy, on the (CPU) parameters themselves, for an MLP body on
        flattened observations; None for other bodies (they act through torch)."""
        if not isinstance(self.body, MLP):
            return None
        linear = numpy_linear_stack([*self.body.layers, self.head], self.body.activation_name)
        k, low, high = self.action_dim, self.log_std_min, self.log_std_max

        def forward(observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            out = linear(observations)
            return out[:, :k], np.clip(out[:, k:], low, high)

        return forward


class CriticEnsemble(nn.Module):
    """``n`` Q-networks on ``[s, a]``, evaluated together: observations and ``(batch,
    action_dim)`` actions -> ``(n, batch)``, or ``(n, batch, outputs)`` with ``outputs > 1``
    values per critic (TQC's quantiles).

    Layer ``l`` of critic ``i`` is ``weights[l][i]`` ``(in, out)`` and ``biases[l][i]``
    ``(1, out)``; each layer of all the critics is one batched matrix product
    (``baddbmm``), so Q1 and Q2 cost one forward and one backward pass, not two. The
    critics are independent: each is initialised as ``nn.Linear`` initialises its layers
    (weights and biases uniform in ``+-1/sqrt(fan_in)``) and none shares a weight.

    Without ``encoders`` the observations are flat vectors of ``features`` values; with
    them, encoder ``i`` (one per critic, none shared) maps the observations as shaped to
    ``features`` values, and critic ``i``'s layers take ``[encoder_i(s), a]``.
    """

    def __init__(
        self,
        n: int,
        features: int,
        action_dim: int,
        hidden: tuple[int, ...],
        activation: str,
        encoders: list[nn.Module] | None = None,
        outputs: int = 1,
    ) -> None:
        super().__init__()
        self.n, self.outputs = n, outputs
        self.activation = INPLACE_ACTIVATIONS[activation]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in itertools.pairwise([features + action_dim, *hidden, outputs]):
            bound = 1.0 / math.sqrt(fan_in)
            weight = torch.empty(n, fan_in, fan_out).uniform_(-bound, bound)
            self.weights.append(nn.Parameter(weight))
            self.biases.append(nn.Parameter(torch.empty(n, 1, fan_out).uniform_(-bound, bound)))
        self.encoders = None if encoders is None else nn.ModuleList(encoders)
        if self.encoders is not None and len(self.encoders) != n:
            raise ValueError(f"{n} critics need {n} encoders, got {len(self.encoders)}")

    def forward(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        members: int | None = None,
        frozen: bool = False,
    ) -> torch.Tensor:
        """``Q_i(s, a)`` for the first ``members`` critics (all by default), ``(members, batch)``
        (``(members, batch, outputs)`` with several outputs).

        ``frozen=True`` uses the weights as constants: gradients reach the inputs (the actor's
        actions) but no weight gradient is computed, which is what a policy update needs.
        """
        n = self.n if members is None else members
        if self.encoders is None:
            x = torch.cat([observations, actions], -1).expand(n, -1, -1)
        else:
            x = torch.cat([self.encode(observations, n, frozen), actions.expand(n, -1, -1)], -1)
        layers = []
        for weight, bias in zip(self.weights, self.biases, strict=True):
            if members is not None:
                weight, bias = weight[:n], bias[:n]
            if frozen:
                weight, bias = weight.detach(), bias.detach()
            layers.append((weight, bias))
        values = stacked.mlp(x, layers, self.activation)
        return values.squeeze(-1) if self.outputs == 1 else values

    def encode(self, observations: torch.Tensor, n: int, frozen: bool) -> torch.Tensor:
        """The features of the first ``n`` encoders, one after the other, stacked ``(n, batch,
        features)``; without a graph when ``frozen`` (the actions take no part in them)."""
        assert self.encoders is not None
        with torch.set_grad_enabled(torch.is_grad_enabled() and not frozen):
            return torch.stack([encoder(observations) for encoder in self.encoders[:n]])

    def member(self, index: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The ``(weight (out, in), bias (out,))`` pairs of critic ``index``'s layers on
        ``[s, a]``, as ``nn.Linear`` holds them (for tests and for reading one critic alone)."""
        return [
            (weight[index].detach().T, bias[index, 0].detach())
            for weight, bias in zip(self.weights, self.biases, strict=True)
        ]


def critic_ensemble(
    n: int,
    network: str,
    observation_space: Any,
    action_space: Any,
    hidden: tuple[int, ...],
    activation: str,
    network_kwargs: dict[str, Any] | None = None,
    combined: Callable[[], nn.Module] | None = None,
    outputs: int = 1,
    ensemble: Callable[..., CriticEnsemble] = CriticEnsemble,
) -> CriticEnsemble:
    """``n`` critics for the ``network`` setting, each with ``outputs`` values, built by
    ``ensemble`` (:class:`CriticEnsemble` or a subclass taking its arguments).

    ``mlp`` (``auto`` on vectors): MLPs on ``[s, a]`` over flattened observations. Otherwise
    each critic gets a body of its own (:func:`feature_body`, built once per critic): none
    shared with the actor, as in Stable-Baselines3's off-policy default, and none between
    the critics, which stay as independent as the MLP ones; its ``hidden`` layers take the
    body's features with the action.
    """
    action_dim = int(np.prod(action_space.shape))
    if resolve_network(network, observation_space, combined) == "mlp":
        obs_dim = int(np.prod(observation_space.shape))
        return ensemble(n, obs_dim, action_dim, hidden, activation, outputs=outputs)
    bodies = [
        feature_body(
            network,
            observation_space,
            action_space,
            hidden,
            activation,
            False,
            network_kwargs,
            combined,
        )
        for _ in range(n)
    ]
    features = {size for _, size in bodies}
    if len(features) != 1:
        raise ConfigError(
            f"network {network!r} gave bodies of different feature sizes {sorted(features)} "
            "for the critics; the factory must build the same architecture every call"
        )
    encoders = [body for body, _ in bodies]
    return ensemble(n, features.pop(), action_dim, hidden, activation, encoders, outputs)


class FlatNetwork:
    """``module`` with its parameters in one flat vector, and optionally a target copy.

    ``vector`` is what the network's optimiser steps (:func:`rlx.nn.optim.flatten_parameters`:
    each layer's parameters are views of it). With ``target=True``, ``target`` is a copy of
    the module made before training, whose own flat ``target_vector`` follows the online one
    by Polyak averaging, ``theta' <- tau theta + (1 - tau) theta'``: one ``lerp_``. The target
    takes no gradient and is only ever evaluated under ``torch.no_grad()``.
    """

    def __init__(self, module: nn.Module, device: torch.device, target: bool = False) -> None:
        self.module = module.to(device)
        self.target: nn.Module | None = None
        self.target_vector: torch.Tensor | None = None
        if target:
            self.target = copy.deepcopy(self.module)
            with torch.no_grad():
                self.target_vector = flatten_parameters(list(self.target.parameters()))
            self.target_vector.requires_grad_(False)
            for parameter in self.target.parameters():
                parameter.requires_grad_(False)
        self.vector = flatten_parameters(list(self.module.parameters()))

    def update_target(self, tau: float, rows: np.ndarray | None = None) -> None:
        """``theta' <- tau theta + (1 - tau) theta'`` on the whole network at once (on a seed
        batch's stacked networks, which share this method, of the seeds in ``rows``)."""
        assert self.target_vector is not None
        soft_update(self.target_vector, self.vector, tau, rows)


@torch.no_grad()
def soft_update(
    target: torch.Tensor, online: torch.Tensor, tau: float, rows: np.ndarray | None = None
) -> None:
    """``theta' <- tau theta + (1 - tau) theta'`` (a copy when ``tau`` is 1) on flat vectors,
    in one operation; on a seed batch's ``(K, P)`` stacks, of the seeds where ``rows``
    (``(K,)`` bool) is true only, when given."""
    if rows is None:
        if tau == 1.0:
            target.copy_(online)
        else:
            target.lerp_(online, tau)
        return
    moved = online if tau == 1.0 else torch.lerp(target, online, tau)
    target.copy_(torch.where(torch.from_numpy(rows)[:, None], moved, target))


#: glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


@functools.cache
def retain_freed_memory(mmap_threshold: int = 16 << 20, trim_threshold: int = 64 << 20) -> bool:
    """Let glibc's malloc reuse freed blocks instead of returning them to the system.

    torch's CPU allocator takes every tensor from ``malloc``. An update of these networks
    allocates and frees a few megabytes of activations and gradients, blocks of 256 KiB and
    more: glibc serves such blocks with ``mmap`` and unmaps them when freed, or trims the heap
    once more than its trim threshold is free at the top, so the next update page-faults the
    same memory in again (some 400 faults, 10-15% of an update at batch 256 and 256-unit
    layers). Raising both thresholds keeps up to ``trim_threshold`` bytes of freed memory in
    the process for reuse. Process-wide and done once; a no-op where the C library is not
    glibc. Returns whether the settings were applied.
    """
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(
            libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)
            and libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold)
        )
    except (OSError, AttributeError):
        return False
