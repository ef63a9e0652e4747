"""Vanilla policy gradient: REINFORCE with a learned value baseline.

Williams (1992), "Simple Statistical Gradient-Following Algorithms for Connectionist
Reinforcement Learning", Machine Learning 8, with the state-value baseline of Sutton &
Barto (2018, section 13.4), in the form of OpenAI's Spinning Up (Achiam 2018)::

    for iteration = 1, 2, ...
        collect trajectories with the current policy
        A_t = GAE(lambda) advantages from the current value function
              (lambda = 1: the return-to-go G_t minus the baseline V(s_t))
        one gradient step on the policy:  maximise mean log pi(a_t | s_t) A_t
        value_iterations steps on the value function: minimise mean (V(s_t) - G_t)^2

The policy and the value function have their own Adam optimisers and learning rates. With a
shared body (the cnn policy or a user module) the policy gradient trains the body and the
value steps train only the value head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rlx.config import hyperparameter
from rlx_onpolicy.base import (
    OnPolicyAgent,
    PolicyGradientConfig,
    explained_variance,
    mean,
    standardize,
)


@dataclass
class VPGConfig(PolicyGradientConfig):
    """Hyperparameters of VPG.

    Spinning Up takes 4,000 steps, one policy step at 3e-4 and 80 value steps per iteration,
    which gives too few policy steps for CartPole in a few hundred thousand environment
    steps; the defaults here take more, smaller iterations and a larger policy step (the
    CHANGELOG has the measurement).
    """

    n_steps: int = hyperparameter(128, "steps per environment per iteration", low=1)
    gae_lambda: float = hyperparameter(
        0.97, "GAE lambda (1: return-to-go minus baseline)", low=0, high=1, search=(0.8, 1.0)
    )
    learning_rate: float = hyperparameter(
        3e-3, "step size of the policy's optimiser", low=0, low_open=True, search=(1e-4, 3e-2)
    )
    value_learning_rate: float = hyperparameter(
        1e-3, "step size of the value function's optimiser", low=0, low_open=True
    )
    critic_learning_rate: float | None = hyperparameter(
        None,
        "the value function's step size (None: value_learning_rate)",
        low=0,
        low_open=True,
    )
    value_iterations: int = hyperparameter(25, "value-function steps per iteration", low=1)
    value_batch_size: int | None = hyperparameter(
        None, "minibatch of each value step (None: all the iteration's data)", low=1
    )
    normalize_advantage: bool = hyperparameter(
        True, "standardise the advantages (with advantage_statistics: each update's, or running)"
    )
    max_grad_norm: float | None = hyperparameter(
        None, "clip gradients to this global norm (None: no clipping)", low=0, low_open=True
    )

    def step_sizes(self) -> tuple[float, float]:
        """The policy's and the value function's learning rates."""
        actor, critic = self.actor_learning_rate, self.critic_learning_rate
        return (
            self.learning_rate if actor is None else actor,
            self.value_learning_rate if critic is None else critic,
        )


class VPG(OnPolicyAgent):
    """VPG: one policy-gradient step and ``value_iterations`` value steps per rollout.

    Logged metrics: ``policy_loss``, ``value_loss``, ``entropy``, ``explained_variance``,
    ``learning_rate``.
    """

    Config = VPGConfig
    batched_update = True

    def build(self) -> None:
        self.policy = self.new_policy()
        actor, critic = self.config.step_sizes()
        self.optimizers = {
            "policy": self.new_optimizer([self.policy.actor_vector], actor, eps=1e-8),
            "value": self.new_optimizer([self.policy.critic_vector], critic, eps=1e-5),
        }

    def learning_rates(self) -> dict[str, float]:
        actor, critic = self.config.step_sizes()
        return {"policy": actor, "value": critic}

    def update(self) -> dict[str, Any]:
        """One policy step and the value steps (in a seed batch: per seed, with the
        batch's ``weights`` and ``rows``, see :mod:`rlx_onpolicy.batched`)."""
        c = self.config
        data = self.buffer.flat()
        weights, rows = data.get("weights"), data.get("rows")
        params, _ = self.policy(data["observations"])
        log_std = self.training_log_std()
        log_probs, entropy = self.distribution.log_prob_entropy(
            params, log_std, data["actions"], entropy=c.ent_coef > 0
        )
        advantages = data["advantages"]
        if self.advantage_stats is not None:
            advantages = self.running_advantages(advantages, weights, rows)
        elif c.normalize_advantage and advantages.shape[-1] > 1:
            advantages = standardize(advantages, weights)
        policy_loss = -mean(log_probs * advantages, weights)
        if entropy is not None:
            loss = policy_loss - c.ent_coef * mean(entropy, weights)
        else:
            loss = policy_loss
        self.apply_gradients(loss, self.optimizers["policy"], self.policy.vectors()[:1], rows)
        with torch.no_grad():
            _, entropy = self.distribution.log_prob_entropy(
                params, self.training_log_std(), data["actions"]
            )
        value_loss = torch.zeros(())
        for _ in range(c.value_iterations):
            batch = data
            if c.value_batch_size is not None and c.value_batch_size < len(data["returns"]):
                index = torch.from_numpy(
                    self.rng.choice(len(data["returns"]), c.value_batch_size, replace=False)
                ).to(self.device)
                batch = {
                    key: data[key].index_select(0, index) for key in ("observations", "returns")
                }
            _, values = self.policy(batch["observations"])
            value_loss = mean((batch["returns"] - values).square(), weights)
            critic = self.policy.vectors()[1:]
            self.apply_gradients(value_loss, self.optimizers["value"], critic, rows)
        return {
            "policy_loss": policy_loss.detach().tolist(),
            "value_loss": value_loss.detach().tolist(),
            "entropy": mean(entropy, weights).tolist(),
            "explained_variance": explained_variance(data["values"], data["returns"], weights),
        }
