"""rlx's qr-dqn and tqc against sb3-contrib's QRDQN and TQC, side by side, with the zoo's settings.

QR-DQN learns CartPole-v1 with rl-baselines3-zoo's ``hyperparams/qrdqn.yml`` entry (50k steps,
learning rate 2.3e-3, batch 64, buffer 100k, warm-up 1000, target update every 10 steps,
train_freq 256 with 128 gradient steps, epsilon to 0.04 over 16% of the budget, 256-256 ReLU,
10 quantiles; Adam epsilon 0.01 / 64, sb3-contrib's rule); TQC learns Pendulum-v1 with
``hyperparams/tqc.yml``'s (20k steps, learning rate 1e-3, the rest sb3-contrib's defaults:
256-256, 2 critics of 25 quantiles, 2 dropped per critic, batch 256, tau 0.005, learned
alpha). rlx takes them from ``rlx_offpolicy/tuned.toml``. Both libraries train the same seeds
on one CPU thread; every ``eval_every`` steps the deterministic policy plays 10 episodes on
the same environment seeds in both (``rlx.evaluation.evaluation_seeds``). The tables give the
mean evaluation return at equal steps and the training wall-clock time (evaluations
excluded). Writes ``benchmarks/results/contrib_offpolicy_quantiles.{json,md}``.

    python benchmarks/contrib_offpolicy_quantiles.py            # 3 seeds, the zoo's budgets
    python benchmarks/contrib_offpolicy_quantiles.py --quick    # a smoke run: 1 seed, 2k steps
    python benchmarks/contrib_offpolicy_quantiles.py --seeds 2 --scale 0.5 --tasks tqc

Needs ``stable-baselines3`` and ``sb3-contrib`` (2.9), which rlx does not depend on.
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

import gymnasium
import numpy as np
import torch

import rlx
from rlx import tuned
from rlx.evaluation import evaluate, evaluation_seeds

EVAL_EPISODES = 10

#: task: rlx agent, environment, the zoo's budget, evaluation interval, sb3-contrib's class
TASKS = {
    "qr-dqn": ("qr-dqn", "CartPole-v1", 50_000, 5_000, "QRDQN"),
    "tqc": ("tqc", "Pendulum-v1", 20_000, 2_000, "TQC"),
}


def sb3_model(task: str, seed: int) -> Any:
    """sb3-contrib's model with the zoo's entry for the task (the rest its defaults)."""
    from sb3_contrib import QRDQN, TQC

    _, env_id, _, _, _ = TASKS[task]
    if task == "qr-dqn":
        return QRDQN(
            "MlpPolicy",
            env_id,
            learning_rate=2.3e-3,
            batch_size=64,
            buffer_size=100_000,
            learning_starts=1000,
            gamma=0.99,
            target_update_interval=10,
            train_freq=256,
            gradient_steps=128,
            exploration_fraction=0.16,
            exploration_final_eps=0.04,
            policy_kwargs={"net_arch": [256, 256], "n_quantiles": 10},
            seed=seed,
            device="cpu",
        )
    return TQC("MlpPolicy", env_id, learning_rate=1e-3, seed=seed, device="cpu")


def sb3_evaluate(model: Any, env_id: str) -> float:
    """The mean return of sb3-contrib's deterministic policy on rlx's evaluation seeds."""
    env = gymnasium.make(env_id)
    returns = []
    for seed in evaluation_seeds(0, EVAL_EPISODES):
        observation, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(observation[None], deterministic=True)
            observation, reward, terminated, truncated, _ = env.step(action[0])
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def run_sb3(task: str, seed: int, budget: int, eval_every: int) -> dict[str, Any]:
    """sb3-contrib learning the whole budget in one call (so that its exploration schedule
    spans it), evaluated from a callback every ``eval_every`` steps; the time spent
    evaluating is taken out."""
    from stable_baselines3.common.callbacks import BaseCallback

    env_id = TASKS[task][1]
    model = sb3_model(task, seed)
    curve: list[tuple[int, float]] = []
    paused = [0.0]

    class Evaluations(BaseCallback):
        mark = eval_every

        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:
            # Before collecting, after the last training: the policy so far.
            if self.num_timesteps >= self.mark:
                started = time.perf_counter()
                curve.append((self.num_timesteps, sb3_evaluate(self.model, env_id)))
                paused[0] += time.perf_counter() - started
                self.mark += eval_every

    started = time.perf_counter()
    model.learn(budget, callback=Evaluations())
    seconds = time.perf_counter() - started - paused[0]
    if not curve or curve[-1][0] < model.num_timesteps:
        curve.append((model.num_timesteps, sb3_evaluate(model, env_id)))
    return {"curve": curve, "seconds": seconds}


def run_rlx(task: str, seed: int, budget: int, eval_every: int) -> dict[str, Any]:
    """rlx's agent with the tuned settings (epsilon's decay over ``budget``), evaluated every
    ``eval_every`` steps."""
    agent_name, env_id, _, _, _ = TASKS[task]
    agent = rlx.make(agent_name, env_id, seed=seed, **tuned.hyperparameters(agent_name, env_id))
    agent.set_training_budget(budget)
    env = gymnasium.make(env_id)
    curve, seconds, steps, mark = [], 0.0, 0, eval_every
    while steps < budget:
        started = time.perf_counter()
        while steps < min(mark, budget):
            steps += agent.step().env_steps
        seconds += time.perf_counter() - started
        mark += eval_every
        curve.append((steps, evaluate(agent, env, episodes=EVAL_EPISODES, seed=0).mean_return))
    agent.close()
    return {"curve": curve, "seconds": seconds}


def at(curve: list[tuple[int, float]], index: int) -> float:
    """The ``index``-th evaluation: both evaluate at the first training boundary at or past
    each multiple of ``eval_every`` (a train_freq of steps past it at most)."""
    return curve[min(index, len(curve) - 1)][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument(
        "--scale", type=float, default=1.0, help="a share of the zoo's budgets (1: all of them)"
    )
    parser.add_argument("--quick", action="store_true", help="1 seed, 2k steps (smoke run)")
    parser.add_argument("--note", default="", help="a line for the results file")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds = 1 if args.quick else args.seeds
    results = []
    for task in args.tasks:
        _, env_id, budget, eval_every, peer = TASKS[task]
        if args.quick:
            budget, eval_every = 2_048, 1_024
        elif args.scale != 1.0:
            budget = int(budget * args.scale) // eval_every * eval_every
        runs = []
        for seed in range(seeds):
            row: dict[str, Any] = {"seed": seed}
            for library, runner in (("rlx", run_rlx), ("sb3-contrib", run_sb3)):
                row[library] = runner(task, seed, budget, eval_every)
                print(task, seed, library, row[library]["curve"][-1],
                      f"{row[library]['seconds']:.1f} s", flush=True)  # fmt: skip
            runs.append(row)
        results.append(
            {
                "task": task,
                "peer": peer,
                "env": env_id,
                "budget": budget,
                "eval_every": eval_every,
                "runs": runs,
            }
        )
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    stem = "contrib_offpolicy_quantiles_quick" if args.quick else "contrib_offpolicy_quantiles"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(
        json.dumps({"machine": machine, "note": args.note, "results": results}, indent=1)
    )
    page = markdown(results, machine, args.note, seeds)
    (args.out / f"{stem}.md").write_text(page)
    print(page)


def markdown(results: list[dict[str, Any]], machine: dict[str, Any], note: str, seeds: int) -> str:
    """The results as a Markdown page: per task, returns at equal steps, then wall-clock times."""
    lines = [
        "# Quantile critics: rlx's qr-dqn and tqc vs sb3-contrib's QRDQN and TQC",
        "",
        "Written by `benchmarks/contrib_offpolicy_quantiles.py`. Both libraries train with "
        "rl-baselines3-zoo's settings (`hyperparams/qrdqn.yml` for CartPole-v1, "
        "`hyperparams/tqc.yml` for Pendulum-v1; rlx: `rlx_offpolicy/tuned.toml`), seeds 0 to "
        f"{seeds - 1}, and are evaluated on the same {EVAL_EPISODES} environment seeds "
        "(deterministic policy). Times are training only, evaluations excluded.",
        "",
        f"Machine: {machine['platform']}, {machine['processor']}, {machine['cpus']} CPUs, "
        f"Python {machine['python']}, torch {machine['torch']}, one torch thread.",
    ]
    if note:
        lines += ["", note]
    for task in results:
        budget, every = task["budget"], task["eval_every"]
        lines += ["", f"## {task['task']} vs {task['peer']}: {task['env']} ({budget:,} steps)", ""]
        lines.append("| steps | rlx mean (min, max) | sb3-contrib mean (min, max) |")
        lines.append("| ---: | ---: | ---: |")
        for index, mark in enumerate(range(every, budget + 1, every)):
            cells = []
            for library in ("rlx", "sb3-contrib"):
                values = [at(run[library]["curve"], index) for run in task["runs"]]
                cells.append(
                    f"{statistics.mean(values):.1f} ({min(values):.1f}, {max(values):.1f})"
                )
            lines.append(f"| {mark:,} | {cells[0]} | {cells[1]} |")
        rlx_s = [run["rlx"]["seconds"] for run in task["runs"]]
        sb3_s = [run["sb3-contrib"]["seconds"] for run in task["runs"]]
        lines += [
            "",
            f"Training time per seed: rlx {statistics.mean(rlx_s):.1f} s, sb3-contrib "
            f"{statistics.mean(sb3_s):.1f} s; rlx / sb3-contrib = "
            f"{statistics.mean(rlx_s) / statistics.mean(sb3_s):.2f}.",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
