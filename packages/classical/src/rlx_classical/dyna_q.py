"""Tabular Dyna-Q: Q-learning plus planning with a learned model of the environment.

R. S. Sutton, "Integrated architectures for learning, planning, and reacting based on
approximating dynamic programming", ICML 1990;
R. S. Sutton and A. G. Barto, "Reinforcement Learning: An Introduction", 2nd ed., 2018,
section 8.2::

    Initialise Q(s, a) and Model(s, a) for all s, a
    Loop forever:
        (a) S <- current (nonterminal) state
        (b) A <- epsilon-greedy(S, Q)
        (c) Take action A; observe resultant reward R, and state S'
        (d) Q(S, A) <- Q(S, A) + alpha [R + gamma max_a Q(S', a) - Q(S, A)]
        (e) Model(S, A) <- R, S'   (assuming a deterministic environment)
        (f) Loop repeat n times:
                S, A <- a random previously observed state-action pair
                R, S' <- Model(S, A)
                Q(S, A) <- Q(S, A) + alpha [R + gamma max_a Q(S', a) - Q(S, A)]

Each real step is followed by n simulated ones replayed from the model, so a reward found
once spreads back along the whole path in a few episodes instead of one state per episode;
n = 0 is Q-learning. The model keeps the last outcome of each pair, whether it ended the
episode included (so a modelled terminal transition is worth R alone); in a stochastic
environment that is the last sample, not the distribution. The book draws an observed state
and then an action tried in it; here a pair is drawn uniformly among all the observed ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx.config import hyperparameter
from rlx.errors import CheckpointError
from rlx.protocols import AgentState, Iteration
from rlx.vector import info_numbers
from rlx_classical.tabular import (
    TabularAgent,
    TabularConfig,
    epsilon_greedy,
    uniform_stream,
)

#: A modelled transition: state, action, reward, next state, and whether it terminated.
Transition = tuple[int, int, float, int, bool]


@dataclass
class DynaQConfig(TabularConfig):
    """Hyperparameters of tabular Dyna-Q."""

    planning_steps: int = hyperparameter(
        10,
        "simulated Q-learning updates from the model after each real environment step "
        "(0: plain Q-learning)",
        low=0,
    )


class DynaQ(TabularAgent):
    """Tabular Dyna-Q: each real step updates Q, records the outcome, then plans from the model.

    One ``step()`` is one training episode. The model is a list of the observed transitions
    (one per state-action pair, in the order the pairs were first tried) and a table of
    each pair's place in it, as Python objects for the same reason as the Q table. Planning
    draws from the training generator, so it is part of exact resume; the policy is the Q
    table alone. Logged metrics: ``epsilon``, the exploration rate of the next training
    step, and ``model_pairs``, the number of pairs the model knows.
    """

    Config = DynaQConfig

    def memory_estimate(self) -> dict[str, tuple[int, str]]:
        """The Q table, and the model: the index table (a list per state of a slot per
        action), a transition per pair once tried (about 120 bytes) and its arrays in a
        checkpoint (17 bytes per pair)."""
        parts = super().memory_estimate()
        parts[f"a model of {self.n_states:,} states x {self.n_actions:,} actions"] = (
            56 * self.n_states + (8 + 120 + 17) * self.n_states * self.n_actions,
            "use an environment with fewer states or actions",
        )
        return parts

    def __init__(self, env: Any, config: DynaQConfig, seed: int) -> None:
        super().__init__(env, config, seed)
        self.model: list[Transition] = []
        self._index = [[-1] * self.n_actions for _ in range(self.n_states)]

    def step(self) -> Iteration:
        """One training episode: after every real transition, a Q-learning update, the pair's
        outcome recorded in the model, then ``planning_steps`` Q-learning updates on pairs drawn
        uniformly from the model."""
        c = self.config
        q, alpha, gamma, planning_steps = self.q, c.learning_rate, c.gamma, c.planning_steps
        epsilon_at = self.epsilon_schedule()
        model, index = self.model, self._index
        env_step = self.env.step
        uniform = uniform_stream(self.rng).__next__
        random = self.rng.random
        t = self.env_steps
        episode_return = 0.0
        state = self.begin_episode()
        done = False
        while not done:
            # (a)-(c): act epsilon-greedily in the real environment.
            values = q[state]
            epsilon = epsilon_at(t)
            action = epsilon_greedy(values, epsilon, uniform(), uniform())
            next_state, reward, terminated, truncated, info = env_step(action)
            reward = float(reward)
            # (d) direct RL. A terminal state is worth nothing; a time limit ends the
            # episode, not the task.
            target = reward if terminated else reward + gamma * max(q[next_state])
            values[action] += alpha * (target - values[action])
            # (e) model learning: the pair's last outcome replaces the one before.
            transition = (state, action, reward, next_state, bool(terminated))
            place = index[state][action]
            if place < 0:
                index[state][action] = len(model)
                model.append(transition)
            else:
                model[place] = transition
            # (f) planning: the same backup on pairs drawn uniformly from the model, their
            # places drawn in one block (n = 0 draws nothing: it is Q-learning exactly).
            if planning_steps:
                places = (random(planning_steps) * len(model)).astype(np.int64).tolist()
            else:
                places = []
            for place in places:
                s, a, r, s_next, ended = model[place]
                planned = q[s]
                target = r if ended else r + gamma * max(q[s_next])
                planned[a] += alpha * (target - planned[a])
            episode_return += reward
            t += 1
            state = next_state
            done = terminated or truncated
        length = t - self.env_steps
        self.env_steps = t
        self.episodes += 1
        metrics = {"epsilon": self.epsilon, "model_pairs": len(model)}
        return Iteration(length, [episode_return], [length], metrics, [info_numbers(info)])

    def model_arrays(self) -> dict[str, np.ndarray]:
        """The model as arrays: ``model_reward``, ``model_next_state`` (-1 for a pair never
        tried) and ``model_terminated`` of shape ``(n_states, n_actions)``, and
        ``model_pairs``, the observed ``(state, action)`` pairs in the order planning
        indexes them, shape ``(pairs, 2)``."""
        shape = (self.n_states, self.n_actions)
        reward = np.zeros(shape, dtype=np.float64)
        next_state = np.full(shape, -1, dtype=np.int64)
        terminated = np.zeros(shape, dtype=np.bool_)
        pairs = np.zeros((len(self.model), 2), dtype=np.int64)
        if self.model:
            s, a, r, s_next, ended = (np.array(column) for column in zip(*self.model, strict=True))
            pairs[:, 0], pairs[:, 1] = s, a
            reward[s, a], next_state[s, a], terminated[s, a] = r, s_next, ended
        return {
            "model_reward": reward,
            "model_next_state": next_state,
            "model_terminated": terminated,
            "model_pairs": pairs,
        }

    def resume_state(self) -> AgentState:
        """The episode count and every RNG state, and the model planning samples from."""
        state = super().resume_state()
        state.arrays.update(self.model_arrays())
        return state

    def load_resume_state(self, state: AgentState) -> None:
        """Restore the episode count, the generators and the model that :meth:`resume_state` saved;
        a model that does not fit this environment (shapes, pairs out of range or twice, observed
        pairs without a next state) is a :class:`~rlx.errors.CheckpointError`."""
        arrays = state.arrays
        shape = (self.n_states, self.n_actions)
        pairs = arrays["model_pairs"]
        tables = [arrays[key] for key in ("model_reward", "model_next_state", "model_terminated")]
        if any(table.shape != shape for table in tables) or pairs.ndim != 2 or pairs.shape[1] != 2:
            raise CheckpointError(
                f"the saved model does not fit this environment's {self.n_states} states and "
                f"{self.n_actions} actions"
            )
        s, a = pairs[:, 0], pairs[:, 1]
        in_range = (pairs >= 0).all() and (s < self.n_states).all() and (a < self.n_actions).all()
        if not in_range or len(np.unique(s * self.n_actions + a)) != len(pairs):
            raise CheckpointError("the saved model lists state-action pairs out of range or twice")
        reward, next_state, terminated = (table[s, a].tolist() for table in tables)
        if any(n < 0 or n >= self.n_states for n in next_state):
            raise CheckpointError("the saved model has observed pairs without a next state")
        super().load_resume_state(state)
        self.model = list(zip(s.tolist(), a.tolist(), reward, next_state, terminated, strict=True))
        self._index = [[-1] * self.n_actions for _ in range(self.n_states)]
        for place, (pair_state, pair_action, *_) in enumerate(self.model):
            self._index[pair_state][pair_action] = place
