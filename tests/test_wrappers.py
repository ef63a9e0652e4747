"""Environment wrappers named on the command line or in a config, recorded with the run."""

from __future__ import annotations

import json
import textwrap

import gymnasium as gym
import numpy as np
import pytest

import rlx
from rlx.api import evaluation_env
from rlx.errors import ConfigError, SpaceError, UnknownNameError, UntrustedCodeError
from rlx.wrappers import parse

CLIP = "ClipReward,min_reward=-0.5,max_reward=0.5"


def test_a_wrapper_from_the_command_line_is_parsed_with_json_values():
    assert parse("FrameStackObservation,stack_size=4") == {
        "name": "FrameStackObservation",
        "kwargs": {"stack_size": 4},
        "training_only": False,
    }
    entry = parse("my.mod:Wrap,scale=0.5,mode=fast,flags=[1,2]", training_only=True)
    assert entry["kwargs"] == {"scale": 0.5, "mode": "fast", "flags": [1, 2]}
    assert entry["training_only"]
    with pytest.raises(ConfigError, match="has no '='"):
        parse("ClipReward,oops")


def test_training_only_wrappers_stay_out_of_evaluations(tmp_path, rlx_cli):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "ppo", "--env", "CartPole-v1", "--steps", "600", "--out", str(run),
        "--no-progress", "--set", "n_steps=64", "--wrapper", "NormalizeObservation",
        "--training-wrapper", CLIP,
    )  # fmt: skip
    assert code == 0, err
    recorded = json.loads((run / "config.json").read_text())["wrappers"]
    assert [entry["name"] for entry in recorded] == ["NormalizeObservation", "ClipReward"]
    assert recorded[1] == {
        "name": "ClipReward",
        "kwargs": {"min_reward": -0.5, "max_reward": 0.5},
        "training_only": True,
    }
    agent = rlx.load(run)
    # Training: every step pays at most 0.5. Evaluation: CartPole's own 1 per step.
    assert "ClipReward" in str(agent.env) and "NormalizeObservation" in str(agent.env)
    evaluation = evaluation_env(agent)
    assert "ClipReward" not in str(evaluation) and "NormalizeObservation" in str(evaluation)
    code, out, err = rlx_cli("eval", str(run), "--episodes", "2", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["mean_return"] == pytest.approx(result["mean_length"])
    # Vector environments are built with the same wrappers (from the spec).
    vector = agent.sampler.runner.envs
    assert "ClipReward" in str(vector.envs[0]) and "NormalizeObservation" in str(vector.envs[0])
    # The resumed run rebuilds the same environment.
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "2000", "--no-progress")
    assert code == 0, err
    code, _, err = rlx_cli("run", "--resume", str(run), "--wrapper", "ClipReward")
    assert code == 2 and "drop --set/--config/--seed/--wrapper" in err


def test_wrappers_in_the_toml_config(tmp_path, rlx_cli):
    config = tmp_path / "run.toml"
    config.write_text(
        textwrap.dedent(
            """
            agent = "q-learning"
            env = "FrozenLake-v1"

            [[wrappers]]
            name = "TimeLimit"
            kwargs = { max_episode_steps = 20 }

            [[wrappers]]
            name = "ClipReward"
            kwargs = { min_reward = 0.0, max_reward = 0.5 }
            training_only = true
            """
        )
    )
    run = tmp_path / "run"
    code, _, err = rlx_cli("run", "--config", str(config), "--steps", "300", "--out", str(run))
    assert code == 0, err
    identity = rlx.load(run).identity
    assert [entry["name"] for entry in identity.wrappers] == ["TimeLimit", "ClipReward"]
    bad = tmp_path / "bad.toml"
    bad.write_text('agent = "q-learning"\nenv = "FrozenLake-v1"\nwrappers = "TimeLimit"\n')
    code, _, err = rlx_cli("run", "--config", str(bad), "--out", str(tmp_path / "bad"))
    assert code == 2 and "wrappers must be an array of tables" in err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--wrapper", "ClipRewards"], "unknown wrapper 'ClipRewards'. Did you mean: ClipReward"),
        (["--wrapper", "ClipReward,low=0"], "wrapper ClipReward does not take {'low': 0}"),
        (["--wrapper", "no.such.module:Wrapper"], "cannot load wrapper 'no.such.module:Wrapper'"),
    ],
)
def test_a_bad_wrapper_is_one_message_and_writes_nothing(tmp_path, rlx_cli, args, message):
    run = tmp_path / "run"
    code, _, err = rlx_cli("run", "ppo", "--env", "CartPole-v1", "--out", str(run), *args)
    assert code == 2 and message in err, err
    assert not run.exists()


