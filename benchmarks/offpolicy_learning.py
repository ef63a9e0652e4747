"""Does every seed learn? rlx-offpolicy's agents with the zoo's settings, 5 seeds each.

DQN on CartPole-v1 for 50,000 steps (threshold 475), SAC, TD3 and DDPG on Pendulum-v1 for
20,000 steps (threshold -200), with ``rlx_offpolicy/tuned.toml``'s hyperparameters. Each run is
evaluated every 5,000 (DQN) or 1,000 steps on 10 fixed-seed episodes and trains for its
whole budget (no early stop), so a late collapse shows: the table gives the steps to the
threshold, the best and the final evaluation. Writes
``benchmarks/results/offpolicy_learning.{json,md}``.

    python benchmarks/offpolicy_learning.py [--seeds 5] [--agents dqn sac]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

import rlx
from rlx import tuned

TASKS = {
    "dqn": ("CartPole-v1", 475.0, 50_000, 5_000),
    "sac": ("Pendulum-v1", -200.0, 20_000, 1_000),
    "td3": ("Pendulum-v1", -200.0, 20_000, 1_000),
    "ddpg": ("Pendulum-v1", -200.0, 20_000, 1_000),
}


def run(agent_name: str, seed: int) -> dict:
    env_id, threshold, budget, eval_every = TASKS[agent_name]
    agent = rlx.make(agent_name, env_id, seed=seed, **tuned.hyperparameters(agent_name, env_id))
    trainer = rlx.Trainer(
        agent,
        steps=budget,
        eval_every=eval_every,
        eval_episodes=10,
        progress=False,
        verbose=False,
    )
    evaluations: list[tuple[int, float]] = []
    original = trainer._evaluate

    def record(*args):
        result = original(*args)
        evaluations.append((trainer.env_steps, result.mean_return))
        return result

    trainer._evaluate = record
    started = time.perf_counter()
    result = trainer.fit()
    reached = next((steps for steps, value in evaluations if value >= threshold), None)
    return {
        "seed": seed,
        "steps_to_threshold": reached,
        "best": max(value for _, value in evaluations),
        "final": result.final_eval.mean_return,
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--agents", nargs="+", default=list(TASKS), choices=list(TASKS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(__file__).parent / "results"
    results: dict = {"machine": platform.machine(), "torch": torch.__version__, "agents": {}}
    lines = [
        "# Off-policy learning: every seed with the zoo's settings",
        "",
        "| agent | env | budget | threshold | seeds at threshold | final at threshold | "
        "steps to threshold (per seed) | final return (per seed) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in args.agents:
        env_id, threshold, budget, _ = TASKS[name]
        runs = [run(name, seed) for seed in range(args.seeds)]
        for r in runs:
            print(name, r, flush=True)
        results["agents"][name] = {"env": env_id, "threshold": threshold, "runs": runs}
        reached = sum(r["steps_to_threshold"] is not None for r in runs)
        final_ok = sum(r["final"] >= threshold for r in runs)
        steps = ", ".join(str(r["steps_to_threshold"] or "-") for r in runs)
        finals = ", ".join(f"{r['final']:.0f}" for r in runs)
        lines.append(
            f"| {name} | {env_id} | {budget:,} | {threshold:g} | {reached}/{len(runs)} | "
            f"{final_ok}/{len(runs)} | {steps} | {finals} |"
        )
    (out / "offpolicy_learning.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "offpolicy_learning.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
