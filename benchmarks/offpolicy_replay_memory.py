"""Resident memory of a 1,000,000-transition Atari replay buffer, and the time to sample it.

Fills rlx-offpolicy's ``FrameReplayBuffer`` with synthetic 84x84 ``uint8`` frames in stacks
of 4 (8 environments, episodes of random length, some truncated), then reports the
process's resident memory (``VmRSS``, the pages really in use; the buffer's share is what
it grew by from before the buffer was built) and the time to sample a
minibatch of 32 stacks and their next observations. For comparison, the layout that stores
the observation and next observation stacks of every transition (Stable-Baselines3's
default, ``optimize_memory_usage=False``) is computed, not allocated: 2 x 4 x 84 x 84 bytes
per transition. Target (the issue): at most 7.1 GB resident, a batch of 32 in under 1 ms.

    python benchmarks/offpolicy_replay_memory.py [--transitions 1000000]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from rlx_offpolicy.frames import FrameReplayBuffer

STACK, SIDE, N_ENVS = 4, 84, 8


def resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=1_000_000)
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results" / "offpolicy_replay_memory.json")
    )
    args = parser.parse_args()

    before = resident_bytes()
    # Discrete actions are stored in the smallest integer type that holds them, as the agents do.
    buffer = FrameReplayBuffer(
        args.transitions,
        N_ENVS,
        (STACK, SIDE, SIDE),
        np.dtype(np.uint8),
        (),
        np.min_scalar_type(17),
    )
    rng = np.random.default_rng(0)
    pool = rng.integers(0, 256, size=(64, SIDE, SIDE), dtype=np.uint8)
    stacks = np.empty((N_ENVS, STACK, SIDE, SIDE), np.uint8)
    started = time.perf_counter()
    steps = args.transitions // N_ENVS
    for t in range(steps):
        stacks[:, :-1] = stacks[:, 1:]
        stacks[:, -1] = pool[(t + np.arange(N_ENVS)) % len(pool)]
        done = rng.random(N_ENVS) < 1 / 400
        terminated = done & (rng.random(N_ENVS) < 0.8)
        buffer.add(
            stacks,
            rng.integers(18, size=N_ENVS),
            rng.random(N_ENVS),
            stacks,
            terminated,
            done,
            np.ones(N_ENVS, bool),
        )
    filled = time.perf_counter() - started
    resident = resident_bytes()

    times = []
    for _ in range(2000):
        started = time.perf_counter()
        buffer.sample(32, rng, 0.99)
        times.append(time.perf_counter() - started)
    stored_layout = args.transitions * 2 * STACK * SIDE * SIDE

    results = {
        "machine": f"{platform.processor() or platform.machine()}, numpy {np.__version__}",
        "transitions": len(buffer) + N_ENVS,
        "buffer_nbytes": buffer.nbytes,
        "resident_bytes": resident,
        "resident_gb": resident / 1e9,
        "resident_before_buffer_gb": before / 1e9,
        "buffer_resident_gb": (resident - before) / 1e9,
        "two_stacks_per_transition_gb": stored_layout / 1e9,
        "fill_seconds": filled,
        "sample_32_median_ms": statistics.median(times) * 1e3,
        "sample_32_p99_ms": float(np.percentile(times, 99)) * 1e3,
        "targets": {"buffer_resident_gb": 7.1, "sample_32_ms": 1.0},
    }
    print(json.dumps(results, indent=2))
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
