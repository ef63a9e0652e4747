"""Atari environments resume exactly: sticky actions included (ALE v5 repeats the previous
action with probability 0.25, and the emulator's own snapshot does not hold that action)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ale_py", reason="the atari extra (pip install 'rlx-envs[atari]')")

from rlx import envstate
from rlx.api import make_env
from rlx.vector import make_vector_env


def pong_vector(n_envs: int = 4):
    """Sticky-action Pong with the atari preset, vectorised the way rlx's runners do it."""
    return make_vector_env(make_env("ALE/Pong-v5", wrappers=["atari"]), n_envs, "sync")


def test_a_restored_sticky_action_atari_vector_env_steps_like_the_original():
    original = pong_vector()
    assert original.envs[0].get_wrapper_attr("repeat_action_probability") == 0.25
    original.reset(seed=0)
    rng = np.random.default_rng(1)
    actions = lambda: rng.integers(original.single_action_space.n, size=original.num_envs)  # noqa: E731
    for _ in range(50):
        original.step(actions())
    for _ in range(6):  # a snapshot every 40 steps, each restored into a fresh copy
        restored = pong_vector()
        restored.reset(seed=123)  # another episode, another emulator random state
        envstate.restore(restored, *envstate.snapshot(original))
        for step in range(40):
            action = actions()
            observation, reward, terminated, truncated, _ = original.step(action)
            twin = restored.step(action)
            np.testing.assert_array_equal(twin[0], observation, err_msg=f"step {step}")
            np.testing.assert_array_equal(twin[1], reward)
            np.testing.assert_array_equal(twin[2], terminated)
            np.testing.assert_array_equal(twin[3], truncated)
        restored.close()
    original.close()


def test_the_preset_keeps_sticky_actions_in_the_wrapper_not_the_emulator():
    env = make_env("ALE/Pong-v5", wrappers=["atari"])
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    sticky = env.get_wrapper_attr("repeat_action_probability")
    assert sticky == 0.25
    env.reset(seed=0)
    sticky_actions = env
    while type(sticky_actions).__name__ != "StickyActions":
        sticky_actions = sticky_actions.env
    repeated = 0
    for _ in range(2000):
        previous = sticky_actions.last_action
        sticky_actions.step((previous + 1) % 6)  # always another action: a repeat shows
        repeated += sticky_actions.last_action == previous
    assert abs(repeated / 2000 - 0.25) < 0.04
    # Without sticky actions (ALE v4's setting) the wrapper passes every action through.
    plain = make_env("ALE/Pong-v5", wrappers=["atari"], repeat_action_probability=0.0)
    assert plain.get_wrapper_attr("repeat_action_probability") == 0.0
    env.close()
    plain.close()


def _run_outputs(run_dir) -> tuple[dict, list[dict]]:
    """A run's final checkpoint (policy and resume arrays) and its metrics without the
    wall-clock columns."""
    import csv

    from rlx.checkpoint import load_checkpoint

    final = load_checkpoint(run_dir / "final")
    arrays = {
        f"{part}/{key}": value
        for part in ("policy", "resume")
        for key, value in getattr(final, part).arrays.items()
    }
    with open(run_dir / "metrics.csv", newline="") as f:
        rows = [
            {k: v for k, v in row.items() if not k.startswith("time/")} for row in csv.DictReader(f)
        ]
    return arrays, rows


def test_dqn_on_pong_stopped_at_checkpoints_and_resumed_equals_the_uninterrupted_run(tmp_path):
    """``rlx run dqn --env ALE/Pong-v5 --wrapper atari``, stopped after its checkpoints and
    resumed twice: the replay buffer, the network and the metrics come out the same."""
    import rlx
    from rlx.trainer import Trainer

    def train(run_dir, steps, resume=False):
        settings = dict(steps=steps, eval_episodes=0, progress=False, verbose=False, plot=False)
        settings.update(tensorboard=False, checkpoint_every=200, log_every=100)
        if resume:
            return Trainer.resume(run_dir, **settings).fit()
        agent = rlx.make(
            "dqn",
            "ALE/Pong-v5",
            seed=0,
            wrappers=["atari"],
            n_envs=4,
            buffer_size=1000,
            learning_starts=320,
            batch_size=8,
            target_update_interval=100,
        )
        return Trainer(agent, run_dir=run_dir, **settings).fit()

    train(tmp_path / "uninterrupted", 600)
    train(tmp_path / "resumed", 200)
    train(tmp_path / "resumed", 400, resume=True)
    train(tmp_path / "resumed", 600, resume=True)
    expected, expected_metrics = _run_outputs(tmp_path / "uninterrupted")
    actual, actual_metrics = _run_outputs(tmp_path / "resumed")
    assert expected.keys() == actual.keys()
    for key in expected:
        np.testing.assert_array_equal(actual[key], expected[key], err_msg=key)
    assert actual_metrics == expected_metrics
