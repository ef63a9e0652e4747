"""Synchronous advantage actor-critic (A2C).

Mnih, Badia, Mirza, Graves, Lillicrap, Harley, Silver & Kavukcuoglu (2016), "Asynchronous
Methods for Deep Reinforcement Learning", ICML, Algorithm S3 (A3C), run synchronously: the
``n_envs`` actors step together and one learner makes one gradient step on all their
experience, which the OpenAI Baselines authors found as good as the asynchronous version::

    for iteration = 1, 2, ...
        run the policy in N environments for t_max steps
        R = V(s_{t_max}) (0 at a terminal state); for i = t_max - 1 .. 0: R = r_i + gamma R
        loss = -sum log pi(a_i | s_i) (R - V(s_i))                  policy gradient
               + c_v  sum (R - V(s_i))^2                           value regression
               - c_H  sum H(pi(. | s_i))                           entropy bonus
        one RMSprop step on the loss

The n-step returns are GAE with ``lambda = 1`` (the default); a smaller ``gae_lambda``
gives GAE advantages instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rlx.config import hyperparameter
from rlx.errors import ConfigError
from rlx.nn.optim import RMSprop
from rlx_onpolicy.base import (
    ActorCriticConfig,
    OnPolicyAgent,
    explained_variance,
    mean,
    standardize,
)
from rlx_onpolicy.masks import apply_masks


@dataclass
class A2CConfig(ActorCriticConfig):
    """Hyperparameters of A2C (defaults: Stable-Baselines3's, i.e. the paper's)."""

    n_steps: int = hyperparameter(5, "steps per environment per update (t_max)", low=1)
    gae_lambda: float = hyperparameter(
        1.0, "GAE lambda (1: the paper's n-step returns)", low=0, high=1, search=(0.8, 1.0)
    )
    learning_rate: float = hyperparameter(
        7e-4, "optimiser step size", low=0, low_open=True, search=(1e-5, 1e-2)
    )
    optimizer: str = hyperparameter(
        "rmsprop",
        "rmsprop (rlx's flat RMSprop with rms_alpha, the paper's), adam (rlx's flat Adam), "
        "another torch.optim class (SGD, AdamW, RMSprop, ...) or 'package.module:Class'",
        imports_code=True,
    )
    rms_alpha: float = hyperparameter(
        0.99,
        "decay of the squared gradients of optimizer=rmsprop",
        low=0,
        high=1,
        search=(0.9, 0.999),
    )
    optimizer_eps: float = hyperparameter(
        1e-5, "epsilon of optimizer=rmsprop and optimizer=adam", low=0, low_open=True
    )
    normalize_advantage: bool = hyperparameter(
        False, "standardise the advantages (with advantage_statistics: each update's, or running)"
    )


class A2C(OnPolicyAgent):
    """A2C: one gradient step per rollout of ``n_steps`` x ``n_envs`` transitions.

    Logged metrics: ``policy_loss``, ``value_loss`` (of the last pass of the critic's own
    with ``critic_epochs``), ``entropy``, ``explained_variance``, ``grad_norm`` (the actor's
    alone with ``critic_epochs``), ``learning_rate``.
    """

    Config = A2CConfig
    batched_update = True

    def build(self) -> None:
        c = self.config
        self.policy = self.new_policy()
        self.optimizers = self.new_optimizers(eps=c.optimizer_eps)

    def new_optimizer(
        self, parameters: list[torch.Tensor], learning_rate: float, **defaults: Any
    ) -> Any:
        """rlx's flat RMSprop (``rms_alpha``, ``optimizer_eps``; ``optimizer_kwargs``
        override them), or what :meth:`OnPolicyAgent.new_optimizer` builds."""
        c = self.config
        if c.optimizer != "rmsprop":
            return super().new_optimizer(parameters, learning_rate, **defaults)
        settings = {"alpha": c.rms_alpha, **defaults, **c.optimizer_kwargs}
        try:
            return RMSprop(parameters, lr=learning_rate, **settings)
        except TypeError as exc:
            raise ConfigError(
                f"optimizer rmsprop (alpha, eps) rejected its arguments {c.optimizer_kwargs}: {exc}"
            ) from None

    def update(self) -> dict[str, Any]:
        """One step on the rollout (in a seed batch: per seed, see :meth:`PPO.update`)."""
        c = self.config
        data = self.buffer.flat()
        weights = data.get("weights")
        params, values = self.policy(data["observations"])
        params = apply_masks(params, data.get("action_masks"))
        log_probs, entropy = self.distribution.log_prob_entropy(
            params, self.training_log_std(), data["actions"]
        )
        advantages = data["advantages"]
        if self.advantage_stats is not None:
            advantages = self.running_advantages(advantages, weights, data.get("rows"))
        elif c.normalize_advantage and advantages.shape[-1] > 1:
            advantages = standardize(advantages, weights)
        policy_loss = -mean(log_probs * advantages, weights)
        value_loss = mean((data["returns"] - values).square(), weights)
        entropy_mean = mean(entropy, weights)
        if self.separate_critic():
            loss = policy_loss - c.ent_coef * entropy_mean
        else:
            loss = policy_loss + c.vf_coef * value_loss - c.ent_coef * entropy_mean
        optimizer, vectors = self.actor_step()
        grad_norm = self.apply_gradients(loss, optimizer, vectors, data.get("rows"))
        if self.separate_critic():
            value_loss = self.fit_critic(data)
        stats = torch.stack([policy_loss, value_loss, entropy_mean]).tolist()
        return {
            "policy_loss": stats[0],
            "value_loss": stats[1],
            "entropy": stats[2],
            "explained_variance": explained_variance(data["values"], data["returns"], weights),
            "grad_norm": grad_norm,
        }
