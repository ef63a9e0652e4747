"""GAE and the rollout buffer's handling of episode ends."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx_onpolicy.rollout import gae


def reference_gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """The recursion written out one environment and one step at a time."""
    T, N = rewards.shape
    advantages = np.zeros((T, N))
    for n in range(N):
        running = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminated[t, n] else gamma * next_values[t, n]
            delta = rewards[t, n] + bootstrap - values[t, n]
            if terminated[t, n] or truncated[t, n]:
                running = 0.0
            running = delta + gamma * lam * running
            advantages[t, n] = running
    return advantages


def test_gae_matches_the_recursion_with_terminations_and_truncations():
    rng = np.random.default_rng(0)
    T, N = 20, 3
    rewards = rng.normal(size=(T, N)).astype(np.float32)
    values = rng.normal(size=(T, N)).astype(np.float32)
    next_values = rng.normal(size=(T, N)).astype(np.float32)
    terminated = rng.random((T, N)) < 0.15
    truncated = (rng.random((T, N)) < 0.15) & ~terminated
    advantages, returns = gae(rewards, values, next_values, terminated, truncated, 0.99, 0.95)
    expected = reference_gae(rewards, values, next_values, terminated, truncated, 0.99, 0.95)
    np.testing.assert_allclose(advantages, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(returns, expected + values, rtol=1e-5, atol=1e-5)


def test_truncation_bootstraps_and_termination_does_not():
    rewards = np.ones((1, 2), np.float32)
    values = np.zeros((1, 2), np.float32)
    next_values = np.full((1, 2), 10.0, np.float32)
    terminated = np.array([[True, False]])
    truncated = np.array([[False, True]])
    advantages, _ = gae(rewards, values, next_values, terminated, truncated, 0.5, 1.0)
    assert advantages[0, 0] == pytest.approx(1.0)  # the task ended: nothing after it
    assert advantages[0, 1] == pytest.approx(1.0 + 0.5 * 10.0)  # cut by a time limit


def test_lambda_one_gives_discounted_returns():
    rewards = np.array([[1.0], [2.0], [3.0]], np.float32)
    values = np.array([[0.5], [0.25], [0.125]], np.float32)
    next_values = np.array([[0.25], [0.125], [4.0]], np.float32)
    no = np.zeros((3, 1), bool)
    _, returns = gae(rewards, values, next_values, no, no, 0.9, 1.0)
    expected_last = 3.0 + 0.9 * 4.0
    expected = [1.0 + 0.9 * (2.0 + 0.9 * expected_last), 2.0 + 0.9 * expected_last, expected_last]
    np.testing.assert_allclose(returns[:, 0], expected, rtol=1e-6)


def test_the_reset_step_after_an_episode_is_not_a_transition():
    agent = rlx.make("ppo", "CartPole-v1", seed=0, n_envs=4, n_steps=64, batch_size=64)
    iteration = agent.step()
    buffer = agent.buffer
    done = buffer.terminated | buffer.truncated
    assert done.any(), "CartPole episodes under a random policy end within 64 steps"
    # Exactly the steps right after an episode's end are invalid, and they are not counted.
    after_done = np.zeros_like(done)
    after_done[1:] = done[:-1]
    np.testing.assert_array_equal(~buffer.valid[1:], after_done[1:])
    assert iteration.env_steps == int(buffer.valid.sum()) == len(buffer)
    assert len(iteration.episode_returns) == int(done.sum())
    # Each finished CartPole episode earns 1 per step: return equals length.
    assert iteration.episode_returns == [float(n) for n in iteration.episode_lengths]


def test_minibatches_visit_every_valid_transition_once():
    agent = rlx.make("ppo", "CartPole-v1", seed=0, n_envs=4, n_steps=32, batch_size=16)
    agent.sampler.collect(agent.policy, agent.generator, agent.sample_rng)
    data = agent.buffer.flat()
    seen = torch.cat([b["values"] for b in agent.buffer.minibatches(data, 16, agent.rng)])
    assert len(seen) == len(agent.buffer)
    torch.testing.assert_close(seen.sort().values, data["values"].sort().values)
