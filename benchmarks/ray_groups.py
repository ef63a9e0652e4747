"""Seed groups on Ray against the local worker pool, and what a 1,000-seed group costs the driver.

Run ``python benchmarks/ray_groups.py``; it writes ``results/ray_groups.json`` and ``.md``. Each
measurement runs in a process of its own (the driver's memory is its own), inside a network
namespace of its own where the machine allows one (``unshare --net``), so that Ray's nodes and
connections stay on 127.0.0.1; Ray is started before the clock starts, as a cluster would be.

- ``ppo16``: PPO CartPole-v1, 16 seeds x 100,000 steps (rlx's tuned settings, no evaluation,
  no checkpoints but the last), batched, on the local pool (2 workers) and on Ray on this
  machine (2 CPUs, the default chunks: 2 tasks of 8 seeds); wall-clock of ``fit()``. The
  issue's target: Ray at most 1.1x the local pool.
- ``many``: q-learning FrozenLake-v1, 1,000 seeds x 1,000 steps with every default (final
  evaluation, checkpoint, plot, TensorBoard), on Ray (2 CPUs, one task a seed): wall-clock,
  the driver's CPU seconds (all its threads: Ray's client included) per seed, the seconds it
  spends writing what the workers send (per seed, and per checkpoint received), its peak
  resident memory against a 100-seed group's, and ``rlx eval`` / ``rlx plot`` of the group.
  From these: the expected wall-clock of a 1,000-seed group on N such machines,
  ``max(driver CPU per seed, worker seconds per seed / (N x CPUs)) x 1,000``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
QUIET = {
    "eval_episodes": 0,
    "checkpoint_every": 0,
    "progress": False,
    "verbose": False,
    "plot": False,
    "tensorboard": False,
}


def _start_ray(cpus: int) -> None:
    import ray

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    ray.get(ray.remote(lambda: 0).remote())  # a worker is up before the clock starts


def part_ppo16(backend: str, steps: int, out: Path) -> dict[str, Any]:
    from rlx.groups import new_group

    extra: dict[str, Any] = {"jobs": 2}
    if backend == "ray":
        _start_ray(2)
        extra = {"backend": "ray"}
    group = new_group(
        "ppo",
        "CartPole-v1",
        seeds=range(16),
        settings={"steps": steps, **QUIET},
        out=out,
        batched=True,
        **extra,
    )
    start = time.perf_counter()
    result = group.fit()
    seconds = time.perf_counter() - start
    chunks = json.loads((out / "group.json").read_text())["chunks"]
    return {"seconds": seconds, "chunks": chunks, "failed": len(result.failed)}


def part_many(seeds: int, steps: int, out: Path) -> dict[str, Any]:
    from rlx.groups import GroupTrainer, new_group

    _start_ray(2)
    received = {"seconds": 0.0, "calls": 0, "bytes": 0, "checkpoints": 0}
    original = GroupTrainer._receive

    def timed(self: Any, seed: int, changed: Any, gone: Any) -> None:
        begin = time.perf_counter()
        original(self, seed, changed, gone)
        received["seconds"] += time.perf_counter() - begin
        received["calls"] += 1
        received["bytes"] += sum(len(data) for data in changed.values())
        received["checkpoints"] += sum(
            1 for name in changed if name.endswith("state.json") and not name.startswith("best/")
        )

    GroupTrainer._receive = timed  # type: ignore[method-assign]
    group = new_group(
        "q-learning",
        "FrozenLake-v1",
        seeds=range(seeds),
        settings={"steps": steps, "progress": False},
        out=out,
        backend="ray",
    )
    cpu, start = time.process_time(), time.perf_counter()
    result = group.fit()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    worker = [r.elapsed for r in result.results.values()]
    rlx = str(Path(sys.executable).with_name("rlx"))
    timings = {}
    for command in (["eval", str(out), "--episodes", "2"], ["plot", str(out)]):
        begin = time.perf_counter()
        done = subprocess.run([rlx, *command], capture_output=True, text=True)
        timings[command[0]] = {"seconds": time.perf_counter() - begin, "exit": done.returncode}
    return {
        "seeds": seeds,
        "finished": len(result.results),
        "failed": len(result.failed),
        "wall_seconds": wall,
        "driver_cpu_seconds": cpu,
        "driver_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "received": received,
        "worker_train_seconds_median": sorted(worker)[len(worker) // 2] if worker else None,
        "commands": timings,
    }


def _isolated(args: list[str]) -> dict[str, Any]:
    """Run one part of this script in a process of its own (in a new network namespace when
    the machine allows it); its JSON line."""
    command = [sys.executable, str(Path(__file__).resolve()), "--part", *args]
    if (
        shutil.which("unshare")
        and subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0
    ):
        inner = " ".join(command)
        command = ["unshare", "--net", "sh", "-c", f"ip link set lo up && exec {inner}"]
    done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise SystemExit(f"{args} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(lines[-1])


def report(results: dict[str, Any]) -> str:
    ppo, many, small = results["ppo16"], results["many"], results["many_small"]
    ratio = ppo["ray"]["seconds"] / ppo["local"]["seconds"]
    lines = [
        "# Seed groups on Ray against the local pool",
        "",
        f"Machine: {results['machine']}. `python benchmarks/ray_groups.py`; raw figures in "
        "ray_groups.json. Ray runs on this machine (2 CPUs), started before the clock.",
        "",
        f"## 16 PPO CartPole seeds x {results['ppo_steps']:,} steps, batched",
        "",
        "| backend | chunks | seconds | / local |",
        "|---|---|---:|---:|",
        f"| local pool (2 workers) | {ppo['local']['chunks']} | {ppo['local']['seconds']:.1f} "
        "| 1.00 |",
        f"| Ray (2 CPUs) | {ppo['ray']['chunks']} | {ppo['ray']['seconds']:.1f} | {ratio:.2f} |",
        "",
        f"Target: Ray at most 1.1x the local pool: {'PASS' if ratio <= 1.1 else 'FAIL'}.",
        "",
        f"## {many['seeds']:,} q-learning FrozenLake seeds x {results['many_steps']:,} steps "
        "on Ray",
        "",
        "Every default: a final evaluation, checkpoint, plot and TensorBoard file per seed, one "
        "Ray task a seed.",
        "",
    ]
    per_seed_cpu = many["driver_cpu_seconds"] / many["seeds"]
    received = many["received"]
    per_seed_worker = many["wall_seconds"] * 2 / many["seeds"]  # 2 CPUs busy over the wall
    lines += [
        f"| | {small['seeds']:,} seeds | {many['seeds']:,} seeds |",
        "|---|---:|---:|",
        f"| finished / failed | {small['finished']} / {small['failed']} | {many['finished']} / "
        f"{many['failed']} |",
        f"| wall-clock (s) | {small['wall_seconds']:.1f} | {many['wall_seconds']:.1f} |",
        f"| driver CPU per seed (ms) | {1000 * small['driver_cpu_seconds'] / small['seeds']:.1f}"
        f" | {1000 * per_seed_cpu:.1f} |",
        f"| driver writing files per seed (ms) | "
        f"{1000 * small['received']['seconds'] / small['seeds']:.2f} | "
        f"{1000 * received['seconds'] / many['seeds']:.2f} |",
        f"| driver peak memory (MiB) | {small['driver_peak_rss_mib']:.0f} | "
        f"{many['driver_peak_rss_mib']:.0f} |",
        f"| `rlx eval GROUP --episodes 2` (s) | {small['commands']['eval']['seconds']:.1f} | "
        f"{many['commands']['eval']['seconds']:.1f} |",
        f"| `rlx plot GROUP` (s) | {small['commands']['plot']['seconds']:.1f} | "
        f"{many['commands']['plot']['seconds']:.1f} |",
        "",
        f"The driver received {received['calls']:,} batches of files "
        f"({received['bytes'] / 2**20:.1f} MiB, {received['checkpoints']:,} checkpoints): "
        f"{1000 * received['seconds'] / max(1, received['checkpoints']):.2f} ms of writing per "
        "checkpoint received, files included.",
        "",
        "## Expected wall-clock of 1,000 seeds on N machines",
        "",
        f"A seed occupies a worker CPU for about {per_seed_worker:.2f} s here (wall-clock x 2 "
        f"CPUs / seeds, Ray's task overhead included); the driver spends {1000 * per_seed_cpu:.1f}"
        " ms of CPU per seed, which bounds how fast it can take results in. With 2 CPUs a "
        "machine:",
        "",
        "| machines | expected seconds | bound by |",
        "|---:|---:|---|",
    ]
    for n in (1, 2, 4, 8, 16, 32, 64):
        workers = 1000 * per_seed_worker / (2 * n)
        driver = 1000 * per_seed_cpu
        lines.append(
            f"| {n} | {max(workers, driver):.0f} | {'workers' if workers >= driver else 'driver'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--ppo-steps", type=int, default=100_000)
    parser.add_argument("--many-seeds", type=int, default=1000)
    parser.add_argument("--many-steps", type=int, default=1000)
    parser.add_argument(
        "--only",
        choices=("ppo16", "many"),
        help="measure this part again, keeping the other's figures from results/ray_groups.json",
    )
    args = parser.parse_args()
    if args.part:
        name, *rest = args.part
        out = Path(tempfile.mkdtemp(prefix="rlx-bench-")) / "group"
        try:
            if name == "ppo16":
                found = part_ppo16(rest[0], int(rest[1]), out)
            else:
                found = part_many(int(rest[0]), int(rest[1]), out)
        finally:
            shutil.rmtree(out.parent, ignore_errors=True)
        print(json.dumps(found), flush=True)
        return
    import torch

    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, torch {torch.__version__}, Ray "
        f"{__import__('ray').__version__}",
        "ppo_steps": args.ppo_steps,
        "many_steps": args.many_steps,
        "ppo16": {
            backend: _isolated(["ppo16", backend, str(args.ppo_steps)])
            for backend in ("local", "ray")
        },
        "many_small": _isolated(
            ["many", str(max(10, args.many_seeds // 10)), str(args.many_steps)]
        ),
        "many": _isolated(["many", str(args.many_seeds), str(args.many_steps)]),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ray_groups.json").write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / "ray_groups.md").write_text(report(results))
    print(report(results))


if __name__ == "__main__":
    main()
