"""Evaluations end: an environment without a time limit has its evaluation episodes capped
(reported truncated, with one warning), Atari evaluations serve again after a lost life, and a
long evaluation shows that it is evaluating."""

from __future__ import annotations

import io
import json
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rlx
from rlx import evaluation
from rlx.errors import ConfigError
from rlx.evaluation import evaluate, has_time_limit
from rlx.trainer import Trainer


class Endless(gym.Env):
    """Never ends an episode by itself; pays the action taken."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Discrete(4)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        return 0, {}

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        return 0, float(action), False, False, {}


class Ends(Endless):
    """Ends every episode after ``length`` steps, terminated."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.length, self.t = length, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[int, dict]:
        self.t = 0
        return super().reset(seed=seed)

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict]:
        self.t += 1
        return 0, float(action), self.t >= self.length, False, {}


class Pressing:
    """Always takes action 1 (a greedy policy that never ends its episode)."""

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        return np.ones(len(observation), np.int64) if np.ndim(observation) else 1


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setattr(evaluation, "DEFAULT_MAX_EPISODE_STEPS", 40)
    return 40


def test_an_environment_without_a_time_limit_is_capped_with_one_warning(small_cap):
    assert not has_time_limit(Endless())
    with pytest.warns(UserWarning, match="without a time limit.*within 40 steps were cut short"):
        result = evaluate(Pressing(), Endless(), episodes=3)
    assert result.lengths == (40, 40, 40)
    assert result.returns == (40.0, 40.0, 40.0)
    assert result.truncated == (True, True, True)
    assert result.to_dict()["truncated"] == [True, True, True]


def test_the_default_cap_is_documented_and_long_enough_for_atari():
    assert evaluation.DEFAULT_MAX_EPISODE_STEPS == 27_000  # 108,000 frames at frame skip 4


