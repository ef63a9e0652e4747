"""Population evaluation throughput (environment steps per second) of rlx's OpenAI-ES on
CartPole-v1 at population 256, against a per-member loop in the style of estorch.

Both sides evaluate exactly the same members (the populations of an rlx OpenAI-ES run, so
episodes get longer as the policy learns) with the same MLP (4 -> 32 -> 32 -> 2, tanh):

- ``rlx`` (``vectorization=auto``): the whole population in one batched forward pass per
  step over blocks of gymnasium's vectorised CartPole (``CartPoleVectorEnv``);
- ``rlx_sync`` (``vectorization=sync``): the same batched forward pass, one ordinary
  ``gymnasium.make`` environment per member (what every environment without a vectorised
  implementation gets);
- ``rlx_network`` (``network=es_throughput:benchmark_mlp``, ``vectorization=auto``): the
  same MLP as a user's ``nn.Module`` (the factory below, the parameters in the built-in
  layout, so the members and their episodes are the same), evaluated with
  ``torch.func.functional_call`` under ``torch.vmap``, traced once into a graph of aten
  operations (``rlx_es.policy.trace_population_forward``); ``ratio_rlx_network_vs_rlx`` is
  the cost of bringing one's own network (goal: at least 0.9; eager vmap made 0.41);
- ``per_member`` (estorch's loop): one ``torch.nn`` policy and one environment; for each
  member, load its parameters into the policy and play its episode, one unbatched forward
  pass per step (``policy(torch.from_numpy(obs))``).

Each generation's episodes are seeded identically for the three, so the step counts match up
to the per-member loop using per-member seeds for the vectorised blocks (reported). One
thread for torch and BLAS. Variants alternate generation by generation.

    python benchmarks/es_throughput.py [--generations 12] [--population 256]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import rlx  # noqa: E402
from rlx_es.evaluation import LocalBackend, member_seeds  # noqa: E402

RESULTS = Path(__file__).parent / "results"
sys.path.insert(0, str(Path(__file__).parent))  # network=es_throughput:benchmark_mlp imports


def per_member_loop(policy: nn.Module, parameters: np.ndarray, seeds: list[int]) -> int:
    """estorch-style evaluation: one policy, one environment, one member at a time."""
    env = gymnasium.make("CartPole-v1")
    steps = 0
    for member, seed in zip(parameters, seeds, strict=True):
        torch.nn.utils.vector_to_parameters(
            torch.as_tensor(member, dtype=torch.float32), policy.parameters()
        )
        observation, _ = env.reset(seed=seed)
        done = False
        with torch.no_grad():
            while not done:
                action = int(policy(torch.from_numpy(observation)).argmax())
                observation, _, terminated, truncated, _ = env.step(action)
                done = terminated or truncated
                steps += 1
    return steps


def benchmark_mlp(observation_space: object, action_space: object) -> nn.Module:
    """The user-network factory of ``rlx_network``: the built-in policy's MLP as a module."""
    return torch_policy((32, 32))


