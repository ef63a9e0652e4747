"""A replay buffer larger than 4 GB saved in a checkpoint and loaded back, without pickle.

Fills rlx-offpolicy's ``FrameReplayBuffer`` with 620,000 synthetic 84x84 ``uint8`` frames
(4.4 GB, stacks of 4, 8 environments, some episodes cut), writes its state as the resume
part of a checkpoint (``rlx.checkpoint.save_checkpoint``: safetensors, whose 8-byte header
length and 64-bit offsets have no 4 GB limit), loads it with ``load_checkpoint`` into a
fresh buffer, and checks that every array is equal and that both buffers draw the same
minibatch from the same generator. Reports sizes, times and the peak resident memory.

    python benchmarks/offpolicy_buffer_checkpoint.py [--transitions 620000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import struct
import tempfile
import time
from pathlib import Path

import numpy as np

from rlx.checkpoint import RESUME_FILE, load_checkpoint, save_checkpoint
from rlx.protocols import AgentState
from rlx_offpolicy.frames import FrameReplayBuffer

STACK, SIDE, N_ENVS = 4, 84, 8


def new_buffer(capacity: int) -> FrameReplayBuffer:
    return FrameReplayBuffer(
        capacity, N_ENVS, (STACK, SIDE, SIDE), np.dtype(np.uint8), (), np.dtype(np.uint8)
    )


def fill(buffer: FrameReplayBuffer, transitions: int) -> None:
    rng = np.random.default_rng(0)
    pool = rng.integers(0, 256, size=(64, SIDE, SIDE), dtype=np.uint8)
    stacks = np.empty((N_ENVS, STACK, SIDE, SIDE), np.uint8)
    for t in range(transitions // N_ENVS):
        stacks[:, :-1] = stacks[:, 1:]
        stacks[:, -1] = pool[(t + np.arange(N_ENVS)) % len(pool)]
        done = rng.random(N_ENVS) < 1 / 400
        terminated = done & (rng.random(N_ENVS) < 0.8)
        next_stacks = stacks.copy()
        next_stacks[:, -1] ^= 1  # a final frame that differs, kept for cut episodes
        buffer.add(
            stacks,
            rng.integers(18, size=N_ENVS),
            rng.random(N_ENVS),
            next_stacks,
            terminated,
            done,
            np.ones(N_ENVS, bool),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=620_000)
    parser.add_argument("--dir", default=None, help="where to write the checkpoint (a temp dir)")
    parser.add_argument(
        "--out",
        default=str(Path(__file__).parent / "results" / "offpolicy_buffer_checkpoint.json"),
    )
    args = parser.parse_args()
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="rlx-buffer-"))
    try:
        buffer = new_buffer(args.transitions)
        fill(buffer, args.transitions)
        arrays = buffer.state("buffer")
        started = time.perf_counter()
        path = save_checkpoint(workdir / "checkpoint", AgentState(), AgentState(arrays=arrays))
        saved = time.perf_counter() - started
        file = path / RESUME_FILE
        with file.open("rb") as handle:  # safetensors: u64 header length, JSON, raw bytes
            (header_length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(header_length))
        largest = max(
            end - begin
            for entry in header.values()
            if isinstance(entry, dict) and "data_offsets" in entry
            for begin, end in [entry["data_offsets"]]
        )
        expected = {
            key: value.copy() if value.nbytes < 1 << 20 else None for key, value in arrays.items()
        }
        rng_state = np.random.default_rng(1).bit_generator.state
        original_batch = buffer.sample(32, np.random.default_rng(1), 0.99)
        frames_checksum = int(buffer.arrays["frames"].sum(dtype=np.uint64))
        del buffer, arrays

        started = time.perf_counter()
        checkpoint = load_checkpoint(path)
        loaded = new_buffer(args.transitions)
        loaded.load(checkpoint.resume.arrays, "buffer")
        del checkpoint
        restored = time.perf_counter() - started
        state = loaded.state("buffer")
        small_equal = all(
            np.array_equal(state[key], value)
            for key, value in expected.items()
            if value is not None
        )
        rng = np.random.default_rng()
        rng.bit_generator.state = rng_state
        batch = loaded.sample(32, rng, 0.99)
        same_batch = all(np.array_equal(batch[key], original_batch[key]) for key in batch)
        same_frames = int(loaded.arrays["frames"].sum(dtype=np.uint64)) == frames_checksum
        results = {
            "machine": f"{platform.processor() or platform.machine()}, numpy {np.__version__}",
            "transitions": args.transitions,
            "resume_file_bytes": file.stat().st_size,
            "resume_file_gb": file.stat().st_size / 1e9,
            "largest_array_gb": largest / 1e9,
            "format": "safetensors (no pickle)",
            "save_seconds": saved,
            "load_seconds": restored,
            "peak_resident_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9,
            "frames_equal": same_frames,
            "bookkeeping_arrays_equal": small_equal,
            "same_minibatch_from_the_same_generator": same_batch,
        }
        print(json.dumps(results, indent=2))
        assert same_frames and small_equal and same_batch and largest > 4 * 2**30
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
