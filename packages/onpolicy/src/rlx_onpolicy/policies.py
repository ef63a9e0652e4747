"""Actor-critic networks and the action distributions of the on-policy agents.

An :class:`ActorCritic` maps a batch of observations to distribution parameters (logits, or
Gaussian means) and state values. Three bodies are built in, chosen by the ``policy``
hyperparameter:

- ``mlp``: separate actor and critic MLPs over flattened observations (tanh, 64x64 by
  default, orthogonal initialisation: the defaults of Stable-Baselines3 and of the PPO
  paper's MuJoCo experiments);
- ``cnn``: the convolutional torso of Mnih et al. (2015) shared by actor and critic, for
  84x84 frames, ``uint8`` scaled to [0, 1], channels first or last;
- ``"package.module:factory"``: a user-supplied torch module. ``factory(observation_space,
  action_space)`` returns an ``nn.Module`` from float observations ``(batch, *obs_shape)``
  to features ``(batch, n)``; the actor and critic heads are linear layers on top of it.

Action distributions are plain functions on tensors rather than ``torch.distributions``
objects: building a distribution object (with argument validation) per environment step
costs more than the network itself at these sizes.
"""

from __future__ import annotations

import importlib
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlx.errors import ConfigError, SpaceError

SUPPORTED_OBSERVATIONS = "Box (vectors of any shape, or 84x84 image frames)"
SUPPORTED_ACTIONS = "Discrete, MultiDiscrete and Box"
ACTIVATION_FUNCTIONS = {"tanh": torch.tanh, "relu": torch.relu, "elu": F.elu}
NUMPY_ACTIVATIONS = {
    "tanh": lambda x: np.tanh(x, out=x),
    "relu": lambda x: np.maximum(x, 0, out=x),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))).astype(x.dtype),
}


# -- action distributions --------------------------------------------------------------------


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
    def __init__(self, n: int) -> None:
        self.param_dim = n

    def sample(self, params, log_std, generator):
        actions = gumbel_max(params, generator)
        log_p = F.log_softmax(params, dim=-1)
        return actions, log_p.gather(-1, actions[:, None]).squeeze(-1)

    def log_prob_entropy(self, params, log_std, actions, entropy=True):
        log_p = F.log_softmax(params, dim=-1)
        log_prob = log_p.gather(-1, actions[:, None]).squeeze(-1)
        return log_prob, -(log_p.exp() * log_p).sum(-1) if entropy else None

    def mode(self, params):
        return params.argmax(-1)

    def sample_numpy(self, params, log_std, rng):
        return categorical_numpy(params, rng)


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
        log_prob = sum(lp.gather(-1, actions[:, i, None]).squeeze(-1) for i, lp in enumerate(parts))
        if not entropy:
            return log_prob, None
        return log_prob, sum(-(lp.exp() * lp).sum(-1) for lp in parts)

    def mode(self, params):
        return torch.stack([p.argmax(-1) for p in torch.split(params, self.nvec, dim=-1)], 1)

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
        return log_prob, (log_std + 0.5 * (1.0 + self._LOG_2PI)).sum(-1).expand(params.shape[0])

    def mode(self, params):
        return params

    def sample_numpy(self, params, log_std, rng):
        noise = rng.standard_normal(params.shape, dtype=np.float32)
        actions = params + noise * np.exp(log_std)
        log_prob = (-0.5 * noise**2 - log_std - np.float32(0.5 * self._LOG_2PI)).sum(-1)
        return actions, log_prob

    def to_env(self, actions):
        return np.clip(actions.reshape((-1, *self.shape)), self.low, self.high)


def action_distribution(space: gym.Space) -> ActionDistribution:
    if isinstance(space, gym.spaces.Discrete):
        if space.start != 0:
            raise SpaceError(f"Discrete action spaces must start at 0, got start={space.start}")
        return Categorical(int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete):
        if np.any(space.start != 0):
            raise SpaceError("MultiDiscrete action spaces must start at 0")
        return MultiCategorical(space.nvec.reshape(-1))
    if isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating):
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise SpaceError(
                f"the Box action space {space} has infinite bounds; the Gaussian policy clips "
                "actions to the bounds, so give it finite ones (e.g. gymnasium's RescaleAction)"
            )
        return DiagonalGaussian(space)
    raise SpaceError(
        f"action space {space} is not supported by the on-policy agents; "
        f"supported: {SUPPORTED_ACTIONS}"
    )


# -- bodies ----------------------------------------------------------------------------------


def is_image_space(space: gym.Space) -> bool:
    """A 3-d ``uint8`` Box: frames, channels first or last."""
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def check_observation_space(space: gym.Space) -> None:
    if not isinstance(space, gym.spaces.Box):
        raise SpaceError(
            f"observation space {space} is not supported by the on-policy agents; "
            f"supported: {SUPPORTED_OBSERVATIONS}. Wrap other spaces (e.g. gymnasium's "
            "FlattenObservation for Dict or Discrete observations)"
        )


def orthogonal_(layer: nn.Module, gain: float) -> None:
    if isinstance(layer, (nn.Linear, nn.Conv2d)):
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)


class MLP(nn.Module):
    """Hidden layers ``sizes[0] -> ... -> sizes[-1]``, each followed by the activation.

    The forward pass calls the linear maps directly rather than through ``nn.Sequential``:
    module dispatch costs as much as the arithmetic of a 64-unit layer on a few rows, and the
    sampler runs this once per environment step.
    """

    def __init__(self, sizes: Sequence[int], activation: str) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))
        self.activation_name = activation
        self.activation = ACTIVATION_FUNCTIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = self.activation(F.linear(x, layer.weight, layer.bias))
        return x


