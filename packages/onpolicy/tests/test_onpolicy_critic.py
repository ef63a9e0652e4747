"""A critic fitted apart from the policy (``critic_epochs``, ``critic_batch_size``) in A2C and
PPO: its own passes and optimiser, no value term in the policy's loss, shared bodies refused."""

from __future__ import annotations

import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.testing import check_agent, check_seed_batch

SMALL = {
    "ppo": dict(n_envs=2, n_steps=16, batch_size=16, n_epochs=2),
    "a2c": dict(n_envs=2, n_steps=8),
}

BODY = """
import numpy as np
from torch import nn

def body(observation_space, action_space):
    n = int(np.prod(observation_space.shape))
    return nn.Sequential(nn.Flatten(), nn.Linear(n, 32), nn.Tanh())
"""


def _rollout_mse(agent) -> float:
    data = agent.buffer.flat()
    with torch.no_grad():
        return float((data["returns"] - agent.policy.values(data["observations"])).square().mean())


@pytest.mark.parametrize("name", ["a2c", "ppo"])
def test_the_critic_takes_its_own_passes_and_the_actor_steps_alone(name):
    settings = dict(critic_epochs=3, critic_batch_size=8, **SMALL[name])
    # ExponentialLR with gamma 1 changes nothing but counts each optimiser's steps.
    schedule = dict(lr_scheduler="ExponentialLR", lr_scheduler_kwargs={"gamma": 1.0})
    agent = rlx.make(name, "CartPole-v1", seed=0, **settings, **schedule)
    assert set(agent.optimizers) == {"actor", "critic"}
    agent.step()
    valid = len(agent.buffer)  # 16 or 15 valid steps of each environment's 8 or 16
    minibatches = -(-valid // 8)
    assert agent.schedulers["critic"].last_epoch == 3 * minibatches
    actor_steps = 1 if name == "a2c" else 2 * -(-valid // 16)
    assert agent.schedulers["actor"].last_epoch == actor_steps
    # The policy's loss has no value term: vf_coef changes neither network.
    twin = rlx.make(name, "CartPole-v1", seed=0, vf_coef=5.0, **settings, **schedule)
    twin.step()
    for ours, theirs in zip(agent.policy.vectors(), twin.policy.vectors(), strict=True):
        assert torch.equal(ours, theirs)


def test_more_critic_passes_fit_the_returns_closer():
    errors = {}
    for epochs in (1, 30):
        agent = rlx.make(
            "a2c",
            "CartPole-v1",
            seed=0,
            n_steps=64,
            critic_epochs=epochs,
            critic_learning_rate=0.01,
        )
        agent.step()
        errors[epochs] = _rollout_mse(agent)
    assert errors[30] < 0.5 * errors[1], errors


def test_a_shared_body_is_refused_and_a_critic_of_its_own_is_taken(tmp_path, monkeypatch):
    (tmp_path / "my_bodies.py").write_text(BODY)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="needs separate actor and critic networks"):
        rlx.make("ppo", "CartPole-v1", policy="my_bodies:body", critic_epochs=2)
    agent = rlx.make(
        "a2c",
        "CartPole-v1",
        policy="my_bodies:body",
        critic_policy="my_bodies:body",
        critic_epochs=2,
        **SMALL["a2c"],
    )
    assert agent.step().metrics["value_loss"] >= 0


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"critic_epochs": 0}, "critic_epochs must be in [1, inf]"),
        ({"critic_batch_size": 32}, "set critic_epochs too"),
        ({"critic_epochs": 2, "critic_batch_size": 0}, "critic_batch_size must be in [1, inf]"),
    ],
)
def test_bad_critic_settings_are_one_config_error(settings, message):
    with pytest.raises(ConfigError) as info:
        rlx.make("ppo", "CartPole-v1", **settings)
    assert message in str(info.value)


def test_a_bad_critic_setting_exits_2_from_the_command_line(rlx_cli, tmp_path):
    code, _, err = rlx_cli(
        "run", "a2c", "--env", "CartPole-v1", "--steps", "100", "--out", str(tmp_path / "r"),
        "--no-progress", "--set", "critic_epochs=0",
    )  # fmt: skip
    assert code == 2 and "critic_epochs must be in [1, inf]" in err


@pytest.mark.parametrize("name", ["a2c", "ppo"])
def test_a_separate_critic_resumes_exactly_and_batches(name):
    settings = dict(critic_epochs=2, critic_batch_size=8, **SMALL[name])
    check_agent(name, "CartPole-v1", iterations=3, **settings)
    check_seed_batch(name, "CartPole-v1", iterations=3, **settings)
