"""Episode statistics beyond returns and lengths: the success rate and ``info_keywords``."""

from __future__ import annotations

import csv
import io
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from rich.console import Console

import rlx
from rlx.checkpoint import load_checkpoint
from rlx.errors import ConfigError
from rlx.protocols import Iteration
from rlx.trainer import Trainer
from rlx.vector import EpisodeReturns, VectorRunner, info_numbers, vector_info_numbers

ENV_ID = "RlxInfoCount-v0"
LENGTH = 4
TIMING = {"time/elapsed_s", "time/steps_per_second"}


class InfoCountEnv(gym.Env):
    """Episodes of ``LENGTH`` steps; every step's info has ``t``, the final one also
    ``is_success`` (every other episode of a copy, the first included) and ``distance``
    (the episode's index); with ``drawn`` both come from the environment's RNG instead, the
    only state of it that a checkpoint keeps."""

    observation_space = gym.spaces.Discrete(LENGTH + 1)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, drawn: bool = False) -> None:
        self.t, self.episode, self.drawn = 0, -1, drawn

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.t, self.episode = 0, self.episode + 1
        if self.drawn:
            self.episode = int(self.np_random.integers(10))
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        self.t += 1
        info: dict[str, Any] = {"t": self.t, "label": "text"}
        done = self.t >= LENGTH
        if done:
            info.update(is_success=self.episode % 2 == 0, distance=float(self.episode))
        return self.t, 1.0, done, False, info


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=InfoCountEnv)


def _rows(run_dir) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]


def _train(run_dir, steps: int, console: Any = None, drawn: bool = False, **settings: Any):
    agent = rlx.make("random", ENV_ID, seed=1, env_kwargs={"drawn": drawn})
    settings = {"eval_episodes": 0, "log_every": 8, "progress": False, "plot": False, **settings}
    trainer = Trainer(agent, steps=steps, run_dir=run_dir, console=console, **settings)
    return trainer.fit()


def test_info_numbers_keep_finite_numbers_and_booleans():
    info = {"a": 1, "b": True, "c": "text", "d": float("nan"), "e": [1, 2], "f": 2.5}
    assert info_numbers(info) == {"a": 1.0, "b": 1.0, "f": 2.5}
    assert info_numbers(None) == {}


def test_vector_info_numbers_read_one_copy_and_respect_the_masks():
    infos = {
        "x": np.array([1.0, 2.0]),
        "_x": np.array([True, False]),
        "ok": np.array([True, False]),
        "_ok": np.array([True, True]),
        "episode": {"r": np.array([1.0, 2.0])},  # nested: left out
    }
    assert vector_info_numbers(infos, 0) == {"x": 1.0, "ok": 1.0}
    assert vector_info_numbers(infos, 1) == {"ok": 0.0}


def test_the_vector_runner_keeps_each_finished_episodes_final_info():
    runner = VectorRunner(gym.make(ENV_ID), 2, "sync", seed=0)
    for _ in range(LENGTH):
        runner.step(np.zeros(2, np.int64))
    returns, lengths = runner.pop_finished()
    assert isinstance(returns, EpisodeReturns) and lengths == [LENGTH, LENGTH]
    assert returns.infos == [{"t": 4.0, "is_success": 1.0, "distance": 0.0}] * 2
    iteration = Iteration(2 * LENGTH, returns, lengths)
    assert iteration.episode_infos == returns.infos  # every vector family reports them
    assert runner.pop_finished()[0].infos == []
    runner.close()


def test_episode_returns_gathered_from_several_runners_keep_their_infos():
    returns = EpisodeReturns()
    returns += EpisodeReturns([1.0, 2.0], [{"a": 1.0}, {"a": 2.0}])
    returns += [3.0]
    assert returns == [1.0, 2.0, 3.0]
    assert Iteration(3, returns, [1, 1, 1]).episode_infos == [{"a": 1.0}, {"a": 2.0}, {}]


def test_success_rate_and_info_keys_are_logged_per_row(tmp_path):
    _train(tmp_path / "run", 32, info_keywords=("distance", "t"))
    rows = [row for row in _rows(tmp_path / "run") if row["train/return_mean"]]
    # two episodes of 4 steps per row of 8 steps: episodes 2k and 2k+1
    assert [row["train/success_rate"] for row in rows] == ["0.5"] * 4
    assert [float(row["train/info/distance"]) for row in rows] == [0.5, 2.5, 4.5, 6.5]
    assert {row["train/info/t"] for row in rows} == {"4"}
    assert [int(row["episodes"]) for row in rows] == [2, 4, 6, 8]


