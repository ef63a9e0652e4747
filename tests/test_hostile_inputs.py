"""Hostile inputs and faults: saved files never run code, and a bad file is one clear message.

Each test reproduces one route of the hardening report: a run directory whose JSON names
code (an agent class, gymnasium's ``module:Env`` syntax, a user network), and checkpoints
that pass their checksums but hold the wrong content. An attacker who edits the JSON can
recompute its checksum, so the tests do too (:func:`tamper`); the defence that matters is
that loading resolves only registered names unless the user says ``trust_code``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlx
from rlx.agents.random import RandomConfig
from rlx.checkpoint import POLICY_FILE, STATE_FILE, json_checksum
from rlx.errors import CheckpointError, UntrustedCodeError
from rlx.trainer import Trainer

EVIL = 'open(__file__ + ".ran", "w").write("ran")\nclass X: pass\ndef factory(*a): pass\n'


def train(run_dir: Path, agent: str = "q-learning", env: str = "FrozenLake-v1", **config):
    trainer = Trainer(
        rlx.make(agent, env, seed=0, **config),
        run_dir=run_dir,
        steps=2000,
        eval_episodes=2,
        eval_every=1000,
        progress=False,
        verbose=False,
        plot=False,
        tensorboard=False,
    )
    trainer.fit()
    return run_dir


def tamper(checkpoint: Path, edit) -> None:
    """Edit a checkpoint's state.json as an attacker would: checksum recomputed."""
    document = json.loads((checkpoint / STATE_FILE).read_text())
    document.pop("checksum")
    edit(document)
    document["checksum"] = json_checksum(document)
    (checkpoint / STATE_FILE).write_text(json.dumps(document))


def edit_run(run_dir: Path, **changes) -> None:
    """Change the run record the same way in config.json and in every checkpoint."""
    config = json.loads((run_dir / "config.json").read_text())
    for key, value in changes.items():
        if key == "hyperparameters":
            config["hyperparameters"].update(value)
        else:
            config[key] = value
    (run_dir / "config.json").write_text(json.dumps(config))

    def edit(document):
        for key, value in changes.items():
            if key == "hyperparameters":
                document["run"]["hyperparameters"].update(value)
            else:
                document["run"][key] = value

    for checkpoint in [run_dir / "final", run_dir / "best", *run_dir.glob("checkpoints/*")]:
        if (checkpoint / STATE_FILE).exists():
            tamper(checkpoint, edit)


# -- 1. a run directory never runs code ------------------------------------------------------


def test_a_module_shipped_in_a_run_directory_is_not_imported_by_load(tmp_path):
    """The report's reproduction: evil.py beside the checkpoint, the working directory on
    sys.path (a script next to runs/), state.json pointing at it."""
    run = train(tmp_path / "runs" / "shared")
    (run / "evil.py").write_text(EVIL)
    edit_run(run, agent="runs.shared.evil:X")
    script = "import rlx\ntry:\n    rlx.load('runs/shared')\nexcept rlx.errors.RlxError as e:\n"
    script += "    print(type(e).__name__, e)\n"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True
    )
    assert "UntrustedCodeError" in result.stdout and "trust_code=True" in result.stdout
    assert not (run / "evil.py.ran").exists()


def test_trust_code_is_the_explicit_opt_in(tmp_path, monkeypatch):
    run = train(tmp_path / "run")
    (tmp_path / "evil_agent.py").write_text(EVIL)
    monkeypatch.syspath_prepend(str(tmp_path))
    edit_run(run, agent="evil_agent:X")
    with pytest.raises(UntrustedCodeError, match=r"module:Class target"):
        rlx.load(run)
    assert not (tmp_path / "evil_agent.py.ran").exists()
    with pytest.raises(rlx.errors.RlxError):  # X is no agent, but the user asked to import it
        rlx.load(run, trust_code=True)
    assert (tmp_path / "evil_agent.py.ran").exists()


def test_editing_state_json_without_its_checksum_is_caught(tmp_path):
    run = train(tmp_path / "run")
    document = json.loads((run / "final" / STATE_FILE).read_text())
    document["run"]["agent"] = "this:Foo"
    (run / "final" / STATE_FILE).write_text(json.dumps(document))
    with pytest.raises(CheckpointError, match="does not match its checksum"):
        rlx.load(run / "final")


