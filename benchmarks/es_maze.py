"""The deceptive maze over several seeds: how often NS-ES, NSR-ES and NSRA-ES reach the goal
region, against OpenAI-ES with the same budget, seeds and settings.

``rlx/DeceptiveMaze-v0``: the reward (minus the final distance to the goal) leads into a
cup-shaped trap whose roof is 0.2 from the goal; reaching the goal region means a final
distance of at most 0.15, that is an episode return of at least -0.15. Settings of
``packages/es/tests/test_learning.py`` (population 32, sigma 0.2, Adam 0.1, no weight decay,
MLP 3-16-16-2), ``--generations`` generations per run; a run counts as reaching the goal
when any member's episode does.

    python benchmarks/es_maze.py [--seeds 5] [--generations 120]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

import rlx  # noqa: E402

RESULTS = Path(__file__).parent / "results"
AGENTS = ("ns-es", "nsr-es", "nsra-es", "openai-es")
CONFIG = {
    "population_size": 32,
    "sigma": 0.2,
    "learning_rate": 0.1,
    "weight_decay": 0.0,
    "hidden_sizes": (16, 16),
}


def run(name: str, seed: int, generations: int) -> dict[str, Any]:
    agent = rlx.make(name, env="rlx/DeceptiveMaze-v0", seed=seed, **CONFIG)
    closest, first_hit = -float("inf"), None
    for generation in range(1, generations + 1):
        best = max(agent.step().episode_returns)
        closest = max(closest, best)
        if best >= -0.15 and first_hit is None:
            first_hit = generation
    return {"seed": seed, "closest_distance": -closest, "first_generation_in_goal": first_hit}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--generations", type=int, default=120)
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in AGENTS}
    for seed in range(args.seeds):
        for name in AGENTS:
            runs[name].append(run(name, seed, args.generations))
            print(name, runs[name][-1], flush=True)
    result = {
        "benchmark": "deceptive maze: runs whose members reach the goal region",
        "generations": args.generations,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in CONFIG.items()},
        "reached": {
            name: sum(r["first_generation_in_goal"] is not None for r in rs)
            for name, rs in runs.items()
        },
        "seeds": args.seeds,
        "runs": runs,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "es_maze.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
