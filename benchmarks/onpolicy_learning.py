"""Multi-seed versions of rlx-onpolicy's learning tests.

For each task: ``--seeds`` seeds, evaluation (10 deterministic episodes on fixed seeds)
every ``eval_every`` steps, the run stopping at the threshold. Reports how many seeds reach
the threshold within the budget and the environment steps they needed. Writes
``benchmarks/results/onpolicy_learning.json`` and a Markdown table beside it.

    python benchmarks/onpolicy_learning.py            # 5 seeds, every task (about 10 minutes)
    python benchmarks/onpolicy_learning.py --seeds 2 --tasks ppo-cartpole
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import rlx
from rlx.trainer import Trainer
from rlx.tuned import hyperparameters

#: name: (agent, environment, threshold, step budget, evaluation interval, hyperparameters)
TASKS = {
    "ppo-cartpole": (
        "ppo",
        "CartPole-v1",
        475,
        100_000,
        5_000,
        hyperparameters("ppo", "CartPole-v1"),
    ),
    "a2c-cartpole": (
        "a2c",
        "CartPole-v1",
        400,
        300_000,
        10_000,
        hyperparameters("a2c", "CartPole-v1"),
    ),
    "vpg-cartpole": ("vpg", "CartPole-v1", 300, 300_000, 10_000, {}),
    "ppo-pendulum": (
        "ppo",
        "Pendulum-v1",
        -400,
        200_000,
        10_000,
        hyperparameters("ppo", "Pendulum-v1"),
    ),
    "svpg-cartpole": ("svpg", "CartPole-v1", 300, 300_000, 10_000, {"n_particles": 4}),
}


def run(task: str, seed: int) -> dict:
    name, env, threshold, budget, eval_every, config = TASKS[task]
    agent = rlx.make(name, env, seed=seed, **config)
    started = time.perf_counter()
    result = Trainer(
        agent,
        steps=budget,
        eval_every=eval_every,
        eval_episodes=10,
        target_return=threshold,
        progress=False,
        verbose=False,
        plot=False,
    ).fit()
    return {
        "seed": seed,
        "reached": result.stop_reason == "target",
        "steps": result.env_steps,
        "return": result.final_eval.mean_return if result.final_eval else None,
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--tasks", nargs="*", default=list(TASKS))
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results" / "onpolicy_learning")
    )
    args = parser.parse_args()
    results = {}
    rows = [
        "| task | threshold | budget | seeds reaching it | steps needed (median) |",
        "|---|---|---|---|---|",
    ]
    for task in args.tasks:
        runs = [run(task, seed) for seed in range(args.seeds)]
        for r in runs:
            print(task, r)
        reached = [r for r in runs if r["reached"]]
        _, _, threshold, budget, _, _ = TASKS[task]
        median = statistics.median(r["steps"] for r in reached) if reached else None
        results[task] = {"threshold": threshold, "budget": budget, "runs": runs}
        rows.append(
            f"| {task} | {threshold} | {budget:,} | {len(reached)} / {len(runs)} | "
            f"{f'{median:,.0f}' if median is not None else '-'} |"
        )
    Path(args.out + ".json").write_text(json.dumps(results, indent=2) + "\n")
    Path(args.out + ".md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
