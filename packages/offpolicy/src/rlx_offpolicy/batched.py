"""K seeds of DQN (all its presets: double, dueling, prioritized, noisy, C51, Rainbow),
DDPG, TD3, SAC, TQC or CrossQ (prioritized replay included) trained as one batched
computation.

:class:`SeedBatch` links K agents made with the same settings, one seed each (the seeds of
``rlx run --seeds``, see :meth:`OffPolicyAgent.seed_batch`). Each agent keeps what makes it
its seed's run: its environments, replay buffer, random streams, exploration, counters,
target-update schedule and checkpoints; it acts and stores its transitions itself. What
the batch shares is the learning:

- the K agents' networks become the rows of stacks (:mod:`rlx.nn.stacked`: each agent's
  layers views of its row), and each network of the learner is
  :class:`rlx.nn.stacked.StackedModule`, the agents' own module mapped over the seed axis;
- each gradient step draws every seed's minibatch from its own buffer with its own random
  stream, stacks them, and runs the algorithm's own :meth:`update` once on a learner (a copy
  of the first agent holding the stacks, the stacked optimisers, one counter per seed and
  one torch generator per seed); one backward pass and one optimiser step update all K;
- the agents' module buffers (NoisyNet's noise, CrossQ's running statistics) are stacked
  too, and passed to the mapped forward pass with the parameters: each seed draws its noise
  with its own generator into its own network, whose buffers are views of its rows, and
  acts with it; the statistics a pass moves stay in the rows that learn from it;
- a seed that has not reached ``learning_starts`` sits the round's updates out (its random
  streams untouched), and a seed whose loss stops being finite stops alone, with its single
  run's message; TD3's delayed policy steps follow each seed's own update count.

A seed of a batch follows its single run up to the order of floating-point operations.
Networks other than the MLP, torch optimisers and schedulers and GPUs raise
:class:`~rlx.errors.NotBatchable`, and those seeds train one by one.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from rlx.errors import NotBatchable
from rlx.nn import stacked
from rlx_offpolicy.base import NON_FINITE_ADVICE, OffPolicyAgent
from rlx_offpolicy.networks import FlatNetwork, retain_freed_memory


def check_batchable(agents: Sequence[OffPolicyAgent]) -> None:
    """Raise :class:`NotBatchable` unless ``agents`` can learn as one computation."""
    stacked.check_batchable(agents, "DQN (all its presets), DDPG, TD3, SAC, TQC and CrossQ")
    first = agents[0]
    if not first.flat:
        raise NotBatchable("only the built-in mlp network is batched (network=mlp)")


class StackedFlatNetwork:
    """The learner's view of K :class:`~rlx_offpolicy.networks.FlatNetwork` s: ``module``
    (and ``target``) over the stacked vectors, and the Polyak average of all K (or of some
    rows) at once."""

    def __init__(self, networks: Sequence[Any]) -> None:
        first = networks[0]
        self.vector = stacked.stack_rows([network.vector for network in networks])
        self.module = stacked.StackedModule(first.module, self.vector, first.vector)
        self.module.stack_buffers([network.module for network in networks])  # CrossQ's statistics
        self.target = self.target_vector = None
        if first.target is not None:
            self.target_vector = stacked.stack_rows(
                [network.target_vector for network in networks], grad=False
            )
            self.target = stacked.StackedModule(
                first.target, self.target_vector, first.target_vector
            )

    update_target = FlatNetwork.update_target


class StackedReplay:
    """What the learner's update asks of its buffer: new priorities, to each seed's own."""

    def __init__(self, batch: SeedBatch) -> None:
        self.batch = batch

    def update_priorities(self, indices: np.ndarray, errors: np.ndarray) -> None:
        """Give each learning seed's buffer the new TD errors of the transitions it drew."""
        rows = self.batch.learning
        for k in np.flatnonzero(rows):
            self.batch.agents[k].buffer.update_priorities(indices[k], errors[k])


