"""rlx's ARS against sb3-contrib's ARS, side by side, with rl-baselines3-zoo's settings.

For each task both libraries train the same seeds with the zoo's hyperparameters
(``hyperparams/ars.yml``, which ``rlx_es/tuned.toml`` translates): CartPole-v1 with the
linear policy and 2 directions, Pendulum-v1 with a [16] MLP, 4 directions (the best 1) and
state normalisation (rlx: the paper's V2; sb3-contrib: the zoo's VecNormalize). Every
``eval_every`` steps the deployed policy plays 10 deterministic episodes on the same
environment seeds in both (``rlx.evaluation.evaluation_seeds``); the table gives the mean
evaluation return at equal steps and the training wall-clock time (evaluations excluded).
Writes ``benchmarks/results/contrib_es_ars.{json,md}``.

    python benchmarks/contrib_es_ars.py            # 3 seeds, CartPole 50k and Pendulum 200k steps
    python benchmarks/contrib_es_ars.py --quick    # a smoke run: 1 seed, small budgets
    python benchmarks/contrib_es_ars.py --pendulum-steps 2000000   # the zoo's full budget

Needs ``stable-baselines3`` and ``sb3-contrib`` (2.9), which rlx does not depend on.
"""

from __future__ import annotations

import argparse
import json
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

#: task: (environment, step budget, evaluation interval)
TASKS = {
    "cartpole": ("CartPole-v1", 50_000, 5_000),
    "pendulum": ("Pendulum-v1", 200_000, 50_000),  # the zoo trains 2,000,000: --pendulum-steps
}


def sb3_settings(env_id: str) -> tuple[dict[str, Any], bool]:
    """sb3-contrib's ARS keyword arguments of the zoo's entry, and whether it normalises
    observations (the zoo's ``normalize``)."""
    if env_id == "CartPole-v1":
        return {"policy": "LinearPolicy", "n_delta": 2}, False
    return {
        "policy": "MlpPolicy",
        "learning_rate": 0.018,
        "n_delta": 4,
        "n_top": 1,
        "delta_std": 0.1,
        "policy_kwargs": {"net_arch": [16]},
        "zero_policy": False,
    }, True


def sb3_evaluate(model: Any, normalizer: Any, env_id: str) -> float:
    """The mean return of sb3-contrib's deterministic policy on rlx's evaluation seeds."""
    env = gymnasium.make(env_id)
    returns = []
    for seed in evaluation_seeds(0, EVAL_EPISODES):
        observation, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            if normalizer is not None:
                observation = normalizer.normalize_obs(observation)
            action, _ = model.predict(observation, deterministic=True)
            observation, reward, terminated, truncated, _ = env.step(action)
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def run_sb3(env_id: str, seed: int, budget: int, eval_every: int) -> dict[str, Any]:
    """sb3-contrib's ARS, learning ``eval_every`` steps at a time."""
    from sb3_contrib import ARS
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    kwargs, normalize = sb3_settings(env_id)
    venv: Any = DummyVecEnv([lambda: gymnasium.make(env_id)])
    if normalize:
        venv = VecNormalize(venv, norm_obs=True, norm_reward=False)
    model = ARS(env=venv, seed=seed, device="cpu", **kwargs)
    curve, seconds, steps = [], 0.0, 0
    while steps < budget:
        started = time.perf_counter()
        model.learn(eval_every, reset_num_timesteps=False)
        seconds += time.perf_counter() - started
        steps = model.num_timesteps
        curve.append((steps, sb3_evaluate(model, venv if normalize else None, env_id)))
    return {"curve": curve, "seconds": seconds}


def run_rlx(env_id: str, seed: int, budget: int, eval_every: int) -> dict[str, Any]:
    """rlx's ARS with the tuned settings, evaluated every ``eval_every`` steps."""
    agent = rlx.make("ars", env_id, seed=seed, **tuned.hyperparameters("ars", env_id))
    env = gymnasium.make(env_id)
    curve, seconds, steps, mark = [], 0.0, 0, eval_every
    while steps < budget:
        started = time.perf_counter()
        while steps < mark:
            steps += agent.step().env_steps
        seconds += time.perf_counter() - started
        mark += eval_every
        curve.append((steps, evaluate(agent, env, episodes=EVAL_EPISODES, seed=0).mean_return))
    agent.close()
    return {"curve": curve, "seconds": seconds}


def at(curve: list[tuple[int, float]], index: int) -> float:
    """The ``index``-th evaluation: both libraries evaluate at the end of the iteration that
    passes each multiple of ``eval_every`` (a few hundred steps past it at most)."""
    return curve[min(index, len(curve) - 1)][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--pendulum-steps", type=int, default=TASKS["pendulum"][1])
    parser.add_argument("--quick", action="store_true", help="1 seed, small budgets (smoke run)")
    parser.add_argument("--note", default="", help="a line for the results file")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tasks = {name: TASKS[name] for name in args.tasks}
    if "pendulum" in tasks:
        tasks["pendulum"] = ("Pendulum-v1", args.pendulum_steps, TASKS["pendulum"][2])
    seeds = 1 if args.quick else args.seeds
    if args.quick:
        tasks = {name: (env, min(budget, 4 * every // 5), every // 5)
                 for name, (env, budget, every) in tasks.items()}  # fmt: skip
    results: dict[str, Any] = {}
    for name, (env_id, budget, eval_every) in tasks.items():
        results[name] = {"env": env_id, "budget": budget, "eval_every": eval_every, "runs": []}
        for seed in range(seeds):
            row = {"seed": seed}
            for library, runner in (("rlx", run_rlx), ("sb3-contrib", run_sb3)):
                row[library] = runner(env_id, seed, budget, eval_every)
                print(name, seed, library, row[library]["curve"][-1],
                      f"{row[library]['seconds']:.1f} s", flush=True)  # fmt: skip
            results[name]["runs"].append(row)
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": __import__("os").cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    stem = "contrib_es_ars_quick" if args.quick else "contrib_es_ars"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(
        json.dumps({"machine": machine, "note": args.note, "results": results}, indent=1)
    )
    (args.out / f"{stem}.md").write_text(markdown(results, machine, args.note, seeds))
    print(markdown(results, machine, args.note, seeds))


def markdown(results: dict[str, Any], machine: dict[str, Any], note: str, seeds: int) -> str:
    """The results as a Markdown page: returns at equal steps, then wall-clock times."""
    lines = [
        "# ARS: rlx vs sb3-contrib",
        "",
        "Written by `benchmarks/contrib_es_ars.py`. Both libraries train with "
        "rl-baselines3-zoo's `hyperparams/ars.yml` settings (rlx: `rlx_es/tuned.toml`), "
        f"seeds 0 to {seeds - 1}, and are evaluated on the same {EVAL_EPISODES} environment "
        "seeds (deterministic policy). Times are training only, evaluations excluded.",
        "",
        f"Machine: {machine['platform']}, {machine['processor']}, {machine['cpus']} CPUs, "
        f"Python {machine['python']}, torch {machine['torch']}, one torch thread.",
    ]
    if note:
        lines += ["", note]
    for task in results.values():
        lines += ["", f"## {task['env']} ({task['budget']:,} steps)", ""]
        marks = [m for m in range(task["eval_every"], task["budget"] + 1, task["eval_every"])]
        lines.append("| steps | rlx mean (min, max) | sb3-contrib mean (min, max) |")
        lines.append("| ---: | ---: | ---: |")
        for index, mark in enumerate(marks):
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
