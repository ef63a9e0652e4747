"""Tabular SARSA: on-policy TD control.

G. A. Rummery and M. Niranjan, "On-line Q-learning using connectionist systems",
Technical Report CUED/F-INFENG/TR 166, Cambridge University, 1994;
R. S. Sutton and A. G. Barto, "Reinforcement Learning: An Introduction", 2nd ed., 2018,
section 6.4::

    Loop for each episode:
        Initialise S
        Choose A from S using the policy derived from Q (epsilon-greedy)
        Loop for each step of the episode:
            Take action A, observe R, S'
            Choose A' from S' using the policy derived from Q (epsilon-greedy)
            Q(S, A) <- Q(S, A) + alpha [R + gamma Q(S', A') - Q(S, A)]
            S <- S'; A <- A'
        until S is terminal

The target uses the action the behaviour policy actually takes next (the quintuple
S, A, R, S', A' gives the name), so Q converges to the values of the epsilon-greedy policy
itself, which avoids risky states more than Q-learning while exploration lasts.
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
class SarsaConfig(TabularConfig):
    """Hyperparameters of tabular SARSA."""


class Sarsa(TabularAgent):
    """Tabular SARSA with a linearly decaying epsilon-greedy policy.

    One ``step()`` is one training episode, updating Q after every transition. Logged
    metric: ``epsilon``, the exploration rate of the next training step.
    """

    Config = SarsaConfig

    def step(self) -> Iteration:
        """One training episode: act epsilon-greedily and, after every transition, move Q(S, A)
        towards R + gamma Q(S', A'), A' the action the policy takes next (R alone when S' is
        terminal)."""
        c = self.config
        q, alpha, gamma = self.q, c.learning_rate, c.gamma
        epsilon_at = self.epsilon_schedule()
        env_step = self.env.step
        uniform = uniform_stream(self.rng).__next__
        t = self.env_steps
        episode_return = 0.0
        state = self.begin_episode()
        epsilon = epsilon_at(t)
        action = epsilon_greedy(q[state], epsilon, uniform(), uniform())
        done = False
        while not done:
            next_state, reward, terminated, truncated, info = env_step(action)
            reward = float(reward)
            t += 1
            if terminated:
                target = reward
            else:
                # After a time limit too: the cut-off episode would have gone on.
                next_values = q[next_state]
                epsilon = epsilon_at(t)
                next_action = epsilon_greedy(next_values, epsilon, uniform(), uniform())
                target = reward + gamma * next_values[next_action]
            values = q[state]
            values[action] += alpha * (target - values[action])
            episode_return += reward
            done = terminated or truncated
            if not done:
                state, action = next_state, next_action
        length = t - self.env_steps
        self.env_steps = t
        self.episodes += 1
        return Iteration(
            length, [episode_return], [length], {"epsilon": self.epsilon}, [info_numbers(info)]
        )
