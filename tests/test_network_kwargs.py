"""Keyword arguments of a user's network factory, in every torch family."""

from __future__ import annotations

import textwrap

import pytest

import rlx
from rlx.errors import ConfigError
from rlx.testing import check_agent

FACTORIES = """
from torch import nn


def body(observation_space, action_space, width=16):
    return nn.Sequential(nn.Flatten(), nn.Linear(observation_space.shape[0], width), nn.Tanh())


def es_policy(observation_space, action_space, width=16):
    outputs = int(getattr(action_space, "n", 0) or action_space.shape[0])
    return nn.Sequential(nn.Linear(observation_space.shape[0], width), nn.Tanh(),
                         nn.Linear(width, outputs))
"""


@pytest.fixture
def factories(tmp_path, monkeypatch):
    (tmp_path / "rlx_test_kwargs.py").write_text(textwrap.dedent(FACTORIES))
    monkeypatch.syspath_prepend(str(tmp_path))


CASES = [
    ("ppo", "CartPole-v1", "policy", "body", {"n_steps": 32}),
    ("dqn", "CartPole-v1", "network", "body", {"learning_starts": 32, "batch_size": 32}),
    ("sac", "Pendulum-v1", "network", "body", {"learning_starts": 32, "batch_size": 32}),
    ("openai-es", "CartPole-v1", "network", "es_policy", {"population_size": 8}),
    ("neural-greedy", "rlx/Wheel-v0", "network", "body", {"batch_size": 16}),
]


@pytest.mark.parametrize("name, env, setting, factory, extra", CASES)
def test_factory_keyword_arguments_reach_the_factory(factories, name, env, setting, factory, extra):
    key = "policy_kwargs" if setting == "policy" else "network_kwargs"
    settings = {setting: f"rlx_test_kwargs:{factory}", key: {"width": 7}, **extra}
    agent = rlx.make(name, env, seed=0, **settings)
    modules = [m for m in agent_modules(agent) if hasattr(m, "out_features")]
    assert any(m.out_features == 7 for m in modules), modules
    assert agent.identity.hyperparameters[key] == {"width": 7}
    check_agent(name, env, iterations=2, **settings)


def agent_modules(agent):
    import torch

    found = []
    for value in vars(agent).values():
        candidates = [value, getattr(value, "module", None), getattr(value, "network", None)]
        for candidate in candidates:
            if isinstance(candidate, torch.nn.Module):
                found.extend(candidate.modules())
    policy = getattr(agent, "policy", None)
    if policy is not None and hasattr(policy, "module"):
        found.extend(policy.module.modules())
    return found


def test_a_keyword_the_factory_does_not_take_is_one_config_error(factories):
    with pytest.raises(ConfigError, match="rlx_test_kwargs:body"):
        rlx.make("dqn", "CartPole-v1", network="rlx_test_kwargs:body", network_kwargs={"wide": 7})


def test_factory_keywords_from_the_command_line(factories, tmp_path, rlx_cli):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "dqn", "--env", "CartPole-v1", "--steps", "100", "--out", str(run),
        "--no-progress", "--set", "network=rlx_test_kwargs:body",
        "--set", 'network_kwargs={"width": 5}', "--set", "learning_starts=64",
        "--set", "batch_size=32",
    )  # fmt: skip
    assert code == 0, err
    agent = rlx.load(run, trust_code=True)
    assert agent.q_network.body[1].out_features == 5
