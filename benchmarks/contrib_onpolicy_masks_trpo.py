"""rlx's maskable-ppo and trpo against sb3-contrib's MaskablePPO and TRPO, side by side.

Three tasks, each library training the same seeds with the same settings:

- ``maskable-ppo`` on ``rlx/MaskedPick-v0`` (rlx-envs: 16 actions, 3 valid a step, known only
  from ``action_masks()``; the best valid action is worth 0.75 on average, about 15 an
  episode): 8 environments, 64 steps, minibatches of 128, 4 epochs, learning rate 1e-3,
  entropy 0.01 (the settings of rlx's learning test; the zoo has no such task);
- ``trpo`` on CartPole-v1 and Pendulum-v1 with rl-baselines3-zoo's ``hyperparams/trpo.yml``
  entries (rlx: ``rlx_onpolicy/tuned.toml``). The zoo's Pendulum-v1 entry explores with gSDE,
  which rlx does not have: both libraries run it without (the policy's Gaussian explores).

Every ``eval_every`` steps the policy plays 10 deterministic episodes on the same environment
seeds in both (``rlx.evaluation.evaluation_seeds``; MaskablePPO and rlx both given the
evaluation environment's masks); the table gives the mean evaluation return at equal steps
and the training wall-clock time (evaluations excluded). Writes
``benchmarks/results/contrib_onpolicy_masks_trpo.{json,md}``.

    python benchmarks/contrib_onpolicy_masks_trpo.py            # 3 seeds, full budgets
    python benchmarks/contrib_onpolicy_masks_trpo.py --quick    # a smoke run: 1 seed, 4k steps
    python benchmarks/contrib_onpolicy_masks_trpo.py --seeds 1 --tasks trpo-cartpole

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
import rlx_envs  # noqa: F401 (registers rlx/MaskedPick-v0 with gymnasium)
from rlx import tuned
from rlx.evaluation import action_masks, evaluate, evaluation_seeds

EVAL_EPISODES = 10

#: The settings of rlx's maskable-ppo learning test, for both libraries.
MASKED = {"n_envs": 8, "n_steps": 64, "batch_size": 128, "n_epochs": 4, "learning_rate": 1e-3}

#: name: (rlx agent, environment, step budget, evaluation interval)
TASKS = {
    "maskable-ppo-maskedpick": ("maskable-ppo", "rlx/MaskedPick-v0", 50_000, 10_000),
    "trpo-cartpole": ("trpo", "CartPole-v1", 100_000, 10_000),
    "trpo-pendulum": ("trpo", "Pendulum-v1", 100_000, 20_000),
}


def rlx_settings(agent: str, env: str) -> dict[str, Any]:
    """rlx's settings of a task: the zoo's from tuned.toml, or the masked task's."""
    if agent == "maskable-ppo":
        return {**MASKED, "ent_coef": 0.01}
    return tuned.hyperparameters(agent, env)


def sb3_model(agent: str, env: str, seed: int) -> Any:
    """sb3-contrib's model of a task with the same settings as rlx's."""
    from sb3_contrib import TRPO, MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    if agent == "maskable-ppo":
        venv = make_vec_env(env, n_envs=MASKED["n_envs"], seed=seed)
        return MaskablePPO(
            "MlpPolicy",
            venv,
            n_steps=MASKED["n_steps"],
            batch_size=MASKED["batch_size"],
            n_epochs=MASKED["n_epochs"],
            learning_rate=MASKED["learning_rate"],
            ent_coef=0.01,
            seed=seed,
            device="cpu",
        )
    settings = tuned.hyperparameters("trpo", env)
    names = {"critic_epochs": "n_critic_updates", "critic_batch_size": "batch_size"}
    kwargs = {names.get(k, k): v for k, v in settings.items() if k != "n_envs"}
    venv = make_vec_env(env, n_envs=settings["n_envs"], seed=seed)
    return TRPO("MlpPolicy", venv, seed=seed, device="cpu", **kwargs)


def sb3_evaluate(model: Any, env_id: str, masked: bool) -> float:
    """The mean return of sb3-contrib's deterministic policy on rlx's evaluation seeds."""
    env = gymnasium.make(env_id)
    returns = []
    for seed in evaluation_seeds(0, EVAL_EPISODES):
        observation, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            extra = {"action_masks": action_masks(env)} if masked else {}
            action, _ = model.predict(observation, deterministic=True, **extra)
            observation, reward, terminated, truncated, _ = env.step(action)
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def run_sb3(task: str, seed: int, budget: int, eval_every: int) -> dict[str, Any]:
    """sb3-contrib learning the whole budget in one call, evaluated from a callback every
    ``eval_every`` steps; the time spent evaluating is taken out."""
    from stable_baselines3.common.callbacks import BaseCallback

    agent, env, _, _ = TASKS[task]
    model = sb3_model(agent, env, seed)
    masked = agent == "maskable-ppo"
    curve: list[tuple[int, float]] = []
    paused = [0.0]

    class Evaluations(BaseCallback):
        mark = eval_every

        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:
            # Before a rollout, after the last update: the policy so far.
            if self.num_timesteps >= self.mark:
                started = time.perf_counter()
                curve.append((self.num_timesteps, sb3_evaluate(self.model, env, masked)))
                paused[0] += time.perf_counter() - started
                self.mark += eval_every

    started = time.perf_counter()
    model.learn(budget, callback=Evaluations())
    seconds = time.perf_counter() - started - paused[0]
    if not curve or curve[-1][0] < model.num_timesteps:
        curve.append((model.num_timesteps, sb3_evaluate(model, env, masked)))
    return {"curve": curve, "seconds": seconds}


