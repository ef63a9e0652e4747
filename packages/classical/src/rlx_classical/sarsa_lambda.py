"""Tabular SARSA(lambda): SARSA with eligibility traces.

R. S. Sutton and A. G. Barto, "Reinforcement Learning: An Introduction", 2nd ed., 2018,
section 12.7 (here with one feature per state-action pair); replacing traces from
S. P. Singh and R. S. Sutton, "Reinforcement learning with replacing eligibility traces",
Machine Learning 22, 1996::

    Loop for each episode:
        Initialise S; choose A from S epsilon-greedily; z <- 0
        Loop for each step of the episode:
            Take action A, observe R, S'
            delta <- R - Q(S, A)
            z(S, A) <- z(S, A) + 1   (accumulating)   or   z(S, A) <- 1   (replacing)
            If S' is terminal: Q <- Q + alpha delta z; go to the next episode
            Choose A' from S' epsilon-greedily
            delta <- delta + gamma Q(S', A')
            Q <- Q + alpha delta z
            z <- gamma lambda z
            S <- S'; A <- A'

Each TD error updates every pair visited earlier in the episode, in proportion to its
decayed trace, so a reward propagates back along the whole path at once; lambda = 0 is
one-step SARSA. Only visited pairs have non-zero traces, so the traces are a dictionary
and an update costs one operation per pair visited in the episode, not per table entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx.config import hyperparameter
from rlx.protocols import Iteration
from rlx.vector import info_numbers
from rlx_classical.tabular import (
    TabularAgent,
    TabularConfig,
    epsilon_greedy,
    uniform_stream,
)


@dataclass
class SarsaLambdaConfig(TabularConfig):
    """Hyperparameters of tabular SARSA(lambda)."""

    learning_rate: float = hyperparameter(
        0.1, "step size alpha of the update", low=0, high=1, low_open=True, search=(0.01, 1.0)
    )
    lam: float = hyperparameter(
        0.5, "trace decay lambda (0: one-step SARSA, 1: Monte Carlo-like)", low=0, high=1
    )
    traces: str = hyperparameter(
        "replacing",
        "eligibility trace of a revisited pair: reset to 1 (replacing) or incremented by 1 "
        "(accumulating)",
        choices=("replacing", "accumulating"),
    )


class SarsaLambda(TabularAgent):
    """Tabular SARSA(lambda) with accumulating or replacing traces, reset at each episode start.

    One ``step()`` is one training episode, updating Q after every transition. Logged
    metric: ``epsilon``, the exploration rate of the next training step.
    """

    Config = SarsaLambdaConfig

    def step(self) -> Iteration:
        """One training episode: act epsilon-greedily, and after every transition move every pair
        visited in the episode by its decayed trace times the SARSA TD error (the traces start empty
        at each episode)."""
        c = self.config
        q, alpha, gamma = self.q, c.learning_rate, c.gamma
        decay = c.gamma * c.lam
        replacing = c.traces == "replacing"
        epsilon_at = self.epsilon_schedule()
        env_step = self.env.step
        uniform = uniform_stream(self.rng).__next__
        t = self.env_steps
        episode_return = 0.0
        eligibility: dict[tuple[int, int], float] = {}
        state = self.begin_episode()
        epsilon = epsilon_at(t)
        action = epsilon_greedy(q[state], epsilon, uniform(), uniform())
        done = False
        while not done:
            next_state, reward, terminated, truncated, info = env_step(action)
            reward = float(reward)
            t += 1
            target = reward
            if not terminated:
                # After a time limit too: the cut-off episode would have gone on.
                next_values = q[next_state]
                epsilon = epsilon_at(t)
                next_action = epsilon_greedy(next_values, epsilon, uniform(), uniform())
                target += gamma * next_values[next_action]
            pair = (state, action)
            eligibility[pair] = 1.0 if replacing else eligibility.get(pair, 0.0) + 1.0
            step_size = alpha * (target - q[state][action])
            # Assigning to existing keys while iterating is safe: the dictionary keeps its size.
            for (s, a), trace in eligibility.items():
                q[s][a] += step_size * trace
                eligibility[s, a] = trace * decay
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
