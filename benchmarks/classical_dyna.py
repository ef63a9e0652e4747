"""Real environment steps that Dyna-Q and Q-learning need to find the optimal cliff walk.

On CliffWalking-v1 (-1 a step, -100 and back to the start for a step into the cliff; the
shortest path, along the cliff, returns -13), each variant trains with Sutton and Barto's
settings for the Dyna maze (section 8.2: alpha 0.1, gamma 0.95, constant epsilon 0.1) from
a zero-initialised table, and after every training episode its greedy policy plays one
episode (the environment is deterministic; at most 100 steps). The count is the number of
real environment steps at the end of the first episode after which that greedy episode
returns -13:

- ``q-learning``: rlx's ``q-learning``;
- ``dyna-q n=N``: rlx's ``dyna-q`` with ``planning_steps=N`` (N = 0 is Q-learning exactly,
  and shows what the model bookkeeping costs).

Each variant runs with ``--seeds`` seeds; the median over seeds is reported, with the
training wall-clock to the threshold (time inside ``step()`` only, the greedy checks
excluded; the fastest of ``--repeats`` identical runs, which reach the threshold at the same
step). Results go to ``benchmarks/results/classical_dyna.json`` and a Markdown table
next to it.

    python benchmarks/classical_dyna.py [--seeds 5] [--repeats 3] [--budget 50000]
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

import rlx
from rlx.runs import package_versions

ENV_ID = "CliffWalking-v1"
THRESHOLD = -13.0
SETTINGS = {"learning_rate": 0.1, "gamma": 0.95, "epsilon_start": 0.1, "epsilon_end": 0.1}
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "q-learning": ("q-learning", {}),
    **{f"dyna-q n={n}": ("dyna-q", {"planning_steps": n}) for n in (0, 5, 20, 50)},
}
RESULTS = Path(__file__).parent / "results" / "classical_dyna.json"


def greedy_return(agent: Any, env: Any, limit: int = 100) -> float:
    """The return of one greedy episode of at most ``limit`` steps."""
    observation, _ = env.reset(seed=0)
    total, done, steps = 0.0, False, 0
    while not done and steps < limit:
        observation, reward, terminated, truncated, _ = env.step(agent.act(observation))
        total, done, steps = total + float(reward), terminated or truncated, steps + 1
    return total


def run(name: str, settings: dict[str, Any], seed: int, budget: int) -> dict[str, Any]:
    """Train until the greedy policy returns ``THRESHOLD`` or ``budget`` real steps pass."""
    agent = rlx.make(name, ENV_ID, seed=seed, **SETTINGS, **settings)
    probe = gymnasium.make(ENV_ID)
    seconds = 0.0
    reached = False
    while agent.env_steps < budget and not reached:
        start = time.perf_counter()
        agent.step()
        seconds += time.perf_counter() - start
        reached = greedy_return(agent, probe) >= THRESHOLD
    planning_steps = settings.get("planning_steps", 0)
    return {
        "seed": seed,
        "reached": reached,
        "env_steps": agent.env_steps if reached else None,
        "episodes": agent.episodes if reached else None,
        "planning_updates": agent.env_steps * planning_steps if reached else None,
        "seconds": seconds if reached else None,
    }


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r["reached"]]
    return statistics.median(values) if len(values) == len(runs) else None


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"# Dyna-Q against Q-learning: real steps to the optimal return on {ENV_ID}",
        "",
        f"Threshold: a greedy return of {THRESHOLD:g} (the shortest path), checked after each "
        f"training episode; median of {results['seeds']} seeds (0-{results['seeds'] - 1}); "
        "alpha 0.1, gamma 0.95, epsilon 0.1. Wall-clock: training only, "
        f"fastest of {results['repeats']} runs, on {results['machine']['cpus']} cores.",
        "",
        "| variant | real steps | episodes | planning updates | wall-clock (s) "
        "| real steps per seed |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for variant, summary in results["variants"].items():
        per_seed = ", ".join(str(r["env_steps"]) if r["reached"] else "-" for r in summary["runs"])
        if summary["median_env_steps"] is None:
            cells = ["not all seeds", "-", "-", "-"]
        else:
            cells = [
                f"{summary['median_env_steps']:,.0f}",
                f"{summary['median_episodes']:g}",
                f"{summary['median_planning_updates']:,.0f}",
                f"{summary['median_seconds']:.3f}",
            ]
        lines.append(f"| {variant} | " + " | ".join(cells) + f" | {per_seed} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per seed")
    parser.add_argument("--budget", type=int, default=50_000, help="real steps per run at most")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    variants: dict[str, dict[str, Any]] = {}
    for variant, (name, settings) in VARIANTS.items():
        runs = []
        for seed in range(args.seeds):
            repeats = [run(name, settings, seed, args.budget) for _ in range(args.repeats)]
            assert all(r["env_steps"] == repeats[0]["env_steps"] for r in repeats)
            fastest = min(repeats, key=lambda r: r["seconds"] or float("inf"))
            runs.append({**fastest, "seconds_all": [r["seconds"] for r in repeats]})
        variants[variant] = {
            "agent": name,
            "hyperparameters": {**SETTINGS, **settings},
            "median_env_steps": median(runs, "env_steps"),
            "median_episodes": median(runs, "episodes"),
            "median_planning_updates": median(runs, "planning_updates"),
            "median_seconds": median(runs, "seconds"),
            "runs": runs,
        }
        steps = [r["env_steps"] for r in runs]
        print(f"{variant:>12}: real steps {steps}", flush=True)

    results = {
        "benchmark": "real environment steps to the optimal greedy return, Dyna-Q vs Q-learning",
        "env": ENV_ID,
        "threshold": THRESHOLD,
        "seeds": args.seeds,
        "repeats": args.repeats,
        "budget": args.budget,
        "variants": variants,
        "machine": machine(),
        "versions": package_versions(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    args.out.with_suffix(".md").write_text(table)
    print("\n" + table + f"written to {args.out} and {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
