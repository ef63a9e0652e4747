"""Dropout in the neural bandits: masks drawn from the agent's generator and scaled by
1 / (1 - p), decisions thinned only when asked, the ``dropout`` agent (Riquelme et al.
2018's Dropout) resumes exactly and learns."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

import rlx
from rlx.errors import ConfigError
from rlx.testing import check_agent, same_state, whole_state
from rlx_bandits import neural
from rlx_bandits.neural import RewardNetwork, drop_units

torch.set_num_threads(1)  # 2-core machines: oversubscribed BLAS threads are many times slower

WHEEL = "rlx/Wheel-v0"  # 2-d contexts, 5 arms
NEURAL_AGENTS = ["neural-greedy", "neural-linear", "variational", "bootstrap", "param-noise"]
#: Small networks, training every other round, so that every test takes seconds.
TINY_NETWORK = dict(
    hidden_sizes=(8,), training_freq=2, training_steps=2, batch_size=16, initial_pulls=1
)
SMALL_NETWORK = dict(hidden_sizes=(32,), training_freq=20, training_steps=40, batch_size=64)


def test_drop_units_zeroes_units_with_probability_p_and_scales_the_others_by_1_over_1_minus_p():
    generator = torch.Generator().manual_seed(0)
    x = torch.full((400, 250), 3.0)
    dropped = drop_units(x, 0.2, generator)
    kept = dropped != 0
    torch.testing.assert_close(dropped[kept], torch.full_like(dropped[kept], 3.0 / 0.8))
    # 100,000 units: the kept fraction is 0.8 within 4 standard deviations (0.0013 each).
    assert abs(kept.float().mean().item() - 0.8) < 0.005
    # The mask is a function of the generator's state: the same state, the same mask.
    again = drop_units(x, 0.2, torch.Generator().manual_seed(0))
    assert torch.equal(dropped, again)


def test_reward_network_thins_each_hidden_layer_after_its_activation_by_hand():
    p = 0.5
    network = RewardNetwork(3, (4, 4), 2, 0.3, torch.Generator().manual_seed(0), dropout=p)
    contexts = torch.tensor([[1.0, -2.0, 0.5], [0.3, 0.0, -1.0]])
    generator = torch.Generator().manual_seed(7)
    thinned = network(contexts, generator)
    # The same masks, drawn by hand from the same generator state, in the same order.
    masks = torch.Generator().manual_seed(7)
    first, second = network.body.layers
    h = F.relu(F.linear(contexts, first.weight, first.bias))
    h = h * (torch.rand(h.shape, generator=masks) >= p) * 2.0
    h = F.relu(F.linear(h, second.weight, second.bias))
    h = h * (torch.rand(h.shape, generator=masks) >= p) * 2.0
    expected = F.linear(h, network.head.weight, network.head.bias)
    torch.testing.assert_close(thinned, expected, rtol=0, atol=0)
    # Without a generator the whole network: the MLP's own forward pass, no draws.
    state = generator.get_state()
    whole = network(contexts)
    torch.testing.assert_close(whole, network.head(network.body(contexts)), rtol=0, atol=0)
    assert torch.equal(state, generator.get_state())


def test_network_with_dropout_0_draws_no_masks():
    network = RewardNetwork(3, (4,), 2, 0.3, torch.Generator().manual_seed(0), dropout=0.0)
    generator = torch.Generator().manual_seed(1)
    state = generator.get_state()
    contexts = torch.ones(5, 3)
    assert torch.equal(network(contexts, generator), network(contexts))
    assert torch.equal(state, generator.get_state())


# -- decisions ---------------------------------------------------------------------------------


#: An untrained network of 32 units with half of them dropped: thinned networks disagree.
UNTRAINED = dict(TINY_NETWORK, hidden_sizes=(32,), initial_pulls=0, training_freq=10_000)


@pytest.mark.parametrize("name", ["neural-greedy", "bootstrap"])
@pytest.mark.parametrize("decisions", [True, False])
def test_arms_for_one_context_vary_only_with_dropout_decisions(name, decisions):
    # Agents whose decisions are otherwise deterministic (one network in the ensemble).
    extra = {"epsilon": 0.0} if name == "neural-greedy" else {"n_networks": 1}
    agent = rlx.make(
        name, WHEEL, seed=0, dropout=0.5, dropout_decisions=decisions, **UNTRAINED, **extra
    )
    context = np.array([0.6, -0.3])
    before = agent.generator.get_state()
    arms = {agent.select(context) for _ in range(60)}
    if decisions:
        assert len(arms) > 1, arms
    else:
        assert len(arms) == 1, arms
        assert torch.equal(before, agent.generator.get_state())  # no masks drawn


@pytest.mark.parametrize("name", NEURAL_AGENTS)
@pytest.mark.parametrize("decisions", [True, False])
def test_every_neural_agent_thins_its_decisions_only_with_dropout_decisions(
    monkeypatch, name, decisions
):
    extra = {"epsilon": 0.0} if name == "neural-greedy" else {}  # every decision by the network
    agent = rlx.make(
        name, WHEEL, seed=0, dropout=0.5, dropout_decisions=decisions, **UNTRAINED, **extra
    )
    calls = []

    def counted(x, p, generator):
        calls.append(p)
        return drop_units(x, p, generator)

    monkeypatch.setattr(neural, "drop_units", counted)
    context = np.array([0.6, -0.3])
    for _ in range(5):
        agent.select(context)
    assert calls == ([0.5] * 5 if decisions else [])
    agent.act(context)  # greedy arms: the whole network
    assert len(calls) == (5 if decisions else 0)


@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_every_neural_agent_trains_with_dropout_once_per_hidden_layer_and_step(
    monkeypatch, play, name
):
    agent = rlx.make(name, WHEEL, seed=0, dropout=0.5, **{**TINY_NETWORK, "hidden_sizes": (8, 8)})
    calls = []

    def counted(x, p, generator):
        calls.append(x.shape)
        return drop_units(x, p, generator)

    monkeypatch.setattr(neural, "drop_units", counted)
    play(agent, 4)  # trainings at rounds 2 and 4, of 2 minibatch steps each
    networks = 3 if name == "bootstrap" else 1
    assert calls == [(16, 8)] * (2 * 2 * 2 * networks)  # 2 hidden layers, minibatches of 16


def test_dropout_agent_pulls_varied_arms_for_one_context_and_a_fixed_greedy_arm(play):
    agent = rlx.make("dropout", WHEEL, seed=0, **{**TINY_NETWORK, "hidden_sizes": (32,)})
    play(agent, 20)
    before = whole_state(agent)
    context = np.array([0.6, -0.3])
    assert len({agent.act(context) for _ in range(20)}) == 1
    assert same_state(before, whole_state(agent))  # greedy arms draw nothing
    assert len({agent.select(context) for _ in range(100)}) > 1


def test_dropout_agent_is_neural_greedy_with_the_showdowns_dropout_and_no_epsilon():
    agent = rlx.make("dropout", WHEEL, seed=0)
    config = agent.config
    assert (config.dropout, config.dropout_decisions, config.epsilon) == (0.2, True, 0.0)
    assert type(agent.config).preset == {
        "dropout": 0.2,
        "dropout_decisions": True,
        "epsilon": 0.0,
    }
    # The rest are neural-greedy's defaults, the Showdown's.
    greedy = rlx.make("neural-greedy", WHEEL, seed=0).config
    assert config.hidden_sizes == greedy.hidden_sizes == (50,)
    assert (config.initial_lr, config.training_freq) == (greedy.initial_lr, greedy.training_freq)


# -- the contract ------------------------------------------------------------------------------


@pytest.mark.parametrize("iterations", [3, 30])
def test_dropout_agent_keeps_the_rlx_contract_on_the_wheel(iterations):
    # 30 rounds: fifteen trainings with dropout, a checkpoint, fifteen more after it.
    check_agent("dropout", WHEEL, iterations=iterations, **TINY_NETWORK)


@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_neural_agent_with_dropout_resumes_exactly(name):
    check_agent(name, WHEEL, iterations=20, dropout=0.3, dropout_decisions=True, **TINY_NETWORK)


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dropout", *NEURAL_AGENTS])
@pytest.mark.parametrize("value", [1.0, 1.5, -0.1, float("nan")])
def test_dropout_outside_0_to_1_is_a_config_error_naming_the_range(name, value):
    with pytest.raises(ConfigError, match=r"dropout must be in \[0, 1\), got"):
        rlx.make(name, WHEEL, dropout=value)


def test_dropout_from_the_command_line_is_parsed_and_checked():
    assert rlx.make("neural-greedy", WHEEL, dropout="0.25").config.dropout == 0.25
    with pytest.raises(ConfigError, match="dropout"):
        rlx.make("neural-greedy", WHEEL, dropout="1")


# -- learning ----------------------------------------------------------------------------------


def test_dropout_agent_learns_a_linear_problem_within_400_rounds(
    linear_bandit, play, uniform_regret
):
    # Observed over seeds 0-3: 0.11-0.16 of uniform's regret (neural-greedy: 0.13-0.17).
    rounds = 400
    agent = rlx.make("dropout", linear_bandit, seed=0, **SMALL_NETWORK)
    assert play(agent, rounds) < 0.3 * uniform_regret(linear_bandit, rounds)
