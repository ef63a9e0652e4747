"""Reward scaling (``reward_scale``) and running reward normalisation (``normalize_rewards``):
raw rewards in the buffer, scaled minibatches, statistics saved with the policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx import tuned
from rlx.errors import ConfigError
from rlx.testing import check_agent, check_seed_batch
from rlx.trainer import Trainer

SMALL = dict(
    learning_starts=32,
    batch_size=32,
    train_freq=16,
    gradient_steps=3,
    buffer_size=1_000,
    hidden_sizes=(32, 32),
)
NORMALISED = {**SMALL, "normalize_rewards": True, "reward_scale": 5.0}


def _stepped(name: str = "sac", env: str = "Pendulum-v1", iterations: int = 4, **settings):
    agent = rlx.make(name, env, seed=0, **{**NORMALISED, **settings})
    for _ in range(iterations):
        agent.step()
    return agent


def test_the_statistics_are_those_of_every_reward_collected():
    agent = _stepped()
    stored = agent.buffer.arrays["rewards"][: len(agent.buffer)].reshape(-1).astype(np.float64)
    assert len(stored) == agent.env_steps  # nothing overwritten yet
    stats = agent.reward_stats
    assert stats.count == pytest.approx(agent.env_steps, abs=1e-3)
    assert stats.mean == pytest.approx(stored.mean(), rel=1e-4)
    assert stats.var == pytest.approx(stored.var(), rel=1e-4)
    # Pendulum's raw rewards, as the environment gave them: in [-16.3, 0], far from unit scale.
    assert stored.min() < -1.0 and stored.max() <= 0.0


def test_batches_scale_the_raw_stored_rewards_with_the_current_statistics():
    agent = _stepped()
    raw = agent.buffer.sample(64, np.random.default_rng(0), 0.99, 1)
    batch = agent.to_tensors(dict(raw))
    factor = 5.0 / np.sqrt(agent.reward_stats.var + 1e-8)
    assert agent.reward_factor() == pytest.approx(factor)
    np.testing.assert_allclose(batch["rewards"].numpy(), raw["rewards"] * factor, rtol=1e-6)
    assert batch["rewards"].dtype == torch.float32  # as unscaled
    # No mean is subtracted: rewards keep their sign (Pendulum's are all <= 0).
    assert (batch["rewards"].numpy() <= 0).all()
    # The stored rewards stay raw, and the statistics move on with new transitions.
    before = agent.reward_factor()
    agent.step()
    assert agent.reward_factor() != before


def test_reward_scale_alone_multiplies_and_keeps_no_statistics():
    agent = _stepped(normalize_rewards=False, reward_scale=0.1)
    assert agent.reward_stats is None and agent.reward_factor() == 0.1
    raw = agent.buffer.sample(16, np.random.default_rng(1), 0.99, 1)
    batch = agent.to_tensors(dict(raw))
    np.testing.assert_allclose(batch["rewards"].numpy(), raw["rewards"] * 0.1, rtol=1e-6)


def test_n_step_returns_are_scaled_as_a_whole():
    agent = _stepped("dqn", "CartPole-v1", n_step=3, normalize_rewards=True, reward_scale=1.0)
    raw = agent.buffer.sample(64, np.random.default_rng(2), 0.99, 3)
    batch = agent.to_tensors(dict(raw))
    np.testing.assert_allclose(
        batch["rewards"].numpy(), raw["rewards"] * agent.reward_factor(), rtol=1e-6
    )


@pytest.mark.parametrize(
    "name, env, extra",
    [
        ("sac", "Pendulum-v1", {}),
        ("td3", "Pendulum-v1", {}),
        ("dqn", "CartPole-v1", {"n_step": 3}),
    ],
    ids=["sac", "td3", "dqn-3-step"],
)
def test_normalising_agents_keep_the_contract_and_resume_exactly(name, env, extra):
    check_agent(name, env, iterations=3, **{**NORMALISED, **extra})


def test_the_statistics_belong_to_the_policy_and_acting_never_reads_them():
    trained = _stepped()
    fresh = rlx.make("sac", "Pendulum-v1", seed=1, **NORMALISED)
    fresh.load_policy_state(trained.policy_state())
    for key in ("mean", "var", "count"):
        assert getattr(fresh.reward_stats, key) == getattr(trained.reward_stats, key)
    assert fresh.reward_factor() == trained.reward_factor()
    observations = np.array([[0.1, 0.9, -2.0], [-1.0, 0.0, 3.0]], np.float32)
    actions = trained.act(observations)
    trained.reward_stats.update(np.array([1e3, -1e3]))
    np.testing.assert_array_equal(trained.act(observations), actions)


def test_a_seed_batch_normalises_each_seed_with_its_own_statistics():
    settings = {**NORMALISED, "learning_starts": 64, "buffer_size": 5_000, "gradient_steps": 4}
    check_seed_batch("sac", "Pendulum-v1", iterations=10, **settings)


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_reward_scale_that_is_not_positive_is_exit_2(rlx_cli, tmp_path, value):
    code, _, err = rlx_cli(
        "run", "sac", "--env", "Pendulum-v1", "--set", f"reward_scale={value}",
        "--steps", "10", "--out", str(tmp_path / "r"),
    )  # fmt: skip
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "reward_scale" in lines[0], err


def test_a_wrong_reward_scale_from_python_is_one_config_error():
    with pytest.raises(ConfigError, match="reward_scale"):
        rlx.make("td3", "Pendulum-v1", reward_scale=0.0)


def test_sac_with_normalised_rewards_reaches_minus_200_on_pendulum_within_10k_steps():
    settings = tuned.hyperparameters("sac", "Pendulum-v1")
    agent = rlx.make("sac", "Pendulum-v1", seed=0, normalize_rewards=True, **settings)
    result = Trainer(
        agent,
        steps=10_000,
        eval_every=1_000,
        eval_episodes=10,
        target_return=-200,
        progress=False,
        verbose=False,
        plot=False,
    ).fit()
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= -200
    # The rewards really were rescaled: Pendulum's standard deviation is several units.
    assert agent.reward_factor() < 0.5
