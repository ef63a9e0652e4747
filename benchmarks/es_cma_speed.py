"""CMA-ES time per generation on the 100-dimensional Rastrigin function: rlx against pycma.

Both run the full-covariance (mu/mu_w, lambda)-CMA-ES with the default population
(``4 + floor(3 ln 100) = 17``), start at ``x0 = 3 * ones(100)`` with ``sigma0 = 2`` and evaluate
the same vectorised Rastrigin function on the whole population at once:

- ``rlx``: ``rlx_es.CMAES`` ask/tell (noise rebuilt from one seed per generation, lazy
  eigendecomposition every ``1 / (10 n (c1 + cmu))`` generations);
- ``pycma``: ``cma.CMAOptions`` defaults with ``verbose=-9``; ``es.ask()``, ``es.tell()``.

Each side runs ``--generations`` generations ``--repeats`` times, alternating; the median time
per generation is reported, with the best value reached (both should be comparable: same
algorithm, same budget).

    python benchmarks/es_cma_speed.py [--generations 2000] [--repeats 3]
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
from pathlib import Path  # noqa: E402

import cma  # noqa: E402
import numpy as np  # noqa: E402

from rlx_es.cma_es import CMAES  # noqa: E402
from rlx_es.core import rastrigin  # noqa: E402

RESULTS = Path(__file__).parent / "results"
N = 100


def run_rlx(generations: int, seed: int) -> tuple[float, float]:
    strategy = CMAES(np.full(N, 3.0), sigma=2.0)
    rng = np.random.default_rng(seed)
    best = np.inf
    start = time.perf_counter()
    for _ in range(generations):
        population = strategy.ask(int(rng.integers(2**31)))
        values = rastrigin(population.parameters())
        strategy.tell(population, -values)
        best = min(best, float(values.min()))
    return (time.perf_counter() - start) / generations, best


def run_pycma(generations: int, seed: int) -> tuple[float, float]:
    es = cma.CMAEvolutionStrategy(np.full(N, 3.0), 2.0, {"verbose": -9, "seed": seed + 1})
    best = np.inf
    start = time.perf_counter()
    for _ in range(generations):
        solutions = es.ask()
        values = rastrigin(np.asarray(solutions))
        es.tell(solutions, values.tolist())
        best = min(best, float(values.min()))
    return (time.perf_counter() - start) / generations, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"rlx": [], "pycma": []}
    for repeat in range(args.repeats):
        for name, run in (("rlx", run_rlx), ("pycma", run_pycma)):
            seconds, best = run(args.generations, repeat)
            runs[name].append({"seconds_per_generation": seconds, "best_value": best})
            print(f"repeat {repeat} {name:6s} {seconds * 1e3:7.3f} ms/generation  best {best:.2f}")
    medians = {
        name: statistics.median(r["seconds_per_generation"] for r in rs)
        for name, rs in runs.items()
    }
    result = {
        "benchmark": "CMA-ES seconds per generation, 100-d Rastrigin, population 17",
        "generations": args.generations,
        "pycma_version": cma.__version__,
        "median_seconds_per_generation": medians,
        "median_best_value": {
            name: statistics.median(r["best_value"] for r in rs) for name, rs in runs.items()
        },
        "ratio_rlx_vs_pycma": medians["rlx"] / medians["pycma"],
        "target": "ratio <= 1",
        "runs": runs,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}",
        "threads": 1,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "es_cma_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
