from __future__ import annotations

import json

import numpy as np
import pytest

from rlx.checkpoint import ARRAYS_FILE, STATE_FILE, load_checkpoint, save_checkpoint
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
    save_checkpoint(tmp_path / "c", _state(), trainer={"env_steps": 5})
    state, document = load_checkpoint(tmp_path / "c")
    assert state.arrays["q"].dtype == np.float64 and state.arrays["n"].dtype == np.int32
    np.testing.assert_array_equal(state.arrays["q"], np.ones((3, 2)))
    assert state.arrays["scalar"].shape == () and state.arrays["scalar"] == 2.5
    assert state.meta == {"steps": 7, "rng": {"state": 2**100 + 3}}
    assert document["trainer"] == {"env_steps": 5}


def test_no_pickle_is_written(tmp_path):
    save_checkpoint(tmp_path / "c", _state())
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [ARRAYS_FILE, STATE_FILE]
    assert b"\x80\x04" not in (tmp_path / "c" / ARRAYS_FILE).read_bytes()[:2]


def test_overwriting_replaces_the_checkpoint_and_leaves_no_temporary_files(tmp_path):
    save_checkpoint(tmp_path / "c", _state(1.0))
    save_checkpoint(tmp_path / "c", _state(2.0))
    state, _ = load_checkpoint(tmp_path / "c")
    assert state.arrays["q"][0, 0] == 2.0
    assert [p.name for p in tmp_path.iterdir()] == ["c"]


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    save_checkpoint(tmp_path / "c", _state(1.0))

    def broken_dump(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(json, "dump", broken_dump)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path / "c", _state(2.0))
    monkeypatch.undo()
    state, _ = load_checkpoint(tmp_path / "c")
    assert state.arrays["q"][0, 0] == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["c"]


def test_truncated_arrays_are_reported_as_corrupt(tmp_path):
    save_checkpoint(tmp_path / "c", _state())
    arrays = tmp_path / "c" / ARRAYS_FILE
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
    (tmp_path / "c" / ARRAYS_FILE).unlink()
    with pytest.raises(CheckpointError, match="incomplete"):
        load_checkpoint(tmp_path / "c")


def test_a_foreign_json_file_is_not_taken_for_a_checkpoint(tmp_path):
    save_checkpoint(tmp_path / "c", _state())
    (tmp_path / "c" / STATE_FILE).write_text(json.dumps({"hello": 1}))
    with pytest.raises(CheckpointError, match="not an rlx checkpoint"):
        load_checkpoint(tmp_path / "c")
