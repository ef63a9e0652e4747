"""The Python API users expect: batched act in every family, vector-env evaluation, agent.save
and rlx.load without the environment."""

from __future__ import annotations

import json
import sys
import warnings

import gymnasium
import numpy as np
import pytest

import rlx
from rlx.checkpoint import STATE_FILE, json_checksum
from rlx.errors import CheckpointError, ConfigError, EnvironmentNeededError, SpaceError

# One agent of every family (and the core's baseline), on an environment it handles.
AGENTS = [
    ("random", "CartPole-v1", {}),
    ("q-learning", "FrozenLake-v1", {}),
    ("thompson", "rlx/BernoulliMAB-v0", {}),
    ("ppo", "CartPole-v1", {"n_envs": 2, "n_steps": 32, "batch_size": 32}),
    ("dqn", "CartPole-v1", {"learning_starts": 64, "batch_size": 32}),
    ("sac", "Pendulum-v1", {"learning_starts": 64, "batch_size": 32}),
    ("openai-es", "CartPole-v1", {"population_size": 4}),
]
IDS = [name for name, _, _ in AGENTS]


def trained(name, env, config, iterations=2):
    agent = rlx.make(name, env, seed=0, **config)
    for _ in range(iterations):
        agent.step()
    return agent


def observations(env_id, count=6):
    env = rlx.make_env(env_id)
    env.action_space.seed(0)
    observation, _ = env.reset(seed=0)
    found = [observation]
    while len(found) < count:
        observation, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            observation, _ = env.reset()
        found.append(observation)
    return found


@pytest.mark.parametrize(("name", "env", "config"), AGENTS, ids=IDS)
def test_act_takes_one_observation_or_a_batch_in_every_family(name, env, config):
    agent = trained(name, env, config)
    found = observations(env)
    batch = np.stack([np.asarray(o) for o in found])
    seeds = getattr(agent, "seed_evaluation", lambda seed: None)
    seeds(0)
    actions = agent.act(batch)
    seeds(0)
    singles = [agent.act(o) for o in found]
    assert np.shape(actions)[0] == len(found)
    for row, single in zip(actions, singles, strict=True):
        assert agent.env.action_space.contains(
            np.asarray(single, dtype=agent.env.action_space.dtype)
        )
        np.testing.assert_allclose(row, single, rtol=1e-5, atol=1e-6)
    if isinstance(agent.env.action_space, gymnasium.spaces.Discrete):
        assert isinstance(singles[0], int) and actions.dtype == np.int64


@pytest.mark.parametrize(("name", "env", "config"), AGENTS, ids=IDS)
def test_an_observation_of_a_wrong_shape_is_one_space_error_naming_both_shapes(name, env, config):
    agent = rlx.make(name, env, seed=0, **config)
    shape = agent.env.observation_space.shape
    wrong = np.zeros((*shape, 3, 2), dtype=agent.env.observation_space.dtype)
    with pytest.raises(SpaceError) as error:
        agent.act(wrong)
    message = str(error.value)
    assert str(shape) in message and str(wrong.shape) in message and "batch" in message


def test_a_tabular_state_outside_the_space_is_a_space_error():
    agent = rlx.make("q-learning", "FrozenLake-v1")
    with pytest.raises(SpaceError, match="outside the observation space Discrete"):
        agent.act(16)
    with pytest.raises(SpaceError, match="outside"):
        agent.act(np.array([0, -1]))


def test_evaluate_on_a_vector_env_equals_the_single_env_episode_by_episode():
    agent = trained("q-learning", "FrozenLake-v1", {"learning_rate": 0.5}, iterations=300)
    single = rlx.evaluate(agent, rlx.make_env("FrozenLake-v1"), episodes=30, seed=4)
    vector = gymnasium.make_vec("FrozenLake-v1", num_envs=4, vectorization_mode="sync")
    batched = rlx.evaluate(agent, vector, episodes=30, seed=4)
    assert batched.returns == single.returns and batched.lengths == single.lengths


def test_evaluate_on_a_native_vector_env_matches_the_single_env_in_mean():
    agent = trained("ppo", "CartPole-v1", AGENTS[3][2], iterations=1)
    single = rlx.evaluate(agent, rlx.make_env("CartPole-v1"), episodes=40, seed=1)
    vector = gymnasium.make_vec("CartPole-v1", num_envs=8)  # gymnasium's own: one seed for all
    batched = rlx.evaluate(agent, vector, episodes=40, seed=1)
    assert batched.episodes == 40 and max(batched.lengths) <= 500
    assert abs(batched.mean_return - single.mean_return) <= 0.25 * single.mean_return + 5
    assert rlx.evaluate(agent, vector, episodes=40, seed=1) == batched  # deterministic


def test_evaluate_shows_no_progress_bar_when_stderr_is_not_a_terminal(capsys):
    agent = rlx.make("random", "CartPole-v1")
    result = rlx.evaluate(agent, rlx.make_env("CartPole-v1"), episodes=3, progress=True)
    assert result.episodes == 3 and capsys.readouterr().err == ""


