"""Replay-buffer checkpoints edited with care (checksums recomputed, so that the checksum
check passes) are refused on resume with one CheckpointError, and nothing is written.

Each edit changes the ``buffer/...`` arrays of a real run's resume part: counters out of
range, arrays of another shape or dtype, priorities that no buffer could hold, frame-buffer
keys that point nowhere. A resume must never fail any other way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import rlx
from rlx.checkpoint import RESUME_FILE, STATE_FILE, _sha256, json_checksum
from rlx.errors import CheckpointError
from rlx.trainer import Trainer

Edit = Callable[[dict[str, np.ndarray]], None]

#: The three buffers: uniform (full ring, 32 slots per environment), prioritized (a ring
#: still filling, environments with different counts) and frames (Atari frame stacks).
RUNS = {
    "uniform": dict(env="CartPole-v1", steps=200, buffer_size=64),
    "prioritized": dict(env="CartPole-v1", steps=200, buffer_size=1000, prioritized=True),
    "frames": dict(env="ALE/Pong-v5", steps=96, buffer_size=200, wrappers=["atari"]),
}


def train(run_dir: Path, env: str, steps: int, wrappers=(), **config) -> Path:
    agent = rlx.make(
        "dqn",
        env,
        seed=0,
        wrappers=list(wrappers),
        n_envs=2,
        learning_starts=64,
        batch_size=8,
        hidden_sizes=(16,),
        **config,
    )
    Trainer(
        agent,
        run_dir=run_dir,
        steps=steps,
        eval_episodes=0,
        progress=False,
        verbose=False,
        plot=False,
        tensorboard=False,
    ).fit()
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    if pytest.importorskip("ale_py", reason="the frame buffer's run plays Atari") is None:
        pytest.skip("no ale_py")
    root = tmp_path_factory.mktemp("runs")
    return {name: train(root / name, **settings) for name, settings in RUNS.items()}


def edited_copy(run: Path, into: Path, edit: Edit) -> Path:
    """A copy of ``run`` whose checkpoints' resume arrays went through ``edit``, with the
    resume part's sha256 and the document checksum recomputed (as a careful forger would)."""
    import shutil

    shutil.copytree(run, into)
    for checkpoint in [into / "final", *into.glob("checkpoints/*")]:
        arrays = load_file(str(checkpoint / RESUME_FILE))
        edit(arrays)
        save_file(arrays, str(checkpoint / RESUME_FILE))
        document = json.loads((checkpoint / STATE_FILE).read_text())
        document.pop("checksum")
        document["resume"]["sha256"] = _sha256(checkpoint / RESUME_FILE)
        document["checksum"] = json_checksum(document)
        (checkpoint / STATE_FILE).write_text(json.dumps(document))
    return into


