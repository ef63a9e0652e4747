"""K seeds of VPG, A2C, PPO or TRPO trained as one batched computation.

:class:`SeedBatch` links K agents made with the same settings, one seed each (the seeds of
``rlx run --seeds``, see :meth:`OnPolicyAgent.seed_batch`). Each agent keeps what makes it
its seed's run: its environments, rollout buffer, normalisers, random streams, counters and
checkpoints. What the batch shares is the computation:

- the K policies' weights become the rows of two stacks, the actors' and the critics'
  (:mod:`rlx.nn.stacked`); at every environment step one NumPy forward pass acts for all K,
  and each seed samples its actions from its own random stream (with ``action_masks``, among
  the valid actions of its own environments, whose masks its rollout keeps);
- the algorithm's own :meth:`update` runs once for all K on a learner: a copy of the first
  agent whose policy, optimisers and buffer are the stacked ones (:class:`StackedPolicy`,
  the stacked optimisers, :class:`StackedRollout`). Its tensors get a leading seed axis;
  the seeds' rollouts, whose numbers of valid steps differ, are padded to a rollout's size
  (minibatches to ``batch_size``), not to the other seeds' lengths, so that a seed computes
  alike whoever trains beside it (and a group resumes exactly after its seeds stopped at
  different rounds), and ``weights`` mark the real entries; each seed draws its minibatches
  from its own random stream, as its single run does, and a seed with a minibatch fewer
  than another is left out of that optimiser step (``rows``);
- a seed whose loss stops being finite stops alone, with the message its single run gives.

So a seed of a batch follows its single run: the same initial weights, environment seeds,
actions and minibatches; only the order of floating-point operations differs (the tests
compare parameters after several iterations). What cannot be batched (a user's network, a
torch optimiser or scheduler, PPO's KL early stop, VPG's value minibatches, a GPU) raises
:class:`~rlx.errors.NotBatchable`, and the seeds train one by one.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from rlx.errors import NotBatchable
from rlx.nn import stacked
from rlx.nn.layers import ACTIVATIONS, MLP, NUMPY_ACTIVATIONS, tanh
from rlx_onpolicy.base import NON_FINITE_ADVICE, OnPolicyAgent
from rlx_onpolicy.masks import apply_masks_numpy
from rlx_onpolicy.policies import ActorCritic
from rlx_onpolicy.ppo import PPOConfig
from rlx_onpolicy.rollout import RolloutBuffer
from rlx_onpolicy.sampler import exploration_log_std


def check_batchable(agents: Sequence[OnPolicyAgent]) -> None:
    """Raise :class:`NotBatchable` unless ``agents`` can train as one computation."""
    stacked.check_batchable(agents, "VPG, A2C, PPO and TRPO")
    first = agents[0]
    bodies = (first.policy.actor_body, first.policy.critic_body)
    if not all(isinstance(body, MLP) and not body.noisy for body in bodies):
        raise NotBatchable("only the built-in mlp policy is batched (policy=mlp, no critic_policy)")
    if isinstance(first.config, PPOConfig) and first.config.target_kl is not None:
        raise NotBatchable("PPO's target_kl early stop is not batched")
    if getattr(first.config, "value_batch_size", None) is not None:
        raise NotBatchable(
            "VPG's value_batch_size is not batched (value steps on all the data are)"
        )


class StackedPolicy:
    """The K actor-critics as one: ``(K, B, *obs) -> ((K, B, param_dim), (K, B))``, on the
    actor stack and the critic stack (each agent's :class:`ActorCritic` holds views of its
    rows)."""

    def __init__(self, template: ActorCritic, actor: torch.Tensor, critic: torch.Tensor) -> None:
        self.actor, self.critic = actor, critic
        activation = template.actor_body.activation_name
        # the batched update's large tensors take rlx.nn.layers.tanh, the fast one
        self.activation = tanh if activation == "tanh" else ACTIVATIONS[activation]
        self.numpy_activation = NUMPY_ACTIVATIONS[activation]
        self.actor_layers = _layout(
            template.actor_vector, [*template.actor_body.layers, template.actor_head]
        )
        self.critic_layers = _layout(
            template.critic_vector, [*template.critic_body.layers, template.critic_head]
        )
        log_std = template.log_std
        self.log_std_at = (
            None
            if log_std is None
            else (stacked.row_offset(template.actor_vector, log_std), (1, log_std.numel()))
        )
        #: The layers' weights and biases, leaves on the stacks' memory (stacked_parameter).
        self.actor_parameters = _parameters(actor, self.actor_layers)
        self.critic_parameters = _parameters(critic, self.critic_layers)
        #: ``(K, 1, action_dim)``, or None for discrete actions.
        self.log_std = (
            None if self.log_std_at is None else stacked.stacked_parameter(actor, *self.log_std_at)
        )

    def __call__(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = observations.flatten(2)
        params = self._mlp(self.actor_parameters, x)
        return params, self._mlp(self.critic_parameters, x).squeeze(-1)

    def values(self, observations: torch.Tensor) -> torch.Tensor:
        """``(K, B, *obs) -> (K, B)``: the critics alone, for the critic's own passes."""
        return self._mlp(self.critic_parameters, observations.flatten(2)).squeeze(-1)

    def _mlp(
        self, layers: list[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor
    ) -> torch.Tensor:
        inputs_first = [(weight.transpose(1, 2), bias.unsqueeze(1)) for weight, bias in layers]
        return stacked.mlp(x, inputs_first, self.activation)

    def vectors(self) -> list[torch.Tensor]:
        """The actor stack and the critic stack (one row per seed): what the seed batch's optimisers
        step."""
        return [self.actor, self.critic]

    def numpy_forward(self) -> Any:
        """The acting pass in NumPy on the stacks' memory: ``(K, n, *obs) -> ((K, n,
        param_dim), (K, n))``."""
        actor = _numpy_layers(self.actor, self.actor_layers)
        critic = _numpy_layers(self.critic, self.critic_layers)
        act = stacked.numpy_linear_stack(actor, self.numpy_activation)
        value = stacked.numpy_linear_stack(critic, self.numpy_activation)

        def forward(observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            x = observations.reshape(*observations.shape[:2], -1)
            return act(x), value(x)[..., 0]

        return forward

    def numpy_log_std(self) -> np.ndarray | None:
        """``(K, action_dim)`` on the actor stack's memory, or None."""
        if self.log_std_at is None:
            return None
        at, (_, n) = self.log_std_at
        return self.actor.detach().numpy()[:, at : at + n]


def _layout(vector: torch.Tensor, layers: Sequence[Any]) -> list[tuple]:
    """Where each linear layer's weight and bias sit in ``vector``, and their shapes."""
    return [
        (
            stacked.row_offset(vector, layer.weight),
            tuple(layer.weight.shape),
            stacked.row_offset(vector, layer.bias),
            tuple(layer.bias.shape),
        )
        for layer in layers
    ]


def _parameters(
    stack: torch.Tensor, layers: list[tuple]
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [
        (
            stacked.stacked_parameter(stack, weight_at, weight_shape),
            stacked.stacked_parameter(stack, bias_at, bias_shape),
        )
        for weight_at, weight_shape, bias_at, bias_shape in layers
    ]


def _numpy_layers(stack: torch.Tensor, layers: list[tuple]) -> list[tuple[np.ndarray, np.ndarray]]:
    array = stack.detach().numpy()
    result = []
    for weight_at, (out, inp), bias_at, _ in layers:
        weight = array[:, weight_at : weight_at + out * inp].reshape(len(array), out, inp)
        bias = array[:, bias_at : bias_at + out]
        if not np.shares_memory(weight, array):  # a copy would not see the updates
            raise RuntimeError("the stacked weights cannot be viewed in NumPy")
        result.append((weight, bias))
    return result


class StackedRollout:
    """The K rollout buffers as the learner reads them: each field ``(K, N, ...)``, padded
    to the seed with the most valid steps, ``weights`` ``(K, N)`` (1 for real entries) and
    ``rows`` (the seeds that learn from it); with ``action_masks``, each seed's masks
    ``(K, N, n_actions)``, so that the update masks each seed's logits with its own."""

    def __init__(self, batch: SeedBatch) -> None:
        self.batch = batch
        self.counts: list[int] = []

    def flat(self) -> dict[str, Any]:
        """Every seed's :meth:`RolloutBuffer.flat`, padded and stacked ``(K, N, ...)``, with
        ``weights`` ``(K, N)`` and ``rows`` (the active seeds that have data); it also notes
        each seed's count for :meth:`minibatches`.

        ``N`` is a rollout's size, ``n_steps * n_envs``, however many valid steps the other
        seeds have: the width of a seed's row sets how its sums and products round, and one
        taken from the others would move a seed off its course when they stop, or resume at
        other rounds. Only ``min_episodes`` rollouts, which can outgrow it, take the longest
        one's length: those seeds resume in one batch up to rounding."""
        agents, active = self.batch.agents, self.batch.active
        parts = [agent.buffer.flat() for agent in agents]
        self.counts = [len(part["values"]) for part in parts]
        rows = active & (np.array(self.counts) > 0)
        c = agents[0].config
        n = max([c.n_steps * c.n_envs, *np.array(self.counts)[rows].tolist()])
        data: dict[str, Any] = {  # (a stopped seed's rollout is stale, unread: cut to N)
            name: torch.stack([_pad(part[name][:n], n) for part in parts])
            for name in _fields(parts[0])
        }
        data["weights"] = _weights(self.counts, n)
        data["rows"] = rows
        return data

    def minibatches(
        self, data: dict[str, Any], batch_size: int, rng: Any = None
    ) -> Iterator[dict[str, Any]]:
        """:meth:`RolloutBuffer.minibatches` of every seed side by side: each seed shuffles
        its own steps with its own random stream; round ``i`` holds every seed's ``i``-th
        minibatch (a seed that has none is not in that round's ``rows``), ``batch_size``
        wide whatever the others' minibatches (see :meth:`flat`)."""
        if batch_size >= data["values"].shape[1]:
            yield data
            return
        plans: list[list[torch.Tensor]] = []
        for agent, count, row in zip(self.batch.agents, self.counts, data["rows"], strict=True):
            if not row:
                plans.append([])
            elif batch_size >= count:
                plans.append([torch.arange(count)])
            else:
                order = torch.from_numpy(agent.rng.permutation(count))
                plans.append([order[i : i + batch_size] for i in range(0, count, batch_size)])
        k, n = len(plans), data["values"].shape[1]
        for i in range(max(len(plan) for plan in plans)):
            pieces = [
                plan[i] if i < len(plan) else torch.zeros(0, dtype=torch.long) for plan in plans
            ]
            sizes = [len(piece) for piece in pieces]
            width = batch_size
            index = torch.zeros(k, width, dtype=torch.long)
            for row, piece in enumerate(pieces):
                index[row, : len(piece)] = piece
            flat_index = (index + n * torch.arange(k)[:, None]).reshape(-1)
            batch: dict[str, Any] = {
                name: data[name]
                .flatten(0, 1)
                .index_select(0, flat_index)
                .view(k, width, *data[name].shape[2:])
                for name in _fields(data)
            }
            batch["weights"] = _weights(sizes, width)
            batch["rows"] = data["rows"] & (np.array(sizes) > 0)
            yield batch


def _fields(data: dict[str, Any]) -> tuple[str, ...]:
    """The per-step fields of a rollout's ``data``: :data:`RolloutBuffer.FIELDS`, and the
    ``action_masks`` when it keeps them."""
    return (
        (*RolloutBuffer.FIELDS, "action_masks") if "action_masks" in data else RolloutBuffer.FIELDS
    )


def _pad(tensor: torch.Tensor, n: int) -> torch.Tensor:
    """``tensor`` with rows appended up to ``n``: zeros, or all-valid masks (padding's weight is
    0 either way; a row of no valid action would only be a row of equal logits)."""
    if len(tensor) == n:
        return tensor
    shape = (n - len(tensor), *tensor.shape[1:])
    filler = tensor.new_ones(shape) if tensor.dtype == torch.bool else tensor.new_zeros(shape)
    return torch.cat([tensor, filler])


def _weights(counts: Sequence[int], n: int) -> torch.Tensor:
    return (torch.arange(n)[None, :] < torch.tensor(counts)[:, None]).float()


class SeedBatch(stacked.SeedBatch):
    """K agents of one class and settings, one seed each, trained as one computation.

    Each agent's ``step`` returns its part of the current round
    (:meth:`rlx.nn.stacked.SeedBatch.iteration`): the first call of a round collects the
    rollouts of every seed still training and runs the learner's update once.
    """

    def __init__(self, agents: Sequence[OnPolicyAgent]) -> None:
        check_batchable(agents)
        first = agents[0]
        policies = [agent.policy for agent in agents]
        actor = stacked.stack_rows([policy.actor_vector for policy in policies])
        critic = stacked.stack_rows([policy.critic_vector for policy in policies])
        stacks = {id(policy.actor_vector): actor for policy in policies}
        stacks.update({id(policy.critic_vector): critic for policy in policies})
        self.policy = StackedPolicy(first.policy, actor, critic)
        learner = copy.copy(first)
        learner.policy = self.policy  # type: ignore[assignment]
        learner.optimizers = {
            name: stacked.stack_optimizer([agent.optimizers[name] for agent in agents], stacks)
            for name in first.optimizers
        }
        learner.buffer = StackedRollout(self)  # type: ignore[assignment]
        super().__init__(agents)
        learner.batch = self
        self.learner = learner
        self._forward = self.policy.numpy_forward()
        self._log_std = self.policy.numpy_log_std()

    def apply_gradients(  # type: ignore[override]
        self, losses: torch.Tensor, optimizer: Any, parameters: Any, rows: np.ndarray | None
    ) -> torch.Tensor:
        """The learner's gradient step (:meth:`rlx.nn.stacked.SeedBatch.apply_gradients`)."""
        max_grad_norm = self.learner.config.max_grad_norm
        return super().apply_gradients(
            losses, optimizer, parameters, max_grad_norm, NON_FINITE_ADVICE, rows
        )

    def round(self, seats: list[int]) -> None:
        collected = self._collect(seats)
        learner, agents = self.learner, self.agents
        for k in seats:
            agents[k].env_steps += collected[k][2]
        learner.env_steps = np.array([agent.env_steps for agent in agents])
        learner.schedule_steps = agents[seats[0]].schedule_steps
        learner.apply_learning_rates()
        rates = {name: opt.param_groups[0]["lr"] for name, opt in learner.optimizers.items()}
        seeds = len(agents)
        for k in seats:  # each agent's own optimiser records its rate (its checkpoints)
            for name, rate in rates.items():
                agents[k].optimizers[name].param_groups[0]["lr"] = stacked.row_value(rate, k, seeds)
        metrics = learner.update()
        metrics["learning_rate"] = next(iter(rates.values()))
        for k in seats:
            if k not in self.failures:
                agents[k].updates += 1
            returns, lengths, steps = collected[k]
            self.outcome(k, steps, returns, lengths, metrics)

    @torch.no_grad()
    def _collect(self, seats: list[int]) -> dict[int, tuple[list[float], list[int], int]]:
        """One rollout of every seat: the samplers' steps, one forward pass for all."""
        agents, forward = self.agents, self._forward
        log_std = exploration_log_std(self._log_std, self.learner.config)
        distribution = self.learner.distribution
        samplers = {k: agents[k].sampler for k in seats}
        for sampler in samplers.values():
            sampler.begin()
        inputs: list[np.ndarray] = [np.empty(0)] * len(agents)

        def observe(update: bool, observed: dict[int, Any]) -> np.ndarray:
            for k, sampler in observed.items():
                inputs[k] = sampler.observe(update)
            blank = np.zeros_like(inputs[seats[0]])
            return np.stack([blank if x.shape != blank.shape else x for x in inputs])

        # Each seat's rollout ends when its own does (min_episodes: rollouts differ in length);
        # the seats that are done wait, their rows of the forward pass unused.
        collecting = dict(samplers)
        while collecting:
            params, values = forward(observe(True, collecting))
            for k, sampler in collecting.items():
                masks = sampler.action_masks()  # each seed's own environments' (action_masks)
                actions, log_probs = distribution.sample_numpy(
                    apply_masks_numpy(params[k], masks),
                    None if log_std is None else log_std[k],
                    agents[k].sample_rng,
                )
                sampler.record(inputs[k], actions, log_probs, values[k], masks=masks)
            collecting = {k: sampler for k, sampler in collecting.items() if not sampler.done()}
        _, last_values = forward(observe(False, samplers))
        return {k: sampler.finish(last_values[k]) for k, sampler in samplers.items()}
