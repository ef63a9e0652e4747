"""A batched seed group killed with SIGKILL (no chance to save ``final/``) after every seed's
first periodic checkpoint: ``rlx run --resume GROUP`` (no ``--jobs``: the recorded batches)
ends with every seed's final checkpoint and metrics rows equal to the group never stopped's,
or, when the kill fell between the seeds' checkpoints of one round, says it cannot be exact."""

from __future__ import annotations

import csv
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from test_interrupts import _finish, _process_group, _rlx

from rlx.checkpoint import load_checkpoint

TIMEOUT = 120.0
PPO = ("ppo", "--env", "CartPole-v1", "--untuned", "-s", "n_steps=64", "-s", "batch_size=64",
       "-s", "n_epochs=2", "-s", "hidden_sizes=[16]", "--seeds", "0-2", "--jobs", "1",
       "--steps", "4096", "--checkpoint-every", "512", "--eval-every", "1024",
       "--eval-episodes", "2")  # fmt: skip


def _rows(run: Path) -> list[dict[str, str]]:
    """metrics.csv without its wall-clock columns."""
    with open(run / "metrics.csv", newline="") as f:
        return [
            {k: v for k, v in row.items() if not k.startswith("time/")} for row in csv.DictReader(f)
        ]


def _has_checkpoint(run: Path) -> bool:
    folder = run / "checkpoints"
    return folder.is_dir() and any(p.name.isdigit() for p in folder.iterdir())


@pytest.mark.skipif(os.name != "posix", reason="process groups and SIGKILL")
def test_a_batched_group_killed_after_its_checkpoints_resumes_to_the_uninterrupted_group(
    tmp_path,
):
    group, straight = tmp_path / "group", tmp_path / "straight"
    config = tmp_path / "trainer.toml"
    config.write_text("[trainer]\nlog_every = 128\nplot = false\ntensorboard = false\n")
    command = _rlx("run", *PPO, "--config", str(config), "--out", str(group), "--no-progress")
    with _process_group(command, tmp_path / "killed") as process:
        deadline = time.monotonic() + TIMEOUT
        while not all(_has_checkpoint(group / f"seed-{k}") for k in range(3)):
            assert process.poll() is None, (tmp_path / "killed.err").read_text()
            assert time.monotonic() < deadline, "the group wrote no checkpoint in time"
            time.sleep(0.01)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=TIMEOUT)
    assert not any((group / f"seed-{k}" / "final").exists() for k in range(3))
    code, err = _finish(tmp_path, "resumed", "--resume", str(group))
    assert code == 0 and "Traceback" not in err, err
    code, err_straight = _finish(
        tmp_path, "straight", *PPO, "--config", str(config), "--out", str(straight)
    )
    assert code == 0, err_straight
    if "at different iterations" in err:  # killed between two seeds' checkpoints of a round
        assert "will not equal an uninterrupted group's" in err
        return
    for k in range(3):
        a = load_checkpoint(group / f"seed-{k}" / "final")
        b = load_checkpoint(straight / f"seed-{k}" / "final")
        assert a.resume is not None and b.resume is not None
        for part, other in ((a.policy, b.policy), (a.resume, b.resume)):
            for key, value in part.arrays.items():
                np.testing.assert_array_equal(value, other.arrays[key], err_msg=f"{k}: {key}")
        assert _rows(group / f"seed-{k}") == _rows(straight / f"seed-{k}")
