"""Warm start: ``rlx run AGENT --env ENV --init-from RUN_DIR`` starts a new run from another
run's policy (never its resume state), records where it started, and refuses a source of
another agent or other spaces, or one that names code, with one clear message."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import rlx
from rlx.api import warm_start
from rlx.checkpoint import load_checkpoint
from rlx.errors import CheckpointError, UntrustedCodeError
from rlx.testing import same_state
from rlx.trainer import Trainer

PPO = dict(n_envs=2, n_steps=64, batch_size=64, n_epochs=1, device="cpu")
PPO_SET = [arg for key, value in PPO.items() for arg in ("--set", f"{key}={value}")]
QUIET = ["--no-progress", "--eval-episodes", "2"]
Q_TARGET = "rlx_classical.q_learning:QLearning"


def train(run_dir: Path, agent: str, env: str, steps: int, seed: int = 0, **config) -> Path:
    env_kwargs = config.pop("env_kwargs", None)
    trainer = Trainer(
        rlx.make(agent, env, seed=seed, env_kwargs=env_kwargs, **config),
        run_dir=run_dir,
        steps=steps,
        eval_episodes=2,
        eval_every=steps // 2,
        progress=False,
        verbose=False,
        plot=False,
        tensorboard=False,
    )
    trainer.fit()
    return run_dir


@pytest.fixture(scope="module")
def q_source(tmp_path_factory) -> Path:
    return train(tmp_path_factory.mktemp("q") / "run", "q-learning", "FrozenLake-v1", 2000)


@pytest.fixture(scope="module")
def ppo_source(tmp_path_factory) -> Path:
    return train(tmp_path_factory.mktemp("ppo") / "run", "ppo", "CartPole-v1", 256, **PPO)


def config_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "config.json").read_text())


# -- the API: the policy part only --------------------------------------------------------------


def test_warm_start_loads_the_policy_and_nothing_else_tabular(q_source):
    agent = rlx.make("q-learning", "FrozenLake-v1", seed=5)
    fresh = rlx.make("q-learning", "FrozenLake-v1", seed=5)
    record = warm_start(agent, q_source)
    source_policy = load_checkpoint(q_source / "final", resume=False).policy
    assert same_state(agent.policy_state(), source_policy)
    assert not same_state(agent.policy_state(), fresh.policy_state())
    ours, theirs = agent.resume_state().meta, fresh.resume_state().meta
    assert (ours["rng"], ours["episodes"]) == (theirs["rng"], theirs["episodes"])  # its own
    assert record["agent"] == "q-learning" and record["env"] == "FrozenLake-v1"
    assert record["path"] == str(q_source.resolve())
    assert record["checkpoint"] == str((q_source / "final").resolve())
    assert record["env_steps"] >= 2000 and record["seed"] == 0
    assert agent.identity.seed == 5  # the new run's identity is its own


def test_warm_start_loads_the_policy_and_nothing_else_networks(ppo_source):
    agent = rlx.make("ppo", "CartPole-v1", seed=1, **PPO)
    fresh = rlx.make("ppo", "CartPole-v1", seed=1, **PPO)
    record = warm_start(agent, ppo_source / "best")
    assert same_state(agent.policy_state(), load_checkpoint(ppo_source / "best").policy)
    assert not same_state(agent.policy_state(), fresh.policy_state())
    assert same_state(agent.resume_state(), fresh.resume_state())  # fresh optimiser state
    assert record["checkpoint"] == str((ppo_source / "best").resolve())


def test_arrays_of_another_shape_are_refused(ppo_source):
    agent = rlx.make("ppo", "CartPole-v1", **{**PPO, "hidden_sizes": [32, 32]})
    with pytest.raises(
        CheckpointError,
        match=r"'policy/actor_body.layers.0.bias' has shape \(64,\), this agent's has \(32,\)",
    ):
        warm_start(agent, ppo_source)


# -- the command line ---------------------------------------------------------------------------


def test_cli_warm_start_records_where_the_run_started(rlx_cli, q_source, tmp_path):
    new = tmp_path / "new"
    args = ["run", "q-learning", "--env", "FrozenLake-v1", "--steps", "1000", *QUIET]
    code, _, err = rlx_cli(*args, "--seed", "3", "--out", str(new), "--init-from", str(q_source))
    assert code == 0, err
    config = config_of(new)
    assert config["init_from"]["path"] == str(q_source.resolve())
    assert config["init_from"]["agent"] == "q-learning"
    assert config["init_from"]["env_steps"] >= 2000
    assert config["seed"] == 3 and "init_from" not in config["hyperparameters"]
    rlx.load(new)  # the run identity is untouched: the new run loads and resumes as any other

    # Training went on from the source's table, each run with its own RNGs.
    other_seed, cold = tmp_path / "other-seed", tmp_path / "cold"
    code, _, err = rlx_cli(
        *args, "--seed", "4", "--out", str(other_seed), "--init-from", str(q_source)
    )
    assert code == 0, err
    assert rlx_cli(*args, "--seed", "3", "--out", str(cold))[0] == 0
    assert "init_from" not in config_of(cold)
    q = {run: rlx.load(run, resume=False).policy_state().arrays["q"] for run in (new, other_seed)}
    q[cold] = rlx.load(cold, resume=False).policy_state().arrays["q"]
    assert not (q[new] == q[other_seed]).all() and not (q[new] == q[cold]).all()


def test_cli_warm_start_of_a_network_agent_from_its_best_policy(rlx_cli, ppo_source, tmp_path):
    new = tmp_path / "new"
    args = ["run", "ppo", "--env", "CartPole-v1", *PPO_SET, "--steps", "128", *QUIET]
    code, _, err = rlx_cli(*args, "--out", str(new), "--init-from", str(ppo_source / "best"))
    assert code == 0, err
    assert config_of(new)["init_from"]["checkpoint"] == str((ppo_source / "best").resolve())


def test_init_from_in_the_config_file(rlx_cli, q_source, tmp_path):
    file = tmp_path / "run.toml"
    file.write_text(f'agent = "q-learning"\nenv = "FrozenLake-v1"\ninit_from = "{q_source}"\n')
    new = tmp_path / "new"
    code, _, err = rlx_cli(
        "run", "--config", str(file), "--steps", "500", *QUIET, "--out", str(new)
    )
    assert code == 0, err
    assert config_of(new)["init_from"]["path"] == str(q_source.resolve())
    file.write_text('agent = "q-learning"\nenv = "FrozenLake-v1"\ninit_from = 3\n')
    code, _, err = rlx_cli("run", "--config", str(file), "--out", str(tmp_path / "bad"))
    assert code == 2 and "init_from must be a string" in err


# -- bad input: one clear message, exit 2, nothing written -------------------------------------


def test_another_agent_is_refused_naming_both(rlx_cli, q_source, tmp_path):
    out = tmp_path / "new"
    code, _, err = rlx_cli(
        "run", "sarsa", "--env", "FrozenLake-v1", "--init-from", str(q_source), "--out", str(out)
    )
    assert code == 2 and "'q-learning'" in err and "'sarsa'" in err and "Traceback" not in err
    assert not out.exists()


def test_other_spaces_are_refused_naming_both(rlx_cli, tmp_path):
    source = train(
        tmp_path / "big", "q-learning", "FrozenLake-v1", 500, env_kwargs={"map_name": "8x8"}
    )
    out = tmp_path / "new"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--init-from", str(source), "--out", str(out)
    )
    assert code == 2 and "observation space" in err
    assert "Discrete(64)" in err and "Discrete(16)" in err and "map_name='8x8'" in err
    assert not out.exists()


@pytest.mark.parametrize("kind", ["missing", "empty", "file"])
def test_a_path_that_is_not_a_run_is_refused(rlx_cli, tmp_path, monkeypatch, kind):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "source"
    if kind == "empty":
        path.mkdir()
    elif kind == "file":
        path.write_text("hello")
    code, _, err = rlx_cli("run", "q-learning", "--env", "FrozenLake-v1", "--init-from", str(path))
    assert code == 2 and str(path) in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_init_from_with_resume_is_refused(rlx_cli, q_source):
    code, _, err = rlx_cli("run", "--resume", str(q_source), "--init-from", str(q_source))
    assert code == 2 and "--init-from" in err and "--resume" in err


def test_trust_code_needs_resume_or_init_from(rlx_cli):
    code, _, err = rlx_cli("run", "q-learning", "--env", "FrozenLake-v1", "--trust-code")
    assert code == 2 and "--trust-code applies to --resume and --init-from" in err


def test_a_source_naming_code_needs_trust_code(rlx_cli, tmp_path):
    source = train(tmp_path / "source", Q_TARGET, "FrozenLake-v1", 500)
    assert config_of(source)["agent"] == Q_TARGET
    with pytest.raises(UntrustedCodeError, match="module:Class target"):
        warm_start(rlx.make(Q_TARGET, "FrozenLake-v1"), source)
    args = ["run", Q_TARGET, "--env", "FrozenLake-v1", "--steps", "200", *QUIET]
    code, _, err = rlx_cli(*args, "--init-from", str(source), "--out", str(tmp_path / "refused"))
    assert code == 2 and "--trust-code" in err and not (tmp_path / "refused").exists()
    trusted = tmp_path / "trusted"
    code, _, err = rlx_cli(*args, "--init-from", str(source), "--trust-code", "--out", str(trusted))
    assert code == 0, err
    assert config_of(trusted)["init_from"]["agent"] == Q_TARGET


# -- resume of a warm-started run -----------------------------------------------------------------


def test_resume_keeps_the_record_and_a_restart_loads_the_source_again(tmp_path):
    source = train(tmp_path / "source", "q-learning", "FrozenLake-v1", 1000)
    agent = rlx.make("q-learning", "FrozenLake-v1", seed=7)
    record = warm_start(agent, source)
    new = tmp_path / "new"
    quiet = dict(progress=False, verbose=False, plot=False, tensorboard=False, eval_episodes=0)
    Trainer(agent, run_dir=new, init_from=record, steps=500, **quiet).fit()
    assert config_of(new)["init_from"] == record
    Trainer.resume(new, steps=1000).fit()
    assert config_of(new)["init_from"] == record  # resume rewrites config.json, keeping it

    # A run that stopped before its first checkpoint starts again from the source's policy.
    for checkpoint in ("final", "best", "checkpoints"):
        shutil.rmtree(new / checkpoint, ignore_errors=True)
    restarted = Trainer.resume(new, steps=1000)
    assert restarted.init_from == record
    assert same_state(restarted.agent.policy_state(), load_checkpoint(source / "final").policy)
    restarted.run.unlock()

    # ... unless that policy changed meanwhile.
    Trainer.resume(source, steps=2000, progress=False, verbose=False, plot=False).fit()
    with pytest.raises(CheckpointError, match="has changed since"):
        Trainer.resume(new, steps=1000)
