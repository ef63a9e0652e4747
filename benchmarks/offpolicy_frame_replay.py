"""Resident memory and speed of the Rainbow paper's replay: 1,000,000 Atari transitions drawn
by priority with 3-step returns, each frame stored once.

Fills rlx-offpolicy's ``PrioritizedFrameReplayBuffer`` with synthetic 84x84 ``uint8`` frames
in stacks of 4 (one environment, as the paper's single actor; episodes of random length,
some truncated), then draws minibatches of 32 by priority with 3-step returns (the stacks,
n-step returns and next stacks rebuilt by index) and gives each drawn transition a new
priority, as an update does. It reports the process's resident memory (``VmRSS``, the
pages really in use, and its peak ``VmHWM``), the fill rate and the sample and update
times. Target (issue 27): at most 7.5 GB resident, where a buffer storing both stacks of
every transition takes 56 GB.

    python benchmarks/offpolicy_frame_replay.py [--transitions 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlx_offpolicy.frames import PrioritizedFrameReplayBuffer

STACK, SIDE, BATCH, N_STEP, GAMMA = 4, 84, 32, 3, 0.99
RESULTS = Path(__file__).parent / "results"


def status_bytes(field: str) -> int:
    """A memory line of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def fill(buffer: PrioritizedFrameReplayBuffer, transitions: int, n_envs: int) -> float:
    """``transitions`` synthetic steps into ``buffer``; the seconds it took."""
    rng = np.random.default_rng(0)
    pool = rng.integers(0, 256, size=(64, SIDE, SIDE), dtype=np.uint8)
    stacks = np.empty((n_envs, STACK, SIDE, SIDE), np.uint8)
    next_stacks = np.empty_like(stacks)
    valid = np.ones(n_envs, bool)
    started = time.perf_counter()
    for t in range(transitions // n_envs):
        next_stacks[:, :-1] = stacks[:, 1:]
        next_stacks[:, -1] = pool[(t + np.arange(n_envs)) % len(pool)]
        done = rng.random(n_envs) < 1 / 400
        terminated = done & (rng.random(n_envs) < 0.8)
        buffer.add(
            stacks,
            rng.integers(18, size=n_envs),
            rng.random(n_envs),
            next_stacks,
            terminated,
            done,
            valid,
        )
        stacks, next_stacks = next_stacks, stacks
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=1_000_000)
    parser.add_argument("--n-envs", type=int, default=1)
    parser.add_argument("--batches", type=int, default=3000)
    parser.add_argument("--out", default=str(RESULTS / "offpolicy_frame_replay.json"))
    args = parser.parse_args()

    before = status_bytes("VmRSS")
    # Discrete actions in the smallest integer type that holds them, as the agents store them.
    buffer = PrioritizedFrameReplayBuffer(
        args.transitions,
        args.n_envs,
        (STACK, SIDE, SIDE),
        np.dtype(np.uint8),
        (),
        np.min_scalar_type(17),
        alpha=0.5,
    )
    fill_seconds = fill(buffer, args.transitions, args.n_envs)
    filled_resident = status_bytes("VmRSS")

    rng = np.random.default_rng(1)
    sample_times, update_times = [], []
    for _ in range(args.batches):
        started = time.perf_counter()
        batch = buffer.sample(BATCH, rng, GAMMA, N_STEP, beta=0.4)
        sampled = time.perf_counter()
        buffer.update_priorities(batch["indices"], rng.exponential(size=BATCH))
        sample_times.append(sampled - started)
        update_times.append(time.perf_counter() - sampled)
    assert batch["observations"].shape == (BATCH, STACK, SIDE, SIDE)
    resident = status_bytes("VmRSS")

    results = {
        "machine": machine(),
        "transitions": args.transitions,
        "n_envs": args.n_envs,
        "sampleable_transitions": len(buffer),
        "buffer_nbytes": buffer.nbytes,
        "sum_tree_nbytes": buffer.tree.nbytes,
        "resident_before_buffer_gb": before / 1e9,
        "resident_after_fill_gb": filled_resident / 1e9,
        "resident_after_sampling_gb": resident / 1e9,
        "peak_resident_gb": status_bytes("VmHWM") / 1e9,
        "two_stacks_per_transition_gb": args.transitions * 2 * STACK * SIDE * SIDE / 1e9,
        "fill_seconds": fill_seconds,
        "fill_transitions_per_second": args.transitions / fill_seconds,
        "batches": args.batches,
        "sample_32_median_ms": statistics.median(sample_times) * 1e3,
        "sample_32_p99_ms": float(np.percentile(sample_times, 99)) * 1e3,
        "update_32_median_ms": statistics.median(update_times) * 1e3,
        "batches_per_second": args.batches / (sum(sample_times) + sum(update_times)),
        "targets": {"peak_resident_gb": 7.5},
    }
    print(json.dumps(results, indent=2))
    out = Path(args.out)
    out.write_text(json.dumps(results, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(results))


def markdown(results: dict[str, Any]) -> str:
    m, r = results["machine"], results
    rows = [
        ("resident memory, peak (VmHWM)", f"{r['peak_resident_gb']:.2f} GB"),
        ("resident memory after the fill (VmRSS)", f"{r['resident_after_fill_gb']:.2f} GB"),
        ("resident memory after sampling (VmRSS)", f"{r['resident_after_sampling_gb']:.2f} GB"),
        ("resident before the buffer was built", f"{r['resident_before_buffer_gb']:.2f} GB"),
        ("buffer arrays and sum tree (nbytes)", f"{r['buffer_nbytes'] / 1e9:.3f} GB"),
        ("of which the sum tree", f"{r['sum_tree_nbytes'] / 1e6:.1f} MB"),
        ("both stacks of every transition instead", f"{r['two_stacks_per_transition_gb']:.1f} GB"),
        (
            "fill",
            f"{r['fill_transitions_per_second']:,.0f} transitions/s ({r['fill_seconds']:.0f} s)",
        ),
        (
            "draw 32 by priority, 3-step, stacks rebuilt (median)",
            f"{r['sample_32_median_ms']:.3f} ms",
        ),
        ("the same, 99th percentile", f"{r['sample_32_p99_ms']:.3f} ms"),
        ("priority update of 32 (median)", f"{r['update_32_median_ms']:.3f} ms"),
        ("batches drawn and updated per second", f"{r['batches_per_second']:,.0f}"),
    ]
    lines = [
        "# The Rainbow paper's replay in the frame buffer: priorities and 3-step returns",
        "",
        f"`benchmarks/offpolicy_frame_replay.py`: `PrioritizedFrameReplayBuffer` of "
        f"{results['transitions']:,} transitions ({results['n_envs']} environment), 84x84 "
        f"`uint8` frames in stacks of 4, alpha 0.5, filled with synthetic frames (episodes of "
        f"random length, some truncated), then {results['batches']:,} minibatches of 32 drawn "
        "by priority with 3-step returns (beta 0.4), each followed by a priority update. "
        f"Target (issue 27): at most {results['targets']['peak_resident_gb']} GB resident.",
        "",
        f"Machine: {m['processor']}, {m['cpus']} cores, {m['memory_gb']} GB, {m['platform']}, "
        f"Python {m['python']}, NumPy {m['numpy']}.",
        "",
        "| measure | value |",
        "| --- | ---: |",
        *[f"| {name} | {value} |" for name, value in rows],
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
