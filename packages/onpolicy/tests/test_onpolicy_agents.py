"""Configuration, schedules, vectorisation, checkpoints, bad input and the command line."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError, TrainingError
from rlx.testing import check_agent
from rlx.trainer import Trainer


def test_too_few_transitions_for_a_minibatch_is_a_config_error():
    with pytest.raises(ConfigError, match=r"n_steps \* n_envs = 8 \* 2 = 16 .* batch_size = 64"):
        rlx.make("ppo", "CartPole-v1", n_steps=8, n_envs=2, batch_size=64)


@pytest.mark.parametrize(
    "setting, match",
    [
        ({"clip_range": 0}, "clip_range"),
        ({"gae_lambda": 1.5}, "gae_lambda"),
        ({"vectorization": "threads"}, "vectorization"),
        ({"hidden_sizes": (64, 0)}, "hidden_sizes"),
    ],
)
def test_bad_hyperparameters_are_refused(setting, match):
    with pytest.raises(ConfigError, match=match):
        rlx.make("ppo", "CartPole-v1", **setting)


def test_cuda_without_a_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ConfigError, match="no CUDA device"):
        rlx.make("a2c", "CartPole-v1", device="cuda")


def test_linear_schedules_decay_over_the_trainer_budget():
    agent = rlx.make(
        "ppo",
        "CartPole-v1",
        seed=0,
        n_envs=4,
        n_steps=32,
        batch_size=64,
        n_epochs=1,
        learning_rate=1e-3,
        lr_schedule="linear",
        clip_schedule="linear",
    )
    agent.set_training_budget(1_000)  # what Trainer.fit() tells the agent
    for _ in range(6):
        metrics = agent.step().metrics
        done = agent.env_steps / 1_000  # counted before the update, as Stable-Baselines3 does
        assert metrics["learning_rate"] == pytest.approx(1e-3 * (1 - done))
        assert metrics["clip_range"] == pytest.approx(0.2 * (1 - done))
    result = Trainer(agent, steps=2_000, eval_episodes=0, progress=False, verbose=False).fit()
    assert result.metrics["learning_rate"] < 1e-3 * 200 / 2_000  # decayed to about 0


@pytest.mark.parametrize("name", ["ppo", "a2c", "vpg", "svpg"])
def test_normalisers_and_box_actions_resume_exactly(name):
    check_agent(
        name,
        "Pendulum-v1",
        seed=2,
        n_envs=2,
        n_steps=16,
        normalize_observations=True,
        normalize_rewards=True,
        **({"batch_size": 16} if name == "ppo" else {}),
    )


def test_sync_vectorisation_resumes_exactly():
    check_agent("a2c", "CartPole-v1", seed=3, vectorization="sync")


@pytest.mark.parametrize("normalize", [False, True])
def test_the_policy_reads_c_ordered_observations(normalize):
    """gymnasium's vectorised CartPole returns Fortran-ordered observations, which a checkpoint
    gives back C-ordered: the sampler hands the policy one layout in both runs, as a product
    may round differently on another and break exact resume."""
    agent = rlx.make(
        "ppo",
        "CartPole-v1",
        seed=0,
        n_envs=2,
        n_steps=8,
        batch_size=16,
        normalize_observations=normalize,
    )
    runner = agent.sampler.runner
    ordered = np.ascontiguousarray(runner.observations)
    expected = agent.sampler.observe(update=False) if normalize else ordered
    runner.observations = np.asfortranarray(ordered)
    inputs = agent.sampler.observe(update=False)
    assert inputs.flags.c_contiguous
    np.testing.assert_array_equal(inputs, expected)


def test_async_vectorisation_trains_and_resumes_with_fresh_episodes():
    agent = rlx.make("a2c", "CartPole-v1", seed=0, n_envs=2, vectorization="async")
    try:
        assert type(agent.sampler.runner.envs).__name__ == "AsyncVectorEnv"
        first = agent.step()
        assert first.env_steps == 10
        policy, resume = agent.policy_state(), agent.resume_state()
        assert resume.meta["sampler"]["envs"] is None  # worker processes cannot be snapshot
        twin = rlx.make("a2c", "CartPole-v1", seed=1, n_envs=2, vectorization="async")
        try:
            twin.load_policy_state(policy)
            twin.load_resume_state(resume)
            loaded = twin.policy_state()
            for key in ("policy/actor_head.weight", "policy/critic_head.weight"):
                np.testing.assert_array_equal(policy.arrays[key], loaded.arrays[key])
            assert twin.step().env_steps == 10
        finally:
            twin.close()
    finally:
        agent.close()


class NaNAfter(gym.Env):
    """CartPole-like observations; rewards turn NaN after 300 steps of its life."""

    observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)
    steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action):
        self.t += 1
        NaNAfter.steps += 1
        reward = float("nan") if NaNAfter.steps > 300 else 1.0
        return np.zeros(3, np.float32), reward, False, self.t >= 20, {}


gym.register("rlx-test/NaNAfter-v0", entry_point=NaNAfter)


def test_a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
    NaNAfter.steps = 0
    agent = rlx.make("a2c", "rlx-test/NaNAfter-v0", seed=0, n_envs=2, n_steps=10)
    trainer = Trainer(
        agent,
        run_dir=tmp_path / "run",
        steps=10_000,
        checkpoint_every=100,
        eval_episodes=0,
        progress=False,
        verbose=False,
        plot=False,
    )
    with pytest.raises(TrainingError) as error:
        trainer.fit()
    message = str(error.value)
    assert "nan" in message and "learning_rate" in message
    assert "last good checkpoint" in message
    checkpoints = sorted((tmp_path / "run" / "checkpoints").iterdir())
    assert checkpoints and str(checkpoints[-1]) in message
    assert not (tmp_path / "run" / "final").exists()
    state = rlx.checkpoint.load_checkpoint(checkpoints[-1]).policy
    assert all(np.isfinite(v).all() for k, v in state.arrays.items() if k.startswith("policy/"))


def test_rlx_info_lists_every_hyperparameter(rlx_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # one row per hyperparameter, names unbroken
    code, output, _ = rlx_cli("info", "ppo")
    assert code == 0, output
    for name in (
        "clip_range",
        "target_kl",
        "n_epochs",
        "batch_size",
        "clip_range_vf",
        "normalize_observations",
        "device",
        "vectorization",
        "policy",
    ):
        assert name in output


def test_rlx_run_trains_and_writes_a_run(rlx_cli, tmp_path):
    code, output, errors = rlx_cli(
        "run",
        "a2c",
        "--env",
        "CartPole-v1",
        "--steps",
        "2000",
        "--eval-episodes",
        "2",
        "--out",
        str(tmp_path / "runs"),
        "--set",
        "n_envs=4",
    )
    assert code == 0, output + errors
    run = tmp_path / "runs"  # --out names the run directory
    assert (run / "final").is_dir() and (run / "metrics.csv").is_file()
    header = (run / "metrics.csv").read_text().splitlines()[0]
    assert "agent/value_loss" in header and "agent/explained_variance" in header


def test_tuned_hyperparameters_are_copies_and_unknown_pairs_are_named():
    from rlx.errors import UnknownNameError
    from rlx.tuned import hyperparameters

    settings = hyperparameters("ppo", "CartPole-v1")
    settings["n_envs"] = 1
    assert hyperparameters("ppo", "CartPole-v1")["n_envs"] == 8
    with pytest.raises(UnknownNameError, match="Did you mean: ppo on CartPole-v1"):
        hyperparameters("ppo", "CartPole-v0")


def test_target_kl_stops_the_epochs_early_and_value_clipping_runs():
    common = dict(seed=0, n_envs=4, n_steps=64, batch_size=64, n_epochs=10, learning_rate=3e-3)
    free = rlx.make("ppo", "CartPole-v1", **common).step().metrics
    assert free["epochs"] == 10
    stopped = rlx.make("ppo", "CartPole-v1", target_kl=1e-5, **common).step().metrics
    assert stopped["epochs"] < 10
    assert stopped["approx_kl"] > 1.5e-5  # it stopped because the KL passed 1.5 x target
    clipped = rlx.make("ppo", "CartPole-v1", clip_range_vf=0.2, **common).step().metrics
    assert np.isfinite(clipped["value_loss"])
    assert clipped["value_loss"] != free["value_loss"]
