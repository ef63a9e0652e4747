"""The neural bandits' ``network`` and ``optimizer`` settings: a user's
``package.module:factory`` body under the reward heads and a user's optimiser keep the rlx
contract, are recorded by name, are checked, and learn."""

from __future__ import annotations

import textwrap

import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.testing import check_agent, same_state, whole_state

torch.set_num_threads(1)  # 2-core machines: oversubscribed BLAS threads are many times slower

WHEEL = "rlx/Wheel-v0"  # 2-d contexts, 5 arms
TINY_NETWORK = dict(training_freq=2, training_steps=2, batch_size=16, initial_pulls=1)
SMALL_NETWORK = dict(training_freq=20, training_steps=40, batch_size=64)
AGENTS = ["neural-greedy", "dropout", "neural-linear", "bootstrap", "param-noise"]


@pytest.fixture
def nets(tmp_path, monkeypatch):
    (tmp_path / "rlx_test_bandit_nets.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            import torch
            from torch import nn

            class HalfAdam(torch.optim.Adam):
                # Adam at half the rate it is given: a user optimiser class.

                def __init__(self, params, lr, **kwargs):
                    super().__init__(params, lr=lr / 2, **kwargs)

            def body(observation_space, action_space, width=16):
                n_in = int(np.prod(observation_space.shape))
                return nn.Sequential(nn.Linear(n_in, width), nn.Tanh(), nn.Linear(width, 12))

            def relu_body(observation_space, action_space):
                n_in = int(np.prod(observation_space.shape))
                return nn.Sequential(nn.Linear(n_in, 32), nn.ReLU())

            def not_a_module(observation_space, action_space):
                return {"width": 3}

            def flat(observation_space, action_space):
                n_in = int(np.prod(observation_space.shape))
                return nn.Sequential(nn.Linear(n_in, 1), nn.Flatten(0))
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "rlx_test_bandit_nets"


@pytest.mark.parametrize("name", AGENTS)
def test_a_user_network_keeps_the_rlx_contract(nets, name):
    check_agent(name, WHEEL, iterations=20, network=f"{nets}:body", **TINY_NETWORK)


@pytest.mark.parametrize("name", AGENTS)
def test_a_user_network_runs_the_same_for_the_same_seed(nets, name):
    def run(seed):
        agent = rlx.make(name, WHEEL, seed=seed, network=f"{nets}:body", **TINY_NETWORK)
        for _ in range(8):
            agent.step()
        return whole_state(agent)

    assert same_state(run(3), run(3))
    assert not same_state(run(3), run(4))


def test_the_network_has_the_user_body_and_one_head_output_per_arm(nets):
    agent = rlx.make("neural-linear", WHEEL, network=f"{nets}:body", **TINY_NETWORK)
    assert isinstance(agent.network.body, torch.nn.Sequential)
    assert (agent.network.head.in_features, agent.network.head.out_features) == (12, 5)
    z = agent.representation(torch.zeros(1, 2))
    assert z.shape == (1, 12)


def test_bootstrap_members_get_their_own_bodies(nets):
    agent = rlx.make("bootstrap", WHEEL, network=f"{nets}:body", n_networks=3, **TINY_NETWORK)
    bodies = [network.body for network in agent.ensemble]
    assert len({id(body) for body in bodies}) == 3
    first = [body[0].weight for body in bodies]
    assert not torch.equal(first[0], first[1]) and not torch.equal(first[1], first[2])


def test_a_factory_object_is_recorded_by_its_import_path(nets):
    import importlib

    factory = importlib.import_module(nets).body
    agent = rlx.make("neural-greedy", WHEEL, network=factory, **TINY_NETWORK)
    assert agent.config.network == f"{nets}:body"


def test_variational_refuses_a_network_factory(nets):
    with pytest.raises(ConfigError, match=r"variational .* network must be 'mlp'"):
        rlx.make("variational", WHEEL, network=f"{nets}:body", **TINY_NETWORK)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("not_a_module", r"must return a torch\.nn\.Module, got dict"),
        ("flat", r"must map contexts \(batch, 2\) to features \(batch, k\)"),
        ("missing", "cannot load network"),
    ],
)
def test_a_bad_factory_is_a_config_error(nets, factory, message):
    with pytest.raises(ConfigError, match=message):
        rlx.make("neural-greedy", WHEEL, network=f"{nets}:{factory}", **TINY_NETWORK)


def test_network_must_be_mlp_or_a_factory():
    with pytest.raises(ConfigError, match=r"network must be 'mlp' or 'package\.module:factory'"):
        rlx.make("neural-greedy", WHEEL, network="cnn")


