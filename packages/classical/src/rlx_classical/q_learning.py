"""Tabular Q-learning: off-policy TD control.

C. J. C. H. Watkins, "Learning from Delayed Rewards", PhD thesis, Cambridge, 1989;
C. J. C. H. Watkins and P. Dayan, "Q-learning", Machine Learning 8, 1992;
R. S. Sutton and A. G. Barto, "Reinforcement Learning: An Introduction", 2nd ed., 2018,
section 6.5::

    Loop for each episode:
        Initialise S
        Loop for each step of the episode:
            Choose A from S using the policy derived from Q (epsilon-greedy)
            Take action A, observe R, S'
            Q(S, A) <- Q(S, A) + alpha [R + gamma max_a Q(S', a) - Q(S, A)]
            S <- S'
        until S is terminal

The target bootstraps from the greedy value of the next state whatever the behaviour
policy does next, so Q converges to the optimal action values while exploring.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx.protocols import Iteration
from rlx.vector import info_numbers
from rlx_classical.tabular import (
    TabularAgent,
    TabularConfig,
    epsilon_greedy,
    uniform_stream,
)


@dataclass
class QLearningConfig(TabularConfig):
    """Hyperparameters of tabular Q-learning."""


class QLearning(TabularAgent):
    """Tabular Q-learning with a linearly decaying epsilon-greedy behaviour policy.

    One ``step()`` is one training episode, updating Q after every transition. Logged
    metric: ``epsilon``, the exploration rate of the next training step.
    """

    Config = QLearningConfig

    def step(self) -> Iteration:
        """One training episode: act epsilon-greedily and, after every transition, move Q(S, A)
        towards R + gamma max_a Q(S', a) (R alone when S' is terminal)."""
        c = self.config
        q, alpha, gamma = self.q, c.learning_rate, c.gamma
        epsilon_at = self.epsilon_schedule()
        env_step = self.env.step
        uniform = uniform_stream(self.rng).__next__
        t = self.env_steps
        episode_return = 0.0
        state = self.begin_episode()
        done = False
        while not done:
            values = q[state]
            epsilon = epsilon_at(t)
            action = epsilon_greedy(values, epsilon, uniform(), uniform())
            next_state, reward, terminated, truncated, info = env_step(action)
            reward = float(reward)
            # A terminal state is worth nothing; a time limit ends the episode, not the task.
            target = reward if terminated else reward + gamma * max(q[next_state])
            values[action] += alpha * (target - values[action])
            episode_return += reward
            t += 1
            state = next_state
            done = terminated or truncated
        length = t - self.env_steps
        self.env_steps = t
        self.episodes += 1
        return Iteration(
            length, [episode_return], [length], {"epsilon": self.epsilon}, [info_numbers(info)]
        )
