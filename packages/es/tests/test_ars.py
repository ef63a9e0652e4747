"""ars: Mania, Guy & Recht (2018), V1/V2 and their top-b variants, on rlx-es's populations."""

from __future__ import annotations

import copy
import json

import gymnasium
import numpy as np
import pytest
import torch

import rlx
from rlx import tuned
from rlx.errors import ConfigError, UntrustedCodeError
from rlx.evaluation import evaluate
from rlx.testing import check_agent
from rlx.trainer import Trainer
from rlx_es.ars import ARS
from rlx_es.core import Population
from rlx_es.evaluation import StateStatistics, member_seeds
from rlx_es.policy import PopulationPolicy, VirtualBatchNorm


@pytest.mark.parametrize(
    ("env_id", "settings"),
    [
        ("CartPole-v1", {"n_delta": 2}),
        ("Pendulum-v1", {"n_delta": 3, "n_top": 2, "version": "v2"}),
        (
            "Pendulum-v1",
            {"version": "v2", "hidden_sizes": [8], "with_bias": True, "squash_output": True,
             "zero_policy": False, "n_delta": 2},
        ),
    ],
)  # fmt: skip
def test_ars_keeps_the_agent_contract(env_id, settings):
    check_agent("ars", env_id, seed=1, iterations=2, **settings)


# -- the mechanism ---------------------------------------------------------------------------


def test_the_update_is_the_papers_step_over_the_top_directions():
    """M + alpha / (b sigma_R) sum_k (r+_k - r-_k) delta_k over the b best directions by
    max(r+, r-), sigma_R the (population) standard deviation of their 2b returns."""
    centre = np.array([1.0, -2.0, 0.5])
    strategy = ARS(centre, n_delta=3, n_top=2, delta_std=0.1, learning_rate=0.3)
    population = strategy.ask(seed=11)
    assert population.size == 6 and population.mirrored and population.sigma == 0.1
    z = np.random.default_rng(11).standard_normal((3, 3))  # delta_k, drawn from the seed
    np.testing.assert_allclose(population.parameters()[0::2], centre + 0.1 * z)
    np.testing.assert_allclose(population.parameters()[1::2], centre - 0.1 * z)
    # (r+, r-) per direction: max 5, 9, 7 -> the top two are directions 1 and 2
    fitness = np.array([5.0, 1.0, 2.0, 9.0, 7.0, 4.0])
    metrics = strategy.tell(population, fitness)
    used = np.array([2.0, 7.0, 9.0, 4.0])
    sigma = np.sqrt(np.mean((used - used.mean()) ** 2))
    expected = centre + 0.3 / (2 * sigma) * ((2.0 - 9.0) * z[1] + (7.0 - 4.0) * z[2])
    np.testing.assert_allclose(strategy.mean, expected, rtol=1e-12)
    assert metrics["return_std"] == pytest.approx(sigma)
    assert metrics["step_size"] == pytest.approx(0.3 / (2 * sigma))


def test_top_directions_rank_by_the_better_of_each_pair():
    strategy = ARS(np.zeros(2), n_delta=4, n_top=2)
    plus, minus = np.array([1.0, 8.0, 3.0, 3.0]), np.array([6.0, 0.0, 7.0, 2.0])
    assert strategy.top_directions(plus, minus).tolist() == [1, 2]  # 8, 7 beat 6, 3
    assert ARS(np.zeros(2), n_delta=4).n_top == 4  # n_top 0 or None: all directions (V1/V2)
    ties = ARS(np.zeros(2), n_delta=3, n_top=2)
    assert ties.top_directions(np.ones(3), np.ones(3)).tolist() == [0, 1]  # ties: as drawn


def test_equal_returns_take_no_step():
    strategy = ARS(np.array([0.5, 0.5]), n_delta=2)
    population = strategy.ask(seed=0)
    metrics = strategy.tell(population, np.full(4, 500.0))
    np.testing.assert_array_equal(strategy.mean, [0.5, 0.5])
    assert metrics["step_size"] == 0.0


