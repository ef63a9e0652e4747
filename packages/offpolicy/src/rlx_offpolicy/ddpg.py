"""Deep deterministic policy gradient (DDPG).

Lillicrap, Hunt, Pritzel, Heess, Erez, Tassa, Silver & Wierstra (2016), "Continuous control
with deep reinforcement learning", ICLR, Algorithm 1::

    initialise critic Q(s, a | theta_Q) and actor mu(s | theta_mu); targets Q', mu' with
    theta_Q' <- theta_Q, theta_mu' <- theta_mu; replay buffer R
    for each episode
        initialise a random process N for action exploration
        for t = 1, T
            a_t = mu(s_t | theta_mu) + N_t; observe r_t, s_{t+1}; store the transition in R
            sample a minibatch of N transitions (s_i, a_i, r_i, s_{i+1}) from R
            y_i = r_i + gamma Q'(s_{i+1}, mu'(s_{i+1} | theta_mu') | theta_Q')
            update the critic by minimising L = N^-1 sum_i (y_i - Q(s_i, a_i | theta_Q))^2
            update the actor by the sampled policy gradient
                grad J = N^-1 sum_i grad_a Q(s, a | theta_Q)|s_i, mu(s_i) grad mu(s | theta_mu)|s_i
            theta_Q' <- tau theta_Q + (1 - tau) theta_Q'
            theta_mu' <- tau theta_mu + (1 - tau) theta_mu'

The exploration process ``N`` is Gaussian (``action_noise = "gaussian"``, Stable-Baselines3's
default use), or, as in the paper, Ornstein-Uhlenbeck (Uhlenbeck & Ornstein 1930),
``x <- x + theta (0 - x) dt + sigma sqrt(dt) eps``, one process per environment, restarted at
zero with each episode and part of the resume state, or a user's class
(:mod:`rlx_offpolicy.noise`, shared with TD3). Noise and actions are in the actor's
``[-1, 1]`` scale (the buffer's), noisy actions clipped to it.

Defaults are Stable-Baselines3's rather than the paper's section 7: one learning rate of
1e-3 for both networks (the paper: 1e-4 actor, 1e-3 critic), tau 0.005 (0.001), minibatches
of 256 (64), two hidden layers of 256 (400 and 300), no L2 penalty on the critic (1e-2), no
batch normalisation, and PyTorch's default initialisation of the output layers (the paper:
uniform in +-3e-3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.config import hyperparameter
from rlx_offpolicy.networks import (
    DeterministicActor,
    FlatNetwork,
    critic_ensemble,
    feature_body,
    resolve_network,
    retain_freed_memory,
)
from rlx_offpolicy.noise import NoisyActorAgent, NoisyActorConfig


@dataclass
class DDPGConfig(NoisyActorConfig):
    """Hyperparameters of DDPG (defaults: Stable-Baselines3's; the paper's OU noise optional)."""

    learning_rate: float = hyperparameter(
        1e-3, "Adam step size", low=0, low_open=True, search=(1e-5, 1e-2)
    )
    tau: float = hyperparameter(
        0.005,
        "target update: theta' <- tau theta + (1 - tau) theta'",
        low=0,
        high=1,
        log=True,
        search=(0.001, 0.05),
    )


class DDPG(NoisyActorAgent):
    """DDPG: one critic, a deterministic actor, Polyak-averaged targets.

    Logged metrics (of the last update of each training): ``critic_loss``, ``actor_loss``
    (``-Q(s, mu(s))``), ``q_mean`` (the actions taken), ``grad_norm`` (the critic's, when
    clipping), ``updates``.
    """

    Config: ClassVar[type] = DDPGConfig
    batched_update = True
    ACTIONS: ClassVar[tuple[type, ...]] = (gym.spaces.Box,)

    def build(self) -> None:
        c, spaces = self.config, (self.input_space, self.env.action_space)
        retain_freed_memory()
        action_dim, (hidden, critic_hidden) = self.action_shape[0], c.layer_sizes()
        #: Whether the networks take flattened vectors (an MLP) rather than observations as shaped.
        self.flat = resolve_network(c.network, spaces[0], self.combined) == "mlp"
        body, features = feature_body(
            c.network,
            *spaces,
            hidden,
            c.activation,
            network_kwargs=c.network_kwargs,
            combined=self.combined,
        )
        self.actor = FlatNetwork(
            DeterministicActor(body, features, action_dim), self.device, target=True
        )
        self.critic = FlatNetwork(
            critic_ensemble(
                1, c.network, *spaces, critic_hidden, c.activation, c.network_kwargs, self.combined
            ),
            self.device,
            target=True,
        )
        actor_step, critic_step = c.step_sizes()
        self.optimizers = {
            "actor": self.new_optimizer(self.actor.vector, actor_step, eps=1e-8),
            "critic": self.new_optimizer(self.critic.vector, critic_step, eps=1e-8),
        }
        self.build_noise()
        self.bind_acting()

    def bind_acting(self) -> None:
        """The actor's NumPy pass on the CPU, over its memory as it is now (again after a
        seed batch moves the weights into its stacks)."""
        self._policy = self.actor.module.numpy_forward() if self.device.type == "cpu" else None

    # -- acting -------------------------------------------------------------------------------

    def greedy(self, observations: np.ndarray) -> np.ndarray:
        """``mu(s)``."""
        if self.flat:
            observations = observations.reshape(len(observations), -1)
        if self._policy is not None:
            return self._policy(observations)
        with torch.no_grad():
            actions = self.actor.module(torch.as_tensor(observations, device=self.device))
        return actions.cpu().numpy()

    # -- learning -----------------------------------------------------------------------------

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        c = self.config
        observations, next_observations = batch["observations"], batch["next_observations"]
        if self.flat:
            observations, next_observations = (
                self.flatten(observations),
                self.flatten(next_observations),
            )

        # The critic's outputs are (1, batch), (K, 1, batch) in a seed batch.
        with torch.no_grad():
            next_actions = self.actor.target(next_observations)
            next_q = self.critic.target(next_observations, next_actions)[..., 0, :]
            not_terminated = 1.0 - batch["terminated"].float()
            target = batch["rewards"] + batch["discounts"] * not_terminated * next_q
        q = self.critic.module(observations, batch["actions"])[..., 0, :]
        errors = q - target
        # Prioritized replay: each term weighted by its importance-sampling weight.
        critic_loss = self.weighted_mean(errors.square(), batch)
        grad_norm = self.gradient_step(critic_loss, self.optimizers["critic"], [self.critic.vector])
        self.update_priorities(batch, errors.abs())

        # The deterministic policy gradient: grad_a Q (weights held fixed) through mu.
        actor_loss = -self.critic.module(
            observations, self.actor.module(observations), frozen=True
        ).mean((-2, -1))
        self.gradient_step(actor_loss, self.optimizers["actor"], [self.actor.vector])

        self.critic.update_target(c.tau)
        self.actor.update_target(c.tau)

        if (self.updates + 1) % c.gradient_steps:
            return {}  # only the last update of a training is logged: no host reads before
        values = torch.stack([critic_loss.detach(), actor_loss.detach(), q.detach().mean(-1)])
        metrics = dict(zip(["critic_loss", "actor_loss", "q_mean"], values.tolist(), strict=True))
        metrics.update(grad_norm=grad_norm, updates=float(self.updates + 1))
        if c.prioritized:
            metrics["importance_beta"] = self.importance_beta
        return metrics

    # -- checkpoints --------------------------------------------------------------------------

    def policy_modules(self) -> dict[str, nn.Module]:
        return {"actor": self.actor.module}

    @torch.no_grad()
    def sync_policy_targets(self) -> None:
        assert self.actor.target_vector is not None
        self.actor.target_vector.copy_(self.actor.vector)

    def training_modules(self) -> dict[str, nn.Module]:
        return {
            "actor_target": self.actor.target,
            "critic": self.critic.module,
            "critic_target": self.critic.target,
        }
