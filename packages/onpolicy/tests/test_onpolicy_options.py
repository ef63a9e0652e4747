"""Optimisers and schedulers by name; an actor and a critic of their own sizes, step sizes
and networks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.nn.optim import Adam, RMSprop
from rlx.testing import check_agent

SMALL = {
    "ppo": dict(n_envs=2, n_steps=16, batch_size=16, n_epochs=2),
    "a2c": dict(n_envs=2, n_steps=5),
    "vpg": dict(n_envs=2, n_steps=16, value_iterations=3),
    "svpg": dict(n_envs=2, n_steps=16, n_particles=2),
}


def test_the_flat_optimisers_stay_the_defaults_and_take_their_settings():
    assert type(rlx.make("ppo", "CartPole-v1").optimizers["optimizer"]) is Adam
    assert type(rlx.make("a2c", "CartPole-v1").optimizers["optimizer"]) is RMSprop
    assert type(rlx.make("a2c", "CartPole-v1", optimizer="adam").optimizers["optimizer"]) is Adam
    agent = rlx.make("ppo", "CartPole-v1", optimizer_kwargs={"betas": [0.5, 0.9]})
    assert agent.optimizers["optimizer"].param_groups[0]["betas"] == [0.5, 0.9]
    agent = rlx.make("a2c", "CartPole-v1", rms_alpha=0.9, optimizer_kwargs={"eps": 1e-3})
    group = agent.optimizers["optimizer"].param_groups[0]
    assert (group["alpha"], group["eps"]) == (0.9, 1e-3)


@pytest.mark.parametrize(
    "name, env, optimizer, kwargs",
    [
        ("ppo", "CartPole-v1", "AdamW", {"weight_decay": 0.01}),
        ("a2c", "Pendulum-v1", "SGD", {"momentum": 0.8}),
        ("vpg", "CartPole-v1", "RMSprop", {"alpha": 0.95}),
    ],
)
def test_a_torch_optimiser_with_its_arguments_resumes_exactly(name, env, optimizer, kwargs):
    agent = rlx.make(name, env, optimizer=optimizer, optimizer_kwargs=kwargs, **SMALL[name])
    first = next(iter(agent.optimizers.values()))
    assert type(first) is getattr(torch.optim, optimizer)
    for key, value in kwargs.items():
        assert first.param_groups[0][key] == value
    for _ in range(2):
        agent.step()
    check_agent(
        name, env, iterations=3, optimizer=optimizer, optimizer_kwargs=kwargs, **SMALL[name]
    )


def test_a_scheduler_steps_after_every_optimiser_step_and_resumes_exactly():
    settings = dict(lr_scheduler="ExponentialLR", lr_scheduler_kwargs={"gamma": 0.9})
    agent = rlx.make("ppo", "CartPole-v1", learning_rate=1e-3, **settings, **SMALL["ppo"])
    for _ in range(3):
        agent.step()
    # 32 transitions in minibatches of 16, two epochs: 4 steps an update.
    assert agent.schedulers["optimizer"].last_epoch == 12
    metrics = agent.step().metrics
    assert metrics["learning_rate"] == pytest.approx(1e-3 * 0.9**16)
    agent = rlx.make("a2c", "CartPole-v1", learning_rate=1e-3, **settings, **SMALL["a2c"])
    for _ in range(5):
        agent.step()
    assert agent.optimizers["optimizer"].param_groups[0]["lr"] == pytest.approx(1e-3 * 0.9**5)
    step_lr = dict(lr_scheduler="StepLR", lr_scheduler_kwargs={"step_size": 3, "gamma": 0.5})
    check_agent("ppo", "CartPole-v1", iterations=4, **step_lr, **SMALL["ppo"])
    check_agent("a2c", "CartPole-v1", iterations=4, optimizer="SGD", **settings, **SMALL["a2c"])
    check_agent("vpg", "CartPole-v1", iterations=3, **settings, **SMALL["vpg"])
    check_agent("svpg", "CartPole-v1", iterations=3, **settings, **SMALL["svpg"])


def test_vpg_schedules_its_policy_and_value_optimisers_apart():
    agent = rlx.make(
        "vpg",
        "CartPole-v1",
        learning_rate=1e-2,
        value_learning_rate=1e-3,
        lr_scheduler="ExponentialLR",
        lr_scheduler_kwargs={"gamma": 0.9},
        **SMALL["vpg"],
    )
    for _ in range(2):
        agent.step()
    assert agent.optimizers["policy"].param_groups[0]["lr"] == pytest.approx(1e-2 * 0.9**2)
    assert agent.optimizers["value"].param_groups[0]["lr"] == pytest.approx(1e-3 * 0.9**6)


def test_the_actor_and_the_critic_have_their_own_sizes():
    agent = rlx.make(
        "ppo", "Pendulum-v1", actor_hidden_sizes=(16,), critic_hidden_sizes=(32, 8), n_envs=2
    )
    linears = {
        name: [m.out_features for m in body.modules() if isinstance(m, torch.nn.Linear)]
        for name, body in (("actor", agent.policy.actor_body), ("critic", agent.policy.critic_body))
    }
    assert linears == {"actor": [16], "critic": [32, 8]}
    assert agent.policy.actor_head.in_features == 16
    assert agent.policy.critic_head.in_features == 8
    agent = rlx.make("a2c", "CartPole-v1", hidden_sizes=(8, 8), critic_hidden_sizes=(24,))
    assert agent.policy.actor_head.in_features == 8
    assert agent.policy.critic_head.in_features == 24
    check_agent("a2c", "CartPole-v1", iterations=3, critic_hidden_sizes=(24,), **SMALL["a2c"])


def test_the_actor_and_the_critic_have_their_own_step_sizes():
    agent = rlx.make("ppo", "CartPole-v1", learning_rate=1e-3, actor_learning_rate=1e-4)
    assert set(agent.optimizers) == {"actor", "critic"}
    assert agent.optimizers["actor"].param_groups[0]["params"] == [agent.policy.actor_vector]
    agent.step()
    assert agent.optimizers["actor"].param_groups[0]["lr"] == 1e-4
    assert agent.optimizers["critic"].param_groups[0]["lr"] == 1e-3
    agent = rlx.make("a2c", "CartPole-v1", critic_learning_rate=2e-3, optimizer="SGD")
    assert agent.optimizers["critic"].param_groups[0]["lr"] == 2e-3
    assert agent.optimizers["actor"].param_groups[0]["lr"] == agent.config.learning_rate
    agent = rlx.make("vpg", "CartPole-v1", critic_learning_rate=5e-3)
    assert agent.optimizers["value"].param_groups[0]["lr"] == 5e-3
    for name in ("ppo", "a2c"):
        for optimizer in ("adam", "SGD"):
            check_agent(
                name,
                "CartPole-v1",
                iterations=3,
                optimizer=optimizer,
                actor_learning_rate=1e-4,
                critic_learning_rate=1e-3,
                **SMALL[name],
            )


def test_separate_step_sizes_equal_to_the_shared_one_learn_the_same():
    shared = rlx.make("ppo", "CartPole-v1", seed=4, **SMALL["ppo"])
    split = rlx.make("ppo", "CartPole-v1", seed=4, actor_learning_rate=3e-4, **SMALL["ppo"])
    for _ in range(3):
        shared.step()
        split.step()
    for key, value in shared.policy_state().arrays.items():
        assert (value == split.policy_state().arrays[key]).all(), key


@pytest.mark.parametrize(
    "name, settings, message",
    [
        ("ppo", {"optimizer": "Adamm"}, "unknown optimizer 'Adamm'. Did you mean: Adam"),
        ("a2c", {"optimizer": "rmsprob"}, "unknown optimizer 'rmsprob'. Did you mean: rmsprop"),
        (
            "ppo",
            {"optimizer": "SGD", "optimizer_kwargs": {"momentun": 0.9}},
            "rejected its arguments",
        ),
        ("ppo", {"optimizer_kwargs": {"eps2": 1.0}}, "optimizer adam (betas, eps) rejected"),
        ("a2c", {"optimizer_kwargs": {"beta": 1.0}}, "optimizer rmsprop (alpha, eps) rejected"),
        ("ppo", {"optimizer_kwargs": "{momentum: 0.9}"}, "expects a JSON object"),
        ("ppo", {"optimizer": "no_such_module:Opt"}, "cannot load optimizer"),
        ("svpg", {"optimizer": "SGD"}, "svpg takes optimizer=adam only"),
        ("ppo", {"lr_scheduler": "StepLr"}, "unknown lr_scheduler 'StepLr'. Did you mean: StepLR"),
        ("a2c", {"lr_scheduler": "StepLR"}, "lr_scheduler StepLR rejected its arguments {}"),
        ("ppo", {"lr_scheduler": "ReduceLROnPlateau"}, "needs a metric at every step"),
        (
            "ppo",
            {"lr_schedule": "linear", "lr_scheduler": "ExponentialLR"},
            "lr_schedule=linear and lr_scheduler=ExponentialLR both set the learning rate",
        ),
        ("ppo", {"actor_learning_rate": -1.0}, "actor_learning_rate must be in (0, inf]"),
        ("vpg", {"critic_learning_rate": 0.0}, "critic_learning_rate must be in (0, inf]"),
        ("a2c", {"critic_hidden_sizes": (32, 0)}, "critic_hidden_sizes"),
        ("ppo", {"actor_hidden_sizes": ()}, "actor_hidden_sizes"),
    ],
)
def test_bad_settings_are_one_config_error(name, settings, message):
    with pytest.raises(ConfigError) as info:
        rlx.make(name, "CartPole-v1", **settings)
    assert message in str(info.value)


def test_settings_from_the_command_line(tmp_path, rlx_cli):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "a2c", "--env", "CartPole-v1", "--steps", "200", "--out", str(run),
        "--no-progress", "--set", "optimizer=SGD", "--set", 'optimizer_kwargs={"momentum": 0.8}',
        "--set", "lr_scheduler=StepLR", "--set", 'lr_scheduler_kwargs={"step_size": 2}',
        "--set", "critic_hidden_sizes=[32]", "--set", "actor_learning_rate=1e-4",
    )  # fmt: skip
    assert code == 0, err
    agent = rlx.load(run)
    assert type(agent.optimizers["actor"]) is torch.optim.SGD
    assert agent.optimizers["actor"].param_groups[0]["momentum"] == 0.8
    assert agent.policy.critic_head.in_features == 32


CRITICS = """
import numpy as np
import torch
from torch import nn