def test_a_wrapper_that_changes_the_spaces_is_checked_like_any_environment(tmp_path, rlx_cli):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--out", str(run),
        "--wrapper", "gymnasium.wrappers:FlattenObservation",
    )  # fmt: skip
    assert code == 2 and "Discrete observation spaces" in err, err
    assert not run.exists()
    with pytest.raises(SpaceError):
        rlx.make("q-learning", "FrozenLake-v1", wrappers=["gymnasium.wrappers:FlattenObservation"])
    with pytest.raises(UnknownNameError):
        rlx.make("q-learning", "FrozenLake-v1", wrappers=["Flatten"])


def test_a_saved_run_whose_wrapper_imports_code_needs_trust(tmp_path):
    from rlx.trainer import Trainer

    wrapper = "gymnasium.wrappers:TimeLimit"
    agent = rlx.make(
        "q-learning",
        "FrozenLake-v1",
        seed=0,
        wrappers=[{"name": wrapper, "kwargs": {"max_episode_steps": 30}}],
    )
    run = tmp_path / "run"
    Trainer(agent, run_dir=run, steps=200, eval_episodes=1, progress=False, verbose=False).fit()
    with pytest.raises(UntrustedCodeError, match="wraps the environment in"):
        rlx.load(run)
    assert rlx.load(run, trust_code=True).identity.wrappers[0]["name"] == wrapper


class Unrecorded(gym.ObservationWrapper):
    """A wrapper that does not record its constructor arguments."""

    def observation(self, observation):
        return observation


def test_a_wrapper_that_cannot_be_rebuilt_in_vector_envs_says_how_to_fix_it():
    gym.register(
        "rlx-test/UnrecordedCartPole-v0",
        lambda: Unrecorded(gym.make("CartPole-v1")),
    )
    env = gym.make("CartPole-v1")
    wrapped = Unrecorded(env)
    from rlx.vector import make_vector_env

    with pytest.raises(ConfigError, match=r"inherit gymnasium\.utils\.RecordConstructorArgs"):
        make_vector_env(wrapped, 2, "sync")
    # Recorded wrappers are applied to every copy, and auto falls back to sync for them.
    vector = make_vector_env(gym.wrappers.ClipReward(env, -0.1, 0.1), 2, "auto")
    vector.reset(seed=0)
    _, rewards, *_ = vector.step(np.zeros(2, np.int64))
    np.testing.assert_allclose(rewards, 0.1)
    vector.close()


def test_normalising_wrappers_resume_exactly(tmp_path, rlx_cli):
    """NormalizeObservation and NormalizeReward keep running statistics in an object of their
    own (``obs_rms``, ``return_rms``): the checkpoint saves them, so a run stopped and resumed
    trains exactly like one that never stopped."""
    common = (
        "--env", "CartPole-v1", "--untuned", "--no-progress", "--wrapper", "NormalizeObservation",
        "--wrapper", "NormalizeReward", "--set", "n_steps=32", "--set", "n_envs=2",
        "--set", "batch_size=32", "--set", "n_epochs=1", "--eval-every", "1000000",
        "--eval-episodes", "1",
    )  # fmt: skip
    straight, split = tmp_path / "straight", tmp_path / "split"
    code, _, err = rlx_cli("run", "ppo", *common, "--iterations", "6", "--out", str(straight))
    assert code == 0, err
    code, _, err = rlx_cli("run", "ppo", *common, "--iterations", "3", "--out", str(split))
    assert code == 0, err
    code, _, err = rlx_cli("run", "--resume", str(split), "--iterations", "6", "--no-progress")
    assert code == 0, err

    def learning(run):  # every column but the clock's
        import csv

        with (run / "metrics.csv").open() as file:
            rows = list(csv.DictReader(file))
        return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]

    rows = learning(straight)
    assert rows and rows == learning(split)
