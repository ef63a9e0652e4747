"""The best achievable returns of a small environment with a known model, to hold a learning
test to the optimum rather than to a threshold."""

from __future__ import annotations

from typing import Any

import numpy as np


def optimal_returns(env: Any, sweeps: int = 200) -> np.ndarray:
    """The optimal undiscounted return from every state of a toy-text environment (Taxi,
    FrozenLake, CliffWalking: ``env.unwrapped.P[state][action]`` lists ``(probability,
    next_state, reward, terminated)``), by value iteration. Episodes must end under the optimal
    policy (``sweeps`` bounds their length) for the values to be returns."""
    model = env.unwrapped.P
    values = np.zeros(len(model))
    for _ in range(sweeps):
        values = np.array(
            [
                max(
                    sum(p * (r + (0.0 if done else values[s])) for p, s, r, done in outcomes)
                    for outcomes in model[state].values()
                )
                for state in range(len(model))
            ]
        )
    return values