def test_resume_refuses_an_agent_target_in_config_json(tmp_path, rlx_cli):
    run = train(tmp_path / "run")
    edit_run(run, agent="this:Foo")
    code, out, err = rlx_cli("run", "--resume", str(run), "--steps", "4000")
    assert code == 2 and "--trust-code" in err and "Traceback" not in err
    assert "Beautiful is better" not in out + err  # `import this` never ran


def test_a_module_env_id_is_refused(tmp_path, rlx_cli, monkeypatch):
    run = train(tmp_path / "run")
    (tmp_path / "evil_env.py").write_text(EVIL)
    monkeypatch.syspath_prepend(str(tmp_path))
    edit_run(run, env="evil_env:Evil-v0")
    code, _, err = rlx_cli("eval", str(run))
    assert code == 2 and "not a registered environment id" in err
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "4000")
    assert code == 2 and "--trust-code" in err
    assert not (tmp_path / "evil_env.py.ran").exists()


def test_a_user_network_named_in_saved_hyperparameters_is_refused(tmp_path, monkeypatch):
    settings = dict(n_envs=2, n_steps=64, batch_size=64, n_epochs=1)
    run = train(tmp_path / "run", agent="ppo", env="CartPole-v1", **settings)
    (tmp_path / "evil_policy.py").write_text(EVIL)
    monkeypatch.syspath_prepend(str(tmp_path))
    edit_run(run, hyperparameters={"policy": "evil_policy:factory"})
    with pytest.raises(UntrustedCodeError, match="policy='evil_policy:factory'"):
        rlx.load(run)
    with pytest.raises(UntrustedCodeError):
        Trainer.resume(run, steps=4000)
    assert not (tmp_path / "evil_policy.py.ran").exists()


def test_trust_code_on_the_command_line_needs_resume(rlx_cli):
    code, _, err = rlx_cli("run", "q-learning", "--env", "FrozenLake-v1", "--trust-code")
    assert code == 2 and "--trust-code applies to --resume" in err


# -- 3. checkpoints that pass the checksum but hold the wrong content ---------------------------


def test_a_wrong_json_type_in_the_state_is_one_checkpoint_error(tmp_path, rlx_cli):
    run = train(tmp_path / "run")
    tamper(run / "final", lambda d: d["resume"]["meta"].__setitem__("rng", "x"))
    with pytest.raises(CheckpointError, match="resume state does not fit"):
        rlx.load(run / "final")
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "4000")
    assert code == 2 and "resume state does not fit" in err and "Traceback" not in err


def test_a_missing_array_is_named(tmp_path):
    from safetensors.numpy import load_file, save_file

    run = train(tmp_path / "run")
    arrays = load_file(str(run / "final" / POLICY_FILE))
    arrays.pop("q")
    save_file(arrays, str(run / "final" / POLICY_FILE))
    digest = __import__("hashlib").sha256((run / "final" / POLICY_FILE).read_bytes()).hexdigest()
    tamper(run / "final", lambda d: d["policy"].__setitem__("sha256", digest))
    with pytest.raises(CheckpointError, match="missing: q"):
        rlx.load(run / "final")


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.zeros((16, 4), np.float32), "dtype float32"),
        (np.full((16, 4), np.nan), "NaN or infinite"),
    ],
)
def test_an_array_of_the_wrong_dtype_or_not_finite_is_refused(tmp_path, value, match):
    import hashlib

    from safetensors.numpy import load_file, save_file

    run = train(tmp_path / "run")
    arrays = load_file(str(run / "final" / POLICY_FILE))
    arrays["q"] = value
    save_file(arrays, str(run / "final" / POLICY_FILE))
    digest = hashlib.sha256((run / "final" / POLICY_FILE).read_bytes()).hexdigest()
    tamper(run / "final", lambda d: d["policy"].__setitem__("sha256", digest))
    with pytest.raises(CheckpointError, match=match):
        rlx.load(run / "final")


