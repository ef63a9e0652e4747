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


def test_resume_refuses_an_agent_target_in_config_json(tmp_path, cli):
    run = train(tmp_path / "run")
    edit_run(run, agent="this:Foo")
    code, out, err = cli("run", "--resume", str(run), "--steps", "4000")
    assert code == 2 and "--trust-code" in err and "Traceback" not in err
    assert "Beautiful is better" not in out + err  # `import this` never ran


def test_a_module_env_id_is_refused(tmp_path, cli, monkeypatch):
    run = train(tmp_path / "run")
    (tmp_path / "evil_env.py").write_text(EVIL)
    monkeypatch.syspath_prepend(str(tmp_path))
    edit_run(run, env="evil_env:Evil-v0")
    code, _, err = cli("eval", str(run))
    assert code == 2 and "not a registered environment id" in err
    code, _, err = cli("run", "--resume", str(run), "--steps", "4000")
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


def test_trust_code_on_the_command_line_needs_resume(cli):
    code, _, err = cli("run", "q-learning", "--env", "FrozenLake-v1", "--trust-code")
    assert code == 2 and "--trust-code applies to --resume" in err


# -- 3. checkpoints that pass the checksum but hold the wrong content ---------------------------


def test_a_wrong_json_type_in_the_state_is_one_checkpoint_error(tmp_path, cli):
    run = train(tmp_path / "run")
    tamper(run / "final", lambda d: d["resume"]["meta"].__setitem__("rng", "x"))
    with pytest.raises(CheckpointError, match="resume state does not fit"):
        rlx.load(run / "final")
    code, _, err = cli("run", "--resume", str(run), "--steps", "4000")
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


def test_another_runs_checkpoint_is_not_evaluated_silently(tmp_path, cli):
    mine = train(tmp_path / "mine", agent="q-learning")
    other = train(tmp_path / "other", agent="sarsa")
    shutil.rmtree(mine / "final")
    shutil.copytree(other / "final", mine / "final")
    code, out, err = cli("eval", str(mine))
    assert code == 2 and "belongs to another run" in err and "sarsa" in err
    assert out == ""
