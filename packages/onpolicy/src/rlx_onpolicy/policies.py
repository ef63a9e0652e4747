"""The actor-critic network of the on-policy agents.

An :class:`ActorCritic` maps a batch of observations to distribution parameters (logits, or
Gaussian means) and state values. Three bodies are built in, chosen by the ``policy``
hyperparameter:

- ``mlp``: separate actor and critic MLPs over flattened observations (tanh, 64x64 by
  default, or sizes of their own; orthogonal initialisation: the defaults of
  Stable-Baselines3 and of the PPO paper's MuJoCo experiments);
- ``cnn``: the convolutional torso of Mnih et al. (2015) shared by actor and critic, for
  84x84 frames, ``uint8`` scaled to [0, 1], channels first or last;
- ``"package.module:factory"``: a user-supplied torch module. ``factory(observation_space,
  action_space)`` returns an ``nn.Module`` from float observations ``(batch, *obs_shape)``
  to features ``(batch, n)``; the actor and critic heads are linear layers on top of it.

A ``critic_policy`` (``"package.module:factory"``, the same contract) gives the critic a
body of its own under any of these: the actor keeps the body ``policy`` names.

Bodies, initialisation and action distributions come from :mod:`rlx.nn`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlx.errors import ConfigError, SpaceError
from rlx.nn.distributions import ActionDistribution
from rlx.nn.layers import (
    MLP,
    NatureCNN,
    is_image_space,
    load_network,
    numpy_linear_stack,
    orthogonal_,
)
from rlx.nn.optim import flatten_parameters


class ActorCritic(nn.Module):
    """Observations -> (distribution parameters, state values).

    ``critic_body=None`` shares the actor's body (CNN and user modules); the MLP policy
    keeps separate bodies, which is what the reference hyperparameters assume.
    """

    def __init__(
        self,
        actor_body: nn.Module,
        critic_body: nn.Module | None,
        actor_features: int,
        critic_features: int,
        distribution: ActionDistribution,
        log_std_init: float,
        flatten: bool,
    ) -> None:
        super().__init__()
        self.flatten = flatten
        self.actor_body = actor_body
        self.critic_body = critic_body
        self.actor_head = nn.Linear(actor_features, distribution.param_dim)
        self.critic_head = nn.Linear(critic_features, 1)
        self.log_std = (
            nn.Parameter(torch.full((distribution.param_dim,), float(log_std_init)))
            if distribution.has_log_std
            else None
        )

    def forward(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.flatten:
            observations = observations.flatten(1)
        actor = self.actor_body(observations)
        critic = actor if self.critic_body is None else self.critic_body(observations)
        actor_head, critic_head = self.actor_head, self.critic_head
        return (
            F.linear(actor, actor_head.weight, actor_head.bias),
            F.linear(critic, critic_head.weight, critic_head.bias).squeeze(-1),
        )

    def numpy_forward(self) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None:
        """The forward pass in NumPy on the policy's own weights, for the MLP policy on the CPU.

        The sampler calls the policy once per environment step on a few rows, where NumPy
        beats torch's dispatch. Returns None for other policies (torch is used).
        """
        bodies = (self.actor_body, self.critic_body)
        if not all(isinstance(body, MLP) for body in bodies) or self.actor_head.weight.is_cuda:
            return None
        activation = self.actor_body.activation_name
        actor = numpy_linear_stack([*self.actor_body.layers, self.actor_head], activation)
        critic = numpy_linear_stack([*self.critic_body.layers, self.critic_head], activation)

        def forward(observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            x = observations.reshape(len(observations), -1)
            return actor(x), critic(x)[:, 0]

        return forward

    def values(self, observations: torch.Tensor) -> torch.Tensor:
        """State values alone (skips the actor's head, and its body when it is separate)."""
        if self.flatten:
            observations = observations.flatten(1)
        body = self.actor_body if self.critic_body is None else self.critic_body
        return self.critic_head(body(observations)).squeeze(-1)

    def flatten_parameters(self) -> None:
        """Move the weights into two flat vectors: ``actor_vector`` and ``critic_vector``.

        ``actor_vector`` holds what the policy gradient moves (body, head and log-std: one
        SVPG particle), ``critic_vector`` the rest; see :func:`rlx.nn.optim.flatten_parameters`.
        The optimisers, gradient clipping and SVPG's kernel then work on two tensors instead of
        a dozen. Call it once, after the module is on its device.
        """
        # Not registered as parameters: state_dict keeps the layers.
        object.__setattr__(self, "actor_vector", flatten_parameters(self.actor_parameters()))
        object.__setattr__(self, "critic_vector", flatten_parameters(self.critic_parameters()))

    def vectors(self) -> list[nn.Parameter]:
        """The two flat parameter vectors (after :meth:`flatten_parameters`)."""
        return [self.actor_vector, self.critic_vector]

    def actor_parameters(self) -> list[nn.Parameter]:
        """What the policy gradient moves (one SVPG particle): body, head and log-std."""
        params = [*self.actor_body.parameters(), *self.actor_head.parameters()]
        return params + ([self.log_std] if self.log_std is not None else [])

    def critic_parameters(self) -> list[nn.Parameter]:
        """Every parameter the actor does not have: the critic's head, and its body when it has one
        of its own."""
        actor = {id(p) for p in self.actor_parameters()}
        return [p for p in self.parameters() if id(p) not in actor]


def build_actor_critic(
    observation_space: gym.Space,
    action_space: gym.Space,
    distribution: ActionDistribution,
    policy: str,
    hidden_sizes: Sequence[int],
    activation: str,
    log_std_init: float,
    ortho_init: bool,
    critic_hidden_sizes: Sequence[int] | None = None,
    critic_policy: str | None = None,
    policy_kwargs: dict[str, Any] | None = None,
    combined: Callable[[], nn.Module] | None = None,
) -> ActorCritic:
    """The network that ``policy`` ("auto", "mlp", "cnn", "combined" or "module:factory")
    names; ``combined`` (``auto`` for Dict or Tuple observations holding images or given
    encoders; ``combined`` builds the extractor, :func:`rlx.nn.layers.combined_factory`) is
    a CNN per image, the user's encoders and the other values as they are, shared by actor
    and critic, under an MLP of ``hidden_sizes``.

    The mlp policy's actor has ``hidden_sizes``, its critic ``critic_hidden_sizes`` (None:
    the same); the other policies' body is shared and has its own sizes. ``critic_policy``
    ("module:factory") replaces the critic's body (and head) with the user's module;
    ``policy_kwargs`` go to the user's factories.
    """
    shape = tuple(observation_space.shape)
    if policy == "auto":
        if combined is not None:
            policy = "combined"
        else:
            policy = "cnn" if is_image_space(observation_space) else "mlp"
    if policy == "combined":
        if combined is None:
            raise SpaceError(
                "the combined policy is for Dict or Tuple observations holding images or given "
                "encoders; use policy=mlp"
            )
        extractor = combined()
        head = MLP([extractor.features_dim, *hidden_sizes], activation)
        body = nn.Sequential(extractor, head)
        n = int(hidden_sizes[-1])
        net = ActorCritic(body, None, n, n, distribution, log_std_init, flatten=False)
        bodies = [body]
    elif policy == "mlp":
        n_in = int(np.prod(shape))
        sizes = [n_in, *hidden_sizes]
        critic_sizes = sizes if critic_hidden_sizes is None else [n_in, *critic_hidden_sizes]
        net = ActorCritic(
            MLP(sizes, activation),
            MLP(critic_sizes, activation),
            sizes[-1],
            critic_sizes[-1],
            distribution,
            log_std_init,
            flatten=True,
        )
        bodies = [net.actor_body, net.critic_body]
    elif policy == "cnn":
        if len(shape) != 3:
            raise SpaceError(
                f"the cnn policy needs image observations (H, W, C) or (C, H, W); got shape "
                f"{shape}. Use policy=mlp for vector observations"
            )
        body = NatureCNN(shape)
        net = ActorCritic(body, None, 512, 512, distribution, log_std_init, flatten=False)
        bodies = [body]
    else:
        if ":" not in policy:
            raise ConfigError(
                f"policy must be 'auto', 'mlp', 'cnn' or 'package.module:factory', got {policy!r}"
            )
        body, n = user_body(policy, "policy", observation_space, action_space, policy_kwargs)
        net = ActorCritic(body, None, n, n, distribution, log_std_init, flatten=False)
        if critic_policy is not None:
            net.critic_body, net.critic_head = user_critic(
                critic_policy, observation_space, action_space, False, policy_kwargs
            )
        return net
    if critic_policy is not None:
        net.critic_body, net.critic_head = user_critic(
            critic_policy, observation_space, action_space, net.flatten, policy_kwargs
        )
        bodies = [net.actor_body]
    if ortho_init:
        for body in bodies:
            body.apply(lambda m: orthogonal_(m, math.sqrt(2)))
        orthogonal_(net.actor_head, 0.01)
        orthogonal_(net.critic_head, 1.0)
    return net


def user_body(
    target: str,
    what: str,
    observation_space: gym.Space,
    action_space: gym.Space,
    policy_kwargs: dict[str, Any] | None = None,
) -> tuple[nn.Module, int]:
    """The module ``target`` ("module:factory") returns, and its number of features."""
    if ":" not in target:
        raise ConfigError(f"{what} must be 'package.module:factory', got {target!r}")
    body = load_network(target, observation_space, action_space, what=what, **(policy_kwargs or {}))
    with torch.no_grad():
        probe = torch.as_tensor(observation_space.sample()[None], dtype=torch.float32)
        features = body(probe)
    if features.ndim != 2:
        raise ConfigError(
            f"{what} {target!r} must map (batch, *obs_shape) to (batch, features); "
            f"it returned shape {tuple(features.shape)}"
        )
    return body, int(features.shape[1])


def user_critic(
    target: str,
    observation_space: gym.Space,
    action_space: gym.Space,
    flatten: bool,
    policy_kwargs: dict[str, Any] | None = None,
) -> tuple[nn.Module, nn.Linear]:
    """The critic's body from ``critic_policy`` and a value head on it; under a policy that
    flattens observations (mlp) the body gets them back in their shape."""
    body, n = user_body(target, "critic_policy", observation_space, action_space, policy_kwargs)
    shape = tuple(observation_space.shape)
    if flatten and len(shape) != 1:
        body = nn.Sequential(nn.Unflatten(1, shape), body)
    return body, nn.Linear(n, 1)
