"""CMA-ES, rlx against pycma: time per generation and final value at pycma's evaluation budget.

Two problems, both with the default population ``4 + floor(3 ln n)`` on both sides:

- 100-d Rastrigin (population 17), ``x0 = 3 * ones(100)``, ``sigma0 = 2``;
- 30-d rotated ellipsoid (population 14), ``f(x) = sum_i 10^(6 (i-1)/(n-1)) (R x)_i^2`` with a
  fixed random rotation ``R``, ``x0 = ones(30)``, ``sigma0 = 1``.

Each side evaluates the same vectorised function on the whole population at once:

- ``rlx``: ``rlx_es.CMAES`` ask/tell (its defaults: active covariance update, no restarts);
- ``pycma``: ``cma.CMAOptions`` defaults with ``verbose=-9``; ``es.ask()``, ``es.tell()``.

pycma runs ``--generations`` (resp. ``--ellipsoid-generations``) generations, or fewer where it
stops on its own termination criteria; its evaluation count is the budget, and rlx runs until
it has spent the same number of evaluations. The "final value" is the best value seen within
the budget. Over ``--seeds`` seeds (alternating rlx and pycma) the median final value and the
median time per generation are reported.

    python benchmarks/es_cma_speed.py [--generations 2000] [--ellipsoid-generations 1000]
        [--seeds 5]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import cma  # noqa: E402
import numpy as np  # noqa: E402

from rlx_es.cma_es import CMAES  # noqa: E402
from rlx_es.core import rastrigin  # noqa: E402

RESULTS = Path(__file__).parent / "results"

Objective = Callable[[np.ndarray], np.ndarray]


def rotated_ellipsoid(n: int) -> Objective:
    """``sum_i 10^(6 (i-1)/(n-1)) (R x)_i^2`` with a fixed random rotation ``R`` (seed 12345)."""
    q, r = np.linalg.qr(np.random.default_rng(12345).standard_normal((n, n)))
    rotation = q * np.sign(np.diag(r))
    scales = 10.0 ** (6.0 * np.arange(n) / (n - 1))

    def f(x: np.ndarray) -> np.ndarray:
        return ((np.asarray(x) @ rotation.T) ** 2 * scales).sum(axis=-1)

    return f


PROBLEMS: dict[str, tuple[int, Objective, float, float]] = {
    "rastrigin_100d": (100, rastrigin, 3.0, 2.0),
    "rotated_ellipsoid_30d": (30, rotated_ellipsoid(30), 1.0, 1.0),
}


def run_pycma(problem: str, generations: int, seed: int) -> dict[str, float]:
    n, f, x0, sigma0 = PROBLEMS[problem]
    es = cma.CMAEvolutionStrategy(np.full(n, x0), sigma0, {"verbose": -9, "seed": seed + 1})
    best = np.inf
    start = time.perf_counter()
    done = 0
    while done < generations and not (done and es.stop()):
        solutions = es.ask()
        values = f(np.asarray(solutions))
        es.tell(solutions, values.tolist())
        best = min(best, float(values.min()))
        done += 1
    seconds = time.perf_counter() - start
    return {
        "seconds_per_generation": seconds / done,
        "final_value": best,
        "evaluations": es.countevals,
        "generations": done,
    }


def run_rlx(problem: str, budget: int, seed: int) -> dict[str, float]:
    n, f, x0, sigma0 = PROBLEMS[problem]
    strategy = CMAES(np.full(n, x0), sigma=sigma0)
    rng = np.random.default_rng(seed)
    best = np.inf
    evaluations = generations = 0
    start = time.perf_counter()
    while evaluations < budget:
        population = strategy.ask(int(rng.integers(2**31)))
        values = f(population.parameters())
        strategy.tell(population, -values)
        evaluations += population.size
        generations += 1
        best = min(best, float(values.min()))
    seconds = time.perf_counter() - start
    return {
        "seconds_per_generation": seconds / generations,
        "final_value": best,
        "evaluations": evaluations,
        "generations": generations,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=2000, help="pycma, Rastrigin")
    parser.add_argument("--ellipsoid-generations", type=int, default=1000, help="pycma")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    limits = {
        "rastrigin_100d": args.generations,
        "rotated_ellipsoid_30d": args.ellipsoid_generations,
    }
    results: dict[str, dict] = {}
    for problem, generations in limits.items():
        runs: dict[str, list[dict[str, float]]] = {"rlx": [], "pycma": []}
        for seed in range(args.seeds):
            reference = run_pycma(problem, generations, seed)
            runs["pycma"].append(reference)
            runs["rlx"].append(run_rlx(problem, reference["evaluations"], seed))
            for name in ("rlx", "pycma"):
                r = runs[name][-1]
                print(
                    f"{problem} seed {seed} {name:6s} {r['seconds_per_generation'] * 1e3:7.3f} "
                    f"ms/generation  {r['evaluations']:6d} evaluations  "
                    f"final {r['final_value']:.4g}"
                )
        seconds = {
            name: statistics.median(r["seconds_per_generation"] for r in rs)
            for name, rs in runs.items()
        }
        finals = {
            name: statistics.median(r["final_value"] for r in rs) for name, rs in runs.items()
        }
        results[problem] = {
            "median_seconds_per_generation": seconds,
            "median_final_value": finals,
            "time_ratio_rlx_vs_pycma": seconds["rlx"] / seconds["pycma"],
            "rlx_at_least_as_good": finals["rlx"] <= finals["pycma"],
            "runs": runs,
        }
    result = {
        "benchmark": "CMA-ES rlx vs pycma: median final value at pycma's evaluation budget and "
        "seconds per generation, default populations",
        "pycma_generations": limits,
        "seeds": args.seeds,
        "pycma_version": cma.__version__,
        "problems": results,
        "target": "rlx median final value <= pycma's and time ratio <= 1 on every problem",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}",
        "threads": 1,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "es_cma_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    summary = {
        problem: {k: v for k, v in r.items() if k != "runs"} for problem, r in results.items()
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
