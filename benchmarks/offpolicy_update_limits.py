"""How close the gradient updates of rlx's qr-dqn, tqc and crossq come to this machine's
arithmetic limit, beside sb3-contrib's QRDQN, TQC and CrossQ.

These three agents spend nearly all their training time in gradient updates (tqc and crossq
one per environment step on minibatches of 256; qr-dqn 128 every 256 steps). Each library
gets the zoo's settings for the task (the ``sb3_model`` of ``contrib_offpolicy_quantiles.py``
and ``contrib_offpolicy_crossq.py``, and rlx's ``tuned.toml``), fills its replay buffer with
the warm-up steps, then times ``--updates`` updates (minibatch sampling included, as
sb3-contrib's ``train`` includes it) after a few untimed ones. For each update:

- the floating-point operations, counted by ``torch.utils.flop_counter.FlopCounterMode``
  over one update of each library (matrix products of the forward and backward passes; the
  element-wise work of losses, activations and Adam is not counted, so the floor below is a
  lower bound);
- the machine's matrix-product rate at the update's own shape (the minibatch through a
  hidden layer, forward and both backward products, one thread), and the floor: the counted
  operations at that rate;
- the measured time per update, and how far above the floor each library sits.

The lowest wall-clock ratio rlx / sb3-contrib that any implementation of rlx's updates could
reach on this machine is the floor over sb3-contrib's time per update. Writes
``benchmarks/results/offpolicy_update_limits.{json,md}``.

    python benchmarks/offpolicy_update_limits.py              # 300 timed updates each
    python benchmarks/offpolicy_update_limits.py --updates 50 --tasks tqc

Needs ``stable-baselines3`` and ``sb3-contrib`` (2.9), which rlx does not depend on. Run it on
an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

import rlx
from rlx import tuned

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import contrib_offpolicy_crossq  # noqa: E402
import contrib_offpolicy_quantiles  # noqa: E402

#: task: environment, the zoo's minibatch and hidden width, sb3-contrib's model
TASKS = {
    "qr-dqn": ("CartPole-v1", 64, 256, contrib_offpolicy_quantiles.sb3_model),
    "tqc": ("Pendulum-v1", 256, 256, contrib_offpolicy_quantiles.sb3_model),
    "crossq": ("Pendulum-v1", 256, 256, contrib_offpolicy_crossq.sb3_model),
}
WARMUP_UPDATES = 20


def matmul_gflops(batch: int, width: int, seconds: float = 1.0) -> float:
    """fp32 GFLOP/s of a hidden layer's three products (forward, input and weight gradients)
    for ``batch`` rows of ``width`` features on one thread: the rate an update's matrix
    products can reach at their own shape."""
    x, w = torch.randn(batch, width), torch.randn(width, width)
    grad = torch.randn(batch, width)
    for _ in range(20):
        x @ w, grad @ w.T, x.T @ grad
    rounds, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(50):
            x @ w, grad @ w.T, x.T @ grad
        rounds += 50
    elapsed = time.perf_counter() - started
    return rounds * 3 * 2 * batch * width * width / elapsed / 1e9


def counted_flops(update: Any) -> int:
    """The matrix-product FLOPs of one call of ``update``."""
    with FlopCounterMode(display=False) as counter:
        update()
    return int(counter.get_total_flops())


def timed(update: Any, count: int) -> float:
    """The median of five timings of ``count // 5`` calls of ``update``: seconds per call."""
    for _ in range(WARMUP_UPDATES):
        update()
    chunk, times = max(1, count // 5), []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(chunk):
            update()
        times.append((time.perf_counter() - started) / chunk)
    return statistics.median(times)


def rlx_update(task: str) -> Any:
    """rlx's agent with the tuned settings and a buffer past its warm-up; returns one update
    (a minibatch drawn and learned from)."""
    env_id = TASKS[task][0]
    agent = rlx.make(task, env_id, seed=0, **tuned.hyperparameters(task, env_id))
    while not agent.ready_to_learn():
        agent.collect()

    def update() -> None:
        agent.update(agent.sample())
        agent.updates += 1

    return update


def sb3_update(task: str) -> Any:
    """sb3-contrib's model with the zoo's settings, its buffer filled past the warm-up by
    ``learn``; returns one gradient step of its ``train``."""
    _, batch, _, make = TASKS[task]
    model = make(task, 0)
    model.learn(total_timesteps=max(model.learning_starts + 300, 1500))

    def update() -> None:
        model.train(gradient_steps=1, batch_size=batch)

    return update


def measure(task: str, updates: int) -> dict[str, Any]:
    """One task's row: FLOPs, the floor, and each library's time per update."""
    env_id, batch, width, _ = TASKS[task]
    rate = matmul_gflops(batch, width)
    row: dict[str, Any] = {"task": task, "env": env_id, "matmul_gflops": rate}
    for side, build in (("rlx", rlx_update), ("sb3_contrib", sb3_update)):
        update = build(task)
        flops = counted_flops(update)
        seconds = timed(update, updates)
        row[side] = {
            "flops": flops,
            "ms": seconds * 1e3,
            "floor_ms": flops / rate / 1e6,
            "gflops": flops / seconds / 1e9,
        }
    row["ratio"] = row["rlx"]["ms"] / row["sb3_contrib"]["ms"]
    row["lowest_ratio"] = row["rlx"]["floor_ms"] / row["sb3_contrib"]["ms"]
    return row


def markdown(rows: list[dict[str, Any]], machine: dict[str, Any]) -> str:
    lines = [
        "# Off-policy updates against the machine's arithmetic: qr-dqn, tqc, crossq",
        "",
        "Written by `benchmarks/offpolicy_update_limits.py` (its docstring says how it counts). "
        f"Machine: {machine['platform']}, {machine['cpus']} CPUs, torch {machine['torch']}, "
        "one torch thread; fp32 1024x1024 matmul "
        f"{machine['peak_gflops']:.1f} GFLOP/s. Times per gradient update, minibatch "
        "sampling included; the floor is the update's counted matrix-product FLOPs at the "
        "matmul rate of its own minibatch and layer width.",
        "",
        "| agent | task | GFLOP per update (rlx / sb3-contrib) | matmul GFLOP/s at the shape "
        "| floor ms | rlx ms | sb3-contrib ms | rlx x floor | sb3-contrib x floor "
        "| rlx / sb3-contrib | lowest possible ratio |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        ours, peer = row["rlx"], row["sb3_contrib"]
        lines.append(
            f"| {row['task']} | {row['env']} | {ours['flops'] / 1e9:.3f} / "
            f"{peer['flops'] / 1e9:.3f} | {row['matmul_gflops']:.1f} | {ours['floor_ms']:.2f} "
            f"| {ours['ms']:.2f} | {peer['ms']:.2f} | {ours['ms'] / ours['floor_ms']:.2f} "
            f"| {peer['ms'] / peer['floor_ms']:.2f} | {row['ratio']:.2f} "
            f"| {row['lowest_ratio']:.2f} |"
        )
    lines += [
        "",
        "`rlx x floor` is how many times the floor rlx's update takes (1.00 would be every "
        "cycle in matrix products at the measured rate); the lowest possible ratio is rlx's "
        "floor over sb3-contrib's measured time: what rlx / sb3-contrib would be if rlx's "
        "update cost nothing but its matrix products.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=list(TASKS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    machine = {
        "platform": platform.platform(),
        "cpus": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "peak_gflops": matmul_gflops(1024, 1024),
    }
    rows = []
    for task in args.tasks:
        row = measure(task, args.updates)
        print(json.dumps(row))
        rows.append(row)
    out = HERE / "results" / "offpolicy_update_limits"
    out.with_suffix(".json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=1))
    out.with_suffix(".md").write_text(markdown(rows, machine))
    print(markdown(rows, machine))


if __name__ == "__main__":
    main()
