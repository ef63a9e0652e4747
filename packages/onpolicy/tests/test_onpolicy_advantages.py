"""Advantages standardised with running statistics across updates
(``advantage_statistics=running``, Pyrado's RunningStandardizer) in A2C, PPO and VPG."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.testing import check_agent, check_seed_batch

SMALL = {
    "ppo": dict(n_envs=2, n_steps=16, batch_size=16, n_epochs=2),
    "a2c": dict(n_envs=2, n_steps=8, normalize_advantage=True),
    "vpg": dict(n_envs=2, n_steps=16, value_iterations=3),
}


def test_the_statistics_merge_every_rollout_and_standardise_with_all_of_them():
    agent = rlx.make("ppo", "CartPole-v1", seed=0, advantage_statistics="running", **SMALL["ppo"])
    seen = []
    for _ in range(3):
        agent.step()
        seen.append(agent.buffer.flat()["advantages"].numpy().astype(np.float64))
    everything = np.concatenate(seen)
    stats = agent.advantage_stats
    assert stats.count == pytest.approx(len(everything) + 1e-4)
    assert stats.mean == pytest.approx(everything.mean(), rel=1e-4, abs=1e-6)
    assert stats.var == pytest.approx(everything.var(), rel=1e-3)
    fresh = torch.tensor([1.0, 2.0, 3.0, 10.0])
    combined = np.concatenate([everything, fresh.numpy()])
    expected = (fresh.numpy() - combined.mean()) / (combined.std() + 1e-8)
    result = agent.running_advantages(fresh).numpy()
    np.testing.assert_allclose(result, expected, rtol=1e-3, atol=1e-5)
    # Not the batch's own statistics: the standardised fresh values do not have mean 0.
    assert abs(result.mean()) > 0.1


@pytest.mark.parametrize("name", ["a2c", "ppo", "vpg"])
def test_running_statistics_change_the_update_and_resume_exactly(name):
    batch = rlx.make(name, "CartPole-v1", seed=0, **SMALL[name])
    running = rlx.make(name, "CartPole-v1", seed=0, advantage_statistics="running", **SMALL[name])
    for _ in range(2):
        batch.step(), running.step()
    assert batch.advantage_stats is None and running.advantage_stats.count > 1
    assert not torch.equal(batch.policy.actor_vector, running.policy.actor_vector)
    assert "advantage_stats.mean" in running.resume_state().arrays
    check_agent(name, "CartPole-v1", iterations=3, advantage_statistics="running", **SMALL[name])
    check_seed_batch(
        name, "CartPole-v1", iterations=3, advantage_statistics="running", **SMALL[name]
    )


@pytest.mark.parametrize(
    "name, settings, message",
    [
        ("ppo", {"advantage_statistics": "runing"}, "Did you mean: running"),
        ("a2c", {"advantage_statistics": "running"}, "set normalize_advantage=true too"),
    ],
)
def test_bad_advantage_settings_are_one_config_error(name, settings, message):
    with pytest.raises(ConfigError) as info:
        rlx.make(name, "CartPole-v1", **settings)
    assert message in str(info.value)


def test_a_misspelt_statistic_exits_2_and_an_old_boolean_still_loads(rlx_cli, tmp_path):
    code, _, err = rlx_cli(
        "run", "ppo", "--env", "CartPole-v1", "--steps", "100", "--out", str(tmp_path / "r"),
        "--no-progress", "--set", "advantage_statistics=runnin",
    )  # fmt: skip
    assert code == 2 and "Did you mean: running" in err
    # A run saved before the setting existed names normalize_advantage alone.
    agent = rlx.make("ppo", "CartPole-v1", normalize_advantage="true")
    assert agent.config.advantage_statistics == "batch" and agent.advantage_stats is None
