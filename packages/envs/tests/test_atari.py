"""The atari wrapper preset on real ALE games: spaces, training-only wrappers, exact resume."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ale_py", reason="the atari extra (pip install 'rlx-envs[atari]')")

from rlx.api import make_env
from rlx.testing import check_agent


def names(env) -> list[str]:
    return [wrapper.name for wrapper in env.spec.additional_wrappers]


def test_the_preset_gives_stacks_of_four_84x84_grayscale_frames():
    env = make_env("ALE/Breakout-v5", wrappers=["atari"])
    assert env.observation_space.shape == (4, 84, 84)
    assert env.observation_space.dtype == np.uint8
    assert env.unwrapped._frameskip == 1  # AtariPreprocessing skips the frames
    assert names(env) == [
        "StickyActions",
        "AtariPreprocessing",
        "EpisodicLife",
        "FireReset",
        "ClipReward",
        "FrameStackObservation",
    ]
    evaluation = make_env("ALE/Breakout-v5", wrappers=["atari"], training=False)
    assert names(evaluation) == [
        "StickyActions",
        "AtariPreprocessing",
        "FireReset",
        "FireOnLifeLoss",
        "FrameStackObservation",
    ]
    observation, _ = env.reset(seed=0)
    assert observation.shape == (4, 84, 84)
    # The preset's own settings come from the command line: --wrapper atari,stack=2
    assert make_env(
        "ALE/Breakout-v5", wrappers=[{"name": "atari", "kwargs": {"stack": 2}}]
    ).observation_space.shape == (2, 84, 84)
    env.close()
    evaluation.close()


def test_training_rewards_are_clipped_and_evaluation_rewards_are_the_game_score():
    training = make_env("ALE/SpaceInvaders-v5", wrappers=["atari"])
    evaluation = make_env("ALE/SpaceInvaders-v5", wrappers=["atari"], training=False)
    training.reset(seed=3)
    evaluation.reset(seed=3)
    actions = np.random.default_rng(0).integers(training.action_space.n, size=400)
    clipped, scores = [], []
    for action in actions:
        _, reward, terminated, truncated, _ = training.step(action)
        _, score, *_ = evaluation.step(action)
        clipped.append(reward)
        scores.append(score)
        if terminated or truncated:  # the first lost life ends the training episode
            break
    clipped, scores = np.array(clipped), np.array(scores)
    assert scores.max() >= 5  # an invader is worth 5 to 30 points
    np.testing.assert_array_equal(clipped, np.sign(scores))
    training.close()
    evaluation.close()


def test_a_lost_life_ends_the_training_episode_only():
    training = make_env("ALE/Breakout-v5", wrappers=["atari"])
    evaluation = make_env("ALE/Breakout-v5", wrappers=["atari"], training=False)
    training.reset(seed=0)
    evaluation.reset(seed=0)
    lives = training.unwrapped.ale.lives()
    for _ in range(2000):
        _, _, terminated, _, _ = training.step(0)  # NOOP: the ball is lost
        _, _, eval_terminated, _, _ = evaluation.step(0)
        if terminated:
            break
    assert terminated and not eval_terminated
    assert training.unwrapped.ale.lives() == lives - 1
    # The next reset goes on with the same game (one life fewer), not a new one.
    training.reset()
    assert training.unwrapped.ale.lives() == lives - 1
    training.close()
    evaluation.close()


def test_ppo_on_an_atari_game_resumes_exactly():
    check_agent(
        "ppo",
        "ALE/Pong-v5",
        iterations=4,
        wrappers=["atari"],
        n_envs=2,
        n_steps=256,
        batch_size=256,
        n_epochs=2,
    )