def critic(observation_space, action_space):
    n = int(np.prod(observation_space.shape))
    return nn.Sequential(nn.Flatten(), nn.Linear(n, 48), nn.ReLU(), nn.Linear(48, 16), nn.ReLU())

class Shaped(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.shape = tuple(shape)
        self.linear = nn.Linear(int(np.prod(shape)), 8)

    def forward(self, x):
        assert tuple(x.shape[1:]) == self.shape, x.shape
        return torch.tanh(self.linear(x.flatten(1)))

def shaped(observation_space, action_space):
    return Shaped(observation_space.shape)

def body(observation_space, action_space):
    n = int(np.prod(observation_space.shape))
    return nn.Sequential(nn.Flatten(), nn.Linear(n, 32), nn.Tanh())

def flat(observation_space, action_space):
    return nn.Flatten(0)
"""


@pytest.fixture
def critics(tmp_path, monkeypatch):
    (tmp_path / "my_critics.py").write_text(CRITICS)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_user_network_for_the_critic_alone(critics):
    agent = rlx.make("ppo", "Pendulum-v1", critic_policy="my_critics:critic", **SMALL["ppo"])
    assert isinstance(agent.policy.critic_body, torch.nn.Sequential)
    assert agent.policy.critic_head.in_features == 16
    assert agent.policy.actor_head.in_features == 64  # the actor keeps its mlp
    critic_ids = {id(p) for p in agent.policy.critic_body.parameters()}
    assert critic_ids <= {id(p) for p in agent.policy.critic_parameters()}
    agent.step()
    # Under a shared user body the critic_policy gives the critic its own.
    agent = rlx.make(
        "a2c", "CartPole-v1", policy="my_critics:body", critic_policy="my_critics:critic"
    )
    assert agent.policy.critic_body is not agent.policy.actor_body
    assert agent.policy.critic_head.in_features == 16
    for name in ("ppo", "a2c", "vpg", "svpg"):
        check_agent(
            name, "CartPole-v1", iterations=2, critic_policy="my_critics:critic", **SMALL[name]
        )


def test_a_user_critic_under_the_mlp_policy_sees_observations_in_their_shape(critics):
    from rlx_onpolicy.policies import user_critic

    space = gym.spaces.Box(-1, 1, (2, 3), np.float32)
    body, head = user_critic("my_critics:shaped", space, gym.spaces.Discrete(2), flatten=True)
    observations = torch.zeros(5, 6)  # what the mlp policy hands its bodies
    assert head(body(observations)).shape == (5, 1)
    body, _ = user_critic("my_critics:shaped", space, gym.spaces.Discrete(2), flatten=False)
    assert body(torch.zeros(5, 2, 3)).shape == (5, 8)


@pytest.mark.parametrize(
    "target, message",
    [
        ("critic", "critic_policy must be 'package.module:factory', got 'critic'"),
        ("my_critics:missing", "cannot load critic_policy 'my_critics:missing'"),
        ("my_critics:flat", "critic_policy 'my_critics:flat' must map (batch, *obs_shape)"),
    ],
)
def test_bad_critic_policies_are_one_config_error(critics, target, message):
    with pytest.raises(ConfigError) as info:
        rlx.make("ppo", "CartPole-v1", critic_policy=target)
    assert message in str(info.value)


def test_an_actor_and_a_critic_optimiser_step_together_under_a_deferring_guard():
    from rlx.nn.optim import FiniteGuard

    settings = dict(seed=0, actor_learning_rate=1e-3, **SMALL["ppo"])
    plain = rlx.make("ppo", "CartPole-v1", **settings)
    guarded = rlx.make("ppo", "CartPole-v1", **settings)
    guarded.guard = FiniteGuard(always=True)  # what a CUDA device does: no host reads
    for _ in range(2):
        plain.step()
        guarded.step()
    for key, value in plain.policy_state().arrays.items():
        np.testing.assert_allclose(guarded.policy_state().arrays[key], value, atol=1e-6)
