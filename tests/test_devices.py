"""Devices on a CPU-only machine: checkpoints move between devices, and cuda asks are clear.

A run "trained on a GPU" is simulated by what such a run leaves behind: ``device = cuda``
in its saved hyperparameters and a 16-byte CUDA generator state in its resume part. The
tests that need CUDA itself are in each family's suite, marked ``cuda`` (skipped here).
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

import rlx
from rlx.checkpoint import RESUME_FILE, STATE_FILE, _sha256, json_checksum
from rlx.errors import CheckpointError, ConfigError
from rlx.nn.state import generator_array, restore_generator_array
from rlx.trainer import Trainer

CUDA_GENERATOR_STATE = np.arange(16, dtype=np.uint8)  # what torch.cuda's get_state() holds


def train(run_dir: Path, agent: str, env: str, steps: int = 600, **config) -> Path:
    Trainer(
        rlx.make(agent, env, seed=0, **config),
        run_dir=run_dir,
        steps=steps,
        eval_episodes=1,
        progress=False,
        verbose=False,
        plot=False,
        tensorboard=False,
    ).fit()
    return run_dir


def as_if_trained_on_cuda(run_dir: Path) -> None:
    """Rewrite a run as a CUDA machine would have written it (checksums recomputed)."""
    from safetensors.numpy import load_file, save_file

    config = json.loads((run_dir / "config.json").read_text())
    config["hyperparameters"]["device"] = "cuda"
    (run_dir / "config.json").write_text(json.dumps(config))
    for checkpoint in [run_dir / "final", *run_dir.glob("checkpoints/*")]:
        document = json.loads((checkpoint / STATE_FILE).read_text())
        document.pop("checksum")
        document["run"]["hyperparameters"]["device"] = "cuda"
        if (checkpoint / RESUME_FILE).exists():
            arrays = load_file(str(checkpoint / RESUME_FILE))
            arrays["torch_rng"] = CUDA_GENERATOR_STATE
            save_file(arrays, str(checkpoint / RESUME_FILE))
            document["resume"]["sha256"] = _sha256(checkpoint / RESUME_FILE)
        document["checksum"] = json_checksum(document)
        (checkpoint / STATE_FILE).write_text(json.dumps(document))


def test_a_generator_state_from_another_device_is_reseeded_with_a_warning():
    generator = torch.Generator()
    with pytest.warns(RuntimeWarning, match="16-byte torch generator state.*seeded anew"):
        assert not restore_generator_array(generator, CUDA_GENERATOR_STATE, reseed=7)
    assert torch.equal(generator.get_state(), torch.Generator().manual_seed(7).get_state())
    with pytest.raises(CheckpointError, match="cannot be restored on cpu"):
        restore_generator_array(generator, CUDA_GENERATOR_STATE)
    # The same device type restores exactly, without a word.
    saved = generator_array(torch.Generator().manual_seed(3))
    assert restore_generator_array(generator, saved, reseed=7)
    assert np.array_equal(generator_array(generator), saved)


@pytest.mark.parametrize(
    "agent, config",
    [("ppo", {"n_steps": 128}), ("dqn", {"learning_starts": 64, "batch_size": 32})],
)
def test_a_cuda_run_is_evaluated_and_resumed_on_the_cpu(tmp_path, rlx_cli, agent, config):
    run = train(tmp_path / "run", agent, "CartPole-v1", **config)
    as_if_trained_on_cuda(run)
    # Loaded as saved, it asks for CUDA: one clear message, exit 2.
    code, _, err = rlx_cli("eval", str(run), "--episodes", "1")
    assert code == 2 and "asks for CUDA, but torch sees no CUDA device" in err
    with pytest.raises(ConfigError, match="asks for CUDA"):
        rlx.load(run)
    code, out, err = rlx_cli("eval", str(run), "--episodes", "1", "--device", "cpu", "--json")
    assert code == 0, err
    assert json.loads(out)["episodes"] == 1
    agent_on_cpu = rlx.load(run, resume=False, device="cpu")
    assert agent_on_cpu.device.type == "cpu"
    # The agent keeps the run's identity: the run was a cuda run.
    assert agent_on_cpu.identity.hyperparameters["device"] == "cuda"
    # Resumed on the CPU, the run goes on; the generator is reseeded, and that is said.
    with pytest.warns(RuntimeWarning, match="saved on another device type"):
        trainer = Trainer.resume(run, device="cpu", steps=1200, progress=False, verbose=False)
        trainer.fit()
    state = json.loads((run / "final" / STATE_FILE).read_text())
    assert state["trainer"]["env_steps"] >= 1200
    assert state["run"]["hyperparameters"]["device"] == "cuda"


def test_device_on_the_command_line(tmp_path, rlx_cli):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run",
        "dqn",
        "--env",
        "CartPole-v1",
        "--steps",
        "300",
        "--out",
        str(run),
        "--no-progress",
        "--device",
        "cpu",
        "--set",
        "learning_starts=64",
        "--set",
        "batch_size=32",
    )
    assert code == 0, err
    assert json.loads((run / "config.json").read_text())["hyperparameters"]["device"] == "cpu"
    code, _, err = rlx_cli(
        "run", "dqn", "--env", "CartPole-v1", "--device", "cpu", "--set", "device=auto"
    )
    assert code == 2 and "--device cpu and --set device=auto disagree" in err
    # An agent without a device setting runs on the CPU and says so when asked for cuda.
    classical = train(tmp_path / "classical", "q-learning", "FrozenLake-v1", steps=200)
    code, _, err = rlx_cli("eval", str(classical), "--episodes", "1", "--device", "cuda")
    assert code == 2 and "q-learning has no device setting (it runs on the CPU)" in err
    code, _, err = rlx_cli("eval", str(classical), "--episodes", "1", "--device", "cpu")
    assert code == 0, err
    # rlx run says the same of a new run, and takes --device cpu.
    code, _, err = rlx_cli("run", "q-learning", "--env", "FrozenLake-v1", "--device", "cuda")
    assert code == 2 and "q-learning has no device setting (it runs on the CPU)" in err
    new = tmp_path / "classical-cpu"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--device", "cpu", "--steps", "100",
        "--out", str(new), "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    assert "device" not in json.loads((new / "config.json").read_text())["hyperparameters"]


NEURAL_BANDITS = [
    "neural-greedy",
    "neural-linear",
    "param-noise",
    "variational",
    "bootstrap",
    "dropout",
]
DEEP_RL = {
    "ppo": ("CartPole-v1", {"n_steps": 64}),
    "a2c": ("CartPole-v1", {}),
    "vpg": ("CartPole-v1", {}),
    "svpg": ("CartPole-v1", {}),
    "dqn": ("CartPole-v1", {"learning_starts": 64, "batch_size": 32}),
    "rainbow": ("CartPole-v1", {"learning_starts": 64, "batch_size": 32}),
    "sac": ("Pendulum-v1", {"learning_starts": 64, "batch_size": 32}),
    "td3": ("Pendulum-v1", {"learning_starts": 64, "batch_size": 32}),
    "ddpg": ("Pendulum-v1", {"learning_starts": 64, "batch_size": 32}),
}


@pytest.mark.parametrize("name", [*NEURAL_BANDITS, *DEEP_RL])
def test_every_torch_agent_runs_on_one_cpu_thread_by_default(name):
    env = DEEP_RL[name][0] if name in DEEP_RL else "rlx/Wheel-v0"
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        agent = rlx.make(name, env, seed=0)
        assert agent.config.torch_threads == 1
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(previous)


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs CUDA: run on a GPU machine (shared/gpu/README.md says how)",
)
@pytest.mark.parametrize("name", list(DEEP_RL))
def test_every_deep_agent_trains_and_resumes_exactly_on_cuda(name):
    from rlx.testing import check_agent

    env, config = DEEP_RL[name]
    check_agent(name, env, iterations=3, device="cuda", **config)


def test_auto_weighs_the_network_and_the_minibatch(monkeypatch):
    from rlx.nn.state import AUTO_CUDA_MIN_WORK, mlp_work, resolve_device

    assert mlp_work(64, [4, 64, 64], networks=2) == 64 * 2 * (4 * 64 + 64 * 64)
    # Without CUDA, auto is the CPU whatever the work.
    assert resolve_device("auto", image=True, work=10**12).type == "cpu"
    # With CUDA (pretended: nothing is allocated), the rule decides.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto").type == "cpu"
    assert resolve_device("auto", image=True).type == "cuda"
    assert resolve_device("auto", work=AUTO_CUDA_MIN_WORK - 1).type == "cpu"
    assert resolve_device("auto", work=AUTO_CUDA_MIN_WORK).type == "cuda"
    # What the families weigh: PPO at its defaults stays on the CPU, a large PPO and SAC's
    # defaults (256-unit layers, minibatches of 256) go to CUDA.
    import gymnasium as gym

    from rlx_offpolicy.sac import SAC
    from rlx_onpolicy.ppo import PPO

    cartpole = gym.make("CartPole-v1")
    ppo = PPO.__new__(PPO)
    ppo.config = PPO.Config()
    assert ppo.choose_device(cartpole.observation_space).type == "cpu"
    ppo.config = PPO.Config(n_envs=64, n_steps=128, batch_size=4096, hidden_sizes=(256, 256))
    assert ppo.choose_device(cartpole.observation_space).type == "cuda"
    sac = SAC.__new__(SAC)
    sac.config = SAC.Config(device="auto")
    assert sac.choose_device(gym.make("Pendulum-v1")).type == "cuda"
    sac.config = SAC.Config(device="auto", hidden_sizes=(64, 64))
    assert sac.choose_device(gym.make("Pendulum-v1")).type == "cpu"


class NaNReward(gymnasium.Wrapper):
    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        return obs, float("nan"), terminated, truncated, info


gymnasium.register(
    "rlx-test/NaNRewardCartPole-v0", lambda: NaNReward(gymnasium.make("CartPole-v1"))
)


@pytest.mark.parametrize(
    "agent, config",
    [
        ("ppo", {"n_steps": 64, "batch_size": 32}),
        ("dqn", {"learning_starts": 32, "batch_size": 32, "train_freq": 32, "gradient_steps": 4}),
    ],
)
def test_deferred_checks_skip_every_non_finite_update_and_raise_at_the_iteration_end(agent, config):
    """What happens on CUDA, forced on the CPU: no host read per minibatch, the bad updates
    leave the weights as they were, and the iteration ends with the TrainingError."""
    from rlx.errors import TrainingError
    from rlx.nn.optim import FiniteGuard

    learner = rlx.make(agent, "rlx-test/NaNRewardCartPole-v0", seed=0, **config)
    learner.guard = FiniteGuard(always=True)
    weights = {k: v.copy() for k, v in learner.policy_state().arrays.items()}
    with pytest.raises(TrainingError, match="the loss became nan; that update and the later"):
        while True:  # DQN learns from its second iteration on
            learner.step()
    for key, value in learner.policy_state().arrays.items():
        np.testing.assert_array_equal(value, weights[key])


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs CUDA: run on a GPU machine (shared/gpu/README.md says how)",
)
@pytest.mark.parametrize("name", ["dqn", "sac", "td3", "ddpg"])
def test_an_off_policy_update_on_cuda_reads_nothing_on_the_host(name):
    env, config = DEEP_RL[name]
    agent = rlx.make(name, env, seed=0, device="cuda", max_grad_norm=10.0, **config)
    while len(agent.buffer) < 64:
        agent.step()
    batch = agent.sample()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        agent.update(batch)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    agent.guard.check()


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs CUDA: run on a GPU machine (shared/gpu/README.md says how)",
)
def test_a_ppo_epoch_on_cuda_reads_nothing_on_the_host():
    agent = rlx.make("ppo", "CartPole-v1", seed=0, device="cuda", n_steps=64, batch_size=32)
    agent.sampler.collect(agent.policy, agent.generator, agent.sample_rng)
    data = agent.buffer.flat()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        agent.train_epoch(data, 0.2, True, False)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    agent.guard.check()
