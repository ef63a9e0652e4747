"""Stein variational policy gradient (SVPG).

Liu, Ramachandran, Liu & Peng (2017), "Stein Variational Policy Gradient", UAI, Algorithm 1,
on Liu & Wang (2016), "Stein Variational Gradient Descent". ``n`` policies (particles)
theta_1..theta_n are moved together towards the distribution q(theta) proportional to
exp(J(theta) / alpha) q0(theta) (flat prior q0 here)::

    for iteration = 1, 2, ...
        for each particle i: collect a rollout, estimate grad J(theta_i) (VPG or A2C)
        k(a, b) = exp(-|a - b|^2 / h),  h = median_ij |theta_i - theta_j|^2 / log(n + 1)
        phi_i = 1/n sum_j [ k(theta_j, theta_i) grad J(theta_j) / alpha
                           + grad_{theta_j} k(theta_j, theta_i) ]
        theta_i <- theta_i + epsilon phi_i                     (Adam on -phi_i here)

The first term moves each particle along a kernel-weighted average of all the particles'
policy gradients; the second pushes particles apart, so the population keeps exploring
different policies. The temperature alpha trades them off: a large alpha is more
repulsion (exploration), a small one more exploitation; as alpha grows to infinity the
particles spread out, and at alpha -> 0 they become independent policy-gradient learners.

Only the policy parameters are particles (body, head and log-std; see
:meth:`~rlx_onpolicy.policies.ActorCritic.actor_parameters`). Each particle keeps its own
value function, vector environment and normalisers, trained as its base algorithm does:
``particle=a2c`` one value step per rollout with ``vf_coef``, ``particle=vpg``
``value_iterations`` steps. ``act`` uses the particle with the best recent training return.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlx.config import hyperparameter
from rlx.errors import ConfigError, TrainingError
from rlx.nn.optim import Adam, apply_gradients
from rlx.protocols import AgentState, Iteration
from rlx.seeding import derive
from rlx.vector import EpisodeReturns
from rlx_onpolicy.base import OnPolicyAgent, OnPolicyConfig, explained_variance, standardize
from rlx_onpolicy.policies import ActorCritic
from rlx_onpolicy.sampler import Sampler


@dataclass
class SVPGConfig(OnPolicyConfig):
    """Hyperparameters of SVPG: the particle count and temperature, and the base algorithm's."""

    n_particles: int = hyperparameter(4, "policy particles n", low=1)
    particle: str = hyperparameter(
        "a2c",
        "how each particle estimates its gradient and trains its critic: a2c or vpg",
        choices=("a2c", "vpg"),
    )
    temperature: float = hyperparameter(
        1.0, "alpha: larger values weigh the repulsion (exploration) more", low=0, low_open=True
    )
    n_envs: int = hyperparameter(4, "environments of each particle", low=1)
    n_steps: int = hyperparameter(32, "steps per environment per rollout", low=1)
    gae_lambda: float = hyperparameter(0.97, "GAE lambda", low=0, high=1, search=(0.8, 1.0))
    learning_rate: float = hyperparameter(
        1e-3,
        "Adam step size of the particles (epsilon)",
        low=0,
        low_open=True,
        search=(1e-5, 1e-2),
    )
    value_learning_rate: float = hyperparameter(
        1e-3, "Adam step size of the value functions", low=0, low_open=True
    )
    critic_learning_rate: float | None = hyperparameter(
        None,
        "the value functions' step size (None: value_learning_rate)",
        low=0,
        low_open=True,
    )
    value_iterations: int = hyperparameter(
        1, "value steps per rollout (vpg particles; a2c particles take one)", low=1
    )
    normalize_advantage: bool = hyperparameter(True, "standardise each particle's advantages")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.optimizer != "adam":
            raise ConfigError(
                f"svpg takes optimizer=adam only (got {self.optimizer!r}): the Stein step and "
                "the extra value steps work on rlx's flat Adam; set its betas and eps with "
                "optimizer_kwargs"
            )

    def step_sizes(self) -> tuple[float, float]:
        """The particles' and the value functions' learning rates."""
        actor, critic = self.actor_learning_rate, self.critic_learning_rate
        return (
            self.learning_rate if actor is None else actor,
            self.value_learning_rate if critic is None else critic,
        )


