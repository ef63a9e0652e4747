"""Trust region policy optimisation.

Schulman, Levine, Moritz, Jordan & Abbeel (2015), "Trust Region Policy Optimization", ICML,
the practical algorithm of Section 6 and Appendix C::

    for iteration = 1, 2, ...
        run pi_old in N environments for T steps; advantages A_t (here GAE, Schulman et al. 2016)
        L(theta)  = E[pi_theta(a|s) / pi_old(a|s) A]          the surrogate, maximised
        KL(theta) = E[KL(pi_old(.|s) || pi_theta(.|s))]        its trust region: KL <= delta
        g = grad L;  F = Hessian of KL at theta_old (the Fisher information matrix)
        s = F^-1 g by conjugate gradient, with Fisher-vector products F v = grad (grad KL . v)
        full step: beta s, beta = sqrt(2 delta / s^T F s)      (the quadratic model's KL = delta)
        line search: theta_old + shrink^j beta s for j = 0, 1, ...; accept the first that
                     improves L and keeps KL <= delta, else keep theta_old
        fit V to the returns (here: critic_epochs passes of minibatches with Adam)

The defaults are sb3-contrib's TRPO (2.x): delta = ``target_kl`` 0.01, 15 conjugate-gradient
steps, damping 0.1 added to ``F`` (``F + damping I``), 10 line-search steps shrinking by 0.8,
advantages standardised over the rollout, 10 critic passes of 128-sample minibatches at a
step size of 1e-3, and no gradient clipping.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rlx.config import hyperparameter
from rlx.errors import ConfigError, TrainingError
from rlx_onpolicy.base import (
    NON_FINITE_ADVICE,
    ActorCriticConfig,
    OnPolicyAgent,
    explained_variance,
    standardize,
)
from rlx_onpolicy.masks import apply_masks


@dataclass
class TRPOConfig(ActorCriticConfig):
    """Hyperparameters of TRPO (defaults: sb3-contrib's, in rlx's 8 environments)."""

    n_steps: int = hyperparameter(2048 // 8, "steps per environment per rollout", low=1)
    learning_rate: float = hyperparameter(
        1e-3,
        "the critic's step size (the policy's step is set by the trust region)",
        low=0,
        low_open=True,
        search=(1e-4, 1e-2),
    )
    max_grad_norm: float | None = hyperparameter(
        None, "clip the critic's gradients to this global norm (None: no clipping)", low=0
    )
    critic_epochs: int = hyperparameter(
        10, "passes of the critic over each rollout (sb3-contrib's n_critic_updates)", low=1
    )
    critic_batch_size: int | None = hyperparameter(
        128,
        "minibatch of the critic's passes (None: the whole rollout; sb3-contrib's batch_size)",
        low=1,
    )
    target_kl: float = hyperparameter(
        0.01,
        "delta: the trust region, the bound on the mean KL(old || new) of a policy update",
        low=0,
        low_open=True,
        search=(0.001, 0.1),
    )
    cg_max_steps: int = hyperparameter(
        15, "conjugate-gradient steps towards the natural gradient F^-1 g", low=1
    )
    cg_damping: float = hyperparameter(
        0.1, "damping added to the Fisher matrix (F + damping I) in the conjugate gradient", low=0
    )
    line_search_shrinking_factor: float = hyperparameter(
        0.8,
        "the line search shrinks the step by this factor each time",
        low=0,
        high=1,
        low_open=True,
    )
    line_search_max_iter: int = hyperparameter(
        10, "steps the line search tries before it keeps the old policy", low=1
    )
    normalize_advantage: bool = hyperparameter(
        True, "standardise the advantages (with advantage_statistics: the rollout's, or running)"
    )
    sub_sampling_factor: int = hyperparameter(
        1, "the policy step (surrogate, KL, Fisher products) uses every k-th transition", low=1
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.ent_coef != 0:
            raise ConfigError(
                f"ent_coef={self.ent_coef}: TRPO's surrogate has no entropy bonus (the trust "
                "region keeps the policy from collapsing); drop ent_coef"
            )
        if self.actor_learning_rate is not None:
            raise ConfigError(
                f"actor_learning_rate={self.actor_learning_rate}: TRPO's policy step is set by "
                "the trust region (target_kl), not by a step size; drop actor_learning_rate"
            )


def conjugate_gradient(
    product: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor, steps: int
) -> torch.Tensor:
    """An approximate solution ``x`` of ``A x = b`` for a symmetric positive definite ``A``
    known by its products ``product(v) = A v``, after at most ``steps`` conjugate-gradient
    steps from ``x = 0`` (stops once the squared residual is below 1e-10)."""
    x = torch.zeros_like(b)
    residual = b.clone()
    direction = b.clone()
    squared = residual @ residual
    for _ in range(steps):
        if float(squared) < 1e-10:
            break
        a_direction = product(direction)
        alpha = squared / (direction @ a_direction)
        x += alpha * direction
        residual -= alpha * a_direction
        new_squared = residual @ residual
        direction = residual + (new_squared / squared) * direction
        squared = new_squared
    return x


class TRPO(OnPolicyAgent):
    """TRPO with GAE on vector environments; the critic is fitted by its own passes.

    Logged metrics: ``policy_objective`` (the surrogate before the step), ``kl`` (the mean
    KL(old || new) of the step taken, 0 when the line search kept the old policy),
    ``line_search_success`` (1 or 0), ``step_fraction`` (the part of the full step taken),
    ``value_loss`` (of the critic's last pass), ``explained_variance``, ``learning_rate``
    (the critic's).
    """

    Config = TRPOConfig

    def build(self) -> None:
        """The policy, and one optimiser: the critic's (rlx's flat Adam by default); the
        policy moves by natural-gradient steps."""
        c = self.config
        self.policy = self.new_policy()
        if self.policy.critic_body is None:
            raise ConfigError(
                f"TRPO fits the critic apart from the policy, which needs separate actor and "
                f"critic networks; policy={c.policy} shares one body: give the critic its own "
                "(critic_policy='package.module:factory'), or use policy=mlp"
            )
        _, critic = c.step_sizes()
        self.optimizers = {
            "critic": self.new_optimizer([self.policy.critic_vector], critic, eps=1e-5)
        }

    def update(self) -> dict[str, Any]:
        """One trust-region step of the policy on the rollout, then the critic's passes."""
        c = self.config
        data = self.buffer.flat()
        advantages = data["advantages"]
        if self.advantage_stats is not None:
            advantages = self.running_advantages(advantages)
        elif c.normalize_advantage and advantages.shape[-1] > 1:
            advantages = standardize(advantages)
        every = slice(None, None, c.sub_sampling_factor)
        metrics = self.policy_step(
            data["observations"][every],
            data["actions"][every],
            data["log_probs"][every],
            advantages[every],
            None if "action_masks" not in data else data["action_masks"][every],
        )
        metrics["value_loss"] = self.fit_critic(data)
        metrics["explained_variance"] = explained_variance(data["values"], data["returns"])
        return metrics

    def policy_step(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        old_log_probs: torch.Tensor,
        advantages: torch.Tensor,
        masks: torch.Tensor | None,
    ) -> dict[str, Any]:
        """The natural-gradient step within the trust region, by line search; returns its
        metrics."""
        c = self.config
        vector = self.policy.actor_vector
        distribution = self.distribution

        def parameters() -> tuple[torch.Tensor, torch.Tensor | None]:
            params = apply_masks(self.policy(observations)[0], masks)
            return params, self.training_log_std()

        with torch.no_grad():
            old_params, old_log_std = parameters()
            if old_log_std is not None:
                old_log_std = old_log_std.clone()  # a view of the vector the step changes

        def objectives() -> tuple[torch.Tensor, torch.Tensor]:
            params, log_std = parameters()
            log_probs, _ = distribution.log_prob_entropy(params, log_std, actions, entropy=False)
            surrogate = ((log_probs - old_log_probs).exp() * advantages).mean()
            kl = distribution.kl(old_params, old_log_std, params, log_std).mean()
            return surrogate, kl

        surrogate, kl = objectives()
        if not torch.isfinite(surrogate):
            raise TrainingError(
                f"{self.where_in_training()}the surrogate objective became {surrogate.item()}; "
                f"the update was not applied. {NON_FINITE_ADVICE}"
            )
        layers = [parameter for parameter, _ in vector.flat_views]  # views of the vector

        def flat_gradient(output: torch.Tensor, **options: bool) -> torch.Tensor:
            gradients = torch.autograd.grad(output, layers, **options)
            return torch.cat([gradient.reshape(-1) for gradient in gradients])

        gradient = flat_gradient(surrogate, retain_graph=True)
        kl_gradient = flat_gradient(kl, create_graph=True)

        def fisher_product(v: torch.Tensor) -> torch.Tensor:
            return flat_gradient(kl_gradient @ v, retain_graph=True) + c.cg_damping * v

        direction = conjugate_gradient(fisher_product, gradient, c.cg_max_steps)
        curvature = float(direction @ fisher_product(direction))
        before = float(surrogate.detach())
        metrics = {
            "policy_objective": before,
            "kl": 0.0,
            "line_search_success": 0.0,
            "step_fraction": 0.0,
        }
        if not (curvature > 0 and math.isfinite(curvature)):
            return metrics  # no direction to step along: the policy stays
        full_step = math.sqrt(2.0 * c.target_kl / curvature) * direction
        old = vector.detach().clone()
        fraction = 1.0
        with torch.no_grad():
            for _ in range(c.line_search_max_iter):
                vector.copy_(old + fraction * full_step)
                new_surrogate, new_kl = objectives()
                if float(new_kl) <= c.target_kl and float(new_surrogate) > before:
                    metrics.update(
                        kl=float(new_kl), line_search_success=1.0, step_fraction=fraction
                    )
                    return metrics
                fraction *= c.line_search_shrinking_factor
            vector.copy_(old)
        return metrics
