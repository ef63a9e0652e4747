"""Off-policy agents on Discrete and Dict observations, and hindsight experience replay."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import rlx
from rlx.errors import ConfigError, SpaceError
from rlx.nn.layers import CombinedExtractor
from rlx.testing import check_agent
from rlx.trainer import Trainer
from rlx.tuned import hyperparameters

SMALL = {"learning_starts": 64, "batch_size": 32, "hidden_sizes": (16,)}


def fit(agent, steps, **settings):
    settings = {"eval_every": steps // 10, "eval_episodes": 10, "progress": False, **settings}
    return Trainer(agent, steps=steps, verbose=False, **settings).fit()


def test_dqn_walks_the_shortest_path_on_frozen_lake():
    # One-hot states: 16 inputs. The optimal path to the goal takes 6 steps, return 1.
    agent = rlx.make(
        "dqn",
        "FrozenLake-v1",
        seed=0,
        env_kwargs={"is_slippery": False},
        learning_starts=1000,
        batch_size=64,
        buffer_size=20_000,
        exploration_fraction=0.5,
        target_update_interval=500,
        hidden_sizes=(64,),
        learning_rate=1e-3,
        train_freq=1,
    )
    result = fit(agent, 20_000, target_return=1.0)
    assert result.best_return == 1.0, result
    assert set(result.final_eval.lengths) == {6}, result.final_eval


def test_her_solves_bit_flipping_where_dqn_alone_fails():
    # Andrychowicz et al. (2017), section 3.1: 15 bits, reward -1 until the goal is reached.
    # A random policy practically never reaches a goal, so DQN has no signal; relabelled
    # goals give it one. Returns are -(flips - 1) on success and -15 on failure.
    settings = hyperparameters("dqn", "rlx/BitFlipping-v0")
    solved = {}
    for goals in (0, 4):
        settings["her_goals"] = goals
        agent = rlx.make("dqn", "rlx/BitFlipping-v0", seed=0, **settings)
        result = fit(agent, 10_000, eval_episodes=20, eval_every=10_000)
        solved[goals] = sum(r > -15 for r in result.final_eval.returns) / 20
    assert solved[0] <= 0.2 and solved[4] >= 0.9, solved


def test_sac_learns_to_reach_goals_from_dict_observations():
    # Minus the distance to the goal each step: a random policy scores -55 on average over
    # 50 steps, heading straight for the goal about -7.
    settings = hyperparameters("sac", "rlx/PointGoal-v0")
    agent = rlx.make("sac", "rlx/PointGoal-v0", seed=0, **settings)
    result = fit(agent, 4000)
    assert result.best_return is not None and result.best_return > -15, result


def test_dqn_reads_the_image_of_dict_observations_with_a_cnn():
    # The answer is only in the image (bright or dark); chance is 0.5.
    agent = rlx.make(
        "dqn",
        "rlx/LightOrDark-v0",
        seed=0,
        learning_starts=200,
        batch_size=32,
        hidden_sizes=(32,),
        learning_rate=1e-3,
        target_update_interval=100,
        exploration_fraction=0.3,
    )
    assert isinstance(agent.q_network.body[0], CombinedExtractor)
    result = fit(agent, 2000, eval_episodes=50, eval_every=0)
    assert np.mean(result.final_eval.returns) >= 0.95, result.final_eval


@pytest.mark.parametrize(
    "name, env, settings",
    [
        ("dqn", "FrozenLake-v1", {}),
        ("dqn", "Taxi-v4", {}),
        ("dqn", "rlx/BitFlipping-v0", {"her_goals": 4}),
        ("sac", "rlx/PointGoal-v0", {"her_goals": 2}),
        ("td3", "rlx/PointGoal-v0", {}),
        ("dqn", "rlx/LightOrDark-v0", {}),
    ],
)
def test_agents_on_encoded_observations_resume_exactly(name, env, settings):
    check_agent(name, env, **SMALL, **settings)


def test_hindsight_replay_relabels_with_goals_achieved_later_in_the_episode():
    agent = rlx.make("dqn", "rlx/BitFlipping-v0", seed=0, her_goals=4, **SMALL)
    fit(agent, 300, eval_every=0)
    buffer, coder = agent.buffer, agent.coder
    batch = buffer.sample(256, np.random.default_rng(0), 0.99)
    achieved = coder.unpack(batch["next_observations"], "achieved_goal")
    desired = coder.unpack(batch["next_observations"], "desired_goal")
    recomputed = agent.env.unwrapped.compute_reward(achieved, desired, {})
    np.testing.assert_array_equal(batch["rewards"], recomputed)
    assert (batch["rewards"] == 0).mean() > 0.2  # relabelled goals are often reached
    # The goal of the observation and of the next observation are the same one.
    np.testing.assert_array_equal(coder.unpack(batch["observations"], "desired_goal"), desired)


def test_her_needs_a_goal_conditioned_task():
    with pytest.raises(ConfigError, match="achieved_goal"):
        rlx.make("dqn", "FrozenLake-v1", her_goals=4)
    with pytest.raises(ConfigError, match="n_step"):
        rlx.make("dqn", "rlx/BitFlipping-v0", her_goals=4, n_step=3)


def test_unsupported_spaces_and_wrong_observations_get_one_message():
    class TextEnv(gym.Env):
        observation_space = gym.spaces.Text(5)
        action_space = gym.spaces.Discrete(2)

    with pytest.raises(SpaceError, match="Text") as error:
        rlx.make("dqn", TextEnv())
    assert "Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple" in str(error.value)

    agent = rlx.make("dqn", "rlx/BitFlipping-v0", **SMALL)
    with pytest.raises(SpaceError, match="desired_goal"):
        agent.act(
            {
                "observation": np.zeros(15),
                "achieved_goal": np.zeros(15),
                "desired_goal": np.zeros(3),
            }
        )

    class Broken(gym.Wrapper):
        def step(self, action):
            observation, *rest = self.env.step(action)
            return {**observation, "desired_goal": observation["desired_goal"][:3]}, *rest

    gym.register("rlx-test/BrokenBits-v0", lambda: Broken(gym.make("rlx/BitFlipping-v0")))
    agent = rlx.make("dqn", "rlx-test/BrokenBits-v0", **SMALL)
    message = (
        r"does not fit its observation space Dict.*"
        r"key 'desired_goal' has shape \(3,\), the space says \(15,\)"
    )
    with pytest.raises(SpaceError, match=message):
        agent.step()
    # What the vector environment passes on is checked leaf by leaf, naming the key.
    with pytest.raises(SpaceError, match=r"key 'desired_goal' has shape \(3,\).*says \(15,\)"):
        agent.coder.pack(
            {
                "observation": np.zeros((1, 15)),
                "achieved_goal": np.zeros((1, 15)),
                "desired_goal": np.zeros((1, 3)),
            }
        )


def test_users_encode_dict_keys_with_their_own_modules(tmp_path, monkeypatch):
    (tmp_path / "my_encoders.py").write_text(
        "from torch import nn\n"
        "def noise(space):\n"
        "    return nn.Sequential(nn.Linear(space.shape[0], 4), nn.Tanh())\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = {**SMALL, "encoders": {"noise": "my_encoders:noise"}}
    agent = rlx.make("dqn", "rlx/LightOrDark-v0", seed=0, **settings)
    extractor = agent.q_network.body[0]
    assert isinstance(extractor, CombinedExtractor) and extractor.features_dim == 512 + 4
    fit(agent, 300, eval_every=0)
    path = rlx.save(agent, tmp_path / "saved")
    with pytest.raises(rlx.errors.UntrustedCodeError, match="encoders"):
        rlx.load(path)
    loaded = rlx.load(path, trust_code=True)
    observation, _ = gym.make("rlx/LightOrDark-v0").reset(seed=3)
    assert loaded.act(observation) == agent.act(observation)
    with pytest.raises(ConfigError, match=r"encoders name \['nois'\]"):
        rlx.make("dqn", "rlx/LightOrDark-v0", encoders={"nois": "my_encoders:noise"})
    with pytest.raises(ConfigError, match="Dict or Tuple observations"):
        rlx.make("dqn", "CartPole-v1", encoders={"x": "my_encoders:noise"})
