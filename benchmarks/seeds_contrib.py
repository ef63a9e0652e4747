"""Seed batches of the sb3-contrib algorithms: K seeds as one batched computation against the
same K seeds one after another, in one process on one torch thread.

For ``trpo`` and ``qr-dqn`` on CartPole-v1, ``maskable-ppo`` on rlx/MaskedPick-v0, ``tqc`` and
``crossq`` on Pendulum-v1 (rl-baselines3-zoo's settings where rlx's tuned settings have them,
the agent's defaults otherwise), K seeds are made with ``rlx.make`` and trained for the same
environment steps twice:

- ``one after another``: each seed alone (``agent.step()`` until the budget);
- ``batched``: the K seeds linked by their class's ``seed_batch`` and stepped in rounds, as
  ``rlx run --seeds`` trains a worker's seeds.

Reported: the seconds for all K each way (agents made before the clock starts, no
evaluation) and the ratio batched / one after another. (That a batched seed is its single run
up to rounding is the tests' business: over thousands of steps the rounding grows until the
two runs part, as any change of the order of operations makes them part.)

recurrent-ppo is not here: its seed batches are refused (its update is mostly torch's fused
LSTM kernel, which a batch runs seed by seed too; see its ``seed_batch``).

Writes ``benchmarks/results/seeds_contrib.json`` and ``.md``.

    python benchmarks/seeds_contrib.py                     # K = 4 (about 15 minutes here)
    python benchmarks/seeds_contrib.py --quick --out /tmp/seeds_contrib.json   # a smoke test
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

#: (agent, environment, steps per seed; the --quick steps).
CONFIGURATIONS = [
    ("trpo", "CartPole-v1", 20_000, 2_048),
    ("maskable-ppo", "rlx/MaskedPick-v0", 20_000, 2_048),
    ("qr-dqn", "CartPole-v1", 20_000, 2_000),
    ("tqc", "Pendulum-v1", 3_000, 600),
    ("crossq", "Pendulum-v1", 3_000, 600),
]


def made(agent: str, env: str, seeds: int, steps: int) -> list[Any]:
    import rlx
    from rlx import tuned

    settings = tuned.hyperparameters(agent, env) if tuned.find(agent, env) else {}
    agents = [rlx.make(agent, env, seed=seed, **settings) for seed in range(seeds)]
    for one in agents:
        one.set_training_budget(steps)
    return agents


def train_alone(agents: list[Any], steps: int) -> float:
    started = time.perf_counter()
    for one in agents:
        while one.env_steps < steps:
            one.step()
    return time.perf_counter() - started


def train_batched(agents: list[Any], steps: int) -> float:
    started = time.perf_counter()
    type(agents[0]).seed_batch(agents)
    while agents[0].env_steps < steps:
        for one in agents:
            one.step()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="a few thousand steps each")
    parser.add_argument("--only", default="", help="comma-separated agents")
    parser.add_argument("--out", default="benchmarks/results/seeds_contrib.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    only = {name for name in args.only.split(",") if name}
    rows = []
    for agent, env, full, quick in CONFIGURATIONS:
        if only and agent not in only:
            continue
        steps = quick if args.quick else full
        alone = made(agent, env, args.seeds, steps)
        alone_s = train_alone(alone, steps)
        together = made(agent, env, args.seeds, steps)
        batched_s = train_batched(together, steps)
        row = {
            "agent": agent,
            "env": env,
            "seeds": args.seeds,
            "steps": steps,
            "env_steps": [int(one.env_steps) for one in together],
            "one_after_another_s": round(alone_s, 2),
            "batched_s": round(batched_s, 2),
            "ratio": round(batched_s / alone_s, 3),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    import importlib.metadata

    result = {
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores, "
        f"{platform.python_version()}, torch {torch.__version__}, "
        f"rlx-core {importlib.metadata.version('rlx-core')}",
        "torch_threads": 1,
        "rows": rows,
    }
    out = Path(args.out)
    out.write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Seed batches of the sb3-contrib algorithms",
        "",
        f"Written by `benchmarks/seeds_contrib.py`. Machine: {result['machine']}; one torch "
        "thread, one process. K seeds trained one after another, then the same K seeds as one "
        "batch (`seed_batch`), the same steps each; seconds for all K, agents made before the "
        "clock starts, no evaluation.",
        "",
        "| agent | environment | seeds x steps | one after another (s) | batched (s) | "
        "batched / one after another |",
        "|---|---|---|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['agent']} | {row['env']} | {row['seeds']} x {row['steps']:,} | "
            f"{row['one_after_another_s']:.1f} | {row['batched_s']:.1f} | {row['ratio']:.2f} |"
        )
    lines += [
        "",
        "Where a batch measured slower (tqc and crossq here), the agent's class says so "
        "(`seed_batches_pay = False`) and a group (`rlx run --seeds`, `rlx tune --seeds`) "
        "trains its seeds one after another.",
        "",
        "recurrent-ppo is not batched: its update is mostly torch's fused LSTM kernel, which a "
        "batch would run seed by seed too (a batched version measured 0.48 s an iteration for 4 "
        "seeds against 0.46 s one after another).",
    ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
