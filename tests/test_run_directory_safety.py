"""rlx deletes only what it wrote, never writes through a link out of a run directory, and
leaves no run stranded.

Each test reproduces a route of the second hardening report: a folder that holds a
``config.json`` of its own, links planted in a run directory (as one downloaded from
elsewhere could hold them), runs killed between their first evaluation and their first
checkpoint, a resume that fails at once, a full disk, a read-only run directory and Ctrl-C in
a run's last iteration.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import rlx
from rlx.errors import ConfigError, TrainingError
from rlx.runs import MARKER_FILE, WRITTEN
from rlx.trainer import Trainer

QUIET = {"progress": False, "verbose": False, "tensorboard": False, "plot": False}


def train(run_dir: Path, steps: int = 2000, **settings) -> Path:
    """A q-learning FrozenLake run (a few seconds at most)."""
    options = {**QUIET, "eval_every": 1000, "eval_episodes": 2, **settings}
    Trainer(
        rlx.make("q-learning", "FrozenLake-v1", seed=0), run_dir=run_dir, steps=steps, **options
    ).fit()
    return run_dir


def tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (links not followed) with a digest of what it holds."""
    entries = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            entries[name] = f"link to {os.readlink(path)}"
        elif path.is_file():
            entries[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            entries[name] = "folder"
    return entries


def diverging(run_dir: Path) -> list[str]:
    """``rlx run`` arguments of a PPO run whose first update fails (the loss becomes inf)."""
    return [
        "run", "ppo", "--env", "CartPole-v1", "--set", "learning_rate=1e30",
        "--steps", "4096", "--out", str(run_dir), "--no-progress",
    ]  # fmt: skip


# -- 1. a folder rlx did not write is never deleted -------------------------------------------


def test_a_folder_with_its_own_config_json_is_refused_and_kept(tmp_path, rlx_cli):
    project = tmp_path / "proj"
    project.mkdir()
    # The worst case: a user's config.json that reads as an rlx run's (copied as a template).
    config = {"agent": "ppo", "env": "CartPole-v1", "seed": 0, "hyperparameters": {}}
    (project / "config.json").write_text(json.dumps(config))
    (project / "notes.txt").write_text("notes")
    before = tree(project)
    code, _, err = rlx_cli(*diverging(project))
    assert code == 2 and "already exists and is not empty" in err, err
    assert "--resume" not in err  # it is not a run to continue
    assert tree(project) == before
    code, _, err = rlx_cli("run", "--resume", str(project), "--steps", "100")
    assert code == 2 and "nothing to resume" in err, err
    assert tree(project) == before


def test_a_failed_run_in_an_empty_folder_of_the_user_leaves_the_folder(
    tmp_path, rlx_cli, monkeypatch
):
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.chdir(project)
    code, _, err = rlx_cli(*diverging(Path(".")))
    assert code == 2 and "the loss became" in err, err
    assert project.is_dir() and list(project.iterdir()) == []


def test_a_failed_new_run_removes_what_it_made_and_the_folders_above_it(tmp_path, rlx_cli):
    code, _, err = rlx_cli(*diverging(tmp_path / "runs" / "deep" / "run"))
    assert code == 2, err
    assert list(tmp_path.iterdir()) == []


def stranded(tmp_path: Path) -> Path:
    """An rlx run killed after its first evaluation, before its first periodic checkpoint:
    config.json, metrics.csv and best/ (the run the report calls stranded), plus the user's
    notes."""
    run = train(tmp_path / "run", steps=2000, checkpoint_every=100_000)
    for name in ("final", "checkpoints"):
        shutil.rmtree(run / name, ignore_errors=True)
    assert (run / "best").is_dir() and (run / "metrics.csv").is_file()
    (run / "notes.md").write_text("my analysis")
    (run / "analysis").mkdir()
    (run / "analysis" / "figure.txt").write_text("a figure")
    return run


def test_a_failed_resume_of_a_run_from_scratch_keeps_the_users_files(tmp_path, monkeypatch):
    run = stranded(tmp_path)
    config = (run / "config.json").read_bytes()
    trainer = Trainer.resume(run, steps=3000)

    def fail():
        raise TrainingError("the loss became nan")

    monkeypatch.setattr(trainer.agent, "step", fail)
    with pytest.raises(TrainingError):
        trainer.fit()
    assert (run / "notes.md").read_text() == "my analysis"
    assert (run / "analysis" / "figure.txt").read_text() == "a figure"
    assert (run / "config.json").read_bytes() == config
    assert (run / MARKER_FILE).is_file()


def test_a_failed_resume_changes_nothing_in_the_run(tmp_path, monkeypatch):
    run = train(tmp_path / "run")
    (run / "notes.md").write_text("my analysis")
    before = tree(run)
    trainer = Trainer.resume(run, steps=4000)

    def fail():
        raise TrainingError("the loss became nan")

    monkeypatch.setattr(trainer.agent, "step", fail)
    with pytest.raises(TrainingError):
        trainer.fit()
    assert tree(run) == before  # config.json too: the new budget was not recorded


def test_a_resume_refused_for_its_budget_writes_nothing(tmp_path, rlx_cli):
    run = train(tmp_path / "run")
    before = tree(run)
    code, _, err = rlx_cli("run", "--resume", str(run), "--eval-every", "500")
    assert code == 2 and "budget" in err, err
    assert tree(run) == before


# -- 2. nothing is written through a link -----------------------------------------------------


def plant(run: Path, name: str, outside: Path) -> Path:
    """Replace ``run/name`` (a file or a folder rlx writes) with a link to a copy outside."""
    target = outside / name.replace("/", "_")
    path = run / name
    if path.is_dir():
        shutil.copytree(path, target)
        shutil.rmtree(path)
    elif path.exists():
        shutil.copy(path, target)
        path.unlink()
    else:
        target.write_text("outside")
    path.symlink_to(target)
    return target


LINKED = [name for name in WRITTEN if name != MARKER_FILE] + ["checkpoints/000000001000"]


@pytest.mark.parametrize("name", LINKED)
def test_resume_refuses_a_link_where_rlx_writes(tmp_path, rlx_cli, name):
    run = train(tmp_path / "run", checkpoint_every=1000, plot=True, tensorboard=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    plant(run, name, outside)
    before = tree(outside)
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "3000", "--no-progress")
    assert code == 2 and "symbolic links" in err and name in err, err
    assert tree(outside) == before


def test_a_link_as_marker_does_not_make_a_folder_a_run(tmp_path, rlx_cli):
    run = train(tmp_path / "run", steps=1000, checkpoint_every=0)
    shutil.rmtree(run / "final")
    shutil.rmtree(run / "best")
    marker = tmp_path / "marker"
    (run / MARKER_FILE).rename(marker)
    (run / MARKER_FILE).symlink_to(marker)
    code, _, err = rlx_cli(*diverging(run))
    assert code == 2 and "already exists" in err, err


def test_the_reported_metrics_tmp_link_cannot_write_a_profile(tmp_path, rlx_cli):
    """The report's reproduction: a planted metrics.csv.tmp link and a crafted metrics.csv."""
    run = train(tmp_path / "run")
    (run / "metrics.csv").write_text("touch PWNED #\n")
    profile = tmp_path / "profile"
    profile.write_text("export PATH=/usr/bin\n")
    (run / "metrics.csv.tmp").symlink_to(profile)
    rlx_cli("run", "--resume", str(run), "--steps", "3000", "--no-progress")
    assert profile.read_text() == "export PATH=/usr/bin\n"
    assert (run / "metrics.csv.tmp").is_symlink()  # rlx writes no file of that name


def test_a_downloaded_run_cannot_make_eval_plot_resume_or_init_from_write_outside(
    tmp_path, rlx_cli
):
    """Every path rlx writes in the run is a link to a folder outside; each command either
    refuses or writes inside the run directory, and the outside is unchanged."""
    run = train(tmp_path / "run", checkpoint_every=1000, plot=True, tensorboard=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in (".lock", "metrics.csv.tmp", "learning_curve.png", "tensorboard", "checkpoints"):
        plant(run, name, outside)
    (run / "videos").symlink_to(outside)
    before = tree(outside)
    commands = [
        ("eval", str(run), "--episodes", "2"),
        ("eval", str(run), "--best", "--episodes", "2"),
        ("plot", str(run)),
        ("run", "--resume", str(run), "--steps", "4000", "--no-progress"),
        ("run", "--resume", str(run), "--steps", "4000", "--video-every", "1000", "--no-progress"),
        (
            "run", "q-learning", "--env", "FrozenLake-v1", "--init-from", str(run),
            "--steps", "1000", "--out", str(tmp_path / "warm"), "--no-progress",
        ),
    ]  # fmt: skip
    for command in commands:
        code, _, err = rlx_cli(*command)
        assert code in (0, 2), (command, err)
        assert "Traceback" not in err, (command, err)
        assert tree(outside) == before, command
    assert not (run / "learning_curve.png").is_symlink()  # plot replaced the link
    assert (tmp_path / "warm" / "final").is_dir()


def test_plot_replaces_a_planted_link_with_the_image(tmp_path, rlx_cli):
    run = train(tmp_path / "run")
    target = tmp_path / "bashrc"
    target.write_text("alias ls=rm\n")
    (run / "learning_curve.png").symlink_to(target)
    code, _, err = rlx_cli("plot", str(run))
    assert code == 0, err
    assert target.read_text() == "alias ls=rm\n"
    assert (run / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_metrics_rows_are_not_appended_through_a_link(tmp_path):
    """The csv logger opens metrics.csv with O_NOFOLLOW: a link swapped in during a run fails
    the write instead of appending elsewhere."""
    from rlx.loggers import CsvLogger, RunInfo

    run = tmp_path / "run"
    run.mkdir()
    logger = CsvLogger()
    logger.start(RunInfo(run_dir=run, identity=None, config={}, resumed=None))
    logger.log(1, {"env_steps": 1, "x": 1.0})
    target = tmp_path / "target"
    target.write_text("kept\n")
    (run / "metrics.csv").unlink()
    (run / "metrics.csv").symlink_to(target)
    with pytest.raises(OSError) as caught:
        logger.log(2, {"env_steps": 2, "x": 2.0})
    assert caught.value.errno == errno.ELOOP
    assert target.read_text() == "kept\n"


# -- 4. stranded run directories --------------------------------------------------------------


def test_a_run_killed_after_its_first_evaluation_resumes_from_scratch(tmp_path, rlx_cli):
    run = stranded(tmp_path)
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "2500", "--no-progress")
    assert code == 0, err
    assert "holds no checkpoint" in err and "from scratch" in err
    assert rlx.load(run).env_steps >= 2500
    assert (run / "notes.md").read_text() == "my analysis"


def test_a_run_killed_after_its_first_evaluation_can_be_reused_as_out(tmp_path, rlx_cli):
    run = stranded(tmp_path)
    code, _, err = rlx_cli(
        "run", "sarsa", "--env", "FrozenLake-v1", "--out", str(run), "--steps", "1500",
        "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    assert "stopped before its first checkpoint" in err
    assert json.loads((run / "config.json").read_text())["agent"] == "sarsa"
    assert (run / "analysis" / "figure.txt").read_text() == "a figure"


# -- 6. read-only directories and full disks --------------------------------------------------


def test_resume_of_a_read_only_run_directory_is_one_message(tmp_path, rlx_cli, monkeypatch):
    """A read-only file system (root ignores chmod, so the refusal is simulated at os.open)."""
    run = train(tmp_path / "run")
    before = tree(run)
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):
        if str(path).startswith(str(run)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "3000", "--no-progress")
    assert code == 2 and "read-only" in err and "rlx eval" in err, err
    assert tree(run) == before


def test_a_full_disk_during_a_checkpoint_is_one_message(tmp_path):
    """The file-size limit makes writes fail with EFBIG inside safetensors, as a full disk
    fails them with ENOSPC (both reach rlx as safetensors' own error, not an OSError)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))

    run = tmp_path / "run"
    command = "run ppo --env CartPole-v1 --set hidden_sizes=[256,256] --steps 4096 "
    command += "--checkpoint-every 2048"
    process = subprocess.run(
        [sys.executable, "-m", "rlx.cli", *command.split(), "--out", str(run), "--no-progress"],
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 2, process.stderr
    assert "Traceback" not in process.stderr
    assert "could not write the checkpoint" in process.stderr
    assert not run.exists()  # nothing was saved, so the run that could not start left nothing


# -- 7. Ctrl-C in the last iteration ----------------------------------------------------------


def test_ctrl_c_in_the_last_iteration_resumes_to_the_final_evaluation(tmp_path):
    """The first Ctrl-C during the last iteration stops before the final evaluation; the
    resumed run evaluates, and its metrics equal an uninterrupted run's."""
    settings = {**QUIET, "steps": 4096, "eval_every": 2048, "eval_episodes": 3}

    def make():
        return rlx.make("ppo", "CartPole-v1", seed=0, n_envs=2, n_steps=512)

    whole = Trainer(make(), run_dir=tmp_path / "whole", **settings).fit()
    trainer = Trainer(make(), run_dir=tmp_path / "cut", **settings)
    step = trainer.agent.step

    def last_iteration_interrupted():
        iteration = step()
        if trainer.env_steps + iteration.env_steps >= settings["steps"]:
            trainer._interrupted = True  # what the SIGINT handler sets
        return iteration

    trainer.agent.step = last_iteration_interrupted
    cut = trainer.fit()
    assert cut.stop_reason == "interrupted" and cut.final_eval is None
    resumed = Trainer.resume(tmp_path / "cut").fit()
    assert resumed.stop_reason == "steps" and resumed.final_eval is not None
    assert resumed.final_eval.returns == whole.final_eval.returns

    def rows(run: Path) -> list[dict[str, str]]:
        from rlx.runs import read_metrics

        _, table = read_metrics(run / "metrics.csv")
        return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in table]

    assert rows(tmp_path / "cut") == rows(tmp_path / "whole")
    with pytest.raises(ConfigError, match="budget"):
        Trainer.resume(tmp_path / "cut")  # now finished: its budget is spent


# -- links anywhere, any command (hypothesis) -------------------------------------------------

COMMANDS = {
    "eval": "eval RUN --episodes 2",
    "plot": "plot RUN",
    "resume": "run --resume RUN --steps 3000 --no-progress",
    "videos": "run --resume RUN --steps 3000 --video-every 500 --no-progress",
    "init-from": "run q-learning --env FrozenLake-v1 --init-from RUN --steps 500 --out WARM "
    "--no-progress",
}
PLANTABLE = [*WRITTEN, "metrics.csv.tmp", "checkpoints/000000001000", "tensorboard/x", "best/x"]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return train(
        tmp_path_factory.mktemp("template") / "run",
        checkpoint_every=1000,
        plot=True,
        tensorboard=True,
    )


def test_links_planted_anywhere_never_lead_a_write_outside(template, tmp_path_factory, rlx_cli):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(
        max_examples=20,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        names=st.lists(st.sampled_from(PLANTABLE), min_size=1, max_size=4, unique=True),
        command=st.sampled_from(sorted(COMMANDS)),
    )
    def check(names: list[str], command: str) -> None:
        tmp = tmp_path_factory.mktemp("links")
        run = tmp / "run"
        shutil.copytree(template, run, symlinks=True)
        outside = tmp / "outside"
        outside.mkdir()
        for name in names:
            if name.endswith("/x"):
                (run / name).parent.mkdir(exist_ok=True)
            plant(run, name, outside)
        before = tree(outside)
        words = COMMANDS[command].replace("RUN", str(run)).replace("WARM", str(tmp / "warm"))
        code, _, err = rlx_cli(*words.split())
        assert code in (0, 2), err
        assert "Traceback" not in err, err
        assert tree(outside) == before

    check()
