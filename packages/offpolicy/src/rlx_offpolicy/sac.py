"""Soft actor-critic with automatic entropy tuning.

Haarnoja, Zhou, Hartikainen, Tucker, Ha, Tan, Kumar, Zhu, Gupta, Abbeel & Levine (2018),
"Soft Actor-Critic Algorithms and Applications", arXiv:1812.05905, Algorithm 1::

    theta_bar_i <- theta_i for i in {1, 2}
    for each iteration
        for each environment step
            a_t ~ pi_phi(a_t | s_t); s_{t+1} ~ p(s_{t+1} | s_t, a_t)
            D <- D u {(s_t, a_t, r(s_t, a_t), s_{t+1})}
        for each gradient step
            theta_i   <- theta_i - lambda_Q grad J_Q(theta_i)      for i in {1, 2}
            phi       <- phi - lambda_pi grad J_pi(phi)
            alpha     <- alpha - lambda grad J(alpha)
            theta_bar_i <- tau theta_i + (1 - tau) theta_bar_i    for i in {1, 2}

    J_Q(theta_i) = E[ 1/2 (Q_theta_i(s, a) - y)^2 ],
        y = r + gamma (min_j Q_theta_bar_j(s', a') - alpha log pi(a' | s')),  a' ~ pi(. | s')
    J_pi(phi)    = E[ alpha log pi(a~ | s) - min_j Q_theta_j(s, a~) ],  a~ = f_phi(eps; s)
    J(alpha)     = E[ -alpha (log pi(a~ | s) + H_bar) ],  target entropy H_bar = -dim(A)

The policy is a diagonal Gaussian over ``u`` squashed by ``a = tanh(u)`` (Appendix C), with
the reparameterisation ``u = mean(s) + std(s) * eps``, ``eps ~ N(0, I)``, and::

    log pi(a | s) = log N(u; mean, std) - sum_i log(1 - tanh(u_i)^2),
    log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2 u))       (stable for large |u|).

The log standard deviation depends on the state and is clamped to ``[log_std_min,
log_std_max]``. Actions live in ``[-1, 1]`` (the buffer's scale), rescaled to the action
space's bounds for the environment. Both critics are one batched network
(:class:`~rlx_offpolicy.networks.CriticEnsemble`); with a CNN or a user's ``network`` the
actor and each critic encode the observations with a body of their own. ``alpha`` is learned
through ``log alpha`` (positive by construction) with its own Adam; as in the authors' code
the temperature loss is taken in ``log alpha``, ``-log alpha (log pi + H_bar)``, whose
gradient is the paper's divided by ``alpha > 0``: the same fixed point. ``alpha`` may instead
be fixed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlx.config import hyperparameter
from rlx_offpolicy.base import ActorCriticConfig, OffPolicyAgent, twin_priority_errors
from rlx_offpolicy.networks import (
    CriticEnsemble,
    FlatNetwork,
    GaussianActor,
    critic_ensemble,
    feature_body,
    resolve_network,
    retain_freed_memory,
)

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


@dataclass
class SoftActorCriticConfig(ActorCriticConfig):
    """What the agents with SAC's squashed Gaussian policy and entropy coefficient (SAC,
    CrossQ) share: the temperature and the clamp of the policy's log std."""

    alpha: float | None = hyperparameter(
        None, "fixed entropy coefficient alpha (None: learned, automatic tuning)", low=0
    )
    initial_alpha: float = hyperparameter(
        1.0, "alpha at the start when it is learned", low=0, low_open=True
    )
    target_entropy: float | None = hyperparameter(
        None, "H_bar, the entropy alpha is tuned toward (None: -dim(A))"
    )
    log_std_min: float = hyperparameter(-20.0, "lower clamp of the policy's log std")
    log_std_max: float = hyperparameter(2.0, "upper clamp of the policy's log std")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.log_std_min >= self.log_std_max:
            raise ValueError(
                f"log_std_min = {self.log_std_min} must be below log_std_max = {self.log_std_max}"
            )


@dataclass
class SACConfig(SoftActorCriticConfig):
    """Hyperparameters of SAC (defaults: Stable-Baselines3's, which are the paper's Table 1,
    but for the warm-up of one minibatch, 256 steps, where SB3 takes 100)."""

    tau: float = hyperparameter(
        0.005,
        "target smoothing: theta_bar <- tau theta + (1 - tau) theta_bar",
        low=0,
        high=1,
        log=True,
        search=(0.001, 0.05),
    )


