"""Optimisers as the user names them, and a step size for the actor and one for the critics."""

from __future__ import annotations

import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.nn.optim import Adam
from rlx.testing import check_agent

SMALL = dict(
    learning_starts=32, batch_size=32, train_freq=16, gradient_steps=2, hidden_sizes=(32, 32)
)


def test_the_flat_adam_stays_the_default_and_takes_its_settings():
    agent = rlx.make("sac", "Pendulum-v1", **SMALL)
    assert all(isinstance(optimizer, Adam) for optimizer in agent.optimizers.values())
    agent = rlx.make("td3", "Pendulum-v1", optimizer_kwargs={"betas": [0.5, 0.9]}, **SMALL)
    assert agent.optimizers["critic"].param_groups[0]["betas"] == [0.5, 0.9]


@pytest.mark.parametrize(
    "name, env, optimizer, kwargs",
    [
        ("sac", "Pendulum-v1", "RMSprop", {"alpha": 0.95}),
        ("td3", "Pendulum-v1", "AdamW", {"weight_decay": 0.01}),
        ("dqn", "CartPole-v1", "SGD", {"momentum": 0.9}),
    ],
)
def test_a_torch_optimiser_with_its_arguments_resumes_exactly(name, env, optimizer, kwargs):
    agent = rlx.make(name, env, optimizer=optimizer, optimizer_kwargs=kwargs, **SMALL)
    first = next(iter(agent.optimizers.values()))
    assert type(first) is getattr(torch.optim, optimizer)
    for key, value in kwargs.items():
        assert first.param_groups[0][key] == value
    check_agent(name, env, iterations=3, optimizer=optimizer, optimizer_kwargs=kwargs, **SMALL)


def test_the_actor_and_the_critics_have_their_own_step_sizes():
    agent = rlx.make("sac", "Pendulum-v1", learning_rate=1e-3, actor_learning_rate=1e-4, **SMALL)
    assert agent.optimizers["actor"].param_groups[0]["lr"] == 1e-4
    assert agent.optimizers["critic"].param_groups[0]["lr"] == 1e-3
    assert agent.optimizers["alpha"].param_groups[0]["lr"] == 1e-3
    agent = rlx.make("ddpg", "Pendulum-v1", critic_learning_rate=2e-3, **SMALL)
    assert agent.optimizers["critic"].param_groups[0]["lr"] == 2e-3
    assert agent.optimizers["actor"].param_groups[0]["lr"] == agent.config.learning_rate


def test_optimiser_settings_from_the_command_line(tmp_path, rlx_cli):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "dqn", "--env", "CartPole-v1", "--steps", "200", "--out", str(run),
        "--no-progress", "--set", "optimizer=SGD", "--set", 'optimizer_kwargs={"momentum": 0.8}',
        "--set", "learning_starts=64", "--set", "batch_size=32",
    )  # fmt: skip
    assert code == 0, err
    assert type(rlx.load(run).optimizers["optimizer"]) is torch.optim.SGD


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"optimizer": "Adamm"}, "unknown optimizer 'Adamm'. Did you mean: Adam"),
        ({"optimizer": "SGD", "optimizer_kwargs": {"momentun": 0.9}}, "rejected its arguments"),
        ({"optimizer_kwargs": {"eps2": 1.0}}, "optimizer adam (betas, eps) rejected"),
        ({"optimizer_kwargs": "{momentum: 0.9}"}, "expects a JSON object"),
        ({"actor_learning_rate": -1.0}, "actor_learning_rate must be in (0, inf]"),
    ],
)
def test_bad_optimiser_settings_are_one_config_error(settings, message):
    with pytest.raises(ConfigError) as info:
        rlx.make("sac", "Pendulum-v1", **settings)
    assert message in str(info.value)


def test_a_scheduler_steps_after_every_update_and_resumes_exactly():
    settings = dict(SMALL, lr_scheduler="ExponentialLR", lr_scheduler_kwargs={"gamma": 0.9})
    agent = rlx.make("td3", "Pendulum-v1", learning_rate=1e-3, **settings)
    for _ in range(5):
        agent.step()
    # The critics update every time, the actor every policy_delay-th time.
    critic_updates = agent.updates
    assert agent.optimizers["critic"].param_groups[0]["lr"] == pytest.approx(
        1e-3 * 0.9**critic_updates
    )
    actor_steps = agent.schedulers["actor"].last_epoch
    assert 0 < actor_steps < critic_updates
    assert agent.optimizers["actor"].param_groups[0]["lr"] == pytest.approx(1e-3 * 0.9**actor_steps)
    check_agent(
        "sac",
        "Pendulum-v1",
        iterations=4,
        **dict(SMALL, lr_scheduler="StepLR", lr_scheduler_kwargs={"step_size": 3, "gamma": 0.5}),
    )
    check_agent("dqn", "CartPole-v1", iterations=3, optimizer="SGD", **settings)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"lr_scheduler": "StepLr"}, "unknown lr_scheduler 'StepLr'. Did you mean: StepLR"),
        ({"lr_scheduler": "StepLR"}, "lr_scheduler StepLR rejected its arguments {}"),
        ({"lr_scheduler": "ReduceLROnPlateau"}, "needs a metric at every step"),
    ],
)
def test_bad_scheduler_settings_are_one_config_error(settings, message):
    with pytest.raises(ConfigError) as info:
        rlx.make("dqn", "CartPole-v1", **settings)
    assert message in str(info.value)


def _linear_widths(module: torch.nn.Module) -> list[int]:
    return [layer.out_features for layer in module.modules() if isinstance(layer, torch.nn.Linear)]


@pytest.mark.parametrize("name", ["sac", "td3", "ddpg"])
def test_the_actor_and_the_critics_have_their_own_layer_sizes(name):
    settings = {**SMALL, "actor_hidden_sizes": (16,), "critic_hidden_sizes": (48, 24)}
    agent = rlx.make(name, "Pendulum-v1", **settings)
    assert _linear_widths(agent.actor.module)[:1] == [16]
    critic_widths = [p.shape[-1] for p in agent.critic.module.parameters() if p.ndim >= 2]
    assert 48 in critic_widths and 24 in critic_widths and 32 not in critic_widths
    same = rlx.make(name, "Pendulum-v1", **SMALL)  # both None: hidden_sizes for both
    assert _linear_widths(same.actor.module)[:2] == [32, 32]
    check_agent(name, "Pendulum-v1", iterations=3, **settings)


def test_bad_layer_sizes_are_one_config_error():
    with pytest.raises(ConfigError, match="critic_hidden_sizes must be positive layer sizes"):
        rlx.make("sac", "Pendulum-v1", critic_hidden_sizes=(64, 0))
