"""Networks and optimisers given to rlx.make as Python objects, recorded by import path."""

from __future__ import annotations

import textwrap

import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.testing import check_agent

FACTORIES = """
import torch
from torch import nn


def body(observation_space, action_space):
    return nn.Sequential(nn.Flatten(), nn.Linear(observation_space.shape[0], 32), nn.Tanh())


def es_policy(observation_space, action_space):
    return nn.Sequential(nn.Linear(observation_space.shape[0], 16), nn.Tanh(),
                         nn.Linear(16, int(action_space.n)))
"""


@pytest.fixture
def factories(tmp_path, monkeypatch):
    (tmp_path / "rlx_test_objects.py").write_text(textwrap.dedent(FACTORIES))
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    import rlx_test_objects

    return importlib.reload(rlx_test_objects)


@pytest.mark.parametrize(
    "name, env, setting, factory, extra",
    [
        ("ppo", "CartPole-v1", "policy", "body", {"n_steps": 32}),
        ("dqn", "CartPole-v1", "network", "body", {"learning_starts": 32, "batch_size": 32}),
        ("openai-es", "CartPole-v1", "network", "es_policy", {"population_size": 8}),
    ],
)
def test_a_network_factory_object_is_recorded_by_its_import_path(
    factories, name, env, setting, factory, extra
):
    agent = rlx.make(name, env, seed=0, **{setting: getattr(factories, factory)}, **extra)
    assert agent.identity.hyperparameters[setting] == f"rlx_test_objects:{factory}"
    check_agent(name, env, iterations=2, **{setting: getattr(factories, factory)}, **extra)


def test_a_torch_optimiser_class_object_is_recorded_by_its_name_and_loads_untrusted(tmp_path):
    agent = rlx.make(
        "sac", "Pendulum-v1", optimizer=torch.optim.SGD, learning_starts=32, batch_size=32
    )
    assert type(agent.optimizers["actor"]) is torch.optim.SGD
    assert agent.config.optimizer == "SGD"  # torch's own: no code to trust when loading
    loaded = rlx.load(rlx.save(agent, tmp_path / "model"))
    assert type(loaded.optimizers["actor"]) is torch.optim.SGD


def test_an_object_that_cannot_be_imported_back_is_refused():
    def local(observation_space, action_space):  # not importable by name
        return torch.nn.Flatten()

    for value in (local, lambda observation_space, action_space: torch.nn.Flatten()):
        with pytest.raises(ConfigError, match="cannot be recorded with the run"):
            rlx.make("ppo", "CartPole-v1", policy=value)
