"""``rlx.testing.check_agent`` names the piece of state where a resumed run diverged.

The toy agents below keep the whole contract but for one piece of state that their
``load_resume_state`` loses; the check must name that piece, not just say "diverged".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from rlx.agents import Saveable
from rlx.config import hyperparameter
from rlx.protocols import AgentState, Iteration
from rlx.seeding import env_rng_state, restore_env_rng
from rlx.spaces import observation_batch
from rlx.testing import check_agent, state_difference

MODULE = __name__


@dataclass
class CountingConfig:
    """The toy agent's one hyperparameter."""

    learning_rate: float = hyperparameter(0.1, "step size, divided by 1 + the updates made")


class CountingAgent(Saveable):
    """A linear greedy policy nudged after each episode by the mean of a small buffer of the
    previous episode's observations, with a step size that shrinks with the updates made."""

    Config = CountingConfig

    def __init__(self, env: Any, config: CountingConfig, seed: int) -> None:
        self.env, self.config, self.seed = env, config, seed
        size, actions = env.observation_space.shape[0], env.action_space.n
        self.weights = np.zeros((size, actions))
        self.buffer = np.zeros((8, size))
        self.updates = 0
        self.rng = np.random.default_rng(seed)
        self._started = False

    def step(self) -> Iteration:
        step_size = self.config.learning_rate / (1 + self.updates)
        self.weights[:, self.updates % self.weights.shape[1]] += step_size * self.buffer.mean(0)
        self.updates += 1
        observation, _ = self.env.reset(seed=None if self._started else self.seed)
        self._started = True
        total, length, done = 0.0, 0, False
        while not done:
            self.buffer[length % len(self.buffer)] = observation
            if self.rng.random() < 0.5:
                action = int(self.rng.integers(self.env.action_space.n))
            else:
                action = int(np.argmax(observation @ self.weights))
            observation, reward, terminated, truncated, _ = self.env.step(action)
            total, length, done = total + float(reward), length + 1, terminated or truncated
        return Iteration(env_steps=length, episode_returns=[total], episode_lengths=[length])

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        batch = observation_batch(self.env.observation_space, observation)
        actions = np.argmax(np.asarray(batch.observations) @ self.weights, axis=1)
        return int(actions[0]) if batch.single else actions

    def policy_state(self) -> AgentState:
        return AgentState(arrays={"weights": self.weights.copy()})

    def load_policy_state(self, state: AgentState) -> None:
        self.weights = state.arrays["weights"].copy()

    def resume_state(self) -> AgentState:
        return AgentState(
            arrays={"buffer/observations": self.buffer.copy()},
            meta={
                "updates": self.updates,
                "started": self._started,
                "rng": self.rng.bit_generator.state,
                "env_rng": env_rng_state(self.env),
            },
        )

    def load_resume_state(self, state: AgentState) -> None:
        self.buffer = state.arrays["buffer/observations"].copy()
        self.updates = state.meta["updates"]
        self._started = state.meta["started"]
        self.rng.bit_generator.state = state.meta["rng"]
        restore_env_rng(self.env, state.meta["env_rng"])


class ForgetsItsUpdates(CountingAgent):
    """Resumes with the update counter of a new agent: its step size starts over."""

    def load_resume_state(self, state: AgentState) -> None:
        super().load_resume_state(state)
        self.updates = 0


class ForgetsItsBuffer(CountingAgent):
    """Resumes with an empty buffer: its first update after resuming is lost."""

    def load_resume_state(self, state: AgentState) -> None:
        super().load_resume_state(state)
        self.buffer = np.zeros_like(self.buffer)


def test_the_toy_agent_keeps_the_contract():
    check_agent(f"{MODULE}:CountingAgent", "CartPole-v1", iterations=3)


@pytest.mark.parametrize(
    "agent, lost",
    [
        ("ForgetsItsUpdates", "resume_state().meta['updates'] differs: 3 != 0"),
        (
            "ForgetsItsBuffer",
            "resume_state().arrays['buffer/observations'] (shape (8, 4), float64) first differs",
        ),
    ],
)
def test_a_resume_that_loses_one_piece_of_state_names_it(agent, lost):
    with pytest.raises(AssertionError) as info:
        check_agent(f"{MODULE}:{agent}", "CartPole-v1", iterations=3)
    message = str(info.value)
    assert "diverged from the uninterrupted run" in message
    assert "policy_state().arrays['weights'] (shape (4, 2), float64) first differs at index" in (
        message
    )
    assert f"Right after loading the checkpoint, the resumed agent already differed: {lost}" in (
        message
    )
    assert "does not restore it" in message


def _state(**arrays: Any) -> AgentState:
    meta = arrays.pop("meta", {})
    return AgentState(arrays={k: np.asarray(v) for k, v in arrays.items()}, meta=meta)


def test_state_difference_is_none_for_equal_states_nans_included():
    a = _state(x=[1.0, np.nan], meta={"rng": {"state": [1, 2]}})
    b = _state(x=[1.0, np.nan], meta={"rng": {"state": (1, 2)}})  # stored as JSON alike
    assert state_difference(a, b) is None


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (
            _state(x=np.zeros((2, 3))),
            _state(x=np.zeros((3, 2))),
            "state.arrays['x'] has shape (2, 3) in the first state, (3, 2) in the second",
        ),
        (
            _state(x=np.zeros(2, np.float32)),
            _state(x=np.zeros(2, np.float64)),
            "state.arrays['x'] has dtype float32 in the first state, float64 in the second",
        ),
        (
            _state(x=[[1, 2], [3, 4]]),
            _state(x=[[1, 2], [5, 6]]),
            "first differs at index (1, 0): np.int64(3) != np.int64(5); 2 of 4 elements differ",
        ),
        (_state(x=[1], y=[2]), _state(x=[1]), "['y'] only in the first, [] only in the second"),
        (
            _state(meta={"optimizer": {"moments": [0.0, 1.0]}}),
            _state(meta={"optimizer": {"moments": [0.0, 2.0]}}),
            "state.meta['optimizer']['moments'][1] differs: 1.0 != 2.0",
        ),
    ],
)
def test_state_difference_names_where_two_states_differ(a, b, expected):
    difference = state_difference(a, b)
    assert difference is not None and expected in difference, difference
