"""What the trainer costs around the agent, before and after a change of rlx-core.

Runs ``rlx run q-learning --env FrozenLake-v1 --out RUN_DIR`` (a recorded run: metrics.csv,
TensorBoard events, checkpoints, evaluations, the plot) on the working tree and on a
reference commit of the same repository, alternately, ``--repeats`` times each, in fresh
processes, and reports the median environment steps per second of the training loop (the
trainer's own ``time/steps_per_second`` at the end of the run, read from metrics.csv, so
interpreter start-up and imports are left out). The reference is checked out with
``git worktree`` into a temporary folder and imported through ``PYTHONPATH`` (its rlx-core and
rlx-classical sources), with the same interpreter and libraries.

    python benchmarks/core_trainer_overhead.py --reference 3d55e83 [--steps 300000] [--repeats 5]

Results go to ``benchmarks/results/core_trainer_overhead.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "classical", "envs")


def run_once(source: Path, steps: int, out: Path) -> float:
    """Steps per second of one recorded q-learning run with the rlx sources under ``source``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(source / "packages" / p / "src") for p in PACKAGES),
    }
    command = [
        sys.executable, "-m", "rlx.cli", "run", "q-learning", "--env", "FrozenLake-v1",
        "--steps", str(steps), "--out", str(out), "--no-progress", "--seed", "0",
    ]  # fmt: skip
    subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    with open(out / "metrics.csv", newline="") as f:
        rows = [row for row in csv.DictReader(f) if row.get("time/steps_per_second")]
    return float(rows[-1]["time/steps_per_second"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="commit to compare with")
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        reference = Path(scratch) / "reference"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(reference), args.reference],
            check=True,
            capture_output=True,
        )
        try:
            speeds: dict[str, list[float]] = {"reference": [], "working tree": []}
            for repeat in range(args.repeats):
                for name, source in (("reference", reference), ("working tree", ROOT)):
                    out = Path(scratch) / f"{name.replace(' ', '-')}-{repeat}"
                    speeds[name].append(run_once(source, args.steps, out))
                    print(f"{name:>12}: {speeds[name][-1]:,.0f} steps/s", flush=True)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(reference)],
                check=False,
            )
    medians = {name: statistics.median(values) for name, values in speeds.items()}
    ratio = medians["working tree"] / medians["reference"]
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    result = {
        "benchmark": "rlx run q-learning --env FrozenLake-v1 with a run directory",
        "steps": args.steps,
        "repeats": args.repeats,
        "reference": args.reference,
        "working_tree": head,
        "steps_per_second": speeds,
        "median_steps_per_second": medians,
        "ratio_working_tree_to_reference": ratio,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }
    path = ROOT / "benchmarks" / "results" / "core_trainer_overhead.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"median: reference {medians['reference']:,.0f}, working tree "
        f"{medians['working tree']:,.0f} steps/s (ratio {ratio:.3f}); {path}"
    )


if __name__ == "__main__":
    main()