def test_another_runs_checkpoint_is_not_evaluated_silently(tmp_path, rlx_cli):
    mine = train(tmp_path / "mine", agent="q-learning")
    other = train(tmp_path / "other", agent="sarsa")
    shutil.rmtree(mine / "final")
    shutil.copytree(other / "final", mine / "final")
    code, out, err = rlx_cli("eval", str(mine))
    assert code == 2 and "belongs to another run" in err and "sarsa" in err
    assert out == ""


# -- 4. one message instead of a traceback, and nothing written ---------------------------------


def toml(tmp_path: Path, line: str) -> str:
    path = tmp_path / "run.toml"
    path.write_text(f'agent = "q-learning"\nenv = "FrozenLake-v1"\n{line}\n')
    return str(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('seed = "three"', "seed must be an integer"),
        ("seed = 1.7", "seed must be an integer"),
        ("seed = -1", "seed must be an integer in [0, 4294967295]"),
        ('agent = ["q-learning"]', "agent must be a string"),
        ("env = 5", "env must be a string"),
    ],
)
def test_bad_config_file_values_are_one_message(tmp_path, rlx_cli, line, message):
    path = tmp_path / "run.toml"
    path.write_text(f"{line}\n" + ("" if "agent" in line else 'agent = "q-learning"\n'))
    if "env" not in line:
        path.write_text(path.read_text() + 'env = "FrozenLake-v1"\n')
    code, _, err = rlx_cli("run", "--config", str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", "-1"], "seed must be an integer in [0, 4294967295], got -1"),
        (["--seed", str(2**64)], "seed must be an integer"),
        (["--set", "initial_q=inf"], "initial_q must be a finite number"),
        (["--set", "learning_rate=nan"], "learning_rate must be a finite number"),
    ],
)
def test_bad_seeds_and_non_finite_settings_are_refused(tmp_path, rlx_cli, args, message):
    out = tmp_path / "out"
    code, _, err = rlx_cli("run", "q-learning", "--env", "FrozenLake-v1", "--out", str(out), *args)
    assert code == 2 and message in err and "Traceback" not in err
    assert not out.exists()


def test_sizes_too_large_for_memory_are_one_message(tmp_path, rlx_cli):
    out = tmp_path / "out"
    code, _, err = rlx_cli(
        "run", "ppo", "--env", "CartPole-v1", "--set", "n_envs=100000000000", "--out", str(out)
    )
    assert code == 2 and "would need about" in err and "lower n_envs" in err, err
    assert "Traceback" not in err
    assert not out.exists()


def test_eval_refuses_a_negative_seed(tmp_path, rlx_cli):
    run = train(tmp_path / "run")
    code, _, err = rlx_cli("eval", str(run), "--seed", "-1")
    assert code == 2 and "evaluation seed must be an integer" in err


@pytest.mark.parametrize("where", ["file", "proc"])
def test_an_impossible_out_path_is_one_message_and_writes_nothing(tmp_path, rlx_cli, where):
    (tmp_path / "f").write_text("")
    out = tmp_path / "f" / "sub" if where == "file" else Path("/proc/rlx-test/run")
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--out", str(out), "--steps", "100"
    )
    assert code == 2 and "cannot create run directory" in err and "Traceback" not in err
    assert (tmp_path / "f").read_text() == ""


def test_a_metrics_file_that_is_not_utf8_is_one_message(tmp_path, rlx_cli):
    run = train(tmp_path / "run")
    with open(run / "metrics.csv", "ab") as f:
        f.write(b"\xff\xfe garbage\n")
    before = (run / "metrics.csv").read_bytes()
    for args in (["plot", str(run)], ["run", "--resume", str(run), "--steps", "4000"]):
        code, _, err = rlx_cli(*args)
        assert code == 2 and "metrics.csv is unreadable" in err and "Traceback" not in err
    assert (run / "metrics.csv").read_bytes() == before