def test_a_vector_agent_logs_them_too(tmp_path):
    pytest.importorskip("rlx_onpolicy")
    agent = rlx.make("a2c", ENV_ID, seed=0, n_envs=2, n_steps=4)
    settings = {"eval_episodes": 0, "log_every": 16, "progress": False, "plot": False}
    Trainer(agent, steps=32, run_dir=tmp_path / "run", info_keywords=["distance"], **settings).fit()
    rows = [row for row in _rows(tmp_path / "run") if row["train/return_mean"]]
    assert rows and all(row["train/success_rate"] == "0.5" for row in rows)
    assert [float(row["train/info/distance"]) for row in rows] == [0.5, 2.5]


@pytest.mark.parametrize(
    "name, package, settings",
    [
        ("q-learning", "rlx_classical", {}),
        ("sarsa-lambda", "rlx_classical", {}),
        ("dyna-q", "rlx_classical", {}),
        ("nop", "rlx_es", {}),
        # a population's members, in this process and in worker processes
        ("openai-es", "rlx_es", {"population_size": 4}),
        ("cem", "rlx_es", {"population_size": 4, "backend": "process", "workers": 2}),
        ("svpg", "rlx_onpolicy", {"n_particles": 2, "n_steps": 8, "n_envs": 1}),
    ],
)
def test_agents_that_play_their_own_episodes_log_them_too(tmp_path, name, package, settings):
    # Alternate episodes succeed whatever is played: the rate is 0.5 over every two episodes.
    pytest.importorskip(package)
    agent = rlx.make(name, ENV_ID, seed=0, **settings)
    run = {"eval_episodes": 0, "log_every": 16, "progress": False, "plot": False}
    Trainer(agent, steps=64, run_dir=tmp_path / "run", info_keywords=["distance"], **run).fit()
    rows = [row for row in _rows(tmp_path / "run") if row["train/return_mean"]]
    assert rows and all(row["train/success_rate"] for row in rows)
    episodes = int(rows[-1]["episodes"])
    successes = sum(
        float(row["train/success_rate"]) * (int(row["episodes"]) - int(before["episodes"]))
        for before, row in zip([{"episodes": "0"}, *rows], rows, strict=False)
    )
    assert episodes >= 8 and abs(successes - episodes / 2) <= 1
    assert all(row["train/info/distance"] for row in rows)


def test_a_key_that_never_appears_is_one_warning_with_a_suggestion(tmp_path):
    text = io.StringIO()
    console = Console(file=text, width=200)
    _train(tmp_path / "run", 32, console=console, info_keywords=("distnce",))
    said = " ".join(text.getvalue().split())
    assert said.count("warning: info key 'distnce'") == 1, said
    assert "Did you mean: distance?" in said
    assert not any("train/info/distnce" in row for row in _rows(tmp_path / "run"))


def test_resume_is_exact_with_a_window_of_info_statistics(tmp_path):
    settings = {"info_keywords": ("distance",), "log_every": 12, "checkpoint_every": 10}
    _train(tmp_path / "whole", 48, drawn=True, **settings)
    _train(tmp_path / "split", 20, drawn=True, **settings)
    saved = load_checkpoint(tmp_path / "split" / "final").document["trainer"]["window"]
    assert saved["info_counts"] == {"is_success": 2, "distance": 2}  # episodes 3 and 4
    assert len({row["train/info/distance"] for row in _rows(tmp_path / "whole")}) > 2
    Trainer.resume(tmp_path / "split", steps=48).fit()
    assert _rows(tmp_path / "whole") == _rows(tmp_path / "split")
    config = (tmp_path / "split" / "config.json").read_text()
    assert '"info_keywords": [\n      "distance"\n    ]' in config


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_key_is_one_config_error(value):
    with pytest.raises(ConfigError, match="not the name of an info key"):
        Trainer(rlx.make("random", "CartPole-v1"), steps=10, info_keywords=[value])


def test_the_cli_option_is_recorded_and_a_bad_key_exits_2(rlx_cli, tmp_path):
    out = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "random", "--env", ENV_ID, "--steps", "16", "--out", str(out), "--no-progress",
        "--eval-episodes", "0", "--info-keyword", "distance", "--info-keyword", "t",
    )  # fmt: skip
    assert code == 0, err
    header = (out / "metrics.csv").read_text().splitlines()[0]
    assert "train/info/distance" in header and "train/info/t" in header
    code, _, err = rlx_cli("run", "random", "--env", ENV_ID, "--info-keyword", " ")
    assert code == 2 and "not the name of an info key" in err and "Traceback" not in err
