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

K seeds train as one batched computation (``rlx run trpo --seeds 0-15``,
:mod:`rlx_onpolicy.batched`): the same update runs on tensors with a leading seed axis, and
each seed keeps its own conjugate gradient (its own step sizes, stopping when its own residual
is small), its own scale of the step and its own line search, whose K candidates are evaluated
in one batched forward pass per step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlx.config import hyperparameter
from rlx.errors import ConfigError, TrainingError
from rlx_onpolicy.base import (
    NON_FINITE_ADVICE,
    ActorCriticConfig,
    OnPolicyAgent,
    explained_variance,
    mean,
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


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The dot product of two vectors ``(P,)``, or of each pair of rows of ``(K, P)``."""
    return a @ b if a.ndim == 1 else (a * b).sum(-1)


def conjugate_gradient(
    product: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor, steps: int
) -> torch.Tensor:
    """An approximate solution ``x`` of ``A x = b`` for a symmetric positive definite ``A``
    known by its products ``product(v) = A v``, after at most ``steps`` conjugate-gradient
    steps from ``x = 0`` (stops once the squared residual is below 1e-10).

    ``b`` may be K rows ``(K, P)``, K systems solved side by side (a seed batch: ``product``
    maps each row by its own ``A``): the step sizes are per row, and a row whose residual is
    small stops where it is, as its system alone would, while the others go on."""
    x = torch.zeros_like(b)
    residual = b.clone()
    direction = b.clone()
    squared = _dot(residual, residual)
    for _ in range(steps):
        going = squared.double() >= 1e-10
        if not bool(going.any()):
            break
        a_direction = product(direction)
        alpha = (squared / _dot(direction, a_direction)).unsqueeze(-1)
        new_residual = residual - alpha * a_direction
        new_squared = _dot(new_residual, new_residual)
        new_direction = new_residual + (new_squared / squared).unsqueeze(-1) * direction
        if bool(going.all()):
            x, residual, direction, squared = (
                x + alpha * direction,
                new_residual,
                new_direction,
                new_squared,
            )
        else:  # the rows that have converged keep what they have
            rows = going.unsqueeze(-1)
            x = torch.where(rows, x + alpha * direction, x)
            residual = torch.where(rows, new_residual, residual)
            direction = torch.where(rows, new_direction, direction)
            squared = torch.where(going, new_squared, squared)
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
    batched_update = True

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
        """One trust-region step of the policy on the rollout, then the critic's passes (in a
        seed batch: every tensor with a leading seed axis, ``weights`` marking the real
        entries of the padded rollouts, every metric one value per seed)."""
        c = self.config
        data = self.buffer.flat()
        weights = data.get("weights")
        advantages = data["advantages"]
        if self.advantage_stats is not None:
            advantages = self.running_advantages(advantages, weights, data.get("rows"))
        elif c.normalize_advantage and advantages.shape[-1] > 1:
            advantages = standardize(advantages, weights)
        # every k-th transition, along the steps' axis (the second in a seed batch)
        every = (slice(None),) * (weights is not None) + (slice(None, None, c.sub_sampling_factor),)
        metrics = self.policy_step(
            data["observations"][every],
            data["actions"][every],
            data["log_probs"][every],
            advantages[every],
            None if "action_masks" not in data else data["action_masks"][every],
            None if weights is None else weights[every],
            data.get("rows"),
        )
        metrics["value_loss"] = self.fit_critic(data)
        metrics["explained_variance"] = explained_variance(data["values"], data["returns"], weights)
        return metrics

    def actor_leaves(self, batched: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The actor's flat parameters, the vector ``(P,)`` (``batched``: the seed batch's
        stack ``(K, P)``), and the leaf tensors its forward pass reads, in the order of their
        memory in it."""
        policy = self.policy
        if not batched:
            vector = policy.actor_vector
            return vector, [parameter for parameter, _ in vector.flat_views]
        leaves = [leaf for pair in policy.actor_parameters for leaf in pair]
        if policy.log_std is not None:
            leaves.append(policy.log_std)
        return policy.actor, sorted(leaves, key=torch.Tensor.data_ptr)

    def policy_step(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        old_log_probs: torch.Tensor,
        advantages: torch.Tensor,
        masks: torch.Tensor | None,
        weights: torch.Tensor | None = None,
        rows: np.ndarray | None = None,
    ) -> dict[str, Any]:
        """The natural-gradient step within the trust region, by line search; returns its
        metrics. In a seed batch (``weights``, and ``rows``: the seeds that learn) the
        vectors are ``(K, P)`` and every scalar of the algorithm is one per seed."""
        c = self.config
        batched = weights is not None
        vector, layers = self.actor_leaves(batched)
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
            surrogate = mean((log_probs - old_log_probs).exp() * advantages, weights)
            kl = mean(distribution.kl(old_params, old_log_std, params, log_std), weights)
            return surrogate, kl

        surrogate, kl = objectives()
        # The seeds that step: every one alone; in a batch those with data whose surrogate is
        # finite (the others fail with their single run's message, and step no more).
        learning = self.finite_rows(surrogate, rows)

        def total(x: torch.Tensor) -> torch.Tensor:
            """What to differentiate: one seed's scalar, or the sum of the seeds' that learn
            (each row's gradient is its own seed's)."""
            return x if learning is None else torch.where(learning, x, x.new_zeros(())).sum()

        def flat_gradient(output: torch.Tensor, **options: bool) -> torch.Tensor:
            gradients = torch.autograd.grad(output, layers, **options)
            return torch.cat([g.reshape(*vector.shape[:-1], -1) for g in gradients], dim=-1)

        gradient = flat_gradient(total(surrogate), retain_graph=True)
        kl_gradient = flat_gradient(total(kl), create_graph=True)

        def fisher_product(v: torch.Tensor) -> torch.Tensor:
            return flat_gradient(_dot(kl_gradient, v).sum(), retain_graph=True) + c.cg_damping * v

        direction = conjugate_gradient(fisher_product, gradient, c.cg_max_steps).detach()
        curvature = _dot(direction, fisher_product(direction)).detach()
        before = surrogate.detach()
        # a seed with no direction to step along (curvature not positive) keeps its policy
        stepping = (curvature > 0) & torch.isfinite(curvature)
        if learning is not None:
            stepping &= learning
        zero = torch.zeros_like(before)
        metrics: dict[str, Any] = {
            "policy_objective": before,
            "kl": zero,
            "line_search_success": zero,
            "step_fraction": zero.double(),  # shrink^j, exactly
        }
        if bool(stepping.any()):
            self.line_search(vector, direction, curvature, stepping, before, objectives, metrics)
        return metrics if batched else {name: float(value) for name, value in metrics.items()}

    def line_search(
        self,
        vector: torch.Tensor,
        direction: torch.Tensor,
        curvature: torch.Tensor,
        stepping: torch.Tensor,
        before: torch.Tensor,
        objectives: Callable[[], tuple[torch.Tensor, torch.Tensor]],
        metrics: dict[str, Any],
    ) -> None:
        """Move ``vector`` along ``direction``, scaled to the trust region, by the largest
        shrink^j of that step that improves the surrogate (above ``before``) within the KL
        bound, or leave it where it is; records the step in ``metrics``. In a seed batch
        every seed of ``stepping`` searches its own ``j``: all candidates are evaluated in
        one batched pass, and a seed whose step was accepted keeps it while the others go
        on."""
        c = self.config
        scale = torch.where(stepping, (2.0 * c.target_kl / curvature.double()).sqrt(), 0.0)
        full_step = scale.to(direction.dtype).unsqueeze(-1) * direction
        old = vector.detach().clone()
        fraction = 1.0
        searching = stepping
        with torch.no_grad():
            for _ in range(c.line_search_max_iter):
                candidate = old + fraction * full_step
                vector.copy_(torch.where(searching.unsqueeze(-1), candidate, vector))
                new_surrogate, new_kl = objectives()
                accepted = searching & (new_kl.double() <= c.target_kl) & (new_surrogate > before)
                for name, value in (
                    ("kl", new_kl),
                    ("line_search_success", 1.0),
                    ("step_fraction", fraction),
                ):
                    metrics[name] = torch.where(accepted, value, metrics[name])
                searching = searching & ~accepted
                if not bool(searching.any()):
                    return
                fraction *= c.line_search_shrinking_factor
            # a seed whose line search found no step keeps its old policy
            vector.copy_(torch.where(searching.unsqueeze(-1), old, vector))

    def finite_rows(self, surrogate: torch.Tensor, rows: np.ndarray | None) -> torch.Tensor | None:
        """None for one seed (whose surrogate must be finite, else TrainingError); in a seed
        batch, the seeds of ``rows`` still training whose surrogate is finite, the others of
        ``rows`` failing with the message their single run gives."""
        if rows is None:
            if not torch.isfinite(surrogate):
                raise TrainingError(self.non_finite(self, float(surrogate)))
            return None
        batch = self.batch
        chosen = rows & batch.active
        finite = torch.isfinite(surrogate.detach()).numpy()
        for k in np.flatnonzero(chosen & ~finite):
            batch.failures[int(k)] = self.non_finite(batch.agents[k], float(surrogate[k].detach()))
            batch.active[k] = False
        return torch.from_numpy(chosen & finite)

    @staticmethod
    def non_finite(agent: OnPolicyAgent, value: float) -> str:
        """The message of a surrogate objective that stopped being finite."""
        return (
            f"{agent.where_in_training()}the surrogate objective became {value}; the update "
            f"was not applied. {NON_FINITE_ADVICE}"
        )
