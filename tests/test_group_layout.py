"""group.json records how the seeds were batched (``chunks``, ``jobs``, ``batched``): a resume
without ``--jobs`` (the command rlx prints after Ctrl-C) batches them again alike and ends as
the uninterrupted group; another ``--jobs`` says the result will differ."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlx.checkpoint import load_checkpoint
from rlx.errors import CheckpointError
from rlx.groups import GroupTrainer, new_group

SMALL_PPO = {"n_steps": 32, "batch_size": 64, "n_epochs": 2, "hidden_sizes": (16, 16)}
QUIET = {"eval_every": 512, "eval_episodes": 2, "log_every": 256, "checkpoint_every": 0,
         "progress": False, "plot": False, "tensorboard": False}  # fmt: skip


def _group(path: Path, steps: int, jobs: int) -> None:
    new_group(
        "ppo", "CartPole-v1", seeds=[0, 1, 2, 3], jobs=jobs, hyperparameters=SMALL_PPO,
        settings={**QUIET, "steps": steps}, out=path,
    ).fit()  # fmt: skip


def test_group_json_records_the_batches_and_a_resume_without_jobs_keeps_them(tmp_path):
    _group(tmp_path / "resumed", 512, jobs=2)
    record = json.loads((tmp_path / "resumed" / "group.json").read_text())
    assert record["chunks"] == [[0, 1], [2, 3]] and record["jobs"] == 2 and record["batched"]
    resumed = GroupTrainer.resume(tmp_path / "resumed", steps=1024)  # no jobs: as recorded
    assert resumed.jobs == 2 and not any("differ" in notice for notice in resumed.notices)
    resumed.fit()
    _group(tmp_path / "straight", 1024, jobs=2)
    for seed in range(4):
        a = load_checkpoint(tmp_path / "resumed" / f"seed-{seed}" / "final")
        b = load_checkpoint(tmp_path / "straight" / f"seed-{seed}" / "final")
        for key, value in a.policy.arrays.items():
            np.testing.assert_array_equal(value, b.policy.arrays[key], err_msg=key)


def test_another_jobs_on_resume_says_the_result_will_differ(tmp_path):
    _group(tmp_path / "group", 128, jobs=2)
    resumed = GroupTrainer.resume(tmp_path / "group", jobs=1, steps=512)
    assert any("--jobs 1 batches the seeds otherwise" in n for n in resumed.notices)
    assert [[task["seed"] for task in chunk] for chunk in resumed.chunks()] == [[0, 1, 2, 3]]


@pytest.mark.parametrize(
    "chunks", [[[0, 0], [1]], [[0, 9]], "0,1", [[True]]], ids=["twice", "foreign", "text", "bool"]
)
def test_a_bad_recorded_layout_is_one_message(tmp_path, chunks):
    new_group(
        "q-learning", "FrozenLake-v1", seeds=[0, 1], jobs=1, settings={**QUIET, "steps": 200},
        out=tmp_path / "group",
    ).fit()  # fmt: skip
    file = tmp_path / "group" / "group.json"
    record = json.loads(file.read_text())
    record["chunks"] = chunks
    file.write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="chunks"):
        GroupTrainer.resume(tmp_path / "group", steps=512)