def test_the_alive_bonus_offset_enters_the_update_not_the_logged_returns():
    plain = rlx.make("ars", "CartPole-v1", seed=3, n_delta=2)
    offset = rlx.make("ars", "CartPole-v1", seed=3, n_delta=2, alive_bonus_offset=-1.0)
    first, second = plain.step(), offset.step()
    assert first.episode_returns == second.episode_returns  # the same episodes, as played
    # CartPole pays 1 a step: with the offset every return is 0, so no step is taken
    np.testing.assert_array_equal(offset.strategy.mean, 0.0)
    assert not np.array_equal(plain.strategy.mean, 0.0)


def _replay(env_id, parameters, seeds, policy):
    """The states each member acted on, playing its episode by hand."""
    states = []
    for row, seed in zip(parameters, seeds, strict=True):
        env = gymnasium.make(env_id)
        observation, _ = env.reset(seed=seed)
        layers = policy.bind(row[None])
        done = False
        while not done:
            states.append(np.asarray(observation, np.float32))
            action = policy.actions(layers, np.asarray(observation, np.float32)[None])[0]
            observation, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    return np.array(states, np.float64)


def test_v2_statistics_are_those_of_every_state_visited_and_the_policy_reads_them():
    """Two generations replayed by hand (one environment per member, seeded as the sync
    block seeds them): the agent's mean and standard deviation are the visited states'."""
    env_id, settings = "Pendulum-v1", {"n_delta": 3, "version": "v2", "vectorization": "sync"}
    agent = rlx.make("ars", env_id, seed=4, **settings)
    env = gymnasium.make(env_id)
    policy = PopulationPolicy(
        env.observation_space, env.action_space, (), VirtualBatchNorm(dim=3), squash=False,
        bias=False,
    )  # fmt: skip
    visited = []
    for _ in range(2):
        rng = copy.deepcopy(agent.rng)
        population = agent.strategy.ask(int(rng.integers(2**31)))
        (block_seed,) = rng.integers(2**31, size=1)
        policy.normalizer.mean = agent.policy.normalizer.mean.copy()
        policy.normalizer.std = agent.policy.normalizer.std.copy()
        visited.append(
            _replay(env_id, population.parameters(), member_seeds(int(block_seed), 6), policy)
        )
        iteration = agent.step()
        assert sum(iteration.episode_lengths) == len(visited[-1])
    states = np.concatenate(visited)
    assert agent.states.count == len(states) == 2400
    np.testing.assert_allclose(agent.states.mean, states.mean(axis=0), rtol=1e-9)
    np.testing.assert_allclose(agent.states.std, states.std(axis=0), rtol=1e-9)
    # the deployed policy reads (x - mean) / std
    np.testing.assert_allclose(agent.policy.normalizer.mean, states.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(agent.policy.normalizer.std, states.std(axis=0), rtol=1e-6)
    x = np.array([0.3, -0.2, 1.5], np.float32)
    linear = agent.strategy.mean.reshape(3, 1)  # M, the policy's (in, out) weight
    by_hand = np.clip(((x - states.mean(axis=0)) / states.std(axis=0)) @ linear, -2.0, 2.0)
    np.testing.assert_allclose(agent.act(x), by_hand, rtol=1e-4, atol=1e-5)
    # V1 leaves the states alone
    assert rlx.make("ars", env_id, seed=4, n_delta=3).policy.normalizer is None


def test_state_statistics_merge_exactly_and_flat_dimensions_read_zero():
    rng = np.random.default_rng(0)
    a, b = rng.normal(5.0, 2.0, (50, 3)), rng.normal(-1.0, 0.5, (70, 3))

    def of(x):
        return StateStatistics(len(x), x.mean(0), ((x - x.mean(0)) ** 2).sum(0))

    merged = StateStatistics.empty(3).merged(of(a)).merged(of(b))
    both = np.concatenate([a, b])
    np.testing.assert_allclose(merged.mean, both.mean(0))
    np.testing.assert_allclose(merged.std, both.std(0))
    np.testing.assert_array_equal(StateStatistics.empty(2).std, [1.0, 1.0])
    # CartPole's states all vary; a V2 agent on a flat dimension reads it as 0
    agent = rlx.make("ars", "CartPole-v1", seed=0, n_delta=2, version="v2")
    agent.states = StateStatistics(10.0, np.array([0.0, 1.0, 2.0, 3.0]), np.zeros(4))
    agent._normalize()
    assert np.isinf(agent.policy.normalizer.std).all()
    assert agent.policy.normalizer(np.ones((1, 4), np.float32)).tolist() == [[0.0] * 4]


def test_backends_and_blocks_give_the_same_run():
    """The process backend's shards bring their state statistics back and merge them: the
    run equals the local one, block for block."""
    settings = {"n_delta": 4, "version": "v2", "block_size": 4}
    local = rlx.make("ars", "Pendulum-v1", seed=2, **settings)
    workers = rlx.make("ars", "Pendulum-v1", seed=2, backend="process", workers=2, **settings)
    try:
        for _ in range(2):
            assert local.step().episode_returns == workers.step().episode_returns
        np.testing.assert_allclose(workers.states.mean, local.states.mean, rtol=1e-12)
        np.testing.assert_allclose(workers.states.m2, local.states.m2, rtol=1e-9)
        np.testing.assert_array_equal(workers.strategy.mean, local.strategy.mean)
    finally:
        workers.close()


def test_the_linear_policy_has_no_bias_and_clips_its_actions():
    agent = rlx.make("ars", "Pendulum-v1", seed=0, n_delta=2)
    assert agent.policy.n_params == 3  # M is 1 x 3, no bias
    agent.strategy.theta = np.array([10.0, 0.0, 0.0])  # a = 10 cos(theta), clipped to [-2, 2]
    agent._acting = None
    assert agent.act(np.array([0.1, 0.0, 0.0], np.float32)) == pytest.approx([1.0])
    assert agent.act(np.array([1.0, 0.0, 0.0], np.float32)) == pytest.approx([2.0])
    mlp = rlx.make("ars", "Pendulum-v1", seed=0, hidden_sizes=[4], with_bias=True)
    assert mlp.policy.n_params == 3 * 4 + 4 + 4 * 1 + 1
    assert mlp.policy.activation is torch.relu  # sb3-contrib's MlpPolicy's
    assert np.array_equal(mlp.strategy.mean, np.zeros(21))  # zero_policy
    assert not np.array_equal(
        rlx.make("ars", "Pendulum-v1", hidden_sizes=[4], zero_policy=False).strategy.mean, 0
    )


def test_a_users_network_plays_under_the_v2_normaliser(tmp_path, monkeypatch):
    (tmp_path / "rlx_es_test_ars_nets.py").write_text(
        "from torch import nn\n\n"
        "def linear(observation_space, action_space):\n"
        "    return nn.Linear(observation_space.shape[0], action_space.shape[0], bias=False)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = {"network": "rlx_es_test_ars_nets:linear", "version": "v2", "n_delta": 2}
    check_agent("ars", "Pendulum-v1", seed=0, iterations=2, **settings)
    agent = rlx.make("ars", "Pendulum-v1", seed=0, **settings)
    for _ in range(2):
        agent.step()
    x = np.array([0.3, -0.2, 1.5], np.float32)
    normalizer = agent.policy.normalizer
    by_hand = np.clip(agent.strategy.mean @ ((x - normalizer.mean) / normalizer.std), -2, 2)
    np.testing.assert_allclose(agent.act(x), [by_hand], rtol=1e-4, atol=1e-5)


# -- learning ---------------------------------------------------------------------------------


def test_ars_solves_cartpole_with_the_zoos_settings():
    """The zoo's CartPole entry (linear policy, 2 directions): sb3-contrib's ARS reaches 500;
    here the mean of 20 evaluation episodes passes 475 within its 50,000 steps."""
    agent = rlx.make("ars", "CartPole-v1", seed=0, **tuned.hyperparameters("ars", "CartPole-v1"))
    env = gymnasium.make("CartPole-v1")
    steps, score = 0, 0.0
    while steps < 50_000 and score < 475:
        steps += agent.step().env_steps
        if steps > 10_000:
            score = evaluate(agent, env, episodes=20, seed=100).mean_return
    assert score >= 475, (steps, score)


def test_ars_swings_up_pendulum_with_the_zoos_settings():
    """The zoo's Pendulum entry (V2-t: a [16] ReLU MLP, 4 directions, the best one, states
    normalised): the centre's mean return over 10 evaluation episodes reaches -282, the score
    of sb3-contrib's published Pendulum model (-282 +- 194), within a million steps."""
    hyperparameters = tuned.hyperparameters("ars", "Pendulum-v1")
    agent = rlx.make("ars", "Pendulum-v1", seed=1, **hyperparameters)
    env = gymnasium.make("Pendulum-v1")
    steps, mark, score = 0, 100_000, -np.inf
    while steps < 1_000_000 and score < -282:
        steps += agent.step().env_steps
        if steps >= mark:
            mark += 100_000
            score = evaluate(agent, env, episodes=10, seed=0).mean_return
    assert score >= -282, (steps, score)


# -- settings ---------------------------------------------------------------------------------


def test_bad_values_are_one_config_error(rlx_cli, tmp_path):
    for setting, message in (
        ("n_top=9", "n_top=9 is more than the n_delta=2 directions"),  # the zoo's 2
        ("version=v3", "Did you mean: v2"),
        ("fitness_shaping=rank", "fitness_shaping must be one of"),
        ("n_delat=4", "Did you mean: n_delta"),
    ):
        code, _, err = rlx_cli(
            "run", "ars", "--env", "CartPole-v1", "--set", setting, "--out", str(tmp_path / "r")
        )
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and message in lines[0], err
    with pytest.raises(ConfigError, match="normalise them a second time"):
        rlx.make("ars", "CartPole-v1", version="v2", virtual_batch_norm=True)


def test_a_users_shaping_loads_only_when_trusted(tmp_path, monkeypatch):
    (tmp_path / "rlx_es_test_ars_shaping.py").write_text(
        "def signs(fitness):\n    return (fitness > fitness.mean()).astype(float)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    target = "rlx_es_test_ars_shaping:signs"
    agent = rlx.make("ars", "CartPole-v1", seed=0, n_delta=2, fitness_shaping=target)
    run = tmp_path / "run"
    Trainer(agent, steps=300, eval_every=0, eval_episodes=0, run_dir=run, progress=False).fit()
    assert json.loads((run / "config.json").read_text())["hyperparameters"]["fitness_shaping"] == (
        target
    )
    with pytest.raises(UntrustedCodeError, match="sets fitness_shaping="):
        rlx.load(run)
    assert rlx.load(run, trust_code=True).config.fitness_shaping == target


def test_the_tuned_settings_build_and_follow_the_zoo():
    assert tuned.check_file("rlx_es:tuned.toml", ["ars"]) >= 10
    pendulum = tuned.hyperparameters("ars", "Pendulum-v1")
    assert pendulum["n_delta"] == 4 and pendulum["n_top"] == 1 and pendulum["version"] == "v2"
    assert tuned.find("ars", "CartPole-v1").trainer == {"steps": 50_000}


def test_population_parameters_are_the_mirrored_pairs():
    agent = rlx.make("ars", "CartPole-v1", seed=0, n_delta=3, delta_std=0.5)
    agent.step()
    members = agent.population_parameters()
    population: Population = agent.last_population
    assert members.shape == (6, 8)  # M: 4 states x 2 actions
    pairs = members[0::2] + members[1::2]  # each direction and its mirror about M
    np.testing.assert_allclose(pairs, np.tile(2 * population.centre, (3, 1)), atol=1e-12)
    assert np.abs(members[0::2] - population.centre).max() > 0.1