class SVPG(OnPolicyAgent):
    """SVPG over ``n_particles`` actor-critics, each with its own environments.

    Logged metrics: ``policy_objective`` and ``value_loss`` (means over particles),
    ``bandwidth`` (h), ``kernel_mean`` (mean off-diagonal kernel value: 1 when the particles
    coincide, towards 0 as they spread), ``best_particle``, ``explained_variance``.
    """

    Config = SVPGConfig

    def build(self) -> None:
        c = self.config
        self.policies: list[ActorCritic] = [self.new_policy() for _ in range(c.n_particles)]
        self.policy = self.policies[0]
        self.best = 0
        self.recent = np.zeros(c.n_particles)
        actor, critic = c.step_sizes()
        self.optimizers = {
            "actors": self.new_optimizer([p.actor_vector for p in self.policies], actor),
            "critics": self.new_optimizer([p.critic_vector for p in self.policies], critic),
        }

    def learning_rates(self) -> dict[str, float]:
        actor, critic = self.config.step_sizes()
        return {"actors": actor, "critics": critic}

    def new_samplers(self) -> dict[str, Sampler]:
        return {
            f"particle{i}": Sampler(
                self.env,
                self.config,
                self.distribution,
                self.device,
                derive(self.seed, "particle", i),
            )
            for i in range(self.config.n_particles)
        }

    def networks(self) -> dict[str, Any]:
        """Every particle's actor-critic, by name ``particle{i}``."""
        return {f"particle{i}": policy for i, policy in enumerate(self.policies)}

    # -- one iteration --------------------------------------------------------------------------

    def step(self) -> Iteration:
        """One update of every particle: each collects a rollout, then the particles move
        together along the kernelised gradients (the module docstring's SVGD step)."""
        returns = EpisodeReturns()  # carries each episode's final info numbers too
        lengths: list[int] = []
        steps = 0
        gradients, objectives, value_losses, variances = [], [], [], []
        for i, (policy, sampler) in enumerate(
            zip(self.policies, self._samplers.values(), strict=True)
        ):
            finished, finished_lengths, n = sampler.collect(policy, self.generator, self.sample_rng)
            returns += finished
            lengths += finished_lengths
            steps += n
            if finished:
                self.recent[i] = float(np.mean(finished))
            self.env_steps += n
            self.apply_learning_rates()
            gradient, objective, value_loss, variance = self._particle_gradient(policy, sampler)
            gradients.append(gradient)
            objectives.append(objective)
            value_losses.append(value_loss)
            variances.append(variance)
        bandwidth, kernel_mean = self._stein_step(torch.stack(gradients))
        self.schedulers.step(self.optimizers.values())
        self.updates += 1
        self.best = int(np.argmax(self.recent))
        self.policy = self.policies[self.best]
        self.sampler = self._samplers[f"particle{self.best}"]
        metrics = {
            "policy_objective": float(np.mean(objectives)),
            "value_loss": float(np.mean(value_losses)),
            "explained_variance": float(np.mean(variances)),
            "bandwidth": bandwidth,
            "kernel_mean": kernel_mean,
            "best_particle": float(self.best),
            "learning_rate": float(self.optimizers["actors"].param_groups[0]["lr"]),
        }
        return Iteration(steps, returns, lengths, metrics)

    def _particle_gradient(
        self, policy: ActorCritic, sampler: Sampler
    ) -> tuple[torch.Tensor, float, float, float]:
        """grad J of one particle's policy (a copy); its critic's gradient is left in place."""
        c = self.config
        data = sampler.buffer.flat()
        params, values = policy(data["observations"])
        log_probs, entropy = self.distribution.log_prob_entropy(
            params, policy.log_std, data["actions"], entropy=c.ent_coef > 0
        )
        advantages = data["advantages"]
        if c.normalize_advantage and len(advantages) > 1:
            advantages = standardize(advantages)
        objective = (log_probs * advantages).mean()
        if entropy is not None:
            objective = objective + c.ent_coef * entropy.mean()
        value_loss = (data["returns"] - values).square().mean()
        policy.actor_vector.grad.zero_()
        policy.critic_vector.grad.zero_()
        if c.particle == "a2c":
            loss = -objective + c.vf_coef * value_loss
            self.check_finite(loss)
            # The actor's gradient holds -grad J (plus, with a shared body, the value
            # loss's share, which SVPG leaves out: recompute it alone).
            if policy.critic_body is None:
                (-objective).backward(retain_graph=True)
                gradient = -policy.actor_vector.grad.clone()
                policy.actor_vector.grad.zero_()
                (c.vf_coef * value_loss).backward()
            else:
                loss.backward()
                gradient = -policy.actor_vector.grad.clone()
        else:
            self.check_finite(objective)
            (-objective).backward()
            gradient = -policy.actor_vector.grad.clone()
            for _ in range(c.value_iterations - 1):
                self._value_step(policy, data)
            value_loss = (data["returns"] - policy.values(data["observations"])).square().mean()
            policy.critic_vector.grad.zero_()
            value_loss.backward()
        self.check_finite(value_loss)
        return (
            gradient,
            float(objective.detach()),
            float(value_loss.detach()),
            explained_variance(data["values"], data["returns"]),
        )

    def _value_step(self, policy: ActorCritic, data: dict[str, torch.Tensor]) -> None:
        """One extra value step of a vpg particle, on the shared critics' Adam state."""
        group = self.optimizers["critics"].param_groups[0]
        optimizer = Adam(
            [policy.critic_vector], lr=group["lr"], betas=group["betas"], eps=group["eps"]
        )
        optimizer.state[policy.critic_vector] = self.optimizers["critics"].state[
            policy.critic_vector
        ]
        value_loss = (data["returns"] - policy.values(data["observations"])).square().mean()
        apply_gradients(value_loss, optimizer, [policy.critic_vector], None, where=self._where())

    @torch.no_grad()
    def _stein_step(self, gradients: torch.Tensor) -> tuple[float, float]:
        """Move every particle along phi (Adam on -phi); critics take their own step."""
        c = self.config
        n = len(self.policies)
        theta = torch.stack([policy.actor_vector.detach() for policy in self.policies])
        squared = torch.cdist(theta, theta).square()
        median = float(squared.median()) if n > 1 else 0.0
        bandwidth = max(median, 1e-8) / math.log(n + 1)
        kernel = torch.exp(-squared / bandwidth)
        # grad_{theta_j} k(theta_j, theta_i) = -2 / h (theta_j - theta_i) k_ji, summed over j.
        repulsion = 2.0 / bandwidth * (theta * kernel.sum(0)[:, None] - kernel.T @ theta)
        phi = (kernel.T @ gradients / c.temperature + repulsion) / n
        for policy, direction in zip(self.policies, phi, strict=True):
            policy.actor_vector.grad.copy_(-direction)
        if c.max_grad_norm is not None:
            for policy in self.policies:
                norm = torch.linalg.vector_norm(policy.actor_vector.grad)
                policy.actor_vector.grad.mul_((c.max_grad_norm / (norm + 1e-6)).clamp_(max=1.0))
        self.optimizers["actors"].step()
        self.optimizers["critics"].step()
        off_diagonal = (kernel.sum() - n) / max(n * (n - 1), 1)
        return bandwidth, float(off_diagonal) if n > 1 else 1.0

    def check_finite(self, loss: torch.Tensor) -> None:
        """Raise a :class:`~rlx.errors.TrainingError` naming the update when ``loss`` is not finite,
        before its gradient reaches any particle."""
        if not torch.isfinite(loss):
            raise TrainingError(
                f"{self._where()}a loss became {loss.item()}; the update was not applied. "
                "Lower learning_rate or temperature, or enable normalize_observations"
            )

    def _where(self) -> str:
        return f"SVPG, update {self.updates + 1} (after {self.env_steps} environment steps): "

    # -- checkpoints ----------------------------------------------------------------------------

    def policy_state(self) -> AgentState:
        """Every particle, and the recent returns that choose the one ``act`` uses."""
        state = super().policy_state()
        state.arrays["recent_returns"] = self.recent.copy()
        return state

    def load_policy_state(self, state: AgentState) -> None:
        """Restore every particle and the recent returns; ``act`` then uses the particle with the
        best of them."""
        super().load_policy_state(state)
        self.recent = state.arrays["recent_returns"].copy()
        self.best = int(np.argmax(self.recent))
        self.policy = self.policies[self.best]
        self.sampler = self._samplers[f"particle{self.best}"]
