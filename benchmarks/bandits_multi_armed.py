"""Steps per second of rlx's multi-armed bandit agents against MABWiser's equivalent policies.

Both libraries play the same online loop on the same 10-armed Bernoulli bandit (arm means
U[0, 1] drawn from ``--seed``): each step, the policy picks an arm and learns from its
reward. Rewards are drawn in advance, one per (step, arm), so both libraries get the same
reward whenever they pull the same arm at the same step.

- MABWiser: ``arm = mab.predict()``, then ``mab.partial_fit([arm], [reward])``;
- rlx: ``arm = agent.select(context)``, then ``agent.update(context, arm, reward)``: the
  agent API that ``agent.step()`` drives, here without the environment around it.

Before the timed loop, both learn from one pull of every arm (MABWiser refuses to predict
before a ``fit``, and its UCB1 does not try unpulled arms first, as rlx's does), with the
same rewards.

Pairs (rlx name and settings / MABWiser learning policy):

- ``epsilon-greedy`` (epsilon 0.1) / ``EpsilonGreedy(epsilon=0.1)``;
- ``ucb1`` (c 1) / ``UCB1(alpha=1)``: the same index, mean + sqrt(2 ln t / n);
- ``thompson`` (Beta(1, 1) priors) / ``ThompsonSampling()``;
- ``gradient-bandit`` (step size 0.1, temperature 1) / ``Softmax(tau=1)``: not the same
  algorithm (MABWiser's Softmax is Boltzmann exploration over sample means), but the
  nearest MABWiser has to a softmax policy.

The pairs run alternately, ``--repeats`` times each, and the median steps per second is
reported, with the ratio rlx / MABWiser. Each run's regret per step (expected reward of the
best arm minus that of the pulled one) shows that both libraries do comparable work.
Results go to ``benchmarks/results/bandits_multi_armed.json``.

MABWiser is not a dependency of any rlx package; install it for this benchmark only (it
brings scikit-learn and pandas)::

    pip install mabwiser
    python benchmarks/bandits_multi_armed.py [--steps 5000] [--repeats 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import rlx
from rlx.runs import package_versions

ENV_ID = "rlx/BernoulliMAB-v0"
N_ARMS = 10
RESULTS = Path(__file__).parent / "results" / "bandits_multi_armed.json"

#: rlx agent, its settings, MABWiser learning policy (class name, arguments)
PAIRS = (
    ("epsilon-greedy", {"epsilon": 0.1}, ("EpsilonGreedy", {"epsilon": 0.1})),
    ("ucb1", {"c": 1.0}, ("UCB1", {"alpha": 1.0})),
    ("thompson", {"prior_alpha": 1.0, "prior_beta": 1.0}, ("ThompsonSampling", {})),
    ("gradient-bandit", {"step_size": 0.1, "temperature": 1.0}, ("Softmax", {"tau": 1.0})),
)


def bandit(steps: int, seed: int) -> tuple[np.ndarray, list[list[float]]]:
    """Arm means, shape ``(N_ARMS,)``, and the reward of every arm at every step; the first
    row is the warm-up pull of every arm."""
    rng = np.random.default_rng(seed)
    means = rng.random(N_ARMS)
    rewards = (rng.random((steps + 1, N_ARMS)) < means).astype(float)
    return means, rewards.tolist()


def run_rlx(name: str, settings: dict[str, Any], means: np.ndarray, rewards, seed: int):
    """Seconds taken and arms pulled by rlx's agent over the rewards."""
    agent = rlx.make(name, ENV_ID, seed=seed, env_kwargs={"means": means.tolist()}, **settings)
    select, update = agent.select, agent.update
    context = np.ones(1)
    for arm, reward in enumerate(rewards[0]):
        update(context, arm, reward)
    pulled = []
    start = time.perf_counter()
    for step_rewards in rewards[1:]:
        arm = select(context)
        update(context, arm, step_rewards[arm])
        pulled.append(arm)
    return time.perf_counter() - start, pulled


