"""Observation normalisation: raw observations in the buffer, normalised batches and actions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import rlx
from rlx.testing import check_agent

SMALL = dict(
    learning_starts=32,
    batch_size=32,
    train_freq=16,
    gradient_steps=3,
    buffer_size=1_000,
    hidden_sizes=(32, 32),
    normalize_observations=True,
)


@pytest.mark.parametrize("name, env", [("sac", "Pendulum-v1"), ("dqn", "CartPole-v1")])
def test_normalising_agents_keep_the_contract(name, env):
    check_agent(name, env, iterations=3, **SMALL)


def test_the_buffer_keeps_raw_observations_and_batches_use_the_current_statistics():
    agent = rlx.make("sac", "Pendulum-v1", seed=0, **SMALL)
    for _ in range(4):
        agent.step()
    stats = agent.obs_normalizer.stats
    # Every observation acted on was counted (Pendulum's cos, sin and velocity).
    assert stats.count == pytest.approx(agent.env_steps, abs=1e-3)
    stored = agent.buffer.arrays["observations"][: len(agent.buffer)].reshape(-1, 3)
    assert np.abs(stored[:, :2]).max() <= 1.0  # raw: cos and sin
    raw = agent.buffer.sample(8, np.random.default_rng(0), 0.99, 1)
    batch = agent.to_tensors(dict(raw))
    expected = (raw["observations"] - stats.mean) / np.sqrt(stats.var + 1e-8)
    np.testing.assert_allclose(batch["observations"].numpy(), np.clip(expected, -10, 10), rtol=1e-5)
    # Acting normalises with the same statistics, and does not change them.
    observation = np.array([0.5, -0.5, 4.0], np.float32)
    count = stats.count
    np.testing.assert_allclose(
        agent.as_input(observation),
        (observation - stats.mean) / np.sqrt(stats.var + 1e-8),
        rtol=1e-5,
    )
    assert stats.count == count


def test_the_statistics_belong_to_the_policy():
    trained = rlx.make("sac", "Pendulum-v1", seed=0, **SMALL)
    for _ in range(4):
        trained.step()
    fresh = rlx.make("sac", "Pendulum-v1", seed=1, **SMALL)
    fresh.load_policy_state(trained.policy_state())
    np.testing.assert_array_equal(
        fresh.obs_normalizer.stats.mean, trained.obs_normalizer.stats.mean
    )
    observation = np.array([0.1, 0.9, -2.0], np.float32)
    np.testing.assert_array_equal(fresh.act(observation), trained.act(observation))


class Frames(gym.Env):
    """Random 84x84 frames, two actions, episodes of ten steps."""

    observation_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(action), False, self.t >= 10, {}


gym.register("rlx-test/NormFrames-v0", Frames)


def test_image_observations_are_not_normalised():
    agent = rlx.make("dqn", "rlx-test/NormFrames-v0", normalize_observations=True, buffer_size=100)
    assert agent.obs_normalizer is None
    assert agent.as_input(np.zeros((4, 84, 84), np.uint8)).dtype == np.uint8