def test_neural_greedy_learns_with_a_user_body(nets, linear_bandit, play, uniform_regret):
    # Observed over seeds 0-2: 0.12-0.24 of uniform's regret (seed 0: 0.12).
    rounds = 400
    agent = rlx.make(
        "neural-greedy", linear_bandit, seed=0, network=f"{nets}:relu_body", **SMALL_NETWORK
    )
    play(agent, rounds)
    uniform = uniform_regret(linear_bandit, rounds)
    assert agent.cumulative_regret < 0.3 * uniform


# -- optimisers ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*AGENTS, "variational"])
def test_a_user_optimizer_keeps_the_rlx_contract(nets, name):
    network = {} if name == "variational" else {"network": f"{nets}:body"}
    check_agent(
        name,
        WHEEL,
        iterations=20,
        optimizer=f"{nets}:HalfAdam",
        optimizer_kwargs={"betas": [0.8, 0.99]},
        **network,
        **TINY_NETWORK,
    )


@pytest.mark.parametrize(
    ("name", "optimizer"),
    [("neural-greedy", "sgd"), ("bootstrap", "AdamW"), ("variational", "rmsprop")],
)
def test_named_optimizers_keep_the_rlx_contract(name, optimizer):
    check_agent(name, WHEEL, iterations=20, optimizer=optimizer, hidden_sizes=(8,), **TINY_NETWORK)


def test_optimizer_kwargs_are_parsed_from_json_and_reach_the_optimizer():
    agent = rlx.make("neural-greedy", WHEEL, optimizer="sgd", optimizer_kwargs='{"momentum": 0.5}')
    assert isinstance(agent.optimizer, torch.optim.SGD)
    assert agent.optimizer.param_groups[0]["momentum"] == 0.5


def test_the_default_optimizers_are_the_showdowns():
    greedy = rlx.make("neural-greedy", WHEEL)
    assert greedy.config.optimizer == "rmsprop"
    assert isinstance(greedy.optimizer, torch.optim.RMSprop)
    assert greedy.optimizer.param_groups[0]["alpha"] == 0.9
    variational = rlx.make("variational", WHEEL)
    assert variational.config.optimizer == "adam"
    assert type(variational.optimizer) is torch.optim.Adam


def test_the_showdowns_rmsprop_takes_no_kwargs():
    with pytest.raises(ConfigError, match=r"optimizer rmsprop .* takes no optimizer_kwargs"):
        rlx.make("neural-greedy", WHEEL, optimizer_kwargs={"alpha": 0.99})


def test_an_unknown_optimizer_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown optimizer"):
        rlx.make("neural-greedy", WHEEL, optimizer="nesterov")


# -- learning-rate schedulers ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["neural-greedy", "bootstrap", "variational"])
def test_an_lr_scheduler_keeps_the_rlx_contract(nets, name):
    network = {} if name == "variational" else {"network": f"{nets}:body"}
    check_agent(
        name,
        WHEEL,
        iterations=20,
        optimizer=f"{nets}:HalfAdam",
        lr_scheduler="StepLR",
        lr_scheduler_kwargs={"step_size": 3, "gamma": 0.5},
        **network,
        **TINY_NETWORK,
    )


def test_the_scheduler_sets_the_rate_of_every_step_in_place_of_lr_decay():
    agent = rlx.make(
        "neural-greedy",
        WHEEL,
        seed=1,
        initial_lr=0.1,
        lr_scheduler="StepLR",
        lr_scheduler_kwargs='{"step_size": 4, "gamma": 0.5}',
        **TINY_NETWORK,
    )
    rounds = 12  # a training of 2 steps every 2 rounds: 12 optimiser steps
    for _ in range(rounds):
        agent.step()
    steps = agent.schedulers["network"].last_epoch
    assert steps == rounds
    assert agent.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5 ** (steps // 4))
    plain = rlx.make("neural-greedy", WHEEL, seed=1, initial_lr=0.1, **TINY_NETWORK)
    for _ in range(rounds):
        plain.step()
    assert not plain.schedulers
    assert plain.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 / (1 + 0.5 * (steps - 1)))


def test_a_bad_lr_scheduler_is_one_config_error_before_any_round():
    with pytest.raises(ConfigError, match=r"unknown lr_scheduler 'StepLr'.*StepLR"):
        rlx.make("dropout", WHEEL, lr_scheduler="StepLr")
    with pytest.raises(ConfigError, match="lr_scheduler StepLR rejected its arguments"):
        rlx.make("neural-greedy", WHEEL, lr_scheduler="StepLR", lr_scheduler_kwargs={"steps": 3})
    with pytest.raises(ConfigError, match="reset_lr restarts the lr_decay schedule"):
        rlx.make("bootstrap", WHEEL, lr_scheduler="ExponentialLR", reset_lr=True)