def test_a_full_disk_during_a_checkpoint_keeps_the_previous_one(tmp_path, monkeypatch):
    import errno

    import safetensors.numpy

    real_save = safetensors.numpy.save_file
    calls = {"n": 0}

    def save_file(arrays, filename, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(arrays, filename, *args, **kwargs)

    monkeypatch.setattr(safetensors.numpy, "save_file", save_file)
    trainer = Trainer(
        rlx.make("q-learning", "FrozenLake-v1", seed=0),
        run_dir=tmp_path / "run",
        steps=5000,
        checkpoint_every=1000,
        eval_episodes=0,
        progress=False,
        plot=False,
        tensorboard=False,
    )
    with pytest.raises(CheckpointError, match=r"No space left on device.*last good checkpoint"):
        trainer.fit()
    monkeypatch.undo()
    saved = sorted((tmp_path / "run" / "checkpoints").iterdir())
    assert saved and rlx.load(saved[-1]).env_steps >= 1000
    assert not list((tmp_path / "run" / "checkpoints").glob(".*"))  # no temporaries left


# -- 5. run directories are never left stranded ----------------------------------------------


class FailsAtOnce:
    """An agent whose first iteration raises, as an unreachable cluster or a NaN would."""

    Config = RandomConfig

    def __init__(self, env, config, seed):
        self.env, self.config, self.seed = env, config, seed

    def step(self):
        raise rlx.errors.TrainingError("the loss became nan at the first update")

    def act(self, observation, deterministic=True):
        return 0

    def policy_state(self):
        return rlx.protocols.AgentState()

    load_policy_state = load_resume_state = lambda self, state: None
    resume_state = policy_state


def test_a_run_that_fails_before_its_first_checkpoint_leaves_nothing(tmp_path):
    import gymnasium

    agent = FailsAtOnce(gymnasium.make("CartPole-v1"), RandomConfig(), 0)
    trainer = Trainer(agent, run_dir=tmp_path / "run", steps=100, progress=False)
    with pytest.raises(rlx.errors.TrainingError, match="nothing was saved"):
        trainer.fit()
    assert not (tmp_path / "run").exists()


def strand(tmp_path: Path) -> Path:
    """A run directory as kill -9 before the first checkpoint leaves it."""
    run = train(tmp_path / "run")
    for name in ("final", "best", "checkpoints"):
        shutil.rmtree(run / name, ignore_errors=True)
    return run


def test_a_run_without_a_checkpoint_resumes_from_scratch_with_a_notice(tmp_path, rlx_cli):
    run = strand(tmp_path)
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "1500", "--no-progress")
    assert code == 0, err
    assert "holds no checkpoint" in err and "from scratch" in err
    assert rlx.load(run).env_steps >= 1500


def test_a_run_without_a_checkpoint_can_be_reused_as_out(tmp_path, rlx_cli):
    run = strand(tmp_path)
    code, _, err = rlx_cli(
        "run",
        "sarsa",
        "--env",
        "FrozenLake-v1",
        "--out",
        str(run),
        "--steps",
        "1500",
        "--no-progress",
    )
    assert code == 0, err
    assert "stopped before its first checkpoint" in err
    assert json.loads((run / "config.json").read_text())["agent"] == "sarsa"


# -- 6. concurrency and files ------------------------------------------------------------------


def test_a_run_directory_in_use_is_refused_naming_the_holder(tmp_path, rlx_cli):
    import os

    from rlx.runs import RunDirectory

    run = train(tmp_path / "run")
    rows = (run / "metrics.csv").read_text()
    holder = RunDirectory(run)
    holder.lock()
    try:
        code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "4000")
    finally:
        holder.unlock()
    assert code == 2 and f"pid {os.getpid()}" in err
    assert (run / "metrics.csv").read_text() == rows
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "3000", "--no-progress")
    assert code == 0, err


def test_files_follow_the_umask(tmp_path):
    import os
    import stat

    previous = os.umask(0o022)
    try:
        run = train(tmp_path / "run")
    finally:
        os.umask(previous)
    for path in (run / "config.json", run / "final" / STATE_FILE, run / "final" / POLICY_FILE):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    for path in (run / "final", run / "best"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o755, path


def test_resume_cleans_unfinished_checkpoints_and_restores_one_renamed_aside(tmp_path, rlx_cli):
    run = train(tmp_path / "run")
    unfinished = run / "checkpoints" / ".000000009999.tmp-abc"
    unfinished.mkdir(parents=True)
    (run / "final").rename(run / ".final.old-4242")  # killed in the middle of the swap
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "3000", "--no-progress")
    assert code == 0, err
    assert "restored" in err and not unfinished.exists()
    assert not list(run.glob(".final.old-*"))
    assert rlx.load(run).env_steps >= 3000
