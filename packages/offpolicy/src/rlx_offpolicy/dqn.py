"""Deep Q-networks, with double Q-learning, dueling heads and n-step returns as options.

Mnih, Kavukcuoglu, Silver et al. (2015), "Human-level control through deep reinforcement
learning", Nature 518, Algorithm 1::

    for each step
        with probability epsilon a random action, else argmax_a Q(s, a; theta)
        store (s, a, r, s') in the replay memory D
        sample a minibatch of transitions from D
        y = r                                          if the episode terminated at s'
            r + gamma max_a' Q(s', a'; theta^-)        otherwise
        a gradient step on (y - Q(s, a; theta))^2 (Huber loss)
        every C steps theta^- <- theta

Options, each from its paper:

- ``double``: van Hasselt, Guez & Silver (2016), "Deep Reinforcement Learning with Double
  Q-learning": the online network chooses a', the target network values it,
  ``y = r + gamma Q(s', argmax_a' Q(s', a'; theta); theta^-)``;
- ``dueling``: Wang et al. (2016), "Dueling Network Architectures": ``Q(s, a) = V(s) +
  A(s, a) - mean_a A(s, a)``, two heads on one body;
- ``n_step``: Sutton (1988); Hessel et al. (2018): ``y = sum_{k<n} gamma^k r_{t+k} +
  gamma^n max_a' Q(s_{t+n}, a')``, cut at episode ends;
- ``tau < 1``: Polyak averaging of the target network instead of a hard copy;
- ``prioritized``: Schaul, Quan, Antonoglou & Silver (2016), "Prioritized Experience
  Replay" (proportional): transitions are drawn with probability proportional to
  ``(|delta| + eps)^alpha`` (:class:`~rlx_offpolicy.prioritized.PrioritizedReplayBuffer`),
  each loss term is weighted by its importance-sampling weight ``(N P(i))^-beta``
  (normalised by the batch's largest), ``beta`` rising linearly to 1 over the training
  budget, and the drawn transitions get their new ``|delta|`` as priority (settings every
  off-policy agent shares, :class:`~rlx_offpolicy.base.OffPolicyConfig`; on Atari frame
  stacks the draws are over the frame buffer's slots,
  :class:`~rlx_offpolicy.frames.PrioritizedFrameReplayBuffer`).

- ``noisy``: Fortunato et al. (2018), "Noisy Networks for Exploration": the fully
  connected layers are :class:`~rlx.nn.layers.NoisyLinear`, whose learned noise explores
  instead of epsilon; online and target networks draw new noise before every update, and
  the greedy policy (evaluation) is the mean network;
- ``atoms > 1``: Bellemare, Dabney & Munos (2017), "A Distributional Perspective on
  Reinforcement Learning" (C51), Algorithm 1: the network outputs a distribution over
  ``atoms`` returns spread evenly on ``[v_min, v_max]``; the target distribution of
  ``r + gamma^n z`` is projected back onto them and the loss is the cross-entropy
  ``-sum_i m_i log p_i(s, a)``; actions maximise the expectation ``sum_i z_i p_i``.

Presets (registered names, see ``rlx info``): ``double-dqn``, ``dueling-dqn``,
``noisy-dqn``, ``prioritized-dqn`` (with a quarter of the learning rate, as in its paper),
``c51``, and ``rainbow``, Hessel et al. (2018), "Rainbow: Combining Improvements in Deep
Reinforcement Learning": all six together with that paper's settings (3-step returns,
alpha 0.5, 51 atoms on [-10, 10], learning rate 6.25e-5, Adam epsilon 1.5e-4, no epsilon).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlx.config import hyperparameter, preset
from rlx.nn.layers import MLP, NoisyLinear, numpy_linear_stack, reset_noise
from rlx.nn.optim import flatten_parameters
from rlx.schedules import linear as linear_schedule
from rlx_offpolicy.base import OffPolicyAgent, OffPolicyConfig
from rlx_offpolicy.networks import feature_body, hidden_features, soft_update


@dataclass
class DQNConfig(OffPolicyConfig):
    """Hyperparameters of DQN (defaults: Stable-Baselines3's, which follow the paper's)."""

    learning_rate: float = hyperparameter(
        1e-4, "Adam step size", low=0, low_open=True, search=(1e-5, 1e-2)
    )
    batch_size: int = hyperparameter(32, "transitions per minibatch", low=1)
    train_freq: int = hyperparameter(4, "steps of every environment between trainings", low=1)
    max_grad_norm: float | None = hyperparameter(
        10.0, "clip gradients to this global norm (None: no clipping)", low=0, low_open=True
    )
    hidden_sizes: tuple[int, ...] = hyperparameter((64, 64), "hidden layers of the Q-network")
    target_update_interval: int = hyperparameter(
        10_000, "environment steps between target network updates (C)", low=1
    )
    tau: float = hyperparameter(
        1.0,
        "target update: theta^- <- tau theta + (1 - tau) theta^- (1: a copy)",
        low=0,
        high=1,
        low_open=True,
    )
    exploration_initial: float = hyperparameter(
        1.0, "epsilon at the start", low=0, high=1, search=(0.5, 1.0)
    )
    exploration_final: float = hyperparameter(
        0.05, "epsilon after the decay", low=0, high=1, search=(0.0, 0.2)
    )
    exploration_fraction: float = hyperparameter(
        0.1,
        "share of the training budget over which epsilon decays linearly",
        low=0,
        high=1,
        search=(0.05, 0.5),
    )
    exploration_steps: int | None = hyperparameter(
        None, "environment steps of the epsilon decay (default: fraction of the budget)", low=0
    )
    double: bool = hyperparameter(False, "double Q-learning targets (van Hasselt et al. 2016)")
    dueling: bool = hyperparameter(False, "dueling value and advantage heads (Wang et al. 2016)")
    n_step: int = hyperparameter(1, "n-step returns, cut at episode ends", low=1)
    loss: str = hyperparameter(
        "huber", "TD loss: huber (the paper's) or mse", choices=("huber", "mse")
    )
    noisy: bool = hyperparameter(
        False, "noisy linear layers explore instead of epsilon (Fortunato et al. 2018)"
    )
    noisy_sigma: float = hyperparameter(
        0.5, "noisy layers: initial noise scale sigma_0 (times 1/sqrt(fan-in))", low=0
    )
    atoms: int = hyperparameter(
        1,
        "atoms of the categorical return distribution (C51: 51; 1: expected values only); "
        "the loss is then the cross-entropy, not `loss`",
        low=1,
    )
    v_min: float = hyperparameter(-10.0, "smallest return atom (atoms > 1)")
    v_max: float = hyperparameter(10.0, "largest return atom (atoms > 1)")
    adam_eps: float = hyperparameter(1e-5, "Adam's epsilon", low=0, low_open=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.atoms == 1 or self.v_min < self.v_max:
            return
        raise ValueError(f"v_min = {self.v_min} must be below v_max = {self.v_max}")


class QNetwork(nn.Module):
    """Observations -> action values ``(batch, n_actions)``: heads on a feature ``body``
    (:func:`~rlx_offpolicy.networks.feature_body`: an MLP over flattened vectors, the Nature
    CNN over ``uint8`` frames, or the user's network).

    With ``atoms > 1`` the heads give the logits of a return distribution per action
    (:meth:`logits`, ``(batch, n_actions, atoms)``) and the values are its expectations.
    """

    def __init__(
        self,
        body: nn.Module,
        features: int,
        n_actions: int,
        dueling: bool,
        noisy: bool = False,
        noisy_sigma: float = 0.5,
        atoms: int = 1,
        v_min: float = -10.0,
        v_max: float = 10.0,
    ) -> None:
        super().__init__()
        self.body = body

        def linear(n_in: int, n_out: int) -> nn.Module:
            return NoisyLinear(n_in, n_out, noisy_sigma) if noisy else nn.Linear(n_in, n_out)

        self.n_actions, self.atoms = n_actions, atoms
        self.head = linear(features, n_actions * atoms)  # the advantages when dueling
        self.value = linear(features, atoms) if dueling else None
        # The return atoms z_i; not saved: they follow from the config.
        self.register_buffer("support", torch.linspace(v_min, v_max, atoms), persistent=False)

    def logits(self, observations: torch.Tensor) -> torch.Tensor:
        """``(batch, n_actions, atoms)``; dueling adds ``V - mean_a A`` atom by atom."""
        features = hidden_features(self.body, observations)
        advantages = self.head(features).view(-1, self.n_actions, self.atoms)
        if self.value is None:
            return advantages
        value = self.value(features).view(-1, 1, self.atoms)
        return value + advantages - advantages.mean(1, keepdim=True)

    def forward(self, observations: torch.Tensor, logits: bool = False) -> torch.Tensor:
        """The action values; with ``logits=True`` the distributions' :meth:`logits` (what a
        seed batch's stacked network, which calls the forward pass only, asks for)."""
        if logits:
            return self.logits(observations)
        if self.atoms > 1:
            return self.logits(observations).softmax(-1) @ self.support
        features = hidden_features(self.body, observations)
        values = self.head(features)
        if self.value is None:
            return values
        return self.value(features) + values - values.mean(-1, keepdim=True)

    def numpy_greedy(self) -> Any:
        """``observations -> argmax_a Q`` in NumPy, for an MLP body with expected values
        (``atoms == 1``); the dueling value does not change it and a noisy network acts as
        its mean. None for other networks."""
        if self.atoms > 1 or not isinstance(self.body, MLP):
            return None
        forward = numpy_linear_stack([*self.body.layers, self.head], self.body.activation_name)
        return lambda observations: forward(observations).argmax(-1)


def categorical_projection(
    returns: torch.Tensor, probabilities: torch.Tensor, v_min: float, v_max: float
) -> torch.Tensor:
    """Project the distribution with mass ``probabilities`` on ``returns`` (both ``(...,
    atoms)``) onto the evenly spaced atoms of ``[v_min, v_max]`` (Bellemare et al. 2017,
    Algorithm 1): each mass is split between its two neighbouring atoms, in proportion to
    closeness; a return on an atom, or clipped to an end, keeps all of its mass there."""
    atoms = probabilities.shape[-1]
    position = (returns.clamp(v_min, v_max) - v_min) * ((atoms - 1) / (v_max - v_min))
    position = position.clamp(0, atoms - 1)
    lower = position.floor()
    upper_share = position - lower  # 0 when the return is on an atom
    lower_index = lower.long()
    upper_index = (lower_index + 1).clamp(max=atoms - 1)
    projected = torch.zeros_like(probabilities)
    projected.scatter_add_(-1, lower_index, probabilities * (1.0 - upper_share))
    projected.scatter_add_(-1, upper_index, probabilities * upper_share)
    return projected


def action_rows(values: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """``values[..., i, a_i, :]``: each transition's row of ``values`` ``(..., batch,
    n_actions, atoms)`` for its action ``actions`` ``(..., batch)``."""
    index = actions[..., None, None].expand(*actions.shape, 1, values.shape[-1])
    return values.gather(-2, index).squeeze(-2)


class DQN(OffPolicyAgent):
    """DQN with epsilon-greedy exploration and a target network.

    Logged metrics: ``loss``, ``q_mean`` (of the actions taken), ``epsilon``,
    ``grad_norm``, ``updates``.
    """

    Config: ClassVar[type] = DQNConfig
    batched_update = True
    ACTIONS: ClassVar[tuple[type, ...]] = (gym.spaces.Discrete,)

    def build(self) -> None:
        c = self.config
        self.q_network = self.new_network()
        #: Whether the body takes flattened vectors (an MLP) rather than observations as shaped.
        self.flat = isinstance(self.q_network.body, MLP)
        self.target_network = self.new_network()
        self.target_network.load_state_dict(self.q_network.state_dict())
        self.q_network.to(self.device)
        self.target_network.to(self.device)
        #: The return atoms z_i (atoms > 1), which the network holds.
        self.support = self.q_network.support
        self.online_vector = flatten_parameters(list(self.q_network.parameters()))
        with torch.no_grad():
            self.target_vector = flatten_parameters(list(self.target_network.parameters()))
        self.target_vector.requires_grad_(False)
        self.optimizers = {
            "optimizer": self.new_optimizer(self.online_vector, c.learning_rate, eps=c.adam_eps)
        }
        self.next_target_update = c.target_update_interval
        self.bind_acting()
        if c.noisy:
            self.reset_noise()

    def new_network(self) -> QNetwork:
        """A Q-network for these settings and spaces (the online and the target network)."""
        c, space = self.config, self.input_space
        hidden = tuple(c.hidden_sizes)
        body, features = feature_body(
            c.network,
            space,
            self.env.action_space,
            hidden,
            c.activation,
            c.noisy,
            c.network_kwargs,
            self.combined,
        )
        network_class, outputs = self.network_head()
        return network_class(
            body,
            features,
            self.n_actions,
            c.dueling,
            noisy=c.noisy,
            noisy_sigma=c.noisy_sigma,
            atoms=outputs,
            v_min=c.v_min,
            v_max=c.v_max,
        )

    def network_head(self) -> tuple[type[QNetwork], int]:
        """The Q-network's class and its outputs per action: ``atoms`` return atoms here
        (QR-DQN's network holds quantiles instead)."""
        return QNetwork, self.config.atoms

    def bind_acting(self) -> None:
        """The NumPy greedy pass on the CPU, over the network's memory as it is now (again
        after a seed batch moves the weights into its stacks)."""
        self._greedy = self.q_network.numpy_greedy() if self.device.type == "cpu" else None

    def reset_noise(self) -> None:
        """New noise for the online and the target network, drawn independently. A seed
        batch's learner has each seed that learns in the round draw its own, from its own
        generator, into its networks' noise: the rows of the learner's stacked noise."""
        if isinstance(self.generator, list):
            for k in np.flatnonzero(self.batch.learning):
                self.batch.agents[k].reset_noise()
            return
        reset_noise(self.q_network, self.generator)
        reset_noise(self.target_network, self.generator)

    @property
    def epsilon(self) -> float:
        """The exploration rate now: linear from the initial to the final value over the
        exploration steps (or fraction of the budget), then constant."""
        c = self.config
        duration = c.exploration_steps
        if duration is None:
            duration = int(c.exploration_fraction * self.budget) if self.budget else None
        return linear_schedule(self.env_steps, c.exploration_initial, c.exploration_final, duration)

    # -- acting -------------------------------------------------------------------------------

    def greedy(self, observations: np.ndarray, noise: bool = False) -> np.ndarray:
        """``argmax_a Q(s, a)``; a noisy network acts with its current noise when ``noise``,
        else as its mean."""
        flat = observations.reshape(len(observations), -1) if self.flat else observations
        if self._greedy is not None and not noise:
            return self._greedy(flat)
        network, mean = self.q_network, self.config.noisy and not noise
        with torch.no_grad():
            if mean:
                network.eval()
            values = network(torch.as_tensor(flat, device=self.device))
            if mean:
                network.train()
        return values.argmax(-1).cpu().numpy()

    def explore(self, observations: np.ndarray) -> np.ndarray:
        actions = self.greedy(observations, noise=self.config.noisy)
        random = self.rng.random(len(actions)) < self.epsilon
        if random.any():
            actions[random] = self.rng.integers(self.n_actions, size=int(random.sum()))
        return actions

    # -- learning -----------------------------------------------------------------------------

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        c = self.config
        observations, next_observations = batch["observations"], batch["next_observations"]
        if self.flat:
            observations, next_observations = (
                self.flatten(observations),
                self.flatten(next_observations),
            )
        if c.noisy:
            self.reset_noise()
        if c.atoms > 1:
            q, losses = self.distributional_losses(batch, observations, next_observations)
            td_errors = losses.detach()  # Rainbow's priorities: the loss of each transition
            loss = self.weighted_mean(losses, batch)
        else:
            q, loss, td_errors = self.expected_value_loss(batch, observations, next_observations)
        norm = self.gradient_step(loss, self.optimizers["optimizer"], [self.online_vector])
        self.update_priorities(batch, td_errors)
        # per seed in a seed batch, whose counters are arrays
        due = np.asarray(self.env_steps >= self.next_target_update)
        if due.any():
            self.update_target(due if due.ndim else None)
            while np.any(behind := self.next_target_update <= self.env_steps):
                self.next_target_update = (
                    self.next_target_update + c.target_update_interval * behind
                )
        if (self.updates + 1) % c.gradient_steps:
            return {}  # only the last update of a training is logged: no host reads before
        metrics = {
            "loss": loss.detach(),
            "q_mean": q.detach().mean(-1),
            "epsilon": self.epsilon,
            "grad_norm": norm,
            "updates": float(self.updates + 1),
        }
        if c.prioritized:
            metrics["importance_beta"] = self.importance_beta
        return metrics

    def distributional_losses(
        self,
        batch: dict[str, torch.Tensor],
        observations: torch.Tensor,
        next_observations: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """C51: the cross-entropy between the projected target distribution of
        ``r + gamma^n z`` at ``(s', a*)`` and ``p(s, a)``, per transition; and ``Q(s, a)``."""
        c, online, target_network = self.config, self.q_network, self.target_network
        support = self.support
        log_p = action_rows(online(observations, logits=True), batch["actions"]).log_softmax(-1)
        with torch.no_grad():
            next_p = target_network(next_observations, logits=True).softmax(-1)
            chooser = online(next_observations) if c.double else next_p @ support
            next_p = action_rows(next_p, chooser.argmax(-1))
            scale = batch["discounts"] * (1.0 - batch["terminated"].float())
            returns = batch["rewards"][..., None] + scale[..., None] * support
            projected = categorical_projection(returns, next_p, c.v_min, c.v_max)
        losses = -(projected * log_p).sum(-1)
        q = log_p.detach().exp() @ support
        return q, losses

    def expected_value_loss(
        self,
        batch: dict[str, torch.Tensor],
        observations: torch.Tensor,
        next_observations: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The TD loss of the paper: ``Q(s, a)``, the loss and the TD errors."""
        c = self.config
        actions = batch["actions"].unsqueeze(-1)
        q = self.q_network(observations).gather(-1, actions).squeeze(-1)
        with torch.no_grad():
            next_values = self.target_network(next_observations)
            if c.double:
                chosen = self.q_network(next_observations).argmax(-1, keepdim=True)
                next_value = next_values.gather(-1, chosen).squeeze(-1)
            else:
                next_value = next_values.max(-1).values
            not_terminated = 1.0 - batch["terminated"].float()
            target = batch["rewards"] + batch["discounts"] * not_terminated * next_value
        if c.loss == "huber":
            losses = F.smooth_l1_loss(q, target, reduction="none")
        else:
            losses = F.mse_loss(q, target, reduction="none")
        # Prioritized replay: each term weighted by its importance-sampling weight.
        loss = self.weighted_mean(losses, batch)
        # The TD errors of the network the minibatch was drawn for (before this step).
        return q, loss, (target - q).detach()

    def update_target(self, rows: np.ndarray | None = None) -> None:
        """``theta^- <- tau theta + (1 - tau) theta^-``: one operation on the flat vectors
        (of the seeds in ``rows`` only, for a seed batch's stacked vectors)."""
        soft_update(self.target_vector, self.online_vector, self.config.tau, rows)

    # -- checkpoints --------------------------------------------------------------------------

    resume_scalars: ClassVar[tuple[str, ...]] = ("next_target_update",)

    def policy_modules(self) -> dict[str, nn.Module]:
        return {"q_network": self.q_network}

    @torch.no_grad()
    def sync_policy_targets(self) -> None:
        self.target_vector.copy_(self.online_vector)

    def training_modules(self) -> dict[str, nn.Module]:
        return {"target_network": self.target_network}


NOISY = dict(noisy=True, exploration_initial=0.0, exploration_final=0.0)
DISTRIBUTIONAL = dict(atoms=51, v_min=-10.0, v_max=10.0)


class DoubleDQN(DQN):
    """The ``double-dqn`` preset: DQN with double Q-learning targets."""

    Config: ClassVar[type] = preset(DQNConfig, "DoubleDQNConfig", __doc__, double=True)


class DuelingDQN(DQN):
    """The ``dueling-dqn`` preset: DQN with dueling heads and double targets (as in the
    dueling paper's experiments)."""

    Config: ClassVar[type] = preset(
        DQNConfig, "DuelingDQNConfig", __doc__, dueling=True, double=True
    )


class NoisyDQN(DQN):
    """The ``noisy-dqn`` preset: DQN whose noisy layers explore, with no epsilon."""

    Config: ClassVar[type] = preset(DQNConfig, "NoisyDQNConfig", __doc__, **NOISY)


class PrioritizedDQN(DQN):
    """The ``prioritized-dqn`` preset: double DQN with prioritized replay at a quarter of
    DQN's learning rate (the paper's experiments)."""

    Config: ClassVar[type] = preset(
        DQNConfig,
        "PrioritizedDQNConfig",
        __doc__,
        prioritized=True,
        double=True,
        learning_rate=2.5e-5,
    )


class C51(DQN):
    """The ``c51`` preset: 51 return atoms on [-10, 10], the paper's Adam step size 2.5e-4
    and epsilon 0.01/32."""

    Config: ClassVar[type] = preset(
        DQNConfig,
        "C51Config",
        __doc__,
        **DISTRIBUTIONAL,
        learning_rate=2.5e-4,
        adam_eps=0.01 / 32,
    )


class Rainbow(DQN):
    """The ``rainbow`` preset: double, dueling, noisy, prioritized (alpha 0.5, priorities
    the losses), 3-step and distributional DQN with Hessel et al. (2018)'s settings."""

    Config: ClassVar[type] = preset(
        DQNConfig,
        "RainbowConfig",
        __doc__,
        double=True,
        dueling=True,
        **NOISY,
        prioritized=True,
        priority_alpha=0.5,
        priority_beta=0.4,
        n_step=3,
        **DISTRIBUTIONAL,
        learning_rate=6.25e-5,
        adam_eps=1.5e-4,
    )
