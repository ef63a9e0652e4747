"""Sample efficiency on 16 seeds, rlx against Stable-Baselines3, and what makes DQN fall back.

Both libraries get rl-baselines3-zoo's CartPole-v1 settings (rlx's tuned settings, translated as
``benchmarks/seeds.py`` does) and the same seeds; every ``--eval-every`` steps and at the end
the greedy policy plays 10 episodes on the run's evaluation seeds (``rlx.evaluation.evaluate``
for both). Parts:

- ``ppo``: PPO, 100,000 steps per seed: the fraction of seeds whose evaluation reaches 475,
  the median steps to get there, a two-sided Mann-Whitney U test of the steps (a seed that
  never gets there ranks last) and a bootstrap 95% interval of the difference of the medians;
- ``dqn``: DQN, 50,000 steps per seed: the same, and how many seeds *stay* solved: the final
  evaluation at 475 or more, against the best evaluation of the run (the policy in the run's
  ``best/``, which ``rlx eval RUN --best`` plays);
- ``dqn-ablations``: rlx's DQN with one setting changed at a time (learning rate, replay
  ratio, target updates, double Q-learning, Adam's epsilon), the same measures, to find what
  drives the fall.

rlx trains each group's seeds as batched seed groups in two worker processes
(``rlx.groups.new_group(..., jobs=2, batched=True)``); SB3 trains one seed per process, two
processes at a time; one torch thread per process. Writes
``benchmarks/results/sample_efficiency.json`` and ``sample_efficiency.md``.

    python benchmarks/sample_efficiency.py                       # every part (about 40 minutes)
    python benchmarks/sample_efficiency.py --parts dqn --seeds 8
    python benchmarks/sample_efficiency.py --quick --out /tmp/efficiency   # a smoke test
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from seeds import (
    QUIET,
    compare_steps,
    rlx_hyperparameters,
    run_rlx,
    sb3_kwargs,
    sb3_settings,
)

RESULTS = Path(__file__).parent / "results"
ENV = "CartPole-v1"
TARGET = 475.0
JOBS = 2

#: part -> (algorithm, steps per seed, evaluation interval)
PARTS: dict[str, tuple[str, int, int]] = {
    "ppo": ("ppo", 100_000, 5_000),
    "dqn": ("dqn", 50_000, 2_500),
    "dqn-ablations": ("dqn", 50_000, 2_500),
}

#: DQN variants: one change to the zoo's settings each.
ABLATIONS: dict[str, dict[str, Any]] = {
    "learning rate 1.15e-3 (half)": {"learning_rate": 1.15e-3},
    "64 gradient steps per 256 steps (half the replay ratio)": {"gradient_steps": 64},
    "target network every 1,024 steps (not every training)": {"target_update_interval": 1024},
    "double Q-learning": {"double": True},
    "Adam epsilon 1e-8 (SB3's DQN default; rlx's tuned CartPole entry keeps 1e-5)": {
        "adam_eps": 1e-8
    },
}


# -- Stable-Baselines3 (one seed per pool worker) --------------------------------------------------


def sb3_seed(algorithm: str, settings: dict[str, Any], seed: int, steps: int, every: int):
    """Train one seed with SB3, evaluating as rlx does; its evaluations and learn time."""
    import gymnasium as gym
    import torch
    from sb3_evaluation import callback as evaluation
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    kwargs = sb3_kwargs(settings)

    env = make_vec_env(ENV, n_envs=settings["n_envs"], seed=seed)
    cls = {"ppo": PPO, "dqn": DQN}[algorithm]
    model = cls("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)
    callback = evaluation(gym.make(ENV), every, steps, 10, seed)
    started = time.perf_counter()
    model.learn(steps, callback=callback)
    callback.measure()
    seconds = time.perf_counter() - started
    return {"seed": seed, "seconds": seconds, "evaluations": callback.evaluations}


def run_sb3(algorithm: str, seeds: int, steps: int, every: int) -> dict[str, Any]:
    settings = sb3_settings(algorithm, ENV, {})
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(JOBS, mp_context=context) as pool:
        futures = [
            pool.submit(sb3_seed, algorithm, settings, seed, steps, every) for seed in range(seeds)
        ]
        runs = [future.result() for future in futures]
    return {"wall_s": time.perf_counter() - started, "settings": settings, "runs": runs}


# -- rlx ------------------------------------------------------------------------------------------


def read_evaluations(metrics: Path) -> list[tuple[int, float]]:
    import csv

    with open(metrics, newline="") as f:
        return [
            (int(float(row["env_steps"])), float(row["eval/return_mean"]))
            for row in csv.DictReader(f)
            if row.get("eval/return_mean")
        ]


def run_rlx_group(
    algorithm: str, seeds: int, steps: int, every: int, extra: dict[str, Any]
) -> dict[str, Any]:
    hyperparameters = rlx_hyperparameters(algorithm, ENV, extra)
    settings = {**QUIET, "steps": steps, "eval_every": every, "eval_episodes": 10}
    with tempfile.TemporaryDirectory() as scratch:
        group = Path(scratch) / "group"
        run = run_rlx(algorithm, ENV, hyperparameters, seeds, settings, JOBS, True, group)
        runs = [
            {"seed": seed, "evaluations": read_evaluations(group / f"seed-{seed}" / "metrics.csv")}
            for seed in range(seeds)
        ]
    return {"wall_s": run["wall_s"], "hyperparameters": hyperparameters, "runs": runs}


# -- measures -------------------------------------------------------------------------------------


def measures(side: dict[str, Any]) -> dict[str, Any]:
    """Steps to 475, and whether each seed is still solved at the end, per seed."""
    reached, finals, bests = [], [], []
    for run in side["runs"]:
        evaluations = run["evaluations"]
        reached.append(next((s for s, value in evaluations if value >= TARGET), None))
        finals.append(evaluations[-1][1])
        bests.append(max(value for _, value in evaluations))
    hits = [s for s in reached if s is not None]
    n = len(reached)
    return {
        "seeds": n,
        "steps_to_475": reached,
        "reached": len(hits) / n,
        "median_steps_to_475": statistics.median(hits) if hits else None,
        "final_returns": finals,
        "final_solved": sum(v >= TARGET for v in finals) / n,
        "median_final": statistics.median(finals),
        "best_returns": bests,
        "best_solved": sum(v >= TARGET for v in bests) / n,
        "wall_s": side["wall_s"],
    }


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# Sample efficiency on 16 seeds: rlx against Stable-Baselines3 (CartPole-v1)",
        "",
        "Zoo settings for both; greedy evaluation on 10 episodes every `eval_every` steps; "
        "'solved' means a mean evaluation return of 475 or more. 'Best solved' counts the "
        "seeds whose best evaluation (the run's `best/`, `rlx eval RUN --best`) is solved.",
        "",
        "| part | library | seeds | reached 475 | median steps to 475 | final solved | "
        "median final return | best solved | wall-clock |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for part, entry in results["parts"].items():
        for library, m in entry["sides"].items():
            median = m["median_steps_to_475"]
            lines.append(
                f"| {part} | {library} | {m['seeds']} | {m['reached']:.0%} | "
                f"{'-' if median is None else f'{median:,.0f}'} | {m['final_solved']:.0%} | "
                f"{m['median_final']:.0f} | {m['best_solved']:.0%} | {m['wall_s']:.0f} s |"
            )
        test = entry.get("test")
        if test:
            p = test["mann_whitney_p"]
            lines.append(
                f"| {part} | rlx - SB3 steps to 475 | | | median difference "
                f"{test['median_difference']:,.0f}, 95% [{test['bootstrap_95'][0]:,.0f}, "
                f"{test['bootstrap_95'][1]:,.0f}], Mann-Whitney p = "
                f"{'-' if p is None else f'{p:.2g}'} | | | | |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--ablation-seeds", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="a smoke test: 2 seeds, 3,000 steps")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.seeds = args.ablation_seeds = 2
        for part, (algorithm, _, _) in PARTS.items():
            PARTS[part] = (algorithm, 3_000, 1_000)
    path = args.out / "sample_efficiency.json"
    results = json.loads(path.read_text()) if path.exists() else {"parts": {}}
    for part in args.parts.split(","):
        algorithm, steps, every = PARTS[part]
        if part == "dqn-ablations":
            sides = {}
            for name, extra in ABLATIONS.items():
                print(f"{part}: {name}", flush=True)
                side = run_rlx_group(algorithm, args.ablation_seeds, steps, every, extra)
                sides[f"rlx, {name}"] = {**measures(side), "change": extra}
            results["parts"][part] = {"steps": steps, "eval_every": every, "sides": sides}
        else:
            print(f"{part}: rlx", flush=True)
            rlx_side = measures(run_rlx_group(algorithm, args.seeds, steps, every, {}))
            print(f"{part}: sb3", flush=True)
            sb3_side = run_sb3(algorithm, args.seeds, steps, every)
            sb3 = measures(sb3_side)
            results["parts"][part] = {
                "steps": steps,
                "eval_every": every,
                "sb3_settings": sb3_side["settings"],
                "sides": {"rlx": rlx_side, "sb3": sb3},
                "test": compare_steps(rlx_side["steps_to_475"], sb3["steps_to_475"], steps),
            }
        args.out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1) + "\n")
        (args.out / "sample_efficiency.md").write_text(markdown(results))
        print(markdown(results), flush=True)


if __name__ == "__main__":
    main()
