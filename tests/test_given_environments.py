"""An environment or a vector environment given to ``rlx.make`` is used as given: with one
environment the agent steps the instance itself, a vector environment is the agent's own, and
what cannot be copied faithfully is refused with one message saying what to pass instead."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("torch")

import rlx
from rlx.errors import ConfigError
from rlx.trainer import Trainer

PPO = {"n_steps": 16, "batch_size": 16, "n_epochs": 1, "device": "cpu"}
DQN = {"learning_starts": 8, "batch_size": 8, "buffer_size": 500, "device": "cpu"}


class StepCounter(gym.Wrapper):
    """Counts the steps taken on this very instance (and records no constructor arguments, so
    its spec cannot rebuild it)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        return self.env.step(action)


def runner_of(agent: Any) -> Any:
    return agent.runner if hasattr(agent, "runner") else agent.sampler.runner


@pytest.mark.parametrize(("name", "config"), [("ppo", {**PPO, "n_envs": 1}), ("dqn", DQN)])
def test_one_environment_given_is_the_one_the_agent_steps(name, config):
    env = StepCounter(gym.make("CartPole-v1"))
    agent = rlx.make(name, env, seed=0, **config)
    result = Trainer(agent, steps=48, eval_episodes=0, progress=False).fit()
    assert env.steps >= result.env_steps >= 48  # not a copy rebuilt from the spec
    assert runner_of(agent).envs.envs[0] is env


def test_a_second_runner_of_the_same_instance_steps_a_copy():
    env = gym.make("CartPole-v1")
    first = rlx.make("ppo", env, seed=0, **PPO, n_envs=1)
    second = rlx.make("ppo", env, seed=0, **PPO, n_envs=1)
    assert runner_of(first).envs.envs[0] is env
    copy = runner_of(second).envs.envs[0]
    assert copy is not env and copy.spec.id == "CartPole-v1"


def test_an_agent_trained_on_an_instance_resumes_exactly_where_it_was(tmp_path):
    run = tmp_path / "run"
    agent = rlx.make("dqn", gym.make("CartPole-v1"), seed=0, **DQN)
    Trainer(agent, run_dir=run, steps=40, eval_episodes=1, progress=False, verbose=False).fit()
    resumed = Trainer.resume(run, steps=80, progress=False, verbose=False)
    assert resumed.fit().env_steps >= 80


@pytest.mark.parametrize(
    ("make_env", "reason"),
    [
        (lambda: gym.make("CartPole-v1").unwrapped.__class__(), "has none"),
        (lambda: StepCounter(gym.make("CartPole-v1")), "RecordConstructorArgs"),
    ],
    ids=["no spec", "wrapper the spec cannot rebuild"],
)
def test_copies_that_cannot_reproduce_the_instance_are_one_clear_error(make_env, reason):
    with pytest.raises(ConfigError, match=reason) as caught:
        rlx.make("ppo", make_env(), seed=0, **PPO, n_envs=2)
    message = str(caught.value)
    assert "environment id" in message and "VectorEnv" in message and "n_envs=1" in message


def test_copies_whose_spaces_differ_from_the_instance_are_refused():
    env = gym.make("CartPole-v1")
    env.unwrapped.observation_space = gym.spaces.Box(-1.0, 1.0, (4,))  # changed after make
    env.observation_space = env.unwrapped.observation_space
    with pytest.raises(ConfigError, match="changed after it was made"):
        rlx.make("ppo", env, seed=0, **PPO, n_envs=2)


def test_a_vector_environment_given_is_the_agents_own():
    counters = [StepCounter(gym.make("CartPole-v1")) for _ in range(3)]
    vector = gym.vector.SyncVectorEnv([lambda c=c: c for c in counters])
    agent = rlx.make("ppo", vector, seed=0, **PPO)
    assert agent.config.n_envs == 3  # taken from the vector environment
    assert runner_of(agent).envs is vector
    result = Trainer(agent, steps=96, eval_episodes=1, progress=False, verbose=False).fit()
    assert all(counter.steps >= 32 for counter in counters)
    assert result.final_eval is not None and result.final_eval.episodes == 1
    vector.step(vector.action_space.sample())  # still the caller's, still open
    with pytest.raises(ConfigError, match="runner steps that one"):
        agent.env.step(0)
    vector.close()