@pytest.mark.parametrize(("name", "env", "config"), AGENTS, ids=IDS)
def test_save_then_load_without_the_environment_acts_like_the_original(name, env, config, tmp_path):
    agent = trained(name, env, config)
    path = agent.save(tmp_path / "model")
    loaded = rlx.load(path, make_env=False)
    assert loaded.identity == agent.identity
    batch = np.stack([np.asarray(o) for o in observations(env)])
    for who in (agent, loaded):
        getattr(who, "seed_evaluation", lambda seed: None)(0)
    np.testing.assert_allclose(loaded.act(batch), agent.act(batch), rtol=1e-6)
    again = rlx.load(path)  # with its environment
    getattr(again, "seed_evaluation", lambda seed: None)(0)
    getattr(agent, "seed_evaluation", lambda seed: None)(0)
    np.testing.assert_allclose(again.act(batch), agent.act(batch), rtol=1e-6)


def test_an_agent_loaded_without_its_environment_refuses_to_step_it(tmp_path):
    path = rlx.save(rlx.make("q-learning", "FrozenLake-v1"), tmp_path / "model")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the stand-in's spaces are no arguments to record
        loaded = rlx.load(path, make_env=False)
    assert loaded.act(5) in range(4)
    with pytest.raises(EnvironmentNeededError, match="make_env=True"):
        loaded.step()
    result = rlx.evaluate(loaded, rlx.make_env("FrozenLake-v1"), episodes=2)
    assert result.episodes == 2


def test_an_agent_whose_constructor_steps_its_environment_needs_it(tmp_path):
    agent = rlx.make(
        "openai-es",
        "CartPole-v1",
        population_size=4,
        virtual_batch_norm=True,
        reference_batch_size=8,
    )
    path = agent.save(tmp_path / "model")
    with pytest.raises(ConfigError, match="cannot be built without its environment CartPole-v1"):
        rlx.load(path, make_env=False)
    assert rlx.load(path).act(np.zeros(4, np.float32)) in (0, 1)


def test_save_refuses_to_replace_what_is_not_a_checkpoint(tmp_path):
    agent = rlx.make("random", "CartPole-v1")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match="not an rlx checkpoint"):
        agent.save(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    agent.save(tmp_path / "model")
    agent.save(tmp_path / "model")  # a checkpoint is replaced


def edit_spaces(path, edit):
    state = json.loads((path / STATE_FILE).read_text())
    state.pop("checksum")
    edit(state["run"]["spaces"])
    state["checksum"] = json_checksum(state)
    (path / STATE_FILE).write_text(json.dumps(state))


@pytest.mark.parametrize(
    "edit",
    [
        lambda spaces: spaces.update(observation={"type": "json:loads"}),
        lambda spaces: spaces.update(observation={"type": "Box", "shape": "x"}),
        lambda spaces: spaces["observation"].update(dtype="object"),
        lambda spaces: spaces["observation"].update(low=[1, 2], shape=[10**10]),
        lambda spaces: spaces.update(action={"type": "Discrete", "n": -3}),
        lambda spaces: spaces.update(action=[1, 2]),
    ],
    ids=["code", "shape", "dtype", "huge", "negative-n", "not-an-object"],
)
@pytest.mark.parametrize("make_env", [False, True])
def test_a_checkpoint_with_nonsense_spaces_is_one_checkpoint_error_and_imports_nothing(
    tmp_path, edit, make_env
):
    path = rlx.make("ppo", "CartPole-v1", n_envs=1, n_steps=64, batch_size=64).save(tmp_path / "m")
    edit_spaces(path, edit)
    modules = set(sys.modules)
    with pytest.raises(CheckpointError, match="spaces"):
        rlx.load(path, make_env=make_env)
    assert not {name for name in set(sys.modules) - modules if "json" in name}


def test_edited_but_valid_spaces_are_refused_when_the_environment_differs(tmp_path):
    path = rlx.make("q-learning", "FrozenLake-v1").save(tmp_path / "m")
    edit_spaces(path, lambda spaces: spaces["observation"].update(n=20))
    with pytest.raises(CheckpointError, match="records the observation space Discrete\\(20\\)"):
        rlx.load(path)
    with pytest.raises(CheckpointError, match="Q table"):
        rlx.load(path, make_env=False)  # the saved table does not fit 20 states


def test_a_run_directory_loads_without_its_environment(tmp_path):
    agent = rlx.make("q-learning", "FrozenLake-v1")
    rlx.Trainer(agent, steps=2_000, run_dir=tmp_path / "run", progress=False, plot=False).fit()
    loaded = rlx.load(tmp_path / "run" / "best", make_env=False)
    assert loaded.act(np.arange(16)).tolist() == agent.act(np.arange(16)).tolist()
