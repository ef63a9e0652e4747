"""OpenAI-ES on HalfCheetah-v5 (MuJoCo): generations per hour at population 256, local backend,
and the return reached in a run of ``--minutes`` minutes.

Settings of Salimans et al. (2017) for MuJoCo: MLP 17 -> 64 -> 64 -> 6 (tanh), observations
normalised (here by a virtual-batch-norm reference batch), sigma 0.02, Adam with step size
0.01, weight decay 0.005, mirrored sampling, centred ranks, one 1,000-step episode per member.
Every ``--eval-every`` generations the centre plays 3 fixed-seed evaluation episodes
(``rlx.evaluate``; not counted in the generation time). One thread; the ``local`` backend
(batched forward pass, one MuJoCo environment per member: HalfCheetah has no vectorised
implementation in gymnasium).

    python benchmarks/es_halfcheetah.py [--minutes 60] [--population 256]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gymnasium  # noqa: E402
import torch  # noqa: E402

import rlx  # noqa: E402

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--population", type=int, default=256)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    agent = rlx.make(
        "openai-es",
        env="HalfCheetah-v5",
        seed=args.seed,
        population_size=args.population,
        hidden_sizes=(64, 64),
        virtual_batch_norm=True,
        sigma=0.02,
        learning_rate=0.01,
        weight_decay=0.005,
    )
    eval_env = gymnasium.make("HalfCheetah-v5")
    budget = args.minutes * 60.0
    trained, history, evaluations = 0.0, [], []
    while trained < budget:
        start = time.perf_counter()
        iteration = agent.step()
        seconds = time.perf_counter() - start
        trained += seconds
        row = {
            "generation": agent.generation,
            "seconds": seconds,
            "member_return_mean": iteration.metrics["return_mean"],
            "member_return_max": iteration.metrics["return_max"],
        }
        history.append(row)
        if agent.generation % args.eval_every == 0:
            result = rlx.evaluate(agent, eval_env, episodes=3, seed=args.seed)
            evaluations.append({"generation": agent.generation, "mean_return": result.mean_return})
            row["centre_return"] = result.mean_return
        print(json.dumps(row), flush=True)
    final = rlx.evaluate(agent, eval_env, episodes=3, seed=args.seed).mean_return
    hours = trained / 3600.0
    result = {
        "benchmark": "OpenAI-ES on HalfCheetah-v5, population 256, local backend",
        "minutes_run": trained / 60.0,
        "shortened": args.minutes < 60,
        "generations": agent.generation,
        "generations_per_hour": agent.generation / hours,
        "env_steps_per_second": agent.generation * args.population * 1000 / trained,
        "final_centre_mean_return": final,
        "best_member_return": agent.best_return,
        "centre_evaluations": evaluations,
        "history": history,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "threads": 1,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "es_halfcheetah.json").write_text(json.dumps(result, indent=2) + "\n")
    summary = {k: v for k, v in result.items() if k not in ("history", "centre_evaluations")}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