class SeedBatch(stacked.SeedBatch):
    """K off-policy agents of one class and settings, one seed each, learning as one."""

    def __init__(self, agents: Sequence[OffPolicyAgent]) -> None:
        check_batchable(agents)
        retain_freed_memory()  # the stacked updates allocate K times the activations
        first = agents[0]
        learner = copy.copy(first)
        stacks: dict[int, torch.Tensor] = {}
        if hasattr(first, "q_network"):  # DQN
            online = stacked.stack_rows([agent.online_vector for agent in agents])
            target = stacked.stack_rows([agent.target_vector for agent in agents], grad=False)
            learner.q_network = stacked.StackedModule(first.q_network, online, first.online_vector)
            learner.target_network = stacked.StackedModule(
                first.target_network, target, first.target_vector
            )
            learner.online_vector, learner.target_vector = online, target
            stacks.update({id(agent.online_vector): online for agent in agents})
            learner.q_network.stack_buffers([agent.q_network for agent in agents])
            learner.target_network.stack_buffers([agent.target_network for agent in agents])
        else:  # SAC, TQC, CrossQ, DDPG, TD3
            learner.actor = StackedFlatNetwork([agent.actor for agent in agents])
            learner.critic = StackedFlatNetwork([agent.critic for agent in agents])
            stacks.update({id(agent.actor.vector): learner.actor.vector for agent in agents})
            stacks.update({id(agent.critic.vector): learner.critic.vector for agent in agents})
        if hasattr(first, "temperature"):  # SAC's learned alpha
            log_alpha = stacked.stack_rows([agent.temperature.log_alpha for agent in agents])
            learner.temperature = SimpleNamespace(log_alpha=log_alpha)
            stacks.update({id(agent.temperature.log_alpha): log_alpha for agent in agents})
        learner.optimizers = {
            name: stacked.stack_optimizer([agent.optimizers[name] for agent in agents], stacks)
            for name in first.optimizers
        }
        if hasattr(first, "last_actor_loss"):  # TD3's, one per seed (NaN: none yet)
            learner.last_actor_loss = torch.tensor(
                [np.nan if a.last_actor_loss is None else float(a.last_actor_loss) for a in agents]
            )
        if hasattr(first, "actor_metrics"):  # CrossQ's last actor metrics, per seed (NaN: none)
            names = {name for agent in agents for name in agent.actor_metrics}
            learner.actor_metrics = {
                name: torch.tensor(
                    [
                        float(a.actor_metrics[name]) if name in a.actor_metrics else np.nan
                        for a in agents
                    ]
                )
                for name in sorted(names)
            }
        learner.buffer = StackedReplay(self)
        learner.generator = [agent.generator for agent in agents]
        #: Draws for the rows of seeds that sit a round out, which must not take theirs.
        self.idle_generator = torch.Generator()
        super().__init__(agents)
        for agent in agents:  # their NumPy acting passes read the old memory
            agent.bind_acting()
        learner.batch = self
        self.learner = learner
        #: The seeds that learn in this round (past their warm-up, with a minibatch).
        self.learning = np.zeros(len(agents), dtype=bool)

    def apply_gradients(  # type: ignore[override]
        self, losses: torch.Tensor, optimizer: Any, parameters: Any, rows: np.ndarray | None = None
    ) -> torch.Tensor:
        """The learner's gradient step, for the seeds that learn in this round (those of
        them in ``rows`` only, when given: TD3's delayed policy steps)."""
        max_grad_norm = self.learner.config.max_grad_norm
        learning = self.learning if rows is None else self.learning & rows
        return super().apply_gradients(
            losses, optimizer, parameters, max_grad_norm, NON_FINITE_ADVICE, learning
        )

    def round(self, seats: list[int]) -> None:
        agents, learner = self.agents, self.learner
        steps = {k: agents[k].collect() for k in seats}
        self.learning[:] = False
        self.learning[[k for k in seats if agents[k].ready_to_learn()]] = True
        metrics: dict[str, Any] = {}
        learning = np.flatnonzero(self.learning)
        if len(learning):
            learner.env_steps = np.array([agent.env_steps for agent in agents])
            learner.generator = [
                agent.generator if self.learning[k] else self.idle_generator
                for k, agent in enumerate(agents)
            ]
            learner.budget = agents[learning[0]].budget  # the schedules over the budget
            if hasattr(agents[0], "next_target_update"):  # DQN's target updates
                learner.next_target_update = np.array([a.next_target_update for a in agents])
            learner.updates = agents[learning[0]].updates
            if hasattr(learner.config, "policy_delay"):  # TD3, CrossQ: each seed's phase
                learner.updates = np.array([agent.updates for agent in agents])
            for _ in range(learner.config.gradient_steps):
                metrics = learner.update(self.sample(learning))
                learner.updates += 1
                for k in learning:
                    if self.active[k]:
                        agents[k].updates += 1
            if hasattr(agents[0], "next_target_update"):
                for k in learning:
                    agents[k].next_target_update = int(learner.next_target_update[k])
        metrics = {  # read from the device once, for all the seeds
            name: value.detach().reshape(-1).tolist() if isinstance(value, torch.Tensor) else value
            for name, value in metrics.items()
        }
        for k in seats:
            returns, lengths = agents[k].runner.pop_finished()
            values = {}
            if self.learning[k]:  # less a metric the seed has none of yet (NaN in its row:
                # TD3's actor_loss before its first policy step), as its single run logs
                values = {
                    name: value
                    for name, value in metrics.items()
                    if not math.isnan(stacked.row_value(value, k, len(agents)))
                }
            if "updates" in values:
                values["updates"] = float(agents[k].updates)
            self.outcome(k, steps[k], returns, lengths, values)

    def sample(self, learning: np.ndarray) -> dict[str, torch.Tensor]:
        """Each learning seed's minibatch from its own buffer, stacked on the seed axis (the
        other seeds' rows hold a copy of the first's, and take no step)."""
        drawn = {int(k): self.agents[k].sample() for k in learning if self.active[k]}
        if not drawn:
            drawn = {int(learning[0]): self.agents[learning[0]].sample()}
        filler = next(iter(drawn.values()))
        rows = [drawn.get(k, filler) for k in range(len(self.agents))]
        return {name: torch.stack([row[name] for row in rows]) for name in filler}
