"""TQC: soft actor-critic with a truncated mixture of quantile critics.

Kuznetsov, Shvechikov, Grishin & Vetrov (2020), "Controlling Overestimation Bias with
Truncated Mixture of Continuous Distributional Quantile Critics", ICML, Algorithm 1. Each of
``M`` critics (``n_critics``) gives ``N`` quantiles (``n_quantiles``) ``theta_1 .. theta_N``
of the return of ``(s, a)`` at the midpoints ``tau_i = (2i - 1) / (2N)``; the target pools
the ``M N`` quantiles of the target critics at ``(s', a')``, sorts them and drops the
largest ``d M`` (``top_quantiles_to_drop_per_net = d``) to control overestimation::

    a' ~ pi(. | s')
    z_(1) <= ... <= z_(MN)   the target critics' quantiles theta_bar_mn(s', a'), sorted
    y_k = r + gamma^n (z_(k) - alpha log pi(a' | s')),   k = 1 .. kN with kN = MN - dM
    J_Z(theta_m) = E[ (1/N) sum_i (1/kN) sum_k rho^1_tau_i(y_k - theta_mi(s, a)) ]
    J_pi(phi)    = E[ alpha log pi(a~ | s) - (1/(MN)) sum_m,i theta_mi(s, a~) ],  a~ ~ pi(. | s)

with the quantile Huber loss ``rho`` of QR-DQN
(:func:`~rlx_offpolicy.qr_dqn.quantile_huber_loss`), averaged over the critics, their
quantiles and the targets as the authors' code and sb3-contrib do. The policy, the learned
temperature (toward ``-dim(A)``), Polyak-averaged targets and everything else are SAC's
(:mod:`rlx_offpolicy.sac`): the ``M`` critics are one batched network
(:class:`~rlx_offpolicy.networks.CriticEnsemble` with ``N`` outputs each). Under prioritized
replay a transition's priority is its loss.

Setting names and defaults are sb3-contrib's ``TQC`` (25 quantiles, 2 critics, 2 dropped per
critic; the rest SAC's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from rlx.config import hyperparameter
from rlx_offpolicy.networks import CriticEnsemble, critic_ensemble
from rlx_offpolicy.qr_dqn import quantile_huber_loss
from rlx_offpolicy.sac import SAC, SACConfig


@dataclass
class TQCConfig(SACConfig):
    """Hyperparameters of TQC (defaults: sb3-contrib's, SAC's for the rest)."""

    n_quantiles: int = hyperparameter(25, "quantiles of each critic (N)", low=1)
    n_critics: int = hyperparameter(2, "critics, each with n_quantiles quantiles (M)", low=1)
    top_quantiles_to_drop_per_net: int = hyperparameter(
        2,
        "largest quantiles of the target mixture dropped per critic (d: d * M of the M * N)",
        low=0,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.top_quantiles_to_drop_per_net >= self.n_quantiles:
            raise ValueError(
                f"top_quantiles_to_drop_per_net = {self.top_quantiles_to_drop_per_net} must be "
                f"below n_quantiles = {self.n_quantiles}: the target keeps "
                "(n_quantiles - top_quantiles_to_drop_per_net) * n_critics quantiles"
            )


def truncated_mixture(quantiles: torch.Tensor, drop_per_critic: int) -> torch.Tensor:
    """The target critics' quantiles ``(..., M, batch, N)`` pooled per transition, sorted,
    less the ``drop_per_critic * M`` largest: ``(..., batch, M N - drop_per_critic M)``."""
    critics = quantiles.shape[-3]
    pooled = quantiles.movedim(-3, -2).flatten(-2)  # (..., batch, M N)
    kept = pooled.shape[-1] - drop_per_critic * critics
    return pooled.sort(-1).values[..., :kept]


class TQC(SAC):
    """TQC: SAC whose critics are quantile critics regressed on a truncated target mixture.

    Logged metrics: SAC's (``critic_loss`` is the quantile Huber loss, ``q_mean`` the mean
    of all the critics' quantiles for the actions taken).
    """

    Config: ClassVar[type] = TQCConfig
    #: Measured (benchmarks/results/seeds_contrib.md): 4 seeds as one batch train 5 to 14%
    #: slower than one after another (64- and 256-unit networks; the pairwise quantile loss
    #: is memory-bound), so ``--seeds`` runs them so.
    seed_batches_pay: ClassVar[bool] = False

    def new_critics(self, hidden: tuple[int, ...]) -> CriticEnsemble:
        """``n_critics`` critics with ``n_quantiles`` outputs each."""
        c = self.config
        return critic_ensemble(
            c.n_critics,
            c.network,
            self.input_space,
            self.env.action_space,
            hidden,
            c.activation,
            c.network_kwargs,
            self.combined,
            outputs=c.n_quantiles,
        )

    def critic_loss(
        self,
        batch: dict[str, torch.Tensor],
        observations: torch.Tensor,
        next_observations: torch.Tensor,
        alpha: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """J_Z: every critic's quantiles regress on the truncated soft target mixture.
        Returns the loss (importance-weighted under prioritized replay), the mean of the
        quantiles of the actions taken, and each transition's loss (its priority)."""
        c = self.config
        with torch.no_grad():
            next_actions, next_log_probs = self.sample_actions(next_observations)
            next_quantiles = self.critic.target(next_observations, next_actions)
            kept = truncated_mixture(next_quantiles, c.top_quantiles_to_drop_per_net)
            soft = kept - (alpha * next_log_probs).unsqueeze(-1)
            scale = batch["discounts"] * (1.0 - batch["terminated"].float())
            targets = batch["rewards"].unsqueeze(-1) + scale.unsqueeze(-1) * soft
        quantiles = self.critic.module(observations, batch["actions"])  # (M, batch, N)
        # The mean over the critics and their quantiles (the loss sums over the quantiles).
        losses = quantile_huber_loss(quantiles, targets.unsqueeze(-3)).mean(-2) / c.n_quantiles
        critic_loss = self.weighted_mean(losses, batch)
        return critic_loss, quantiles.detach().mean((-3, -2, -1)), losses.detach()

    def policy_value(self, observations: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The mean of all the critics' quantiles at ``(s, a~)``, their weights frozen."""
        return self.critic.module(observations, actions, frozen=True).mean((-3, -1))
