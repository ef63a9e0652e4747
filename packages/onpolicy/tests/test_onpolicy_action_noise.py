"""Exploration noise on continuous actions (``action_noise``, ``action_noise_std``, GenRL's
``noise``) in A2C, PPO and VPG: the actions acted on carry it, and their log-probabilities
count it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.testing import check_agent, check_seed_batch

NOISY = dict(action_noise="gaussian", action_noise_std=0.5)


def _rollout(agent):
    data = agent.buffer.flat()
    with torch.no_grad():
        means, _ = agent.policy(data["observations"])
    return data, means


@pytest.mark.parametrize("device_path", ["numpy", "torch"])
def test_the_actions_acted_on_carry_the_noise_and_their_log_probabilities_count_it(device_path):
    # A policy with a std of exp(-10): the spread of the actions is the noise's alone.
    settings = dict(n_envs=4, n_steps=256, batch_size=64, n_epochs=1, log_std_init=-10.0)
    agent = rlx.make("ppo", "Pendulum-v1", seed=0, **settings, **NOISY)
    if device_path == "torch":  # the sampler's torch path (the one of GPUs and user networks)
        agent.policy.numpy_forward = lambda: None
    agent.sampler.collect(agent.policy, agent.generator, agent.sample_rng)
    data, means = _rollout(agent)
    offsets = (data["actions"] - means).numpy()
    assert np.std(offsets) == pytest.approx(0.5, rel=0.1)
    expected = torch.distributions.Normal(means, 0.5).log_prob(data["actions"]).sum(-1)
    np.testing.assert_allclose(data["log_probs"].numpy(), expected.numpy(), rtol=1e-4, atol=1e-4)
    quiet = rlx.make("ppo", "Pendulum-v1", seed=0, **settings)
    quiet.sampler.collect(quiet.policy, quiet.generator, quiet.sample_rng)
    data, means = _rollout(quiet)
    assert np.abs((data["actions"] - means).numpy()).max() < 1e-3


def test_the_update_sees_the_probabilities_the_rollout_acted_with():
    # One step on the whole rollout: its ratio, before the step, is exactly 1 when the update's
    # log-probabilities are those the actions were drawn with.
    settings = dict(n_envs=2, n_steps=64, batch_size=128, n_epochs=1, log_std_init=-1.0)
    metrics = rlx.make("ppo", "Pendulum-v1", seed=0, **settings, **NOISY).step().metrics
    assert metrics["approx_kl"] < 1e-6 and metrics["clip_fraction"] == 0.0
    for name in ("a2c", "vpg"):
        agent = rlx.make(name, "Pendulum-v1", log_std_init=-1.0, **NOISY)
        log_std = agent.training_log_std().detach().numpy()
        assert log_std == pytest.approx(0.5 * math.log(math.exp(-2.0) + 0.25))


def test_the_deterministic_action_is_the_policys_mean():
    agent = rlx.make("a2c", "Pendulum-v1", seed=0, **NOISY)
    twin = rlx.make("a2c", "Pendulum-v1", seed=0)
    observation = np.array([1.0, 0.0, 0.0], np.float32)
    np.testing.assert_array_equal(agent.act(observation), twin.act(observation))


@pytest.mark.parametrize(
    "env, settings, message",
    [
        ("CartPole-v1", {"action_noise": "gaussian"}, "adds noise to continuous (Box) actions"),
        ("Pendulum-v1", {"action_noise": "gausian"}, "Did you mean: gaussian"),
        ("Pendulum-v1", {"action_noise_std": 0.2}, "set action_noise=gaussian too"),
        ("Pendulum-v1", {**NOISY, "action_noise_std": 0.0}, "action_noise_std must be in (0,"),
    ],
)
def test_bad_noise_settings_are_one_config_error(env, settings, message):
    with pytest.raises(ConfigError) as info:
        rlx.make("ppo", env, **settings)
    assert message in str(info.value)


def test_noise_on_discrete_actions_exits_2_from_the_command_line(rlx_cli, tmp_path):
    code, _, err = rlx_cli(
        "run", "a2c", "--env", "CartPole-v1", "--steps", "100", "--out", str(tmp_path / "r"),
        "--no-progress", "--set", "action_noise=gaussian",
    )  # fmt: skip
    assert code == 2 and "adds noise to continuous (Box) actions" in err


@pytest.mark.parametrize(
    "name, settings",
    [
        ("a2c", dict(n_envs=2, n_steps=8)),
        ("ppo", dict(n_envs=2, n_steps=32, batch_size=32, n_epochs=2)),
        ("vpg", dict(n_envs=2, n_steps=16, value_iterations=3)),
    ],
)
def test_noisy_actions_resume_exactly_and_batch(name, settings):
    check_agent(name, "Pendulum-v1", iterations=3, **NOISY, **settings)
    check_seed_batch(name, "Pendulum-v1", iterations=3, tolerance=1e-3, **NOISY, **settings)