def fingerprint(run: Path) -> dict[str, str]:
    return {
        str(path.relative_to(run)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(run.rglob("*"))
        if path.is_file()
    }


# -- the edits -------------------------------------------------------------------------------


def setting(key: str, index, value) -> Edit:
    def edit(arrays):
        arrays[f"buffer/{key}"] = arrays[f"buffer/{key}"].copy()
        arrays[f"buffer/{key}"][index] = value

    return edit


def replacing(key: str, make: Callable[[np.ndarray], np.ndarray]) -> Edit:
    def edit(arrays):
        arrays[f"buffer/{key}"] = np.ascontiguousarray(make(arrays[f"buffer/{key}"]))

    return edit


def removing(key: str) -> Edit:
    return lambda arrays: arrays.pop(f"buffer/{key}")


def emptying_a_slot_with_a_priority(arrays):
    """Env 0 holds one transition fewer, while its last slot keeps its priority."""
    arrays["buffer/counts"] = arrays["buffer/counts"] - np.array([1, 0])
    arrays["buffer/positions"] = arrays["buffer/positions"] - np.array([1, 0])
    filled = int(arrays["buffer/counts"].max())
    for key in ("observations", "next_observations", "actions", "rewards", "terminated", "done"):
        arrays[f"buffer/{key}"] = np.ascontiguousarray(arrays[f"buffer/{key}"][:filled])
    arrays["buffer/priorities"] = np.ascontiguousarray(arrays["buffer/priorities"][: 2 * filled])
    arrays["buffer/priorities"][2 * (filled - 1)] = 1.0  # the slot of env 0 just emptied


def truncating_without_a_final_frame(arrays):
    arrays["buffer/done"] = arrays["buffer/done"].copy()
    arrays["buffer/terminated"] = arrays["buffer/terminated"].copy()
    arrays["buffer/done"][1, 0], arrays["buffer/terminated"][1, 0] = True, False


def adding_a_final_frame(key: int) -> Edit:
    def edit(arrays):
        arrays["buffer/final_keys"] = np.append(arrays["buffer/final_keys"], np.int64(key))
        frame = np.zeros((1, *arrays["buffer/final_frames"].shape[1:]), np.uint8)
        arrays["buffer/final_frames"] = np.concatenate([arrays["buffer/final_frames"], frame])

    return edit


COMMON = {
    "counts negative": setting("counts", 0, -1),
    "counts above the slots": setting("counts", 1, 10**6),
    "counts int32": replacing("counts", lambda a: a.astype(np.int32)),
    "counts of three environments": replacing("counts", lambda a: np.append(a, a[:1])),
    "counts a scalar": replacing("counts", lambda a: a[:1].reshape(())),
    "positions negative": setting("positions", 1, -3),
    "positions at the slot count": setting("positions", 0, 10**6),
    "positions float": replacing("positions", lambda a: a.astype(np.float64)),
    "positions of one environment": replacing("positions", lambda a: a[:1]),
    "actions int32": replacing("actions", lambda a: a.astype(np.int32)),
    "actions one row short": replacing("actions", lambda a: a[:-1]),
    "actions of three environments": replacing("actions", lambda a: np.concatenate([a, a], 1)),
    "rewards NaN": setting("rewards", (0, 0), np.nan),
    "rewards infinite": setting("rewards", (-1, 1), -np.inf),
    "rewards float64": replacing("rewards", lambda a: a.astype(np.float64)),
    "rewards flattened": replacing("rewards", lambda a: a.reshape(-1)),
    "terminated uint8": replacing("terminated", lambda a: a.astype(np.uint8)),
    "done missing": removing("done"),
    "done one row long": replacing("done", lambda a: np.concatenate([a, a[:1]])),
}

PLAIN = {
    "observations float64": replacing("observations", lambda a: a.astype(np.float64)),
    "observations of 5 features": replacing("observations", lambda a: a[..., [0, 1, 2, 3, 0]]),
    "observations one row short": replacing("observations", lambda a: a[:-1]),
    "next_observations missing": removing("next_observations"),
}

PRIORITIZED = {
    "positions behind the counts of a filling ring": setting("positions", 0, 3),
    "a priority NaN": setting("priorities", 0, np.nan),
    "a priority negative": setting("priorities", 3, -0.5),
    "a priority infinite": setting("priorities", 2, np.inf),
    "a priority 0 for a stored transition": setting("priorities", 1, 0.0),
    "a priority above the max priority": setting("priorities", 5, 1e9),
    "a priority for an empty slot": emptying_a_slot_with_a_priority,
    "priorities one short": replacing("priorities", lambda a: a[:-1]),
    "priorities float32": replacing("priorities", lambda a: a.astype(np.float32)),
    "priorities missing": removing("priorities"),
    "max priority 0": setting("max_priority", 0, 0.0),
    "max priority NaN": setting("max_priority", 0, np.nan),
    "max priority of two": replacing("max_priority", lambda a: np.append(a, a)),
    "max priority below the priorities": setting("max_priority", 0, 1e-3),
}

FRAMES = {
    "frames 83 pixels wide": replacing("frames", lambda a: a[..., :83]),
    "frames float32": replacing("frames", lambda a: a.astype(np.float32)),
    "frames missing": removing("frames"),
    "first int64": replacing("first", lambda a: a.astype(np.int64)),
    "a truncated transition without a final frame": truncating_without_a_final_frame,
    "a final key out of range": adding_a_final_frame(10**6),
    "a final key negative": adding_a_final_frame(-1),
    "a final key for a transition that is not truncated": adding_a_final_frame(3),
    "final keys int32": replacing("final_keys", lambda a: a.astype(np.int32)),
    "final frames of another size": replacing("final_frames", lambda a: np.zeros((0, 84, 80))),
    "final frames one too many": replacing(
        "final_frames", lambda a: np.concatenate([a, np.zeros((1, 84, 84), a.dtype)])
    ),
    "starting of one environment": replacing("starting", lambda a: a[:1]),
    "starting int64": replacing("starting", lambda a: a.astype(np.int64)),
    "zero_padding an array": replacing("zero_padding", lambda a: a.reshape(1)),
    "zero_padding missing": removing("zero_padding"),
}

CASES = [
    *[("uniform", name, edit) for name, edit in {**COMMON, **PLAIN}.items()],
    *[("prioritized", name, edit) for name, edit in {**COMMON, **PLAIN, **PRIORITIZED}.items()],
    *[("frames", name, edit) for name, edit in {**COMMON, **FRAMES}.items()],
]


@pytest.mark.parametrize(
    "buffer, edit", [(b, e) for b, _, e in CASES], ids=[f"{b}: {n}" for b, n, _ in CASES]
)
def test_an_edited_buffer_with_valid_checksums_is_one_checkpoint_error(
    runs, tmp_path, buffer, edit
):
    run = edited_copy(runs[buffer], tmp_path / "run", edit)
    before = fingerprint(run)
    with pytest.raises(CheckpointError, match=r"replay buffer|missing field|dtype"):
        Trainer.resume(run, steps=RUNS[buffer]["steps"] + 64, progress=False, verbose=False)
    assert fingerprint(run) == before


@pytest.mark.parametrize("buffer", list(RUNS))
def test_an_unedited_checkpoint_still_resumes(runs, tmp_path, buffer):
    run = edited_copy(runs[buffer], tmp_path / "run", lambda arrays: None)
    Trainer.resume(
        run, steps=RUNS[buffer]["steps"] + 16, progress=False, verbose=False, plot=False
    ).fit()


def test_the_command_line_prints_the_buffer_problem_and_exits_2(runs, tmp_path, rlx_cli):
    run = edited_copy(runs["prioritized"], tmp_path / "run", setting("priorities", 0, np.nan))
    before = fingerprint(run)
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "400")
    assert code == 2, err
    assert "priorities" in err and "Traceback" not in err
    assert fingerprint(run) == before
