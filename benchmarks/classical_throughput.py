"""Throughput of rlx's tabular Q-learning against hand-written loops doing the same work.

On slippery FrozenLake-v1, each variant trains Q-learning for the same number of
environment steps on its own ``gymnasium.make("FrozenLake-v1")``, with the same
hyperparameters, the same linearly decaying epsilon-greedy exploration (ties broken at
random) and the same update:

- ``rlx``: ``rlx.make("q-learning", ...)`` driven by ``rlx.Trainer`` (no run directory,
  no periodic evaluation, no progress bar; the trainer's end-of-run evaluation of 10
  episodes is included in the time);
- ``numpy_loop``: a plain loop over a NumPy Q table, as one would write it by hand;
- ``python_loop``: a plain loop with the tricks rlx uses (the table as lists of floats,
  uniform numbers drawn in blocks), which isolates what the framework itself costs.

The variants run alternately, ``--repeats`` times each, and the median steps per second
is reported. Each variant's greedy policy is then evaluated on the same 1000 episodes, to
show that the work is the same. Results go to ``benchmarks/results/classical_throughput.json``.

    python benchmarks/classical_throughput.py [--steps 300000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

import rlx
from rlx.runs import package_versions
from rlx_classical.q_learning import QLearningConfig

ENV_ID = "FrozenLake-v1"
CONFIG = QLearningConfig(learning_rate=0.05)
RESULTS = Path(__file__).parent / "results" / "classical_throughput.json"


def train_rlx(steps: int, seed: int) -> tuple[int, float, Callable[[int], int]]:
    """Environment steps done, seconds taken and the greedy policy of rlx's Q-learning."""
    agent = rlx.make("q-learning", ENV_ID, seed=seed, learning_rate=CONFIG.learning_rate)
    trainer = rlx.Trainer(agent, steps=steps, eval_every=0, progress=False, verbose=False)
    start = time.perf_counter()
    result = trainer.fit()
    elapsed = time.perf_counter() - start
    return result.env_steps, elapsed, agent.act


def train_numpy_loop(steps: int, seed: int) -> tuple[int, float, Callable[[int], int]]:
    """Q-learning as a hand-written loop over a NumPy table."""
    c = CONFIG
    env = gymnasium.make(ENV_ID)
    rng = np.random.default_rng(seed)
    q = np.full((env.observation_space.n, env.action_space.n), c.initial_q)
    n_actions = q.shape[1]
    start = time.perf_counter()
    state, _ = env.reset(seed=seed)
    for t in range(steps):
        epsilon = max(
            c.epsilon_end,
            c.epsilon_start + (c.epsilon_end - c.epsilon_start) * t / c.epsilon_decay_steps,
        )
        if rng.random() < epsilon:
            action = int(rng.random() * n_actions)
        else:
            ties = np.flatnonzero(q[state] == q[state].max())
            action = int(ties[int(rng.random() * len(ties))])
        next_state, reward, terminated, truncated, _ = env.step(action)
        target = reward if terminated else reward + c.gamma * q[next_state].max()
        q[state, action] += c.learning_rate * (target - q[state, action])
        state = next_state
        if terminated or truncated:
            state, _ = env.reset()
    elapsed = time.perf_counter() - start
    return steps, elapsed, lambda observation: int(np.argmax(q[observation]))


def train_python_loop(steps: int, seed: int) -> tuple[int, float, Callable[[int], int]]:
    """Q-learning as a hand-written loop with lists of floats and block-drawn uniform numbers."""
    c = CONFIG
    env = gymnasium.make(ENV_ID)
    rng = np.random.default_rng(seed)
    n_actions = int(env.action_space.n)
    q = [[c.initial_q] * n_actions for _ in range(int(env.observation_space.n))]
    alpha, gamma = c.learning_rate, c.gamma
    slope = (c.epsilon_end - c.epsilon_start) / c.epsilon_decay_steps
    start = time.perf_counter()
    uniforms = rng.random(2 * steps).tolist()
    state, _ = env.reset(seed=seed)
    for t in range(steps):
        epsilon = c.epsilon_start + slope * t if t < c.epsilon_decay_steps else c.epsilon_end
        values = q[state]
        explore, pick = uniforms[2 * t], uniforms[2 * t + 1]
        if explore < epsilon:
            action = int(pick * n_actions)
        else:
            best = max(values)
            ties = [a for a, v in enumerate(values) if v == best]
            action = ties[int(pick * len(ties))]
        next_state, reward, terminated, truncated, _ = env.step(action)
        target = reward if terminated else reward + gamma * max(q[next_state])
        values[action] += alpha * (target - values[action])
        state = next_state
        if terminated or truncated:
            state, _ = env.reset()
    elapsed = time.perf_counter() - start
    return steps, elapsed, lambda observation: q[observation].index(max(q[observation]))


VARIANTS = {"rlx": train_rlx, "numpy_loop": train_numpy_loop, "python_loop": train_python_loop}


class _Policy:
    def __init__(self, act: Callable[[int], int]) -> None:
        self._act = act

    def act(self, observation: Any, deterministic: bool = True) -> int:
        return self._act(int(observation))


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    success: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for repeat in range(args.repeats):
        for name, train in VARIANTS.items():
            done, elapsed, act = train(args.steps, seed=repeat)
            rates[name].append(done / elapsed)
            result = rlx.evaluate(_Policy(act), gymnasium.make(ENV_ID), episodes=1000, seed=0)
            success[name].append(result.mean_return)
            print(f"repeat {repeat} {name:>12}: {done / elapsed:10,.0f} steps/s", flush=True)

    median = {name: statistics.median(values) for name, values in rates.items()}
    results = {
        "benchmark": "tabular Q-learning throughput, environment steps per second",
        "env": ENV_ID,
        "steps": args.steps,
        "repeats": args.repeats,
        "hyperparameters": dataclasses.asdict(CONFIG),
        "steps_per_second": median,
        "steps_per_second_all": rates,
        "ratio_rlx_to_numpy_loop": median["rlx"] / median["numpy_loop"],
        "ratio_rlx_to_python_loop": median["rlx"] / median["python_loop"],
        "greedy_success_rate": {name: statistics.mean(v) for name, v in success.items()},
        "machine": machine(),
        "versions": package_versions(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")

    print(f"\nQ-learning on {ENV_ID}, {args.steps:,} steps, median of {args.repeats}")
    print(f"{'variant':>12} | {'steps/s':>10} | {'vs numpy loop':>13} | greedy success")
    for name in VARIANTS:
        print(
            f"{name:>12} | {median[name]:10,.0f} | {median[name] / median['numpy_loop']:13.2f} | "
            f"{results['greedy_success_rate'][name]:.3f}"
        )
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
