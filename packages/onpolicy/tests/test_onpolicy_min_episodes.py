"""Rollouts of at least N complete episodes (``min_episodes``, Pyrado's ``min_rollouts``) in
A2C, PPO and VPG: the rollout's length follows the episodes, the buffer grows, GAE, the step count,
minibatches, seed batches and resume stay right."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.testing import check_agent, check_seed_batch
from rlx_onpolicy.rollout import RolloutBuffer, gae

SMALL = {
    "ppo": dict(n_envs=2, n_steps=4, batch_size=16, n_epochs=2, min_episodes=3),
    "a2c": dict(n_envs=2, n_steps=4, min_episodes=3),
    "vpg": dict(n_envs=2, n_steps=4, value_iterations=3, min_episodes=3),
}


def _buffer(n_steps: int) -> RolloutBuffer:
    return RolloutBuffer(
        n_steps, 2, (3,), np.dtype(np.float32), (), np.dtype(np.int64), torch.device("cpu")
    )


def test_a_full_buffer_doubles_and_keeps_what_it_holds():
    rng = np.random.default_rng(0)
    buffer = _buffer(2)
    steps = []
    for t in range(5):
        step = dict(
            observations=rng.normal(size=(2, 3)),
            actions=np.array([t, t + 1]),
            log_probs=rng.normal(size=2),
            values=rng.normal(size=2),
            rewards=rng.normal(size=2),
            terminated=np.array([t == 1, False]),
            truncated=np.array([False, t == 3]),
            valid=np.array([t != 2, True]),
        )
        steps.append(step)
        buffer.add(**step)
    assert buffer.n_steps == 8 and buffer.pos == 5 and len(buffer) == 9
    last = np.array([0.5, -0.5], np.float32)
    buffer.finish(last, 0.9, 0.8)
    stacked = {key: np.stack([s[key] for s in steps]) for key in steps[0]}
    values = stacked["values"].astype(np.float32)
    expected, _ = gae(
        stacked["rewards"].astype(np.float32),
        values,
        np.concatenate([values[1:], last[None]]),
        stacked["terminated"],
        stacked["truncated"],
        0.9,
        0.8,
    )
    data = buffer.flat()
    valid = stacked["valid"].reshape(-1)
    np.testing.assert_allclose(data["advantages"].numpy(), expected.reshape(-1)[valid], rtol=1e-6)
    np.testing.assert_array_equal(data["actions"].numpy(), stacked["actions"].reshape(-1)[valid])
    np.testing.assert_allclose(
        data["observations"].numpy(), stacked["observations"].reshape(-1, 3)[valid], rtol=1e-6
    )


@pytest.mark.parametrize("name", ["a2c", "ppo", "vpg"])
def test_a_rollout_lasts_until_enough_episodes_end(name):
    agent = rlx.make(name, "CartPole-v1", seed=0, **SMALL[name])
    total = 0
    for _ in range(3):
        iteration = agent.step()
        buffer = agent.buffer
        ended = (buffer.terminated | buffer.truncated)[: buffer.pos].sum(axis=1)
        # It stopped at the first step at which the third episode ended, not before or after.
        assert ended.sum() >= 3 and ended[:-1].sum() < 3
        assert buffer.pos > 4  # longer than n_steps: the buffer grew
        assert len(iteration.episode_returns) == ended.sum()
        assert iteration.env_steps == len(buffer)
        total += iteration.env_steps
    assert agent.env_steps == total


def test_ppo_minibatches_cover_a_rollout_of_any_length():
    schedule = dict(lr_scheduler="ExponentialLR", lr_scheduler_kwargs={"gamma": 1.0})
    agent = rlx.make("ppo", "CartPole-v1", seed=0, **SMALL["ppo"], **schedule)
    steps = 0
    for _ in range(3):
        agent.step()
        steps += 2 * -(-len(agent.buffer) // 16)
        assert agent.schedulers["optimizer"].last_epoch == steps
    # A rollout shorter than one minibatch is one minibatch.
    short = rlx.make("ppo", "CartPole-v1", seed=0, n_envs=2, batch_size=512, min_episodes=1)
    assert np.isfinite(short.step().metrics["policy_loss"])


@pytest.mark.parametrize("name", ["a2c", "ppo", "vpg"])
def test_rollouts_of_episodes_resume_exactly_and_batch(name):
    check_agent(name, "CartPole-v1", iterations=3, **SMALL[name])
    check_seed_batch(name, "CartPole-v1", iterations=3, **SMALL[name])


def test_a_bad_episode_count_is_one_config_error(rlx_cli, tmp_path):
    with pytest.raises(ConfigError, match=r"min_episodes must be in \[1, inf\]"):
        rlx.make("a2c", "CartPole-v1", min_episodes=0)
    code, _, err = rlx_cli(
        "run", "ppo", "--env", "CartPole-v1", "--steps", "100", "--out", str(tmp_path / "r"),
        "--no-progress", "--set", "min_episodes=-2",
    )  # fmt: skip
    assert code == 2 and "min_episodes must be in [1, inf]" in err