class NatureCNN(nn.Module):
    """Three convolutions and a 512-unit layer (Mnih et al. 2015) over ``uint8`` frames."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.channels_last = shape[-1] <= 4 < shape[0]
        channels = shape[-1] if self.channels_last else shape[0]
        self.convs = nn.Sequential(
            nn.Conv2d(channels, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            probe = torch.zeros((1, *shape))
            n = self.convs(self._frames(probe)).shape[1]
        self.linear = nn.Sequential(nn.Linear(n, 512), nn.ReLU())
        self.features_dim = 512

    def _frames(self, x: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        return x.float() / 255.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.convs(self._frames(x)))


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

        The sampler calls the policy once per environment step on a few rows; there NumPy's
        matrix products cost a few microseconds where torch's dispatch costs tens. The arrays
        share memory with the parameters, so the function sees every update; it is rebuilt
        once per rollout all the same. Returns None for other policies (torch is used).
        """
        bodies = (self.actor_body, self.critic_body)
        if not all(isinstance(body, MLP) for body in bodies) or self.actor_head.weight.is_cuda:
            return None
        activation = NUMPY_ACTIVATIONS[self.actor_body.activation_name]

        def arrays(layer: nn.Linear) -> tuple[np.ndarray, np.ndarray]:
            return layer.weight.detach().numpy().T, layer.bias.detach().numpy()

        actor = [arrays(layer) for layer in self.actor_body.layers] + [arrays(self.actor_head)]
        critic = [arrays(layer) for layer in self.critic_body.layers] + [arrays(self.critic_head)]

        def run(x: np.ndarray, layers: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
            for weight, bias in layers[:-1]:
                x = x @ weight
                x += bias
                x = activation(x)
            weight, bias = layers[-1]
            return x @ weight + bias

        def forward(observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            x = observations.reshape(len(observations), -1)
            return run(x, actor), run(x, critic)[:, 0]

        return forward

    def values(self, observations: torch.Tensor) -> torch.Tensor:
        """State values alone (skips the actor's head, and its body when it is separate)."""
        if self.flatten:
            observations = observations.flatten(1)
        body = self.actor_body if self.critic_body is None else self.critic_body
        return self.critic_head(body(observations)).squeeze(-1)

    def flatten_parameters(self) -> None:
        """Move the weights into two contiguous vectors, the actor's and the critic's.

        ``self.actor_vector`` holds what the policy gradient moves (body, head and log-std:
        one SVPG particle), ``self.critic_vector`` the rest. Each layer's parameter stays a
        leaf tensor, but its storage becomes a slice of a vector and its gradient a slice of
        the vector's gradient, which backward accumulates into in place. The optimisers,
        gradient clipping and SVPG's kernel then work on two tensors instead of a dozen.
        Call it once, after the module is on its device, and zero gradients in place
        (never set them to None).
        """
        for name, parameters in (
            ("actor_vector", self.actor_parameters()),
            ("critic_vector", self.critic_parameters()),
        ):
            vector = torch.cat([p.detach().reshape(-1) for p in parameters])
            gradient = torch.zeros_like(vector)
            offset = 0
            for parameter in parameters:
                n = parameter.numel()
                parameter.data = vector[offset : offset + n].view_as(parameter)
                parameter.grad = gradient[offset : offset + n].view_as(parameter)
                offset += n
            flat = nn.Parameter(vector)
            flat.grad = gradient
            object.__setattr__(self, name, flat)  # not registered: state_dict keeps the layers

    def vectors(self) -> list[nn.Parameter]:
        """The two flat parameter vectors (after :meth:`flatten_parameters`)."""
        return [self.actor_vector, self.critic_vector]

    def actor_parameters(self) -> list[nn.Parameter]:
        """What the policy gradient moves (one SVPG particle): body, head and log-std."""
        params = [*self.actor_body.parameters(), *self.actor_head.parameters()]
        return params + ([self.log_std] if self.log_std is not None else [])

    def critic_parameters(self) -> list[nn.Parameter]:
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
) -> ActorCritic:
    """The network that ``policy`` ("auto", "mlp", "cnn" or "module:factory") names."""
    check_observation_space(observation_space)
    shape = tuple(observation_space.shape)
    if policy == "auto":
        policy = "cnn" if is_image_space(observation_space) else "mlp"
    if policy == "mlp":
        n_in = int(np.prod(shape))
        sizes = [n_in, *hidden_sizes]
        net = ActorCritic(
            MLP(sizes, activation),
            MLP(sizes, activation),
            sizes[-1],
            sizes[-1],
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
        body = load_policy_module(policy, observation_space, action_space)
        with torch.no_grad():
            probe = torch.as_tensor(observation_space.sample()[None], dtype=torch.float32)
            features = body(probe)
        if features.ndim != 2:
            raise ConfigError(
                f"policy {policy!r} must map (batch, *obs_shape) to (batch, features); "
                f"it returned shape {tuple(features.shape)}"
            )
        n = int(features.shape[1])
        return ActorCritic(body, None, n, n, distribution, log_std_init, flatten=False)
    if ortho_init:
        for body in bodies:
            body.apply(lambda m: orthogonal_(m, math.sqrt(2)))
        orthogonal_(net.actor_head, 0.01)
        orthogonal_(net.critic_head, 1.0)
    return net


def load_policy_module(target: str, observation_space: gym.Space, action_space: gym.Space) -> Any:
    """Import ``"package.module:factory"`` and build the user's body with it."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigError(
            f"policy must be 'auto', 'mlp', 'cnn' or 'package.module:factory', got {target!r}"
        )
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load policy {target!r}: {exc}") from exc
    body = factory(observation_space, action_space)
    if not isinstance(body, nn.Module):
        raise ConfigError(
            f"policy {target!r} must return a torch.nn.Module, got {type(body).__name__}"
        )
    return body
