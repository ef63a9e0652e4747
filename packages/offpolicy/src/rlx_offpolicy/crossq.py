"""CrossQ: SAC without target networks, its networks batch-renormalised.

Bhatt, Palenicek, Belousov, Argus, Amiranashvili, Brox & Peters (2024), "CrossQ: Batch
Normalization in Deep Reinforcement Learning for Greater Sample Efficiency and Simplicity",
ICLR. SAC's losses (:mod:`rlx_offpolicy.sac`) with three changes:

- no target networks: the soft target ``y = r + gamma (min_i Q_i(s', a') - alpha log
  pi(a' | s'))``, ``a' ~ pi(. | s')``, is computed by the critics being trained;
- the critics and the actor batch-renormalise the input of every linear layer
  (:class:`rlx.nn.renorm.BatchRenorm`; the actor also its last features), with plain batch
  normalisation for the first ``renorm_warmup_steps`` training passes of each layer;
- the joint forward pass: ``(s, a)`` and ``(s', a')`` go through the critics as one
  concatenated batch of ``2 B`` rows, so each layer normalises with the statistics of the
  mixture of both distributions (a batch of ``(s', a')`` alone, with the policy's actions,
  is distributed differently from the replayed ``(s, a)``, which is what breaks naive batch
  normalisation in SAC). The ``Q(s', a')`` half only enters the target, without gradient.

Each network is in evaluation mode (the running statistics, no update of them) except in
the passes that train it: the critics in the joint pass, the actor when its loss is taken.
The next actions ``a'`` and acting use the actor's running statistics. The actor and the
temperature are updated once every ``policy_delay`` critic updates. Adam takes ``betas =
(0.5, 0.999)`` (``optimizer_kwargs`` overrides them) and the step size is 1e-3. Defaults are
Stable-Baselines3-contrib's ``CrossQ``: critics of 1024-1024 units (the paper's are 2048
wide), the actor 256-256, momentum 0.01 and ``eps`` 1e-3 for the statistics, a warm-up of
100,000 passes.
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from rlx.config import hyperparameter
from rlx.errors import ConfigError
from rlx.nn.renorm import BatchRenorm, RenormMLP, has_normalization
from rlx_offpolicy.base import twin_priority_errors
from rlx_offpolicy.networks import (
    CriticEnsemble,
    FlatNetwork,
    GaussianActor,
    critic_ensemble,
    feature_body,
    resolve_network,
    retain_freed_memory,
)
from rlx_offpolicy.sac import SAC, SoftActorCriticConfig, Temperature


def statistics_kept(module: Any, rows: np.ndarray | None) -> Any:
    """A block whose training pass moves the normalisation statistics of the seeds in
    ``rows`` only (a seed batch's stacked module:
    :meth:`rlx.nn.stacked.StackedModule.buffers_kept`); with ``rows=None`` the module moves
    its own."""
    if rows is None:
        return contextlib.nullcontext()
    return module.buffers_kept(rows)


@dataclass
class CrossQConfig(SoftActorCriticConfig):
    """Hyperparameters of CrossQ (defaults: Stable-Baselines3-contrib's ``CrossQ``, but for
    the warm-up of one minibatch, 256 steps, where it takes 100)."""

    learning_rate: float = hyperparameter(
        1e-3, "optimiser step size", low=0, low_open=True, search=(1e-5, 1e-2)
    )
    critic_hidden_sizes: tuple[int, ...] | None = hyperparameter(
        (1024, 1024),
        "hidden layers of each critic's MLP (None: hidden_sizes; the paper's are 2048 wide)",
    )
    policy_delay: int = hyperparameter(3, "critic updates per actor and temperature update", low=1)
    batch_norm_momentum: float = hyperparameter(
        0.01,
        "rate at which the running statistics follow the batches' (mu <- mu + m (mu_B - mu))",
        low=0,
        high=1,
        low_open=True,
    )
    batch_norm_eps: float = hyperparameter(
        1e-3, "added to the variances before their square root", low=0, low_open=True
    )
    renorm_warmup_steps: int = hyperparameter(
        100_000,
        "training passes of each normalisation layer that normalise with the batch's "
        "statistics alone (batch normalisation) before renormalising toward the running ones",
        low=0,
    )


class RenormCriticEnsemble(CriticEnsemble):
    """:class:`~rlx_offpolicy.networks.CriticEnsemble` with a
    :class:`~rlx.nn.renorm.BatchRenorm` (statistics per critic) before every linear layer:
    ``[s, a]`` (or ``[encoder_i(s), a]``) and each hidden layer's activations are
    normalised over the batch before the next layer (the last one's too)."""

    def __init__(
        self,
        n: int,
        features: int,
        action_dim: int,
        hidden: tuple[int, ...],
        activation: str,
        encoders: list[nn.Module] | None = None,
        outputs: int = 1,
        **renorm: float,
    ) -> None:
        super().__init__(n, features, action_dim, hidden, activation, encoders, outputs)
        sizes = [features + action_dim, *hidden]
        self.norms = nn.ModuleList(BatchRenorm(size, (n,), **renorm) for size in sizes)  # type: ignore[arg-type]

    def forward(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        members: int | None = None,
        frozen: bool = False,
    ) -> torch.Tensor:
        """``Q_i(s, a)`` of every critic, ``(n, batch)``; ``frozen=True`` takes the weights
        and the normalisations' affine maps as constants. ``members`` must be None: the
        normalisation statistics belong to all the critics together."""
        if members is not None:
            raise ValueError("the renormalised critics are evaluated all together")
        if self.encoders is None:
            x = torch.cat([observations, actions], -1).expand(self.n, -1, -1)
        else:
            x = torch.cat(
                [self.encode(observations, self.n, frozen), actions.expand(self.n, -1, -1)], -1
            )
        last = len(self.weights) - 1
        for index, (weight, bias, norm) in enumerate(
            zip(self.weights, self.biases, self.norms, strict=True)
        ):
            x = norm(x, frozen)
            if frozen:
                weight, bias = weight.detach(), bias.detach()
            x = torch.baddbmm(bias, x, weight)
            if index < last:
                x = self.activation(x)
        return x.squeeze(-1) if self.outputs == 1 else x


class CrossQ(SAC):
    """CrossQ: SAC's twin critics and learned temperature, no target networks, batch
    renormalisation and the joint forward pass of ``(s, a)`` and ``(s', a')``.

    Logged metrics (of the last update of each training): ``critic_loss``, ``q_mean``,
    ``alpha``, ``grad_norm`` (the critics', when clipping), ``updates``, and from the last
    actor update ``actor_loss``, ``entropy`` and ``alpha_loss`` (when alpha is learned).
    """

    Config: ClassVar[type] = CrossQConfig
    batched_update = True
    #: Measured (benchmarks/results/seeds_contrib.md): 4 seeds as one batch train 8% slower
    #: than one after another at the zoo's Pendulum settings, so ``--seeds`` runs them so.
    seed_batches_pay: ClassVar[bool] = False

    def build(self) -> None:
        c, spaces = self.config, (self.input_space, self.env.action_space)
        retain_freed_memory()
        action_dim, (hidden, critic_hidden) = self.action_shape[0], c.layer_sizes()
        #: Whether the networks take flattened vectors (an MLP) rather than observations as shaped.
        self.flat = resolve_network(c.network, spaces[0], self.combined) == "mlp"
        if self.flat:
            body: nn.Module = RenormMLP([self.obs_dim, *hidden], c.activation, **self.renorm())
            features = hidden[-1]
        else:
            body, features = feature_body(
                c.network,
                *spaces,
                hidden,
                c.activation,
                network_kwargs=c.network_kwargs,
                combined=self.combined,
            )
            if ":" in c.network and not has_normalization(body):
                raise ConfigError(
                    f"crossq batch-normalises its networks (it has no target networks), and "
                    f"network {c.network!r} holds no normalisation layer; add an "
                    "rlx.nn.renorm.BatchRenorm or a torch.nn.BatchNorm1d to it"
                )
            body = nn.Sequential(body, BatchRenorm(features, **self.renorm()))  # type: ignore[arg-type]
        self.actor = FlatNetwork(
            GaussianActor(body, features, action_dim, (c.log_std_min, c.log_std_max)),
            self.device,
        )
        self.critic = FlatNetwork(self.new_critics(critic_hidden), self.device)
        self.actor.module.eval()
        self.critic.module.eval()
        self.learn_alpha = c.alpha is None
        self.temperature = Temperature(c.initial_alpha).to(self.device)
        self.target_entropy = (
            float(-action_dim) if c.target_entropy is None else float(c.target_entropy)
        )
        actor_step, critic_step = c.step_sizes()
        adam = {"eps": 1e-8, "betas": (0.5, 0.999)}
        self.optimizers = {
            "actor": self.new_optimizer(self.actor.vector, actor_step, **adam),
            "critic": self.new_optimizer(self.critic.vector, critic_step, **adam),
        }
        if self.learn_alpha:
            self.optimizers["alpha"] = self.new_optimizer(
                self.temperature.log_alpha, c.learning_rate, **adam
            )
        #: The actor's metrics of its last update (tensors), logged with later trainings'.
        self.actor_metrics: dict[str, torch.Tensor] = {}
        self.bind_acting()

    def renorm(self) -> dict[str, Any]:
        """The settings of every :class:`~rlx.nn.renorm.BatchRenorm` layer."""
        c = self.config
        return {
            "momentum": c.batch_norm_momentum,
            "eps": c.batch_norm_eps,
            "warmup_steps": c.renorm_warmup_steps,
        }

    def new_critics(self, hidden: tuple[int, ...]) -> CriticEnsemble:
        """The twin critics, renormalised (:class:`RenormCriticEnsemble`)."""
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
            ensemble=functools.partial(RenormCriticEnsemble, **self.renorm()),
        )

    def bind_acting(self) -> None:
        """Nothing: the renormalised actor acts through torch, in evaluation mode."""
        self._policy = None

    # -- learning -----------------------------------------------------------------------------

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, Any]:
        c = self.config
        observations, next_observations = batch["observations"], batch["next_observations"]
        if self.flat:
            observations, next_observations = (
                self.flatten(observations),
                self.flatten(next_observations),
            )
        # A seed batch's learner counts updates per seed (an array): each seed steps its
        # actor at its own phase of the delay, and only the seeds that learn this round move
        # their statistics.
        count = np.asarray(self.updates) + 1
        learning = self.batch.learning if count.ndim else None
        alpha = self.alpha()
        with statistics_kept(self.critic.module, learning):
            critic_loss, q_mean, td_errors = self.critic_loss(
                batch, observations, next_observations, alpha
            )
        grad_norm = self.gradient_step(critic_loss, self.optimizers["critic"], [self.critic.vector])
        self.update_priorities(batch, td_errors)

        due = count % c.policy_delay == 0
        if learning is not None:
            due &= learning
        if due.any():
            self.actor_update(observations, alpha, due if due.ndim else None)

        if np.any(count % c.gradient_steps):
            return {}  # only the last update of a training is logged: no host reads before
        values = {"critic_loss": critic_loss, "q_mean": q_mean, "alpha": alpha}
        values.update(self.actor_metrics)
        # one number each, or one per seed in a seed batch (critic_loss's shape)
        numbers = torch.stack([v.detach().reshape(critic_loss.shape) for v in values.values()])
        metrics: dict[str, Any] = dict(zip(values, numbers.tolist(), strict=True))
        metrics.update(grad_norm=grad_norm, updates=count.astype(float).tolist())
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
        """J_Q with the joint forward pass: ``[(s, a); (s', a')]`` through the critics in
        training mode (their normalisation statistics those of the mixture), the target from
        the ``(s', a')`` half without gradient. Returns the loss (importance-weighted under
        prioritized replay), the critics' mean value of the actions taken and the TD errors
        that set priorities."""
        axis = batch["actions"].ndim - 2  # the batch axis: 1 after a seed batch's seed axis
        size = batch["actions"].shape[axis]
        with torch.no_grad():
            next_actions, next_log_probs = self.sample_actions(next_observations)
        q_all = self.joint_values(
            torch.cat([observations, next_observations], axis),
            torch.cat([batch["actions"], next_actions], axis),
        )
        q, next_q = q_all[..., :size], q_all[..., size:]  # (2, batch) each
        with torch.no_grad():
            not_terminated = 1.0 - batch["terminated"].float()
            soft_value = next_q.min(-2).values - alpha * next_log_probs
            target = batch["rewards"] + batch["discounts"] * not_terminated * soft_value
        errors = q - target.unsqueeze(-2)
        critic_loss = 0.5 * self.weighted_mean(errors.square(), batch).sum(-1)
        return critic_loss, q.detach().mean((-2, -1)), twin_priority_errors(errors)

    def joint_values(self, observations: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Both critics on a batch in training mode (the pass that moves their normalisation
        statistics), ``(2, batch)``; they go back to evaluation mode after."""
        critic = self.critic.module
        critic.train()
        try:
            return critic(observations, actions)
        finally:
            critic.eval()

    def actor_update(
        self, observations: torch.Tensor, alpha: torch.Tensor, rows: np.ndarray | None = None
    ) -> None:
        """J_pi and J(alpha) on fresh actions of the actor in training mode (its statistics
        move), through the critics in evaluation mode with their weights frozen. In a seed
        batch, ``rows`` are the seeds whose step is due: the others keep their actor,
        temperature, statistics and last metrics."""
        actor, generator = self.actor.module, self.generator
        if rows is not None:  # the seeds not due draw no noise from their own streams
            idle = self.batch.idle_generator
            self.generator = [g if due else idle for g, due in zip(generator, rows, strict=True)]
        actor.train()
        try:
            with statistics_kept(actor, rows):
                actions, log_probs = self.sample_actions(observations)
        finally:
            actor.eval()
            self.generator = generator
        actor_loss = (alpha * log_probs - self.policy_value(observations, actions)).mean(-1)
        self.gradient_step(actor_loss, self.optimizers["actor"], [self.actor.vector], rows)
        metrics = {"actor_loss": actor_loss.detach(), "entropy": -log_probs.detach().mean(-1)}
        if self.learn_alpha:
            log_alpha = self.temperature.log_alpha
            alpha_loss = -(log_alpha * (log_probs.detach() + self.target_entropy)).mean(-1)
            self.gradient_step(alpha_loss, self.optimizers["alpha"], [log_alpha], rows)
            metrics["alpha_loss"] = alpha_loss.detach()
        if rows is not None:  # the seeds not due log their last (NaN: none yet)
            due = torch.from_numpy(rows)
            for name, value in metrics.items():
                last = self.actor_metrics.get(name, torch.full_like(value, math.nan))
                metrics[name] = torch.where(due, value, last)
        self.actor_metrics = metrics

    def policy_value(self, observations: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The smaller critic's ``Q(s, a~)``, the critics in evaluation mode with their
        weights frozen (the gradient reaches the actions only)."""
        return self.critic.module(observations, actions, frozen=True).min(-2).values

    # -- checkpoints --------------------------------------------------------------------------

    def training_modules(self) -> dict[str, nn.Module]:
        """The critics (their normalisation statistics with them) and the temperature."""
        return {"critic": self.critic.module, "temperature": self.temperature}