def run_mabwiser(policy: tuple[str, dict[str, Any]], rewards, seed: int):
    """Seconds taken and arms pulled by MABWiser's policy over the rewards."""
    from mabwiser.mab import MAB, LearningPolicy

    name, arguments = policy
    mab = MAB(list(range(N_ARMS)), getattr(LearningPolicy, name)(**arguments), seed=seed)
    mab.fit(list(range(N_ARMS)), rewards[0])
    predict, partial_fit = mab.predict, mab.partial_fit
    pulled = []
    start = time.perf_counter()
    for step_rewards in rewards[1:]:
        arm = predict()
        partial_fit([arm], [step_rewards[arm]])
        pulled.append(arm)
    return time.perf_counter() - start, pulled


def regret_per_step(means: np.ndarray, pulled: list[int]) -> float:
    return float(means.max() - means[pulled].mean())


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "processor": model or platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def versions() -> dict[str, str]:
    found = package_versions()
    for name in ("mabwiser", "numpy", "scikit-learn", "pandas"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return dict(sorted(found.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    try:
        import mabwiser  # noqa: F401
    except ImportError:
        sys.exit("this benchmark compares against MABWiser: pip install mabwiser")

    means, rewards = bandit(args.steps, args.seed)
    policies = {}
    for name, settings, policy in PAIRS:
        rates: dict[str, list[float]] = {"rlx": [], "mabwiser": []}
        regrets: dict[str, list[float]] = {"rlx": [], "mabwiser": []}
        for repeat in range(args.repeats):
            seed = args.seed + repeat
            for library in ("rlx", "mabwiser"):
                if library == "rlx":
                    elapsed, pulled = run_rlx(name, settings, means, rewards, seed)
                else:
                    elapsed, pulled = run_mabwiser(policy, rewards, seed)
                rates[library].append(args.steps / elapsed)
                regrets[library].append(regret_per_step(means, pulled))
                print(
                    f"{name:>15} repeat {repeat} {library:>8}: {args.steps / elapsed:10,.0f} "
                    f"steps/s, regret per step {regrets[library][-1]:.4f}",
                    flush=True,
                )
        median = {library: statistics.median(values) for library, values in rates.items()}
        policies[name] = {
            "rlx": {"agent": name, "hyperparameters": settings},
            "mabwiser": {"learning_policy": policy[0], "arguments": policy[1]},
            "steps_per_second": median,
            "steps_per_second_all": rates,
            "ratio_rlx_to_mabwiser": median["rlx"] / median["mabwiser"],
            "regret_per_step_mean": {lib: statistics.mean(v) for lib, v in regrets.items()},
        }

    results = {
        "benchmark": "multi-armed bandit policies, online select + update steps per second",
        "bandit": {
            "arms": N_ARMS,
            "rewards": "Bernoulli",
            "means": means.tolist(),
            "best_mean": float(means.max()),
            "seed": args.seed,
        },
        "steps": args.steps,
        "repeats": args.repeats,
        "policies": policies,
        "machine": machine(),
        "versions": versions(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")

    print(f"\n{N_ARMS}-armed Bernoulli bandit, {args.steps:,} steps, median of {args.repeats}")
    print(
        f"{'rlx agent':>15} | {'MABWiser policy':>16} | {'rlx steps/s':>11} | "
        f"{'MABWiser steps/s':>16} | {'ratio':>6} | regret/step rlx, MABWiser"
    )
    for name, result in policies.items():
        rate, regret = result["steps_per_second"], result["regret_per_step_mean"]
        print(
            f"{name:>15} | {result['mabwiser']['learning_policy']:>16} | {rate['rlx']:11,.0f} | "
            f"{rate['mabwiser']:16,.0f} | {result['ratio_rlx_to_mabwiser']:6.1f} | "
            f"{regret['rlx']:.4f}, {regret['mabwiser']:.4f}"
        )
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
