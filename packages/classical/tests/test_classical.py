"""rlx-classical: the three tabular agents learn, are reproducible and resume exactly."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.spaces import Discrete

import rlx
from rlx.checkpoint import load_checkpoint, save_checkpoint
from rlx.errors import ConfigError, SpaceError, UnknownNameError
from rlx.testing import check_agent, same_state, whole_state
from rlx_classical.tabular import epsilon_greedy

AGENTS = ["q-learning", "sarsa", "sarsa-lambda"]


def train(agent, steps: int, **trainer_settings):
    return rlx.Trainer(agent, steps=steps, eval_every=0, progress=False, **trainer_settings).fit()


def play(agent, episodes: int) -> None:
    for _ in range(episodes):
        agent.step()


# -- learning ------------------------------------------------------------------------------


def test_q_learning_solves_slippery_frozen_lake():
    # The optimal policy reaches the goal in about 74% of episodes within the 100-step limit.
    settings = dict(learning_rate=0.05, gamma=0.99, epsilon_end=0.01, epsilon_decay_steps=50_000)
    agent = rlx.make("q-learning", "FrozenLake-v1", seed=0, **settings)
    train(agent, 300_000)
    result = rlx.evaluate(agent, gymnasium.make("FrozenLake-v1"), episodes=1000, seed=1)
    assert result.mean_return >= 0.70


@pytest.mark.parametrize(
    "name, minimum", [("q-learning", 7.0), ("sarsa", 6.5), ("sarsa-lambda", 6.5)]
)
def test_agent_learns_taxi_with_its_defaults(name, minimum):
    # Taxi-v3 is deprecated in gymnasium 1.x; v4 has the same dynamics by default.
    agent = rlx.make(name, "Taxi-v4", seed=0)
    train(agent, 100_000)
    result = rlx.evaluate(agent, gymnasium.make("Taxi-v4"), episodes=200, seed=1)
    assert result.mean_return >= minimum


# -- update rules ------------------------------------------------------------------------------


class OneStepEnv(gymnasium.Env):
    """From state 0 any action leads to state 1 with reward 0, ending the episode one way."""

    observation_space = Discrete(2)
    action_space = Discrete(2)

    def __init__(self, ending: str) -> None:
        self.ending = ending

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        return 1, 0.0, self.ending == "terminated", self.ending == "truncated", {}


@pytest.mark.parametrize("name", AGENTS)
@pytest.mark.parametrize("ending, expected", [("terminated", 0.0), ("truncated", 0.5)])
def test_terminal_states_are_worth_zero_and_time_limits_bootstrap(name, ending, expected):
    # With alpha = 1 the updated entry is the target: 0 + gamma * Q(S', .) = 0.5 * 1 unless
    # S' is terminal.
    settings = dict(learning_rate=1.0, gamma=0.5, initial_q=1.0, epsilon_start=0.0, epsilon_end=0.0)
    agent = rlx.make(name, OneStepEnv(ending), seed=0, **settings)
    agent.step()
    updated = agent.q_table[0]
    assert sorted(updated.tolist()) == [expected, 1.0]


def test_sarsa_lambda_with_lambda_zero_is_sarsa():
    sarsa = rlx.make("sarsa", "Taxi-v4", seed=3, learning_rate=0.1)
    sarsa_zero = rlx.make("sarsa-lambda", "Taxi-v4", seed=3, learning_rate=0.1, lam=0.0)
    play(sarsa, 30)
    play(sarsa_zero, 30)
    assert np.array_equal(sarsa.q_table, sarsa_zero.q_table)


def test_accumulating_and_replacing_traces_differ():
    tables = []
    for traces in ("replacing", "accumulating"):
        agent = rlx.make("sarsa-lambda", "Taxi-v4", seed=3, lam=0.9, traces=traces)
        play(agent, 5)
        tables.append(agent.q_table)
    assert not np.array_equal(*tables)


def test_epsilon_greedy_breaks_ties_at_random_and_explores_uniformly():
    picks = [0.0, 0.3, 0.6, 0.9]
    assert [epsilon_greedy([0.0] * 4, 0.0, 0.5, p) for p in picks] == [0, 1, 2, 3]
    assert [epsilon_greedy([0.0, 2.0, 1.0, 2.0], 0.0, 0.5, p) for p in picks] == [1, 1, 3, 3]
    assert [epsilon_greedy([0.0, 2.0, 1.0], 0.0, 0.5, p) for p in picks] == [1, 1, 1, 1]
    assert [epsilon_greedy([0.0, 2.0, 1.0, 2.0], 0.5, 0.4, p) for p in picks] == [0, 1, 2, 3]


class RecordResets(gymnasium.Wrapper):
    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.seeds: list[int | None] = []

    def reset(self, *, seed=None, options=None):
        self.seeds.append(seed)
        return super().reset(seed=seed, options=options)


@pytest.mark.parametrize("name", AGENTS)
def test_only_the_first_episode_reseeds_the_environment(name):
    env = RecordResets(gymnasium.make("FrozenLake-v1"))
    agent = rlx.make(name, env, seed=11)
    play(agent, 3)
    assert env.seeds == [11, None, None]


def test_act_is_greedy_by_default_and_never_draws_from_the_training_rng():
    agent = rlx.make("q-learning", "FrozenLake-v1", seed=0)
    agent.q[3] = [0.5, 0.9, 0.9, 0.1]
    training_rng = agent.resume_state().meta["rng"]
    assert [agent.act(3) for _ in range(5)] == [1] * 5
    # epsilon is still 1 before training: exploratory actions cover the action space.
    assert {agent.act(3, deterministic=False) for _ in range(100)} == {0, 1, 2, 3}
    assert agent.resume_state().meta["rng"] == training_rng


# -- reproducibility and resume ------------------------------------------------------------


@pytest.mark.parametrize("name", AGENTS)
def test_same_seed_same_table_and_other_seed_other_table(name):
    first, twin, other = (rlx.make(name, "Taxi-v4", seed=s) for s in (7, 7, 8))
    for agent in (first, twin, other):
        train(agent, 5_000)
    assert np.array_equal(first.q_table, twin.q_table)
    assert not np.array_equal(first.q_table, other.q_table)


@pytest.mark.parametrize("name", AGENTS)
def test_training_resumed_from_a_checkpoint_matches_an_uninterrupted_run(name, tmp_path):
    uninterrupted = rlx.make(name, "FrozenLake-v1", seed=5)
    play(uninterrupted, 200)
    save_checkpoint(
        tmp_path / "checkpoint", uninterrupted.policy_state(), uninterrupted.resume_state()
    )
    # Evaluating in between must not change what training does next.
    rlx.evaluate(uninterrupted, gymnasium.make("FrozenLake-v1"), episodes=5, seed=0)
    rlx.evaluate(uninterrupted, gymnasium.make("FrozenLake-v1"), episodes=5, deterministic=False)
    play(uninterrupted, 200)

    resumed = rlx.make(name, "FrozenLake-v1", seed=5)
    checkpoint = load_checkpoint(tmp_path / "checkpoint")
    resumed.load_policy_state(checkpoint.policy)
    resumed.load_resume_state(checkpoint.resume)
    play(resumed, 200)

    assert resumed.env_steps == uninterrupted.env_steps
    assert np.array_equal(resumed.q_table, uninterrupted.q_table)
    assert same_state(whole_state(resumed), whole_state(uninterrupted))


@pytest.mark.parametrize("name", AGENTS)
def test_trainer_resume_matches_an_uninterrupted_run(name, tmp_path):
    settings = dict(checkpoint_every=2_000, tensorboard=False)
    train(rlx.make(name, "Taxi-v4", seed=2), 10_000, run_dir=tmp_path / "full", **settings)
    train(rlx.make(name, "Taxi-v4", seed=2), 4_000, run_dir=tmp_path / "run", **settings)
    rlx.Trainer.resume(tmp_path / "run", steps=10_000).fit()

    full = load_checkpoint(tmp_path / "full" / "final")
    resumed = load_checkpoint(tmp_path / "run" / "final")
    assert resumed.document["trainer"]["env_steps"] == full.document["trainer"]["env_steps"]
    assert np.array_equal(resumed.policy.arrays["q"], full.policy.arrays["q"])
    assert same_state(resumed.policy, full.policy)
    assert same_state(resumed.resume, full.resume)


def test_a_checkpoint_for_another_environment_is_refused():
    frozen_lake = rlx.make("q-learning", "FrozenLake-v1", seed=0)
    taxi = rlx.make("q-learning", "Taxi-v4", seed=0)
    with pytest.raises(rlx.errors.CheckpointError, match="500 states and 6 actions"):
        taxi.load_policy_state(frozen_lake.policy_state())


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"learning_rate": 2}, "learning_rate must be in"),
        ({"learning_rate": 0}, "learning_rate must be in"),
        ({"gamma": -1}, "gamma must be in"),
        ({"epsilon_decay_steps": -5}, "epsilon_decay_steps must be in"),
        ({"epsilon_start": 0.1, "epsilon_end": 0.5}, "epsilon_end"),
        ({"learning_rate": "fast"}, "learning_rate expects a number"),
    ],
)
@pytest.mark.parametrize("name", AGENTS)
def test_bad_hyperparameters_are_refused(name, settings, message):
    with pytest.raises(ConfigError, match=message):
        rlx.make(name, "FrozenLake-v1", **settings)


@pytest.mark.parametrize("settings", [{"lam": 1.5}, {"traces": "dutch"}])
def test_bad_trace_settings_are_refused(settings):
    with pytest.raises(ConfigError):
        rlx.make("sarsa-lambda", "FrozenLake-v1", **settings)


def test_an_unknown_hyperparameter_is_named_with_a_suggestion():
    with pytest.raises(UnknownNameError, match=r"'learning_rat'.*Did you mean: learning_rate"):
        rlx.make("q-learning", "FrozenLake-v1", learning_rat=0.1)
    with pytest.raises(UnknownNameError, match="'lam'"):
        rlx.make("sarsa", "FrozenLake-v1", lam=0.5)


@pytest.mark.parametrize("name", AGENTS)
def test_a_box_observation_space_is_refused_naming_discrete(name):
    with pytest.raises(SpaceError, match="Discrete"):
        rlx.make(name, "CartPole-v1")


def test_direct_construction_also_checks_the_spaces():
    from rlx_classical import QLearning

    with pytest.raises(SpaceError, match="Discrete observation space"):
        QLearning(gymnasium.make("CartPole-v1"), QLearning.Config(), seed=0)
    shifted = gymnasium.make("FrozenLake-v1")
    shifted.observation_space = Discrete(16, start=1)
    with pytest.raises(SpaceError, match="starting at 0"):
        QLearning(shifted, QLearning.Config(), seed=0)


# -- the plugin --------------------------------------------------------------------------------


def test_the_plugin_registers_three_classical_agents_for_discrete_spaces():
    specs = {name: rlx.registry.agents[name] for name in AGENTS}
    for spec in specs.values():
        assert spec.family == "classical"
        assert spec.distribution == "rlx-classical"
        assert spec.observation_spaces == spec.action_spaces == ("Discrete",)


@pytest.mark.parametrize(
    "name, settings",
    [("q-learning", {}), ("sarsa", {}), ("sarsa-lambda", {"traces": "accumulating"})],
)
def test_agent_passes_the_rlx_contract_check(name, settings):
    check_agent(name, "Taxi-v4", seed=4, **settings)
