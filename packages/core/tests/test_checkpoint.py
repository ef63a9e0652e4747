from __future__ import annotations

import json
import os

import numpy as np
import pytest

from rlx.checkpoint import POLICY_FILE, RESUME_FILE, STATE_FILE, load_checkpoint, save_checkpoint
from rlx.errors import CheckpointError
from rlx.protocols import AgentState


def _state(value: float = 1.0) -> AgentState:
    return AgentState(
        arrays={
            "q": np.full((3, 2), value, dtype=np.float64),
            "n": np.arange(4, dtype=np.int32),
            "scalar": np.array(2.5),
        },
        meta={"steps": 7, "rng": {"state": 2**100 + 3}},
    )


def test_round_trip_keeps_arrays_dtypes_and_json(tmp_path):
    save_checkpoint(tmp_path / "c", _state(), AgentState(meta={"r": 1}), trainer={"env_steps": 5})
    checkpoint = load_checkpoint(tmp_path / "c")
    state, document = checkpoint.policy, checkpoint.document
    assert checkpoint.resume.meta == {"r": 1} and checkpoint.resume.arrays == {}
    assert state.arrays["q"].dtype == np.float64 and state.arrays["n"].dtype == np.int32
    np.testing.assert_array_equal(state.arrays["q"], np.ones((3, 2)))
    assert state.arrays["scalar"].shape == () and state.arrays["scalar"] == 2.5
    assert state.meta == {"steps": 7, "rng": {"state": 2**100 + 3}}
    assert document["trainer"] == {"env_steps": 5}


def test_no_pickle_is_written(tmp_path):
    save_checkpoint(tmp_path / "c", _state(), _state())
    files = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert files == sorted([POLICY_FILE, RESUME_FILE, STATE_FILE])
    assert b"\x80\x04" not in (tmp_path / "c" / POLICY_FILE).read_bytes()[:2]


def test_a_policy_only_checkpoint_has_no_resume_part(tmp_path):
    save_checkpoint(tmp_path / "c", _state())
    assert not (tmp_path / "c" / RESUME_FILE).exists()
    checkpoint = load_checkpoint(tmp_path / "c")
    assert checkpoint.resume is None and checkpoint.policy.arrays["q"].shape == (3, 2)


def test_the_resume_part_is_read_only_when_asked_for(tmp_path):
    save_checkpoint(tmp_path / "c", _state(), _state(2.0))
    (tmp_path / "c" / RESUME_FILE).write_bytes(b"garbage")
    assert load_checkpoint(tmp_path / "c", resume=False).resume is None
    with pytest.raises(CheckpointError, match=r"resume\.safetensors does not match its checksum"):
        load_checkpoint(tmp_path / "c")


def test_a_checkpoint_of_the_old_one_file_layout_names_its_version(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    document = {"format": "rlx-checkpoint", "format_version": 1, "arrays_sha256": "0", "meta": {}}
    (old / STATE_FILE).write_text(json.dumps(document))
    (old / "arrays.safetensors").write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"format version 1, written before rlx-core 0\.1\.0"):
        load_checkpoint(old)


def test_a_newer_format_asks_for_an_upgrade(tmp_path):
    save_checkpoint(tmp_path / "c", _state())
    document = json.loads((tmp_path / "c" / STATE_FILE).read_text())
    (tmp_path / "c" / STATE_FILE).write_text(json.dumps({**document, "format_version": 99}))
    with pytest.raises(CheckpointError, match=r"newer than this rlx-core reads.*upgrade"):
        load_checkpoint(tmp_path / "c")


def test_overwriting_replaces_the_checkpoint_and_leaves_no_temporary_files(tmp_path):
    save_checkpoint(tmp_path / "c", _state(1.0))
    save_checkpoint(tmp_path / "c", _state(2.0))
    assert load_checkpoint(tmp_path / "c").policy.arrays["q"][0, 0] == 2.0
    assert [p.name for p in tmp_path.iterdir()] == ["c"]


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    save_checkpoint(tmp_path / "c", _state(1.0))

    def broken_sync(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_sync)  # state.json is the last file written
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path / "c", _state(2.0))
    monkeypatch.undo()
    assert load_checkpoint(tmp_path / "c").policy.arrays["q"][0, 0] == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["c"]


def test_truncated_arrays_are_reported_as_corrupt(tmp_path):
    save_checkpoint(tmp_path / "c", _state())
    arrays = tmp_path / "c" / POLICY_FILE
    arrays.write_bytes(arrays.read_bytes()[:-5])
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(tmp_path / "c")


def test_garbage_json_is_reported_as_corrupt(tmp_path):
    save_checkpoint(tmp_path / "c", _state())
    (tmp_path / "c" / STATE_FILE).write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(tmp_path / "c")


def test_missing_checkpoint_and_missing_files_are_clear_errors(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nothing")
    save_checkpoint(tmp_path / "c", _state())
    (tmp_path / "c" / POLICY_FILE).unlink()
    with pytest.raises(CheckpointError, match="incomplete"):
        load_checkpoint(tmp_path / "c")


def test_a_foreign_json_file_is_not_taken_for_a_checkpoint(tmp_path):
    save_checkpoint(tmp_path / "c", _state())
    (tmp_path / "c" / STATE_FILE).write_text(json.dumps({"hello": 1}))
    with pytest.raises(CheckpointError, match="not an rlx checkpoint"):
        load_checkpoint(tmp_path / "c")
