"""Proximal policy optimisation with the clipped surrogate objective.

Schulman, Wolski, Dhariwal, Radford & Klimov (2017), "Proximal Policy Optimization
Algorithms", arXiv:1707.06347, Algorithm 1::

    for iteration = 1, 2, ...
        run policy pi_old in N environments for T steps
        compute advantage estimates A_1..A_T (GAE)
        optimise the surrogate L w.r.t. theta, K epochs, minibatch size M <= NT
        theta_old <- theta

    r_t(theta) = pi_theta(a_t | s_t) / pi_old(a_t | s_t)
    L_clip     = E[min(r_t A_t, clip(r_t, 1 - eps, 1 + eps) A_t)]
    L          = L_clip - c1 * L_value + c2 * entropy                       (maximised)

Options of the common implementations (Engstrom et al. 2020; Huang et al. 2022, "The 37
Implementation Details of Proximal Policy Optimization"): advantages normalised per
minibatch, the value loss optionally clipped around the old values, linear decay of the
learning rate and of eps, and an early stop of the epochs once the approximate KL
divergence to the old policy passes 1.5 x ``target_kl``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from rlx.config import hyperparameter, preset
from rlx.errors import ConfigError
from rlx_onpolicy.base import (
    ActorCriticConfig,
    OnPolicyAgent,
    explained_variance,
    mean,
    standardize,
)
from rlx_onpolicy.masks import apply_masks


@dataclass
class PPOConfig(ActorCriticConfig):
    """Hyperparameters of PPO (defaults: Stable-Baselines3's, i.e. the paper's MuJoCo set)."""

    n_steps: int = hyperparameter(2048 // 8, "steps per environment per rollout", low=1)
    batch_size: int = hyperparameter(64, "minibatch size", low=1)
    n_epochs: int = hyperparameter(10, "passes over each rollout", low=1, search=(3, 20))
    clip_range: float = hyperparameter(
        0.2,
        "eps: the probability ratio is clipped to [1 - eps, 1 + eps]",
        low=0,
        low_open=True,
        search=(0.1, 0.4),
    )
    clip_schedule: str = hyperparameter(
        "constant",
        "constant, or linear: eps decays to 0 with the learning rate",
        choices=("constant", "linear"),
    )
    clip_range_vf: float | None = hyperparameter(
        None,
        "clip new values to old +- this in the value loss (None: no value clipping)",
        low=0,
        low_open=True,
    )
    normalize_advantage: bool = hyperparameter(
        True, "standardise the advantages (with advantage_statistics: each minibatch's, or running)"
    )
    target_kl: float | None = hyperparameter(
        None,
        "stop the epochs when the approximate KL passes 1.5 x this (None: never)",
        low=0,
        low_open=True,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_episodes is None and self.n_steps * self.n_envs < self.batch_size:
            raise ConfigError(
                f"n_steps * n_envs = {self.n_steps} * {self.n_envs} = "
                f"{self.n_steps * self.n_envs} transitions per rollout is fewer than "
                f"batch_size = {self.batch_size}; raise n_steps or n_envs, or lower batch_size"
            )
        if self.normalize_advantage and self.batch_size < 2:
            raise ConfigError("batch_size must be at least 2 to normalise advantages")


#: The diagnostics PPO logs for the last epoch of each update, in the order it sums them.
DIAGNOSTICS = ("policy_loss", "value_loss", "entropy", "clip_fraction", "approx_kl")


@dataclass
class EpochDiagnostics:
    """Sums of :data:`DIAGNOSTICS` over the minibatches of one epoch, and how it ended (in
    a seed batch, one column per seed, counting the minibatches each seed had)."""

    sums: torch.Tensor | None = None
    minibatches: Any = 0
    grad_norm: Any = 0.0  # a 0-d tensor on CUDA, read with the other metrics
    kl_exceeded: bool = False

    def add(self, values: torch.Tensor, rows: Any = None) -> None:
        """Add one minibatch's :data:`DIAGNOSTICS` ``values``; in a seed batch they have one column
        per seed, and ``rows`` (bool ``(K,)``) says which seeds had data in the minibatch."""
        count = 1.0 if rows is None else torch.from_numpy(rows).to(values)
        self.sums = values * count if self.sums is None else self.sums + values * count
        self.minibatches = self.minibatches + count

    def means(self) -> dict[str, Any]:
        """The mean of each of :data:`DIAGNOSTICS` over the epoch's minibatches (per seed in a seed
        batch, 0 for a seed that had none); zeros before any minibatch."""
        if self.sums is None:
            return dict.fromkeys(DIAGNOSTICS, 0.0)
        count = self.minibatches
        if isinstance(count, torch.Tensor):  # per seed: a seed may have had no minibatch
            count = count.clamp(min=1.0)
        return dict(zip(DIAGNOSTICS, (self.sums / count).tolist(), strict=True))


class PPO(OnPolicyAgent):
    """PPO-Clip with GAE on vector environments.

    Logged metrics: ``policy_loss``, ``value_loss`` (with ``critic_epochs``: of the last pass of
    the critic's own), ``entropy``, ``approx_kl``,
    ``clip_fraction`` (over the minibatches of the last epoch), ``explained_variance``,
    ``epochs`` (fewer than ``n_epochs`` after a KL early stop), ``grad_norm``,
    ``clip_range``, ``learning_rate``.
    """

    Config = PPOConfig
    batched_update = True

    def update(self) -> dict[str, Any]:
        """The epochs of minibatch steps on the rollout. In a seed batch the tensors have a
        leading seed axis, ``weights`` mark the real entries of padded minibatches and every
        metric has one value per seed."""
        c = self.config
        clip = self.scheduled(c.clip_range, c.clip_schedule)
        data = self.buffer.flat()
        weights = data.get("weights")
        normalize_minibatches = c.normalize_advantage
        if self.advantage_stats is not None:
            # Running statistics: the whole rollout is standardised once, before the epochs.
            data["advantages"] = self.running_advantages(
                data["advantages"], weights, data.get("rows")
            )
            normalize_minibatches = False
        elif c.normalize_advantage and c.batch_size >= data["advantages"].shape[-1]:
            # One minibatch holds everything: normalise once, not in every epoch.
            data["advantages"] = standardize(data["advantages"], weights)
            normalize_minibatches = False
        epoch = 0
        diagnostics = EpochDiagnostics()
        while epoch < c.n_epochs and not diagnostics.kl_exceeded:
            epoch += 1
            # Diagnostics cost a tenth of a step: take them in the last epoch only, unless
            # the KL early stop needs the KL of every minibatch.
            diagnose = epoch == c.n_epochs or c.target_kl is not None
            diagnostics = self.train_epoch(data, clip, normalize_minibatches, diagnose)
        metrics = diagnostics.means()
        if self.separate_critic():
            metrics["value_loss"] = self.fit_critic(data)
        return {
            **metrics,
            "explained_variance": explained_variance(data["values"], data["returns"], weights),
            "epochs": float(epoch),
            "grad_norm": diagnostics.grad_norm,
            "clip_range": clip,
        }

    def minibatches(self, data: dict[str, Any]) -> Any:
        """One pass over the rollout ``data`` in random minibatches of ``batch_size`` (recurrent
        PPO's are of whole sequences)."""
        return self.buffer.minibatches(data, self.config.batch_size, self.rng)

    def forward_minibatch(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """The policy's distribution parameters and values on a minibatch's observations."""
        return self.policy(batch["observations"])

    def train_epoch(
        self, data: dict[str, Any], clip: Any, normalize: bool, diagnose: bool
    ) -> EpochDiagnostics:
        """One pass of minibatch steps over the rollout; stops early once the KL is too large."""
        c = self.config
        optimizer, vectors = self.actor_step()
        result = EpochDiagnostics()
        for batch in self.minibatches(data):
            weights = batch.get("weights")
            params, values = self.forward_minibatch(batch)
            params = apply_masks(params, batch.get("action_masks"))
            log_std = self.training_log_std()  # anew: each step changes log_std in place
            log_probs, entropy = self.distribution.log_prob_entropy(
                params, log_std, batch["actions"], entropy=c.ent_coef > 0
            )
            advantages = batch["advantages"]
            if normalize and advantages.shape[-1] > 1:
                advantages = standardize(advantages, weights)
            # The clipped surrogate L_clip, maximised: its negative is minimised.
            log_ratio = log_probs - batch["log_probs"]
            ratio = log_ratio.exp()
            surrogate = torch.min(
                ratio * advantages, ratio.clamp(1.0 - clip, 1.0 + clip) * advantages
            )
            policy_loss = -mean(surrogate, weights)
            if c.clip_range_vf is not None:
                old = batch["values"]
                values = old + (values - old).clamp(-c.clip_range_vf, c.clip_range_vf)
            value_loss = mean((batch["returns"] - values).square(), weights)
            loss = policy_loss if self.separate_critic() else policy_loss + c.vf_coef * value_loss
            if entropy is not None:
                loss = loss - c.ent_coef * mean(entropy, weights)
            rows = batch.get("rows")
            norm = self.apply_gradients(loss, optimizer, vectors, rows)
            if rows is not None and not rows.all():
                # A seed without this minibatch keeps the norm of its own last step.
                norm = torch.where(torch.from_numpy(rows), norm, result.grad_norm)
            result.grad_norm = norm
            if diagnose:
                with torch.no_grad():
                    # The low-variance estimator E[(r - 1) - log r] of KL(old || new).
                    kl = mean((ratio - 1.0) - log_ratio, weights)
                    if entropy is None:
                        _, entropy = self.distribution.log_prob_entropy(
                            params, log_std, batch["actions"]
                        )
                    clip_fraction = mean(((ratio - 1.0).abs() > clip).float(), weights)
                    values = [policy_loss, value_loss, mean(entropy, weights), clip_fraction, kl]
                    result.add(torch.stack(values), rows)
                if c.target_kl is not None and float(kl) > 1.5 * c.target_kl:
                    result.kl_exceeded = True
                    break
        return result


class MaskablePPO(PPO):
    """The ``maskable-ppo`` preset: PPO acting on valid actions only (``action_masks=true``),
    sb3-contrib's MaskablePPO: the environment's ``action_masks()`` (or else its info's
    ``action_mask``) masks the logits in acting, in the clipped surrogate's log-probabilities
    and in the entropy (:mod:`rlx_onpolicy.masks`)."""

    Config: ClassVar[type] = preset(PPOConfig, "MaskablePPOConfig", __doc__, action_masks=True)
