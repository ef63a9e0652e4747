"""On-policy agents on Discrete and Dict observations."""

from __future__ import annotations

import pytest

import rlx
from rlx.errors import ConfigError
from rlx.nn.layers import CombinedExtractor
from rlx.testing import check_agent
from rlx.trainer import Trainer
from rlx.tuned import hyperparameters

SMALL = {"n_steps": 32, "batch_size": 16, "hidden_sizes": (16,)}


def test_ppo_learns_to_reach_goals_from_dict_observations():
    # Minus the distance to the goal each step: random actions score -55 on average over
    # 50 steps, heading straight for the goal about -7.
    settings = hyperparameters("ppo", "rlx/PointGoal-v0")
    agent = rlx.make("ppo", "rlx/PointGoal-v0", seed=0, **settings)
    result = Trainer(
        agent, steps=30_000, eval_every=5_000, eval_episodes=10, progress=False, verbose=False
    ).fit()
    assert result.best_return is not None and result.best_return > -10, result


def test_ppo_walks_the_shortest_path_on_frozen_lake():
    agent = rlx.make("ppo", "FrozenLake-v1", seed=0, env_kwargs={"is_slippery": False})
    result = Trainer(
        agent, steps=30_000, eval_every=2_048, target_return=1.0, progress=False, verbose=False
    ).fit()
    assert result.best_return == 1.0 and set(result.final_eval.lengths) == {6}, result


def test_ppo_reads_the_image_of_dict_observations_with_a_cnn():
    # The answer is only in the image (bright or dark); chance is 0.5.
    agent = rlx.make(
        "ppo",
        "rlx/LightOrDark-v0",
        seed=0,
        n_steps=256,
        batch_size=64,
        hidden_sizes=(32,),
        learning_rate=1e-3,
    )
    assert isinstance(agent.policy.actor_body[0], CombinedExtractor)
    result = Trainer(
        agent, steps=2048, eval_every=0, eval_episodes=50, progress=False, verbose=False
    ).fit()
    assert sum(result.final_eval.returns) >= 48, result.final_eval


@pytest.mark.parametrize(
    "name, env",
    [
        ("ppo", "Taxi-v4"),
        ("a2c", "rlx/BitFlipping-v0"),
        ("ppo", "rlx/PointGoal-v0"),
        ("ppo", "rlx/LightOrDark-v0"),
    ],
)
def test_agents_on_encoded_observations_resume_exactly(name, env):
    settings = {"n_steps": 32, "hidden_sizes": (16,)} if name == "a2c" else SMALL
    check_agent(name, env, **settings)


def test_observation_normalisation_is_for_box_observations():
    with pytest.raises(ConfigError, match="normalize_observations"):
        rlx.make("ppo", "Taxi-v4", normalize_observations=True)


def test_users_encode_dict_keys_with_their_own_modules(tmp_path, monkeypatch):
    (tmp_path / "my_ppo_encoders.py").write_text(
        "from torch import nn\n"
        "def goal(space):\n"
        "    return nn.Sequential(nn.Linear(space.shape[0], 8), nn.Tanh())\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    encoders = {"desired_goal": "my_ppo_encoders:goal"}
    agent = rlx.make("ppo", "rlx/PointGoal-v0", seed=0, encoders=encoders, **SMALL)
    extractor = agent.policy.actor_body[0]
    assert isinstance(extractor, CombinedExtractor) and extractor.features_dim == 8 + 4
    check_agent("ppo", "rlx/PointGoal-v0", encoders=encoders, **SMALL)
