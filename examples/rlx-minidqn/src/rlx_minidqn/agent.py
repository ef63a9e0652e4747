"""Deep Q-networks (DQN), written only with rlx-core's building blocks.

Mnih, Kavukcuoglu, Silver et al. (2015), "Human-level control through deep reinforcement
learning", Nature 518, 529-533, Algorithm 1 (deep Q-learning with experience replay)::

    initialise the replay memory D, the Q-network Q(s, a; theta) at random, and the
    target network Q^ with theta^- = theta
    for every environment step t:
        with probability epsilon a random action a_t, else a_t = argmax_a Q(s_t, a; theta)
        take a_t, observe r_t and s_{t+1}; store (s_t, a_t, r_t, s_{t+1}) in D
        sample a minibatch of transitions (s_j, a_j, r_j, s_{j+1}) uniformly from D
        y_j = r_j                                        if the episode terminates at j + 1
              r_j + gamma max_a' Q^(s_{j+1}, a'; theta^-)  otherwise
        a gradient step on the Huber loss of y_j - Q(s_j, a_j; theta)
        every C updates, theta^- <- theta

Departures from the paper, as in most implementations for small tasks: Adam instead of
RMSProp; epsilon decays linearly over ``exploration_steps`` environment steps; the
``learning_starts`` first steps act uniformly at random (the paper's replay start size); the
network is trained ``gradient_steps`` times every ``train_freq`` steps of the environments
(the paper: once every 4); and an episode cut by a time limit still bootstraps from its final
observation, since only a terminated one has no future.

What rlx-core gives, and where it is used below:

- :func:`rlx.config.hyperparameter`: the hyperparameters, checked and explained by ``rlx
  info`` (:class:`MiniDQNConfig`);
- :class:`rlx.vector.VectorRunner`: ``n_envs`` environments with their autoreset and episode
  statistics; :class:`rlx.replay.ReplayBuffer`: the replay memory ``D``;
- :func:`rlx.schedules.linear`: epsilon; :mod:`rlx.seeding`: the generators;
- :class:`rlx.nn.layers.MLP`, :func:`rlx.nn.optim.apply_gradients` and :mod:`rlx.nn.state`:
  the network, its gradient step, and its checkpoint arrays;
- :class:`rlx.protocols.Iteration` and :class:`rlx.protocols.AgentState`: what the trainer
  reads after each step and what a checkpoint stores.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlx.agents import Saveable
from rlx.config import hyperparameter
from rlx.nn.layers import MLP
from rlx.nn.optim import apply_gradients
from rlx.nn.state import (
    load_module_arrays,
    load_optimizer_state,
    module_arrays,
    optimizer_state,
    set_torch_threads,
)
from rlx.protocols import AgentState, Iteration
from rlx.replay import ReplayBuffer
from rlx.schedules import linear
from rlx.seeding import agent_generator, derive, generator_state, restore_generator
from rlx.spaces import observation_batch
from rlx.vector import VectorRunner


@dataclass
class MiniDQNConfig:
    """Hyperparameters of :class:`MiniDQN`; the defaults suit small tasks such as CartPole."""

    n_envs: int = hyperparameter(1, "environments stepped together", low=1)
    buffer_size: int = hyperparameter(
        50_000, "replay memory capacity in transitions (D), all environments together", low=1
    )
    learning_starts: int = hyperparameter(
        1_000, "environment steps of uniformly random actions before the first update", low=0
    )
    batch_size: int = hyperparameter(64, "transitions per minibatch", low=1)
    gamma: float = hyperparameter(0.99, "discount factor", low=0, high=1)
    train_freq: int = hyperparameter(
        4, "steps of every environment between two trainings (one learning iteration)", low=1
    )
    gradient_steps: int = hyperparameter(1, "minibatch updates per training", low=1)
    learning_rate: float = hyperparameter(1e-3, "Adam step size", low=0, low_open=True)
    max_grad_norm: float = hyperparameter(
        10.0, "gradients are clipped to this global norm", low=0, low_open=True
    )
    target_update_interval: int = hyperparameter(
        250, "updates between two copies of the Q-network into its target (C)", low=1
    )
    exploration_initial: float = hyperparameter(1.0, "epsilon at the start", low=0, high=1)
    exploration_final: float = hyperparameter(0.05, "epsilon after the decay", low=0, high=1)
    exploration_steps: int = hyperparameter(
        10_000, "environment steps over which epsilon decays linearly", low=0
    )
    hidden_sizes: tuple[int, ...] = hyperparameter((64, 64), "hidden layers of the Q-network")
    torch_threads: int = hyperparameter(
        1, "torch CPU threads (0: torch's default); small networks are fastest on one", low=0
    )

    def __post_init__(self) -> None:
        if not self.hidden_sizes or any(size < 1 for size in self.hidden_sizes):
            raise ValueError(f"hidden_sizes must be positive layer sizes, got {self.hidden_sizes}")
        if self.batch_size > self.buffer_size:
            raise ValueError(
                f"batch_size = {self.batch_size} is larger than buffer_size = {self.buffer_size}"
            )


def make_q_network(
    observation_size: int, hidden_sizes: tuple[int, ...], n_actions: int
) -> nn.Module:
    """``Q(s, .; theta)``: observations ``(batch, observation_size)`` to action values
    ``(batch, n_actions)``, an :class:`~rlx.nn.layers.MLP` body under a linear head."""
    body = MLP((observation_size, *hidden_sizes), "relu")
    return nn.Sequential(body, nn.Linear(hidden_sizes[-1], n_actions))


class MiniDQN(Saveable):
    """DQN with epsilon-greedy exploration, a replay memory and a target network.

    Box observations (flattened) and Discrete actions, as its spec declares. One
    :meth:`step` is ``train_freq`` steps of every environment, then ``gradient_steps``
    updates. Logged metrics: ``epsilon``; once learning has started, ``loss`` (the Huber loss
    of the last update) and ``q_mean`` (its mean ``Q(s_j, a_j)``).
    """

    Config = MiniDQNConfig
    #: Trainer settings suggested to ``rlx run`` (the user's own win).
    trainer_defaults: ClassVar[dict[str, Any]] = {"eval_every": 5_000, "log_every": 1_000}

    def __init__(self, env: Any, config: MiniDQNConfig, seed: int) -> None:
        self.env = env
        self.config = c = config
        self.seed = seed
        set_torch_threads(c.torch_threads)
        observation_shape = tuple(env.observation_space.shape)
        self.n_actions = int(env.action_space.n)
        self.first_action = int(env.action_space.start)
        #: Exploration and minibatches draw from it; the environments have their own.
        self.rng = agent_generator(seed)
        self.runner = VectorRunner(env, c.n_envs, "auto", seed)
        self.buffer = ReplayBuffer(
            c.buffer_size,
            c.n_envs,
            observation_shape,
            np.dtype(np.float32),
            (),
            np.dtype(np.int64),
        )
        # Initial weights from the run's seed, leaving torch's global generator as it was.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive(seed, "initial weights"))
            self.q_network = make_q_network(
                int(np.prod(observation_shape)), c.hidden_sizes, self.n_actions
            )
        self.target_network = copy.deepcopy(self.q_network).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.q_network.parameters(), lr=c.learning_rate)
        self.env_steps = 0
        self.updates = 0

    # -- acting -----------------------------------------------------------------------------

    @property
    def epsilon(self) -> float:
        """The probability of a random action at this environment step."""
        c = self.config
        return float(
            linear(self.env_steps, c.exploration_initial, c.exploration_final, c.exploration_steps)
        )

    def greedy(self, observations: Any) -> np.ndarray:
        """``argmax_a Q(s, a; theta)``: action indices ``(n,)`` for observations ``(n, *shape)``."""
        flat = np.asarray(observations, np.float32).reshape(len(observations), -1)
        with torch.no_grad():
            return self.q_network(torch.from_numpy(flat)).argmax(1).numpy()

    def explore(self, observations: np.ndarray) -> np.ndarray:
        """Epsilon-greedy action indices ``(n_envs,)``; uniformly random before
        ``learning_starts``."""
        n = self.config.n_envs
        if self.env_steps < self.config.learning_starts:
            return self.rng.integers(self.n_actions, size=n)
        actions = self.greedy(observations)
        random = self.rng.random(n) < self.epsilon
        actions[random] = self.rng.integers(self.n_actions, size=int(random.sum()))
        return actions

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """The greedy action: an ``int`` for one observation, int64 ``(n,)`` for a batch
        ``(n, *shape)``. Exploration belongs to training, so ``deterministic`` changes
        nothing and evaluation draws no random number."""
        batch = observation_batch(self.env.observation_space, observation)
        actions = self.first_action + self.greedy(batch.observations)
        return int(actions[0]) if batch.single else actions.astype(np.int64)

    # -- one learning iteration -------------------------------------------------------------

    def step(self) -> Iteration:
        """``train_freq`` steps of every environment into the replay memory, then
        ``gradient_steps`` updates once ``learning_starts`` steps have been taken."""
        c = self.config
        steps = 0
        for _ in range(c.train_freq):
            observations = self.runner.observations
            actions = self.explore(observations)
            step = self.runner.step(self.first_action + actions)
            # The reset step after an episode's end (valid False) is no transition.
            self.buffer.add(
                observations,
                actions,
                step.rewards,
                step.next_observations,
                step.terminated,
                step.done,
                step.valid,
            )
            valid = int(step.valid.sum())
            steps += valid
            self.env_steps += valid
        metrics = {"epsilon": self.epsilon}
        if self.env_steps >= c.learning_starts and len(self.buffer) >= c.batch_size:
            for _ in range(c.gradient_steps):
                loss, q_mean = self.update(self.buffer.sample(c.batch_size, self.rng, c.gamma))
            metrics.update(loss=float(loss), q_mean=float(q_mean))
        returns, lengths = self.runner.pop_finished()
        return Iteration(steps, returns, lengths, metrics)

    def update(self, batch: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """One gradient step on a minibatch from :meth:`ReplayBuffer.sample
        <rlx.replay.ReplayBuffer.sample>` (each field with leading axis ``batch_size``);
        every ``target_update_interval`` updates, the target network copies the Q-network.
        Returns the loss and the mean ``Q(s_j, a_j)``, detached."""
        c = self.config
        observations = torch.from_numpy(batch["observations"]).flatten(1)
        next_observations = torch.from_numpy(batch["next_observations"]).flatten(1)
        actions = torch.from_numpy(batch["actions"])
        with torch.no_grad():
            next_values = self.target_network(next_observations).max(1).values
            # ``discounts`` is gamma (gamma**k for k-step returns); 0 where s_{j+1} is terminal.
            alive = 1.0 - torch.from_numpy(batch["terminated"]).float()
            targets = (
                torch.from_numpy(batch["rewards"])
                + torch.from_numpy(batch["discounts"]) * alive * next_values
            )
        q = self.q_network(observations).gather(1, actions[:, None]).squeeze(1)
        loss = F.smooth_l1_loss(q, targets)
        apply_gradients(
            loss,
            self.optimizer,
            list(self.q_network.parameters()),
            c.max_grad_norm,
            where=f"mini-dqn, update {self.updates + 1}: ",
            advice="Lower learning_rate or max_grad_norm",
        )
        self.updates += 1
        if self.updates % c.target_update_interval == 0:
            self.target_network.load_state_dict(self.q_network.state_dict())
        return loss.detach(), q.detach().mean()

    # -- checkpoints ------------------------------------------------------------------------

    def policy_state(self) -> AgentState:
        """The Q-network's weights: all that acting needs."""
        return AgentState(arrays=module_arrays("q_network", self.q_network))

    def load_policy_state(self, state: AgentState) -> None:
        """Take the Q-network's weights; the target network starts from them too (a warm
        start), until :meth:`load_resume_state` puts back its own."""
        load_module_arrays("q_network", self.q_network, state.arrays)
        self.target_network.load_state_dict(self.q_network.state_dict())

    def resume_state(self) -> AgentState:
        """Everything else an exact resume needs: the target network, Adam's moments, the
        replay memory, the environments in mid-episode, the counters and the generator."""
        arrays = module_arrays("target_network", self.target_network)
        optimizer_arrays, optimizer_meta = optimizer_state("adam", self.optimizer)
        arrays.update(optimizer_arrays)
        arrays.update(self.buffer.state("buffer"))
        runner_arrays, runner_meta = self.runner.state("runner")
        arrays.update(runner_arrays)
        meta = {
            "env_steps": self.env_steps,
            "updates": self.updates,
            "rng": generator_state(self.rng),
            "adam": optimizer_meta,
            "runner": runner_meta,
        }
        return AgentState(arrays=arrays, meta=meta)

    def load_resume_state(self, state: AgentState) -> None:
        """Restore :meth:`resume_state` (after :meth:`load_policy_state`)."""
        arrays, meta = state.arrays, state.meta
        load_module_arrays("target_network", self.target_network, arrays)
        load_optimizer_state("adam", self.optimizer, arrays, meta["adam"])
        self.buffer.load(arrays, "buffer")
        # Environments that cannot be restored (asynchronous ones) restart with this seed.
        restart = derive(self.seed, "restart episodes", meta["updates"])
        self.runner.load(arrays, meta["runner"], "runner", seed=restart)
        self.env_steps, self.updates = int(meta["env_steps"]), int(meta["updates"])
        restore_generator(self.rng, meta["rng"])

    def close(self) -> None:
        """Release the environments the runner made."""
        self.runner.close()
