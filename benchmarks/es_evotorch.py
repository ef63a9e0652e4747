"""Wall-clock to a mean return of 475 on CartPole-v1: rlx's OpenAI-ES against EvoTorch's PGPE.

PGPE is EvoTorch's closest algorithm to OpenAI-ES: configured with symmetric (mirrored)
sampling, centred ranking, Adam on the centre and a fixed standard deviation
(``stdev_learning_rate=0``), it is OpenAI-ES. Both sides use the same population size, noise
standard deviation, learning rate, policy (4 -> 16 -> 2 MLP, tanh, argmax action) and one
episode per member, no observation normalisation, no weight decay:

- ``rlx``: ``rlx.make("openai-es", ...)`` with the local backend (batched evaluation);
- ``evotorch``: ``PGPE`` on ``GymNE`` with ``num_actors=0`` (in-process, one thread).

After every generation both centres are evaluated on the same 10 fixed-seed episodes
(``rlx.evaluate``); the clock counts training only (the check is not timed for either) and a
run stops at a mean return of 475, or at ``--max-seconds`` of training. Seeds ``0..--seeds-1``;
the ratio is of the median times.

    python benchmarks/es_evotorch.py [--seeds 3] [--population 64]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import rlx  # noqa: E402

RESULTS = Path(__file__).parent / "results"
TARGET = 475.0


class EvoTorchPolicy:
    """``act`` for an EvoTorch centre, so that rlx.evaluate plays it."""

    def __init__(self, problem: Any, centre: Any) -> None:
        self.policy = problem.to_policy(centre)

    def act(self, observation: np.ndarray, deterministic: bool = True) -> int:
        with torch.no_grad():
            return int(self.policy(torch.as_tensor(observation, dtype=torch.float32)).argmax())


def run_rlx(seed: int, args: argparse.Namespace) -> dict[str, Any]:
    agent = rlx.make(
        "openai-es",
        env="CartPole-v1",
        seed=seed,
        population_size=args.population,
        hidden_sizes=(16,),
        sigma=args.sigma,
        learning_rate=args.learning_rate,
        weight_decay=0.0,
    )
    return _loop(agent.step, lambda: agent, seed, args)


def run_evotorch(seed: int, args: argparse.Namespace) -> dict[str, Any]:
    from evotorch.algorithms import PGPE
    from evotorch.neuroevolution import GymNE

    torch.manual_seed(seed)
    np.random.seed(seed)
    problem = GymNE(
        env="CartPole-v1",
        network="Linear(obs_length, 16) >> Tanh() >> Linear(16, act_length)",
        num_actors=0,
        observation_normalization=False,
        num_episodes=1,
    )
    searcher = PGPE(
        problem,
        popsize=args.population,
        center_learning_rate=args.learning_rate,
        stdev_init=args.sigma,
        stdev_learning_rate=0.0,
        optimizer="adam",
        ranking_method="centered",
        symmetric=True,
    )
    return _loop(
        searcher.step, lambda: EvoTorchPolicy(problem, searcher.status["center"]), seed, args
    )


def _loop(step: Any, policy: Any, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    env = gymnasium.make("CartPole-v1")
    trained, generation, mean_return = 0.0, 0, 0.0
    while trained < args.max_seconds:
        start = time.perf_counter()
        step()
        trained += time.perf_counter() - start
        generation += 1
        mean_return = rlx.evaluate(policy(), env, episodes=10, seed=seed).mean_return
        if mean_return >= TARGET:
            break
    return {
        "seconds": trained,
        "generations": generation,
        "final_mean_return": mean_return,
        "reached": mean_return >= TARGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--population", type=int, default=64)
    parser.add_argument("--sigma", type=float, default=0.05)
    parser.add_argument("--learning-rate", type=float, default=0.03)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("evotorch").setLevel(logging.WARNING)
    runs: dict[str, list[dict[str, Any]]] = {"rlx": [], "evotorch": []}
    for seed in range(args.seeds):
        for name, run in (("rlx", run_rlx), ("evotorch", run_evotorch)):
            result = run(seed, args)
            runs[name].append({"seed": seed, **result})
            print(f"seed {seed} {name:8s} {result}", flush=True)
    medians = {name: statistics.median(r["seconds"] for r in rs) for name, rs in runs.items()}
    result = {
        "benchmark": "wall-clock seconds of training to a mean return of 475 on CartPole-v1",
        "rlx": "openai-es, local backend (batched)",
        "peer": "EvoTorch PGPE (symmetric, centered ranks, Adam, fixed stdev), GymNE num_actors=0",
        "population": args.population,
        "sigma": args.sigma,
        "learning_rate": args.learning_rate,
        "median_seconds": medians,
        "all_reached": {name: all(r["reached"] for r in rs) for name, rs in runs.items()},
        "ratio_rlx_vs_evotorch": medians["rlx"] / medians["evotorch"],
        "target": "ratio <= 0.5",
        "runs": runs,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "threads": 1,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "es_evotorch.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
