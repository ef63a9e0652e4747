"""The replay buffer: what is stored at episode ends, n-step returns, the ring, checkpoints."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.errors import ConfigError
from rlx.replay import ReplayBuffer
from rlx.vector import VectorRunner


def buffer(capacity: int = 16, n_envs: int = 1) -> ReplayBuffer:
    return ReplayBuffer(capacity, n_envs, (1,), np.dtype(np.float32), (), np.dtype(np.int64))


def add(buf, obs, action, reward, next_obs, terminated=False, truncated=False, valid=True):
    """One step of one environment, written out as scalars."""
    buf.add(
        np.array([[obs]], np.float32),
        np.array([action]),
        np.array([reward], np.float64),
        np.array([[next_obs]], np.float32),
        np.array([terminated]),
        np.array([terminated or truncated]),
        np.array([valid]),
    )


def stored(buf, env: int = 0) -> list[tuple]:
    a = buf.arrays
    return [
        (
            float(a["observations"][i, env, 0]),
            float(a["next_observations"][i, env, 0]),
            float(a["rewards"][i, env]),
            bool(a["terminated"][i, env]),
            bool(a["done"][i, env]),
        )
        for i in range(buf.counts[env])
    ]


def test_a_truncated_step_keeps_its_final_observation_and_the_reset_step_is_not_stored():
    buf = buffer()
    add(buf, 0.0, 0, 1.0, 1.0)
    add(buf, 1.0, 1, 1.0, 2.0, truncated=True)  # a time limit: 2.0 is the final observation
    add(buf, 2.0, 0, 0.0, 10.0, valid=False)  # NEXT_STEP autoreset: only resets (to 10.0)
    add(buf, 10.0, 1, 1.0, 11.0, terminated=True)
    assert stored(buf) == [
        (0.0, 1.0, 1.0, False, False),
        (1.0, 2.0, 1.0, False, True),  # bootstraps from 2.0: not terminated
        (10.0, 11.0, 1.0, True, True),  # terminated: no bootstrap
    ]


def test_each_environment_stores_only_its_valid_steps():
    buf = buffer(capacity=8, n_envs=2)
    obs = np.array([[0.0], [100.0]], np.float32)
    for t in range(3):
        valid = np.array([True, t != 1])  # env 1 resets at step 1
        buf.add(
            obs + t,
            np.array([0, 1]),
            np.ones(2),
            obs + t + 1,
            np.zeros(2, bool),
            np.zeros(2, bool),
            valid,
        )
    assert buf.counts.tolist() == [3, 2] and len(buf) == 5
    assert [row[0] for row in stored(buf, 1)] == [100.0, 102.0]


def test_n_step_returns_are_cut_at_episode_ends_and_at_the_newest_transition():
    buf = buffer()
    add(buf, 0.0, 0, 1.0, 1.0)
    add(buf, 1.0, 0, 2.0, 2.0)
    add(buf, 2.0, 0, 4.0, 3.0, terminated=True)
    add(buf, 3.0, 0, 0.0, 20.0, valid=False)
    add(buf, 20.0, 0, 8.0, 21.0)
    gamma = 0.5
    batch = buf.gather(np.array([0, 1, 2, 3]), np.zeros(4, np.int64), gamma, n_step=3)
    # From slot 0: 1 + 0.5 * 2 + 0.25 * 4, ending in the terminal step.
    np.testing.assert_allclose(batch["rewards"], [3.0, 4.0, 4.0, 8.0])
    np.testing.assert_allclose(batch["discounts"], [0.125, 0.25, 0.5, 0.5])
    assert batch["terminated"].tolist() == [True, True, True, False]
    np.testing.assert_array_equal(batch["next_observations"][:, 0], [3.0, 3.0, 3.0, 21.0])


def test_the_ring_overwrites_the_oldest_and_sampling_only_sees_written_slots():
    buf = buffer(capacity=4)
    for t in range(6):
        add(buf, float(t), 0, float(t), float(t + 1))
    assert len(buf) == 4
    slots, envs = buf.sample_indices(1000, np.random.default_rng(0))
    observations = buf.arrays["observations"][slots, envs, 0]
    assert set(observations.tolist()) == {2.0, 3.0, 4.0, 5.0}
    # n-step from the newest transition cannot run into the oldest one.
    newest = int((buf.positions[0] - 1) % buf.slots)
    batch = buf.gather(np.array([newest]), np.array([0]), 0.9, n_step=3)
    assert batch["rewards"][0] == 5.0 and batch["discounts"][0] == pytest.approx(0.9)


def test_one_environment_draws_what_the_search_over_environments_would():
    # One environment skips the search over environments' counts; a second environment that
    # never stored anything takes the general path and must draw the same transitions.
    for steps in (5, 16, 23):  # part filled, just full, wrapped around
        one, two = buffer(), buffer(capacity=32, n_envs=2)  # 16 slots each
        for t in range(steps):
            add(one, float(t), 0, 0.0, float(t + 1))
            two.add(
                np.array([[t], [0]], np.float32),
                np.zeros(2, np.int64),
                np.zeros(2),
                np.array([[t + 1], [0]], np.float32),
                np.zeros(2, bool),
                np.zeros(2, bool),
                np.array([True, False]),
            )
        slots, envs = one.sample_indices(500, np.random.default_rng(steps))
        expected_slots, expected_envs = two.sample_indices(500, np.random.default_rng(steps))
        np.testing.assert_array_equal(slots, expected_slots)
        np.testing.assert_array_equal(envs, expected_envs)
        assert set(one.arrays["observations"][slots, envs, 0]) == set(
            range(max(0, steps - 16), steps)
        )


def test_a_buffer_that_would_not_fit_in_memory_is_refused_before_allocation():
    with pytest.raises(ConfigError, match=r"would need about .* of memory, but .* available"):
        ReplayBuffer(10**12, 1, (84, 84, 4), np.dtype(np.uint8), (), np.dtype(np.int64))


def test_a_checkpoint_of_the_buffer_restores_it_exactly():
    buf = buffer(capacity=8, n_envs=2)
    rng = np.random.default_rng(0)
    for _ in range(11):
        buf.add(
            rng.normal(size=(2, 1)).astype(np.float32),
            rng.integers(3, size=2),
            rng.normal(size=2),
            rng.normal(size=(2, 1)).astype(np.float32),
            rng.random(2) < 0.2,
            rng.random(2) < 0.3,
            rng.random(2) < 0.8,
        )
    twin = buffer(capacity=8, n_envs=2)
    twin.load(buf.state("b"), "b")
    a = buf.sample(64, np.random.default_rng(1), 0.9, n_step=2)
    b = twin.sample(64, np.random.default_rng(1), 0.9, n_step=2)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_on_real_vector_environments_transitions_chain_and_time_limits_bootstrap():
    env = gym.make("CartPole-v1", max_episode_steps=20)
    runner = VectorRunner(env, 3, "sync", seed=0)
    buf = ReplayBuffer(3000, 3, (4,), np.dtype(np.float32), (), np.dtype(np.int64))
    rng = np.random.default_rng(0)
    truncations = 0
    for _ in range(300):
        observations = runner.observations
        actions = rng.integers(2, size=3)
        step = runner.step(actions)
        truncations += int((step.truncated & step.valid).sum())
        buf.add(
            observations,
            actions,
            step.rewards,
            step.next_observations,
            step.terminated,
            step.done,
            step.valid,
        )
    assert truncations > 0
    a = buf.arrays
    for env_index in range(3):
        n = buf.counts[env_index]
        done = a["done"][:n, env_index]
        # Within an episode each transition starts where the previous one ended.
        np.testing.assert_array_equal(
            a["observations"][1:n, env_index][~done[: n - 1]],
            a["next_observations"][: n - 1, env_index][~done[: n - 1]],
        )
        # After an episode's end the next stored transition starts a new episode: never the
        # final observation, which only the ending transition keeps.
        ends = np.flatnonzero(done[: n - 1])
        assert not np.any(
            np.all(
                a["observations"][ends + 1, env_index] == a["next_observations"][ends, env_index],
                axis=-1,
            )
        )
    assert not (a["terminated"] & ~a["done"]).any()
