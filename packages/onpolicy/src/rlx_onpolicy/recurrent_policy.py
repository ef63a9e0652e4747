"""The recurrent actor-critic of recurrent PPO: an encoder, an LSTM or GRU, then MLP heads.

A :class:`RecurrentActorCritic` reads observations through an encoder (flattened vectors for
``mlp``, the Nature CNN for images, or the user's ``package.module:factory`` module), feeds
the features to a recurrent cell (``cell``: ``lstm`` or ``gru``, ``recurrent_layers`` layers
of ``recurrent_size`` units) and maps the cell's output through MLPs of ``hidden_sizes`` to
the distribution's parameters and the state value. The critic (``recurrent_critic``, the
choices of sb3-contrib's ``RecurrentActorCriticPolicy``):

- ``separate``: a recurrent cell of its own (sb3-contrib's ``enable_critic_lstm=True``, its
  default);
- ``shared``: the actor's cell's output, without a gradient into it (``shared_lstm=True``);
- ``none``: a linear layer on the features, no memory (``enable_critic_lstm=False``).

The recurrent state of a batch of environments is one float tensor ``(batch, state_size)``:
every layer's hidden state (and an LSTM's cell state) of the actor's cell, then the critic's,
side by side, so that a rollout stores it, a checkpoint saves it and an episode start zeroes
it as it does any array. :meth:`RecurrentActorCritic.forward` runs sequences
``(batch, length, *obs_shape)`` from such a state in one call of the cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.errors import ConfigError, SpaceError
from rlx.nn.distributions import ActionDistribution
from rlx.nn.layers import MLP, NatureCNN, is_image_space, orthogonal_
from rlx.nn.optim import flatten_parameters
from rlx_onpolicy.policies import user_body

#: The recurrent cells, by the name the ``cell`` setting gives.
CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}


class RecurrentActorCritic(nn.Module):
    """(observation sequences, recurrent state) -> (distribution parameters, values, state).

    ``critic`` is ``separate``, ``shared`` or ``none`` (see the module's docstring).
    """

    def __init__(
        self,
        encoder: nn.Module,
        features: int,
        cell: str,
        recurrent_size: int,
        recurrent_layers: int,
        critic: str,
        actor_hidden_sizes: Sequence[int],
        critic_hidden_sizes: Sequence[int],
        activation: str,
        distribution: ActionDistribution,
        log_std_init: float,
    ) -> None:
        super().__init__()
        self.cell, self.critic_mode = cell, critic
        self.recurrent_size, self.recurrent_layers = recurrent_size, recurrent_layers
        self.encoder = encoder
        rnn = CELLS[cell]
        self.actor_rnn = rnn(features, recurrent_size, recurrent_layers, batch_first=True)
        self.critic_rnn = (
            rnn(features, recurrent_size, recurrent_layers, batch_first=True)
            if critic == "separate"
            else None
        )
        self.critic_linear = nn.Linear(features, recurrent_size) if critic == "none" else None
        self.actor_mlp = _mlp(recurrent_size, actor_hidden_sizes, activation)
        self.critic_mlp = _mlp(recurrent_size, critic_hidden_sizes, activation)
        actor_out = actor_hidden_sizes[-1] if actor_hidden_sizes else recurrent_size
        critic_out = critic_hidden_sizes[-1] if critic_hidden_sizes else recurrent_size
        self.actor_head = nn.Linear(actor_out, distribution.param_dim)
        self.critic_head = nn.Linear(critic_out, 1)
        self.log_std = (
            nn.Parameter(torch.full((distribution.param_dim,), float(log_std_init)))
            if distribution.has_log_std
            else None
        )

    @property
    def rnn_state_size(self) -> int:
        """The numbers one recurrent cell keeps per environment: hidden (and cell) states of
        every layer."""
        per_layer = 2 if self.cell == "lstm" else 1
        return per_layer * self.recurrent_layers * self.recurrent_size

    @property
    def state_size(self) -> int:
        """The width of the recurrent state of one environment: the actor's cell's numbers,
        and the critic's when it has a cell of its own."""
        cells = 2 if self.critic_rnn is not None else 1
        return cells * self.rnn_state_size

    def initial_state(self, n: int, device: Any = None) -> torch.Tensor:
        """The recurrent state at the start of ``n`` episodes: zeros ``(n, state_size)``."""
        return torch.zeros(n, self.state_size, device=device)

    def _unpack(self, state: torch.Tensor) -> Any:
        """One cell's slice of ``state`` ``(batch, rnn_state_size)`` as the cell takes it:
        ``(h, c)`` for an LSTM, ``h`` for a GRU, each ``(layers, batch, size)``."""
        batch = state.shape[0]
        parts = state.reshape(batch, -1, self.recurrent_layers, self.recurrent_size)
        parts = parts.permute(1, 2, 0, 3).contiguous()
        return (parts[0], parts[1]) if self.cell == "lstm" else parts[0]

    def _pack(self, state: Any) -> torch.Tensor:
        """The inverse of :meth:`_unpack`: a cell's state as ``(batch, rnn_state_size)``."""
        parts = torch.stack(state) if self.cell == "lstm" else state[None]
        return parts.permute(2, 0, 1, 3).reshape(parts.shape[2], -1)

    def forward(
        self, observations: torch.Tensor, state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run sequences ``(batch, length, *obs_shape)`` from ``state`` ``(batch, state_size)``:
        returns the parameters ``(batch, length, param_dim)``, the values ``(batch, length)``
        and the state after the last step. Episode starts are not handled here: a sequence
        belongs to one episode (the caller zeroes the state at a start)."""
        batch, length = observations.shape[:2]
        features = self.encoder(observations.flatten(0, 1)).reshape(batch, length, -1)
        size = self.rnn_state_size
        actor, actor_state = self.actor_rnn(features, self._unpack(state[:, :size]))
        new_state = [self._pack(actor_state)]
        if self.critic_rnn is not None:
            critic, critic_state = self.critic_rnn(features, self._unpack(state[:, size:]))
            new_state.append(self._pack(critic_state))
        elif self.critic_linear is not None:
            critic = self.critic_linear(features)
        else:  # shared: the actor's memory, the critic's loss not reaching it
            critic = actor.detach()
        params = self.actor_head(self.actor_mlp(actor))
        values = self.critic_head(self.critic_mlp(critic)).squeeze(-1)
        return params, values, torch.cat(new_state, 1)

    def step(
        self, observations: torch.Tensor, state: torch.Tensor, starts: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of ``batch`` environments ``(batch, *obs_shape)``: ``state`` is zeroed where
        ``starts`` (bool ``(batch,)``) marks a new episode; returns the parameters, the values
        and the new state."""
        state = state * (~starts).to(state.dtype)[:, None]
        params, values, new_state = self(observations[:, None], state)
        return params[:, 0], values[:, 0], new_state

    def flatten_parameters(self) -> None:
        """Move the weights into two flat vectors, ``actor_vector`` (encoder, the actor's cell,
        MLP, head and log-std) and ``critic_vector`` (the rest), as
        :meth:`rlx_onpolicy.policies.ActorCritic.flatten_parameters` does."""
        object.__setattr__(self, "actor_vector", flatten_parameters(self.actor_parameters()))
        object.__setattr__(self, "critic_vector", flatten_parameters(self.critic_parameters()))

    def vectors(self) -> list[nn.Parameter]:
        """The two flat parameter vectors (after :meth:`flatten_parameters`)."""
        return [self.actor_vector, self.critic_vector]

    def actor_parameters(self) -> list[nn.Parameter]:
        """What the policy gradient moves: the encoder, the actor's cell, MLP, head, log-std."""
        modules = (self.encoder, self.actor_rnn, self.actor_mlp, self.actor_head)
        params = [p for module in modules for p in module.parameters()]
        return params + ([self.log_std] if self.log_std is not None else [])

    def critic_parameters(self) -> list[nn.Parameter]:
        """Every parameter the actor does not have: the critic's cell or linear layer, its MLP
        and head."""
        actor = {id(p) for p in self.actor_parameters()}
        return [p for p in self.parameters() if id(p) not in actor]


def _mlp(n_in: int, sizes: Sequence[int], activation: str) -> nn.Module:
    """An MLP from ``n_in`` through ``sizes`` (the identity when there are none)."""
    return MLP([n_in, *sizes], activation) if sizes else nn.Identity()


def build_recurrent_actor_critic(
    observation_space: gym.Space,
    action_space: gym.Space,
    distribution: ActionDistribution,
    config: Any,
) -> RecurrentActorCritic:
    """The :class:`RecurrentActorCritic` the settings of ``config`` describe: the encoder
    ``policy`` names (``auto``: cnn for images, else mlp), the cell, the critic, the MLPs'
    ``hidden_sizes`` after the cell, orthogonal initialisation of the encoder, MLPs and heads
    when ``ortho_init`` (the cells keep torch's initialisation, as sb3-contrib's do)."""
    c = config
    shape = tuple(observation_space.shape)
    policy = c.policy
    if policy == "auto":
        policy = "cnn" if is_image_space(observation_space) else "mlp"
    if policy == "mlp":
        encoder: nn.Module = nn.Flatten()
        features = int(np.prod(shape))
    elif policy == "cnn":
        if len(shape) != 3:
            raise SpaceError(
                f"the cnn encoder needs image observations (H, W, C) or (C, H, W); got shape "
                f"{shape}. Use policy=mlp for vector observations"
            )
        encoder, features = NatureCNN(shape), 512
    elif ":" in policy:
        encoder, features = user_body(
            policy, "policy", observation_space, action_space, c.policy_kwargs
        )
    else:
        raise ConfigError(
            f"recurrent-ppo's policy is the encoder before its recurrent cell: 'auto', 'mlp', "
            f"'cnn' or 'package.module:factory', got {policy!r}"
        )
    actor_sizes, critic_sizes = c.layer_sizes()
    net = RecurrentActorCritic(
        encoder,
        features,
        c.cell,
        c.recurrent_size,
        c.recurrent_layers,
        c.recurrent_critic,
        actor_sizes,
        critic_sizes,
        c.activation,
        distribution,
        c.log_std_init,
    )
    if c.ortho_init:
        modules = [net.actor_mlp, net.critic_mlp, net.critic_linear]
        if ":" not in policy:  # the user's encoder keeps its own initialisation
            modules.append(net.encoder)
        for module in modules:
            if module is not None:
                module.apply(lambda m: orthogonal_(m, math.sqrt(2)))
        orthogonal_(net.actor_head, 0.01)
        orthogonal_(net.critic_head, 1.0)
    return net
