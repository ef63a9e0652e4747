"""Twin delayed deep deterministic policy gradient (TD3).

Fujimoto, van Hoof & Meger (2018), "Addressing Function Approximation Error in Actor-Critic
Methods", ICML, Algorithm 1::

    initialise critics Q_theta1, Q_theta2 and actor pi_phi; targets theta'_i <- theta_i,
    phi' <- phi; replay buffer B
    for t = 1 to T
        a ~ pi_phi(s) + eps, eps ~ N(0, sigma); observe r, s'; store (s, a, r, s') in B
        sample a minibatch of N transitions (s, a, r, s') from B
        a~ <- pi_phi'(s') + eps, eps ~ clip(N(0, sigma~), -c, c)     target policy smoothing
        y <- r + gamma min_{i=1,2} Q_theta'_i(s', a~)                  clipped double Q
        theta_i <- argmin N^-1 sum (y - Q_theta_i(s, a))^2
        if t mod d = 0                                                 delayed updates
            grad_phi J(phi) = N^-1 sum grad_a Q_theta1(s, a)|a=pi_phi(s) grad_phi pi_phi(s)
            theta'_i <- tau theta_i + (1 - tau) theta'_i
            phi' <- tau phi + (1 - tau) phi'

Actions live in ``[-1, 1]`` (the actor's tanh output, the buffer's scale): the exploration
noise ``sigma = 0.1``, the smoothing noise ``sigma~ = 0.2`` and its clip ``c = 0.5`` are in
that scale, and noisy actions are clipped to it, as the paper's are to the action bounds.
``action_noise`` trades the paper's Gaussian exploration noise for DDPG's Ornstein-Uhlenbeck
process or a user's class (:mod:`rlx_offpolicy.noise`).
Both critics are one batched network (:class:`~rlx_offpolicy.networks.CriticEnsemble`).

Defaults are Stable-Baselines3's, which follow the authors' updated reference code rather
than the paper's Table 3: two hidden layers of 256 (the paper: 400 and 300) and minibatches of
256 (the paper: 100). 256-256 is what the authors' repository and SB3 settled on, learns as
well on the paper's tasks, and costs about half of 400-300 per update here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.config import hyperparameter
from rlx_offpolicy.base import twin_priority_errors
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
class TD3Config(NoisyActorConfig):
    """Hyperparameters of TD3 (defaults: Stable-Baselines3's, the paper's noise and delay)."""

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
    policy_delay: int = hyperparameter(2, "d: critic updates per actor and target update", low=1)
    target_policy_noise: float = hyperparameter(
        0.2, "sigma~ of the target policy smoothing noise, in the [-1, 1] action scale", low=0
    )
    target_noise_clip: float = hyperparameter(
        0.5, "c: the smoothing noise is clipped to [-c, c]", low=0
    )


class TD3(NoisyActorAgent):
    """TD3: clipped double Q-learning, target policy smoothing, delayed policy updates.

    Logged metrics (of the last update of each training): ``critic_loss`` (the two critics'
    mean squared errors summed), ``actor_loss`` (``-Q_theta1(s, pi(s))``, of the last actor
    update), ``q_mean`` (both critics, the actions taken), ``grad_norm`` (the critics', when
    clipping), ``updates``.
    """

    Config: ClassVar[type] = TD3Config
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
                2, c.network, *spaces, critic_hidden, c.activation, c.network_kwargs, self.combined
            ),
            self.device,
            target=True,
        )
        actor_step, critic_step = c.step_sizes()
        self.optimizers = {
            "actor": self.new_optimizer(self.actor.vector, actor_step, eps=1e-8),
            "critic": self.new_optimizer(self.critic.vector, critic_step, eps=1e-8),
        }
        #: The loss of the last policy step, logged until the next (a seed batch's learner:
        #: one per seed, NaN for a seed that has taken none yet).
        self.last_actor_loss: torch.Tensor | None = None
        self.build_noise()
        self.bind_acting()

    def bind_acting(self) -> None:
        """The actor's NumPy pass on the CPU, over its memory as it is now."""
        self._policy = self.actor.module.numpy_forward() if self.device.type == "cpu" else None

    # -- acting -------------------------------------------------------------------------------

    def greedy(self, observations: np.ndarray) -> np.ndarray:
        """``pi_phi(s)``."""
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
        actions = batch["actions"]

        # The critics' outputs are (2, batch), (K, 2, batch) in a seed batch.
        with torch.no_grad():
            # Target policy smoothing: a~ = clip(pi_phi'(s') + clip(eps, -c, c), -1, 1).
            noise = self.normal_noise(actions.shape).mul_(c.target_policy_noise)
            noise.clamp_(-c.target_noise_clip, c.target_noise_clip)
            next_actions = (self.actor.target(next_observations) + noise).clamp_(-1.0, 1.0)
            # Clipped double Q-learning: the smaller of the two target critics.
            next_q = self.critic.target(next_observations, next_actions).min(-2).values
            not_terminated = 1.0 - batch["terminated"].float()
            target = batch["rewards"] + batch["discounts"] * not_terminated * next_q
        q = self.critic.module(observations, actions)  # both critics at once
        errors = q - target.unsqueeze(-2)
        # Prioritized replay: each term weighted by its importance-sampling weight.
        critic_loss = self.weighted_mean(errors.square(), batch).sum(-1)
        grad_norm = self.gradient_step(critic_loss, self.optimizers["critic"], [self.critic.vector])
        self.update_priorities(batch, twin_priority_errors(errors))

        # Whether the policy step is due: per seed in a seed batch, whose update counts are
        # an array (each seed's own, of the seeds that learn in this round).
        count = np.asarray(self.updates) + 1
        due = count % c.policy_delay == 0
        if due.ndim:
            due &= self.batch.learning
        if due.any():
            # Deterministic policy gradient through Q_theta1 alone (its weights held fixed).
            q1 = self.critic.module(
                observations, self.actor.module(observations), members=1, frozen=True
            )
            actor_loss = -q1.mean((-2, -1))
            rows = due if due.ndim else None
            loss = actor_loss.detach()
            if rows is None:
                self.gradient_step(actor_loss, self.optimizers["actor"], [self.actor.vector])
            else:
                self.batch.apply_gradients(
                    actor_loss, self.optimizers["actor"], [self.actor.vector], rows
                )
                loss = torch.where(torch.from_numpy(rows), loss, self.last_actor_loss)
            self.last_actor_loss = loss
            self.critic.update_target(c.tau, rows)
            self.actor.update_target(c.tau, rows)

        if np.any(count % c.gradient_steps):
            return {}  # only the last update of a training is logged: no host reads before
        values = [critic_loss.detach(), q.detach().mean((-2, -1))]
        names = ["critic_loss", "q_mean"]
        if self.last_actor_loss is not None:
            values.append(self.last_actor_loss)
            names.append("actor_loss")
        metrics = dict(zip(names, torch.stack(values).tolist(), strict=True))
        metrics.update(grad_norm=grad_norm, updates=count.astype(float).tolist())
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