def torch_policy(hidden: tuple[int, ...]) -> nn.Module:
    """The same MLP as rlx's policy; parameter order (W1, b1, W2, b2, ...) with W as (in, out)."""

    class Linear(nn.Module):
        def __init__(self, fan_in: int, fan_out: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(fan_in, fan_out))
            self.bias = nn.Parameter(torch.zeros(fan_out))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.weight + self.bias

    sizes = (4, *hidden, 2)
    layers: list[nn.Module] = []
    for index, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(Linear(a, b))
        if index < len(sizes) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=12)
    parser.add_argument("--population", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    hidden = (32, 32)
    agent = rlx.make(
        "openai-es",
        env="CartPole-v1",
        seed=args.seed,
        population_size=args.population,
        hidden_sizes=hidden,
        sigma=0.05,
        learning_rate=0.03,
    )
    sync_settings = rlx_sync_settings(agent)
    sync_backend = LocalBackend(sync_settings, args.population)
    network_settings = dataclasses.replace(agent.settings, network="es_throughput:benchmark_mlp")
    network_backend = LocalBackend(network_settings, args.population)
    policy = torch_policy(hidden)
    names = ("rlx", "rlx_network", "rlx_sync", "per_member")
    totals = {name: {"steps": 0, "seconds": 0.0} for name in names}
    rows = []
    for generation in range(args.generations):
        population = agent.strategy.ask(int(agent.rng.integers(2**31)))
        message = population.to_message()
        block_seeds = agent.rng.integers(
            2**31, size=-(-args.population // agent.settings.block_size)
        )
        start = time.perf_counter()
        episodes = agent.backend.evaluate(message, block_seeds)
        rlx_time = time.perf_counter() - start
        start = time.perf_counter()
        network = network_backend.evaluate(message, block_seeds)
        network_time = time.perf_counter() - start
        start = time.perf_counter()
        sync = sync_backend.evaluate(message, block_seeds)
        sync_time = time.perf_counter() - start
        seeds = [s for b in block_seeds for s in member_seeds(int(b), agent.settings.block_size)][
            : args.population
        ]
        parameters = population.parameters()
        start = time.perf_counter()
        loop_steps = per_member_loop(policy, parameters, seeds)
        loop_time = time.perf_counter() - start
        assert loop_steps == int(sync.lengths.sum()), "the per-member loop and rlx_sync disagree"
        agent.strategy.tell(population, episodes.returns)
        for name, steps, seconds in (
            ("rlx", int(episodes.lengths.sum()), rlx_time),
            ("rlx_network", int(network.lengths.sum()), network_time),
            ("rlx_sync", int(sync.lengths.sum()), sync_time),
            ("per_member", loop_steps, loop_time),
        ):
            totals[name]["steps"] += steps
            totals[name]["seconds"] += seconds
        rows.append(
            {
                "generation": generation,
                "mean_return": float(episodes.returns.mean()),
                "rlx_steps_per_s": int(episodes.lengths.sum()) / rlx_time,
                "rlx_network_steps_per_s": int(network.lengths.sum()) / network_time,
                "rlx_network_same_episodes": bool(
                    np.array_equal(network.lengths, episodes.lengths)
                ),
                "rlx_sync_steps_per_s": int(sync.lengths.sum()) / sync_time,
                "per_member_steps_per_s": loop_steps / loop_time,
            }
        )
        row = rows[-1]
        print(
            f"gen {generation:2d} mean return {episodes.returns.mean():6.1f}  "
            f"rlx {row['rlx_steps_per_s']:9.0f}  network {row['rlx_network_steps_per_s']:9.0f}  "
            f"rlx_sync {row['rlx_sync_steps_per_s']:9.0f}  "
            f"per-member {row['per_member_steps_per_s']:8.0f} steps/s",
            flush=True,
        )
    rates = {name: t["steps"] / t["seconds"] for name, t in totals.items()}
    result = {
        "benchmark": "OpenAI-ES population evaluation throughput, CartPole-v1",
        "population": args.population,
        "generations": args.generations,
        "policy": "MLP 4-32-32-2 tanh",
        "steps_per_second": rates,
        "ratio_rlx_vs_per_member": rates["rlx"] / rates["per_member"],
        "ratio_rlx_sync_vs_per_member": rates["rlx_sync"] / rates["per_member"],
        "ratio_rlx_network_vs_rlx": rates["rlx_network"] / rates["rlx"],
        # Robust to a hiccup of the machine in one variant's turn of one generation.
        "median_generation_ratio_rlx_network_vs_rlx": float(
            np.median([r["rlx_network_steps_per_s"] / r["rlx_steps_per_s"] for r in rows])
        ),
        "rlx_network_same_episodes": all(r["rlx_network_same_episodes"] for r in rows),
        "target": "ratio >= 10; rlx_network within 10% of rlx",
        "per_generation": rows,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "threads": 1,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "es_throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "per_generation"}, indent=2))


def rlx_sync_settings(agent: object) -> object:
    """The agent's evaluator settings with one ordinary environment per member."""
    return dataclasses.replace(agent.settings, vectorization="sync")


if __name__ == "__main__":
    main()