def test_a_vector_environment_made_by_gymnasium_keeps_its_id():
    vector = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    agent = rlx.make("dqn", vector, seed=0, **DQN)
    assert agent.identity.env == "CartPole-v1" and agent.config.n_envs == 2
    assert runner_of(agent).envs is vector
    vector.close()


@pytest.mark.parametrize("mode", ["sync", "vector_entry_point"])
def test_training_on_a_make_vec_environment_evaluates_and_reloads(tmp_path, mode):
    """make_vec puts num_envs and vectorization_mode in the vector's spec: the evaluation copy
    and the recorded run must get the single environment's arguments only."""
    vector = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode=mode)
    agent = rlx.make("ppo", vector, seed=0, **PPO)
    result = rlx.Trainer(agent, steps=300, eval_episodes=2, run_dir=tmp_path / "run").fit()
    assert result.final_eval is not None and result.final_eval.episodes == 2
    loaded = rlx.load(tmp_path / "run")  # rebuilt on CartPole-v1 itself, resume state too
    assert loaded.identity.env == "CartPole-v1" and loaded.identity.env_kwargs == {}
    assert loaded.config.n_envs == 2
    vector.close()


def test_a_vector_environment_with_a_conflicting_n_envs_or_agent_is_refused():
    vector = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    with pytest.raises(ConfigError, match="n_envs = 4, but the vector environment given has 2"):
        rlx.make("ppo", vector, seed=0, **PPO, n_envs=4)
    assert rlx.make("ppo", vector, seed=0, **PPO, n_envs="2").config.n_envs == 2
    frozen = gym.vector.SyncVectorEnv([lambda: gym.make("FrozenLake-v1")] * 2)
    with pytest.raises(ConfigError, match="q-learning steps one environment"):
        rlx.make("q-learning", frozen)
    vector.close()
    frozen.close()


def test_an_instance_made_with_arguments_is_rebuilt_with_them_on_load(tmp_path):
    env = gym.make("FrozenLake-v1", is_slippery=False)
    agent = rlx.make("q-learning", env)
    assert agent.identity.env_kwargs == {"is_slippery": False}  # not the registered default
    loaded = rlx.load(rlx.save(agent, tmp_path / "lake"))
    assert loaded.env.unwrapped.spec.kwargs["is_slippery"] is False
    with pytest.raises(ConfigError, match="env_kwargs apply to an environment given by id"):
        rlx.make("q-learning", env, env_kwargs={"is_slippery": True})


@pytest.mark.parametrize("name", ["dqn", "ppo"])
def test_auto_steps_fewer_than_three_copies_synchronously_and_records_it(tmp_path, name):
    # gymnasium's CartPoleVectorEnv steps one copy 2.5 times slower than a synchronous vector
    # of one; a fresh run records what auto became, a run recorded with auto before keeps it.
    import dataclasses

    from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv

    from rlx.api import identity_of, make_from_identity

    config = DQN if name == "dqn" else {**PPO, "n_envs": 1}
    few = rlx.make(name, "CartPole-v1", seed=0, **config)
    assert few.config.vectorization == "sync"
    assert isinstance(runner_of(few).envs, gym.vector.SyncVectorEnv)
    many = rlx.make(name, "CartPole-v1", seed=0, **{**config, "n_envs": 3})
    assert many.config.vectorization == "auto"
    assert isinstance(runner_of(many).envs.unwrapped, CartPoleVectorEnv)
    recorded = identity_of(few)
    hyperparameters = {**recorded.hyperparameters, "vectorization": "auto"}
    recorded = dataclasses.replace(recorded, hyperparameters=hyperparameters)
    rebuilt = make_from_identity(recorded)
    assert rebuilt.config.vectorization == "auto"
    assert isinstance(runner_of(rebuilt).envs.unwrapped, CartPoleVectorEnv)