def run_rlx(task: str, seed: int, budget: int, eval_every: int) -> dict[str, Any]:
    """rlx with the task's settings, evaluated every ``eval_every`` steps."""
    agent_name, env_id, _, _ = TASKS[task]
    agent = rlx.make(agent_name, env_id, seed=seed, **rlx_settings(agent_name, env_id))
    agent.set_training_budget(budget)
    env = gymnasium.make(env_id)
    curve, seconds, steps, mark = [], 0.0, 0, eval_every
    # rlx counts no autoreset step (sb3 does): a rollout 2% short of a mark reaches it.
    slack = eval_every // 50
    while steps < budget - slack:
        started = time.perf_counter()
        while steps < min(mark, budget) - slack:
            steps += agent.step().env_steps
        seconds += time.perf_counter() - started
        mark += eval_every
        curve.append((steps, evaluate(agent, env, episodes=EVAL_EPISODES, seed=0).mean_return))
    agent.close()
    return {"curve": curve, "seconds": seconds}


def at(curve: list[tuple[int, float]], index: int) -> float:
    """The ``index``-th evaluation: both evaluate at the first rollout boundary at or past each
    multiple of ``eval_every``."""
    return curve[min(index, len(curve) - 1)][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--steps", type=int, default=None, help="one budget for every task")
    parser.add_argument("--quick", action="store_true", help="1 seed, 4k steps (smoke run)")
    parser.add_argument("--note", default="", help="a line for the results file")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds = 1 if args.quick else args.seeds
    results: dict[str, Any] = {}
    for task in args.tasks:
        _, env_id, budget, eval_every = TASKS[task]
        if args.steps is not None:
            budget = args.steps
        if args.quick:
            budget, eval_every = 4_096, 2_048
        eval_every = min(eval_every, budget)
        runs = []
        for seed in range(seeds):
            row: dict[str, Any] = {"seed": seed}
            for library, runner in (("rlx", run_rlx), ("sb3-contrib", run_sb3)):
                row[library] = runner(task, seed, budget, eval_every)
                print(task, seed, library, row[library]["curve"][-1],
                      f"{row[library]['seconds']:.1f} s", flush=True)  # fmt: skip
            runs.append(row)
        results[task] = {"env": env_id, "budget": budget, "eval_every": eval_every, "runs": runs}
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    stem = "contrib_onpolicy_masks_trpo_quick" if args.quick else "contrib_onpolicy_masks_trpo"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(
        json.dumps({"machine": machine, "note": args.note, "results": results}, indent=1)
    )
    (args.out / f"{stem}.md").write_text(markdown(results, machine, args.note, seeds))
    print(markdown(results, machine, args.note, seeds))


def markdown(results: dict[str, Any], machine: dict[str, Any], note: str, seeds: int) -> str:
    """The results as a Markdown page: per task, returns at equal steps, then wall-clock
    times."""
    lines = [
        "# Maskable PPO and TRPO: rlx vs sb3-contrib",
        "",
        "Written by `benchmarks/contrib_onpolicy_masks_trpo.py`. Both libraries train the same "
        f"settings on seeds 0 to {seeds - 1}: `maskable-ppo` / MaskablePPO on "
        "`rlx/MaskedPick-v0` with rlx's learning-test settings, `trpo` / TRPO with "
        "rl-baselines3-zoo's `hyperparams/trpo.yml` (rlx: `rlx_onpolicy/tuned.toml`; "
        "Pendulum-v1 without the zoo's gSDE in both). They are evaluated on the same "
        f"{EVAL_EPISODES} environment seeds (deterministic policy, the masks given to both). "
        "Times are training only, evaluations excluded.",
        "",
        f"Machine: {machine['platform']}, {machine['processor']}, {machine['cpus']} CPUs, "
        f"Python {machine['python']}, torch {machine['torch']}, one torch thread.",
    ]
    if note:
        lines += ["", note]
    lines += [
        "",
        "| task | steps | rlx final return | sb3-contrib final return | rlx s | sb3-contrib s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for task, result in results.items():
        finals = {
            library: statistics.mean(run[library]["curve"][-1][1] for run in result["runs"])
            for library in ("rlx", "sb3-contrib")
        }
        times = {
            library: statistics.mean(run[library]["seconds"] for run in result["runs"])
            for library in ("rlx", "sb3-contrib")
        }
        lines.append(
            f"| {task} | {result['budget']:,} | {finals['rlx']:.1f} | {finals['sb3-contrib']:.1f} "
            f"| {times['rlx']:.1f} | {times['sb3-contrib']:.1f} |"
        )
    for task, result in results.items():
        budget, every = result["budget"], result["eval_every"]
        lines += ["", f"## {task}: {result['env']} ({budget:,} steps)", ""]
        lines.append("| steps | rlx mean (min, max) | sb3-contrib mean (min, max) |")
        lines.append("| ---: | ---: | ---: |")
        for index, mark in enumerate(range(every, budget + 1, every)):
            cells = []
            for library in ("rlx", "sb3-contrib"):
                values = [at(run[library]["curve"], index) for run in result["runs"]]
                cells.append(
                    f"{statistics.mean(values):.1f} ({min(values):.1f}, {max(values):.1f})"
                )
            lines.append(f"| {mark:,} | {cells[0]} | {cells[1]} |")
        rlx_s = [run["rlx"]["seconds"] for run in result["runs"]]
        sb3_s = [run["sb3-contrib"]["seconds"] for run in result["runs"]]
        lines += [
            "",
            f"Training time per seed: rlx {statistics.mean(rlx_s):.1f} s, sb3-contrib "
            f"{statistics.mean(sb3_s):.1f} s; rlx / sb3-contrib = "
            f"{statistics.mean(rlx_s) / statistics.mean(sb3_s):.2f}.",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