def test_episodes_that_end_by_themselves_are_untouched_and_not_truncated(small_cap):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a time limit of its own: no warning either
        limited = evaluate(Pressing(), gym.wrappers.TimeLimit(Endless(), 100), episodes=2)
    assert limited.lengths == (100, 100)  # the environment's own limit, above the cap
    assert limited.truncated == (True, True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no episode reached the cap: nothing to warn about
        finished = evaluate(Pressing(), Ends(7), episodes=2)
    assert finished.lengths == (7, 7) and finished.truncated == (False, False)


def test_an_explicit_cap_applies_to_every_environment_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = evaluate(
            Pressing(), gym.wrappers.TimeLimit(Endless(), 100), episodes=2, max_episode_steps=9
        )
        endless = evaluate(Pressing(), Endless(), episodes=1, max_episode_steps=12)
    assert result.lengths == (9, 9) and result.truncated == (True, True)
    assert endless.lengths == (12,)
    with pytest.raises(ConfigError, match="max_episode_steps must be at least 1"):
        evaluate(Pressing(), Endless(), episodes=1, max_episode_steps=0)


def test_a_vector_environment_without_a_time_limit_is_capped_too(small_cap):
    vector = gym.vector.SyncVectorEnv([Endless, Endless])
    with pytest.warns(UserWarning, match="within 40 steps were cut short"):
        result = evaluate(Pressing(), vector, episodes=3)
    assert result.lengths == (40, 40, 40) and result.truncated == (True, True, True)


def test_the_trainer_caps_its_evaluations_at_its_setting(small_cap):
    agent = rlx.make("q-learning", gym.wrappers.TimeLimit(Endless(), 20), seed=0)
    trainer = Trainer(agent, eval_env=Endless(), steps=40, eval_episodes=2, progress=False)
    with pytest.warns(UserWarning, match="within 40 steps were cut short"):
        result = trainer.fit()
    assert result.final_eval.lengths == (40, 40)
    assert result.final_eval.truncated == (True, True)

    agent = rlx.make("q-learning", gym.wrappers.TimeLimit(Endless(), 20), seed=0)
    trainer = Trainer(
        agent,
        eval_env=Endless(),
        steps=40,
        eval_episodes=2,
        eval_max_episode_steps=15,
        progress=False,
    )
    assert trainer.fit().final_eval.lengths == (15, 15)


def test_a_long_evaluation_says_so_on_a_non_terminal_stderr(monkeypatch, capsys):
    monkeypatch.setattr(evaluation, "QUIET_SECONDS", 0.0)
    evaluate(Pressing(), Ends(300), episodes=2, max_episode_steps=1_000, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert "evaluating: 1/2 episodes, 300 steps" in lines[-2]
    assert "evaluating: 2/2 episodes, 600 steps" in lines[-1]


def test_a_short_evaluation_stays_quiet(capsys):
    evaluate(Pressing(), Ends(5), episodes=2, max_episode_steps=1_000, progress=True)
    assert capsys.readouterr().err == ""


def test_a_periodic_evaluation_shows_on_the_training_bar():
    from rich.console import Console

    seen: list[tuple[int, int]] = []
    output = io.StringIO()
    console = Console(file=output, force_terminal=True, width=160)
    agent = rlx.make("q-learning", gym.wrappers.TimeLimit(Endless(), 20), seed=0)
    trainer = Trainer(
        agent,
        eval_env=gym.wrappers.TimeLimit(Ends(300), 1_000),
        steps=60,
        eval_every=20,
        eval_episodes=2,
        console=console,
        verbose=False,
    )
    from rlx.callbacks.standard import ProgressBar

    bar = next(c for c in trainer.callbacks if isinstance(c, ProgressBar))
    original = bar.evaluating

    def spying(episodes: int):
        context = original(episodes)
        report = context.__enter__()
        assert report is not None  # the training bar is live: the evaluation is a line on it

        def recording(done: int, steps: int) -> None:
            seen.append((done, steps))
            report(done, steps)

        class Wrapped:
            def __enter__(self):
                return recording

            def __exit__(self, *exc):
                return context.__exit__(*exc)

        return Wrapped()

    bar.evaluating = spying
    trainer.fit()
    assert (2, 600) in seen and (1, 300) in seen
    assert "evaluating" in output.getvalue()


def test_the_command_line_reports_truncated_episodes_and_takes_a_cap(tmp_path, rlx_cli):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "50", "--out", str(run),
        "--no-progress", "--eval-episodes", "1",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = rlx_cli("eval", str(run), "--episodes", "2", "--json")
    assert code == 0, err
    assert len(json.loads(out)["truncated"]) == 2
    code, out, err = rlx_cli(
        "eval", str(run), "--episodes", "2", "--json", "--max-episode-steps", "1"
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["lengths"] == [1, 1] and document["truncated"] == [True, True]
    code, _, err = rlx_cli("eval", str(run), "--max-episode-steps", "0")
    assert code == 2


# -- Atari ------------------------------------------------------------------------------------


def test_a_greedy_policy_that_never_serves_ends_its_breakout_evaluation():
    pytest.importorskip("ale_py", reason="the atari extra (pip install 'rlx-envs[atari]')")
    training = rlx.make_env("ALE/Breakout-v5", wrappers=["atari"])
    evaluation_env = rlx.make_env("ALE/Breakout-v5", wrappers=["atari"], training=False)
    assert has_time_limit(evaluation_env)  # ALE's own 108,000 frames: no extra cap

    class Noop:
        def act(self, observation: Any, deterministic: bool = True) -> int:
            return 0

    result = evaluate(Noop(), evaluation_env, episodes=1)
    # Without FIRE after a lost life the game waits until its 27,000-step limit. (The episode's
    # length is the bound; the seconds it takes depend on the machine's load.)
    assert result.truncated == (False,) and result.lengths[0] < 2_000
    training.reset(seed=0)
    lives = training.unwrapped.ale.lives()
    for _ in range(2_000):  # training is unchanged: a lost life ends the episode, no FIRE
        _, _, terminated, _, _ = training.step(0)
        if terminated:
            break
    assert terminated and training.unwrapped.ale.lives() == lives - 1
    training.close()
    evaluation_env.close()


def test_the_breakout_story_trains_and_evaluates_in_bounded_time():
    """``rlx run ppo --env ALE/Breakout-v5 --wrapper atari`` with a tiny budget evaluated an
    untrained policy for 9.5 minutes (every episode to the 108,000-frame limit)."""
    pytest.importorskip("ale_py", reason="the atari extra (pip install 'rlx-envs[atari]')")
    pytest.importorskip("torch")
    agent = rlx.make(
        "ppo",
        "ALE/Breakout-v5",
        wrappers=["atari"],
        n_envs=1,
        n_steps=64,
        batch_size=32,
        n_epochs=1,
        device="cpu",
    )
    result = Trainer(agent, steps=64, eval_episodes=1, progress=False, verbose=False).fit()
    # Bounded in steps, not timed (the seconds depend on the machine's load): the game ended,
    # no life left, long before the 108,000-frame limit.
    assert result.final_eval.truncated == (False,)
    assert result.final_eval.lengths[0] < 5_000