def squashed_gaussian(
    mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``a = tanh(mean + std * noise)`` and ``log pi(a | s)`` summed over action dimensions.

    ``log N(u; mean, std)`` is written with ``noise = (u - mean) / std`` directly, and the
    change of variables with ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``, which
    stays finite where ``1 - tanh(u)^2`` rounds to 0.
    """
    u = mean + log_std.exp() * noise
    gaussian = -0.5 * noise.square() - log_std - 0.5 * _LOG_2PI
    log_det = 2.0 * (_LOG_2 - u - F.softplus(-2.0 * u))
    return torch.tanh(u), (gaussian - log_det).sum(-1)


class Temperature(nn.Module):
    """``log alpha``, a parameter of its own (so that it is checkpointed like the networks)."""

    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.log_alpha = nn.Parameter(torch.full((1,), math.log(alpha)))


class SAC(OffPolicyAgent):
    """SAC with twin critics, Polyak-averaged targets and a learned temperature.

    Logged metrics (of the last update of each training): ``critic_loss``, ``actor_loss``,
    ``alpha``, ``alpha_loss`` (when alpha is learned), ``entropy`` (``-log pi`` of the
    policy's fresh actions), ``q_mean`` (both critics, the actions taken), ``grad_norm``
    (the critics', when clipping), ``updates``.
    """

    Config: ClassVar[type] = SACConfig
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
            GaussianActor(body, features, action_dim, (c.log_std_min, c.log_std_max)),
            self.device,
        )
        self.critic = FlatNetwork(self.new_critics(critic_hidden), self.device, target=True)
        self.learn_alpha = c.alpha is None
        self.temperature = Temperature(c.initial_alpha).to(self.device)
        self.target_entropy = (
            float(-action_dim) if c.target_entropy is None else float(c.target_entropy)
        )
        actor_step, critic_step = c.step_sizes()
        self.optimizers = {
            "actor": self.new_optimizer(self.actor.vector, actor_step, eps=1e-8),
            "critic": self.new_optimizer(self.critic.vector, critic_step, eps=1e-8),
        }
        if self.learn_alpha:
            self.optimizers["alpha"] = self.new_optimizer(
                self.temperature.log_alpha, c.learning_rate, eps=1e-8
            )
        self.bind_acting()

    def new_critics(self, hidden: tuple[int, ...]) -> CriticEnsemble:
        """The twin critics, each with ``hidden`` layers (TQC's quantile critics override it)."""
        c = self.config
        return critic_ensemble(
            2,
            c.network,
            self.input_space,
            self.env.action_space,
            hidden,
            c.activation,
            c.network_kwargs,
            self.combined,
        )

    def bind_acting(self) -> None:
        """The actor's NumPy pass on the CPU, over its memory as it is now (again after a
        seed batch moves the weights into its stacks)."""
        self._policy = self.actor.module.numpy_forward() if self.device.type == "cpu" else None

    # -- acting -------------------------------------------------------------------------------

    def policy_numpy(self, observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mean and log std of ``u`` for a batch of observations, as NumPy arrays."""
        if self.flat:
            observations = observations.reshape(len(observations), -1)
        if self._policy is not None:
            return self._policy(observations)
        with torch.no_grad():
            mean, log_std = self.actor.module(torch.as_tensor(observations, device=self.device))
        return mean.cpu().numpy(), log_std.cpu().numpy()

    def greedy(self, observations: np.ndarray) -> np.ndarray:
        """The squashed mean, ``tanh(mean(s))``."""
        mean, _ = self.policy_numpy(observations)
        return np.tanh(mean)

    def explore(self, observations: np.ndarray) -> np.ndarray:
        """``a ~ pi(. | s)``: ``tanh(mean + std * eps)``, ``eps`` drawn from the agent's RNG."""
        mean, log_std = self.policy_numpy(observations)
        noise = self.rng.standard_normal(mean.shape, dtype=np.float32)
        return np.tanh(mean + np.exp(log_std) * noise)

    def sample_actions(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised actions ``a~ = tanh(mean + std * eps)`` and ``log pi(a~ | s)``."""
        mean, log_std = self.actor.module(observations)
        noise = self.normal_noise(mean.shape)
        return squashed_gaussian(mean, log_std, noise)

    # -- learning -----------------------------------------------------------------------------

    def alpha(self) -> torch.Tensor:
        """The entropy coefficient: ``exp(log alpha)`` when learned, else the fixed one."""
        if self.learn_alpha:
            return self.temperature.log_alpha.detach().exp()
        return torch.tensor(self.config.alpha, device=self.device)

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        c = self.config
        observations, next_observations = batch["observations"], batch["next_observations"]
        if self.flat:
            observations, next_observations = (
                self.flatten(observations),
                self.flatten(next_observations),
            )
        alpha = self.alpha()

        critic_loss, q_mean, td_errors = self.critic_loss(
            batch, observations, next_observations, alpha
        )
        grad_norm = self.gradient_step(critic_loss, self.optimizers["critic"], [self.critic.vector])
        self.update_priorities(batch, td_errors)

        # J_pi: reparameterised actions through the (frozen) critics.
        actions, log_probs = self.sample_actions(observations)
        q_new = self.policy_value(observations, actions)
        actor_loss = (alpha * log_probs - q_new).mean(-1)
        self.gradient_step(actor_loss, self.optimizers["actor"], [self.actor.vector])

        # J(alpha): raise alpha while the entropy is below H_bar, lower it above.
        alpha_loss = None
        if self.learn_alpha:
            log_alpha = self.temperature.log_alpha
            alpha_loss = -(log_alpha * (log_probs.detach() + self.target_entropy)).mean(-1)
            self.gradient_step(alpha_loss, self.optimizers["alpha"], [log_alpha])

        self.critic.update_target(c.tau)

        if (self.updates + 1) % c.gradient_steps:
            return {}  # only the last update of a training is logged: no host reads before
        values = [critic_loss, actor_loss, alpha, -log_probs.mean(-1), q_mean]
        names = ["critic_loss", "actor_loss", "alpha", "entropy", "q_mean"]
        if alpha_loss is not None:
            values.append(alpha_loss)
            names.append("alpha_loss")
        # one number each, or one per seed in a seed batch (critic_loss's shape)
        numbers = torch.stack([v.detach().reshape(critic_loss.shape) for v in values]).tolist()
        metrics = dict(zip(names, numbers, strict=True))
        metrics.update(grad_norm=grad_norm, updates=float(self.updates + 1))
        if c.prioritized:
            metrics["importance_beta"] = self.importance_beta
        return metrics

    def critic_loss(
        self,
        batch: dict[str, torch.Tensor],
        observations: torch.Tensor,
        next_observations: torch.Tensor,
        alpha: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """J_Q: both critics regress on the soft target of the smaller target critic. Returns
        the loss (importance-weighted under prioritized replay), the critics' mean value of
        the actions taken and the TD errors that set priorities."""
        with torch.no_grad():
            next_actions, next_log_probs = self.sample_actions(next_observations)
            next_q = self.critic.target(next_observations, next_actions).min(-2).values
            not_terminated = 1.0 - batch["terminated"].float()
            soft_value = next_q - alpha * next_log_probs
            target = batch["rewards"] + batch["discounts"] * not_terminated * soft_value
        q = self.critic.module(observations, batch["actions"])  # (2, batch)
        errors = q - target.unsqueeze(-2)
        # Prioritized replay: each term weighted by its importance-sampling weight.
        critic_loss = 0.5 * self.weighted_mean(errors.square(), batch).sum(-1)
        return critic_loss, q.detach().mean((-2, -1)), twin_priority_errors(errors)

    def policy_value(self, observations: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """What the actor maximises besides the entropy: the smaller critic's ``Q(s, a~)``,
        the critics' weights frozen (the gradient reaches the actions only)."""
        return self.critic.module(observations, actions, frozen=True).min(-2).values

    # -- checkpoints --------------------------------------------------------------------------

    def policy_modules(self) -> dict[str, nn.Module]:
        return {"actor": self.actor.module}

    def training_modules(self) -> dict[str, nn.Module]:
        return {
            "critic": self.critic.module,
            "critic_target": self.critic.target,
            "temperature": self.temperature,
        }
