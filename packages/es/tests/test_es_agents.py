"""The gym agents: contract, batched evaluation, backends, behaviour and bad input."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import rlx
from rlx.errors import ConfigError, RlxError
from rlx.testing import check_agent
from rlx_es.core import Population
from rlx_es.envs import BehaviourWrapper
from rlx_es.evaluation import Evaluator, member_seeds
from rlx_es.openai_es import OpenAIESAgent, OpenAIESConfig

SMALL = {"population_size": 8, "hidden_sizes": (8,), "block_size": 4}


@pytest.mark.parametrize("name", ["openai-es", "cma-es", "cem"])
def test_agents_keep_the_contract_with_box_actions(name):
    check_agent(name, "Pendulum-v1", seed=2, iterations=2, **SMALL)


def test_novelty_agent_keeps_the_contract_on_the_maze_with_its_info_behaviour():
    check_agent(
        "nsra-es", "rlx/DeceptiveMaze-v0", seed=3, iterations=2, behaviour_source="info", **SMALL
    )


def test_a_sync_block_plays_each_member_like_a_lone_rollout_with_its_own_seed():
    env = gymnasium.make("CartPole-v1")
    agent = OpenAIESAgent(
        env,
        OpenAIESConfig(
            population_size=6, hidden_sizes=(4,), sigma=0.5, vectorization="sync", block_size=6
        ),
        seed=0,
    )
    population = Population(agent.strategy.mean.copy(), 0.5, seed=11, size=6, mirrored=True)
    evaluator = Evaluator(agent.settings, 0, 6)
    episodes = evaluator.evaluate(population.to_message(), np.array([99]))
    assert len(set(episodes.lengths.tolist())) > 1  # episodes of different lengths were masked
    for i, seed in enumerate(member_seeds(99, 6)):
        layers = agent.policy.bind(population.parameters(np.array([i])))
        lone = gymnasium.make("CartPole-v1")
        observation, _ = lone.reset(seed=seed)
        total, length, done = 0.0, 0, False
        while not done:
            action = int(agent.policy.actions(layers, np.asarray(observation)[None])[0])
            observation, reward, terminated, truncated, _ = lone.step(action)
            total, length, done = total + reward, length + 1, terminated or truncated
        assert (episodes.returns[i], episodes.lengths[i]) == (total, length)


def test_process_backend_matches_the_local_backend_exactly():
    runs = {}
    for backend in ("local", "process"):
        agent = rlx.make(
            "openai-es",
            env="CartPole-v1",
            seed=5,
            backend=backend,
            workers=2,
            population_size=24,
            block_size=8,
            hidden_sizes=(8,),
        )
        try:
            returns = [agent.step().episode_returns for _ in range(3)]
        finally:
            agent.close()
        runs[backend] = (returns, agent.strategy.mean.copy())
    assert runs["local"][0] == runs["process"][0]
    np.testing.assert_array_equal(runs["local"][1], runs["process"][1])


def test_an_odd_population_is_refused_for_mirrored_sampling():
    with pytest.raises(ConfigError, match="even for mirrored"):
        rlx.make("openai-es", env="CartPole-v1", population_size=255)
    agent = rlx.make(
        "openai-es", env="CartPole-v1", population_size=5, mirrored=False, hidden_sizes=(4,)
    )
    assert len(agent.step().episode_returns) == 5


def test_a_population_not_divisible_across_workers_is_split_unevenly():
    agent = rlx.make(
        "cem",
        env="CartPole-v1",
        population_size=10,
        block_size=3,
        backend="process",
        workers=3,
        hidden_sizes=(4,),
    )
    try:
        # blocks of 3, 3, 3 and 1 members shared as whole blocks by three workers
        assert [count for _, count, _, _ in agent.backend.shards] == [3, 6, 1]
        assert len(agent.step().episode_returns) == 10
    finally:
        agent.close()


def test_a_worker_process_that_dies_is_one_training_error_naming_it():
    import os
    import signal

    from rlx.errors import TrainingError

    agent = rlx.make(
        "cem", env="CartPole-v1", population_size=4, backend="process", workers=2,
        hidden_sizes=(4,),
    )  # fmt: skip
    try:
        agent.step()
        victim = agent.backend.processes[1]
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(timeout=10)
        with pytest.raises(TrainingError, match=r"worker process 1 .* died .* signal 9"):
            agent.step()
        assert agent.backend.processes == []  # the other worker was stopped too
    finally:
        agent.close()


def test_a_missing_behaviour_names_every_way_to_provide_one():
    agent = rlx.make("ns-es", env="CartPole-v1", behaviour_source="info", **SMALL)
    with pytest.raises(RlxError) as error:
        agent.step()
    message = str(error.value)
    for option in (
        "info['bc']",
        "behaviour_key",
        "BehaviourWrapper",
        "behaviour=fn",
        "behaviour_source=final_observation",
    ):
        assert option in message


def _pole_angle(observation, info):
    return np.asarray(observation)[2:3]


def test_behaviour_from_a_wrapper_or_a_callable_reaches_the_archive():
    wrapped = BehaviourWrapper(gymnasium.make("CartPole-v1"), _pole_angle)
    assert wrapped.spec.additional_wrappers  # rebuilt from the spec, wrapper included
    from rlx_es.novelty import NSES, NoveltyConfig

    config = NoveltyConfig(behaviour_source="info", **SMALL)
    by_wrapper = NSES(wrapped, config, seed=0)
    by_callable = NSES(gymnasium.make("CartPole-v1"), config, seed=0, behaviour=_pole_angle)
    by_wrapper.step()
    by_callable.step()
    assert by_wrapper.archive.shape == (4, 1)  # three centres, then the updated one
    np.testing.assert_array_equal(by_wrapper.archive, by_callable.archive)


def test_vectorization_vector_is_refused_for_an_environment_without_one():
    with pytest.raises(RlxError, match="vector_entry_point"):
        rlx.make("openai-es", env="Pendulum-v1", vectorization="vector")


def test_an_unreachable_ray_address_fails_fast_with_a_clear_message(monkeypatch):
    ray = pytest.importorskip("ray")
    agent = rlx.make("openai-es", env="CartPole-v1", backend="ray", address="127.0.0.1:1", **SMALL)
    # Refused before ray.init, which would wait minutes (checked this way rather than by the
    # time taken, which a busy machine stretches).
    init = []
    monkeypatch.setattr(ray, "init", lambda *args, **kwargs: init.append(kwargs))
    with pytest.raises(RlxError, match=r"cannot reach a Ray cluster at 127\.0\.0\.1:1"):
        agent.step()
    assert init == []


def test_act_returns_valid_actions_and_tracks_the_best_member():
    agent = rlx.make("openai-es", env="Pendulum-v1", **SMALL)
    iteration = agent.step()
    action = agent.act(np.zeros(3, dtype=np.float32))
    assert action.dtype == np.float32 and agent.env.action_space.contains(action)
    assert agent.best_return == max(iteration.episode_returns)
    assert iteration.env_steps == 8 * 200
