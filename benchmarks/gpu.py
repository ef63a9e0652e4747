"""Throughput of every torch agent on the CPU and on CUDA, at its defaults and at a large size.

For each deep agent (and the neural bandits) the script times ``agent.step()`` for a few
seconds after a warm-up and reports environment steps (rounds for bandits) per second, with
``device=cpu`` and ``device=cuda``; for rlx-es, generations per second at populations 4,096
and 16,384. On a machine without CUDA the cuda columns stay empty; agents without a
``device`` setting have the CPU column only. Every
figure holds for the machine named in the results file only.

    python benchmarks/gpu.py [--seconds 3] [--only ppo,sac]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from pathlib import Path

import torch

import rlx
from rlx.api import agent_spec

#: name -> (environment, settings at the defaults, settings of a large configuration)
AGENTS: dict[str, tuple[str, dict, dict]] = {
    "ppo": (
        "CartPole-v1",
        {},
        {"n_envs": 64, "n_steps": 128, "batch_size": 4096, "hidden_sizes": (256, 256)},
    ),
    "a2c": ("CartPole-v1", {}, {"n_envs": 64, "n_steps": 64, "hidden_sizes": (256, 256)}),
    "vpg": ("CartPole-v1", {}, {"n_envs": 64, "n_steps": 64, "hidden_sizes": (256, 256)}),
    "dqn": (
        "CartPole-v1",
        {"learning_starts": 1000},
        {"learning_starts": 1000, "batch_size": 1024, "hidden_sizes": (256, 256)},
    ),
    "sac": (
        "Pendulum-v1",
        {"learning_starts": 1000},
        {"learning_starts": 1000, "batch_size": 1024, "hidden_sizes": (512, 512)},
    ),
    "td3": (
        "Pendulum-v1",
        {"learning_starts": 1000},
        {"learning_starts": 1000, "batch_size": 1024, "hidden_sizes": (512, 512)},
    ),
    "neural-greedy": ("rlx/Wheel-v0", {}, {"hidden_sizes": (256, 256), "batch_size": 2048}),
}
ES_POPULATIONS = (4096, 16384)


def throughput(name: str, env: str, settings: dict, seconds: float) -> float:
    """Environment steps per second of ``agent.step()`` after the warm-up."""
    agent = rlx.make(name, env, seed=0, **settings)
    try:
        warm = time.perf_counter()
        while time.perf_counter() - warm < min(seconds, 2.0) or getattr(
            agent, "env_steps", 10**9
        ) < settings.get("learning_starts", 0):
            agent.step()
        steps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            steps += agent.step().env_steps
        return steps / (time.perf_counter() - started)
    finally:
        close = getattr(agent, "close", None)
        if close is not None:
            close()


def es_generations(population: int, seconds: float, device: str) -> float:
    agent = rlx.make("openai-es", "CartPole-v1", seed=0, population_size=population, device=device)
    try:
        agent.step()  # warm-up
        generations, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            agent.step()
            generations += 1
        return generations / (time.perf_counter() - started)
    finally:
        close = getattr(agent, "close", None)
        if close is not None:
            close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--only", default="", help="comma-separated agent names")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "gpu.json"))
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    only = {name for name in args.only.split(",") if name}
    rows = []
    for name, (env, default, large) in AGENTS.items():
        if only and name not in only:
            continue
        for size, settings in (("default", default), ("large", large)):
            config_fields = dataclasses.fields(agent_spec(name).load().Config)
            has_device = "device" in {field.name for field in config_fields}
            row = {"agent": name, "env": env, "size": size, "settings": settings}
            for device in ("cpu", "cuda"):
                if device == "cuda" and not (cuda and has_device):
                    row[f"{device}_steps_per_s"] = None
                    continue
                extra = {"device": device} if has_device else {}
                row[f"{device}_steps_per_s"] = throughput(
                    name, env, {**settings, **extra}, args.seconds
                )
            rows.append(row)
            print(json.dumps(row, default=str), flush=True)
    es = []
    if not only or "openai-es" in only:
        for population in ES_POPULATIONS:
            row = {
                "agent": "openai-es",
                "population": population,
                "cpu_generations_per_s": es_generations(population, args.seconds, "cpu"),
                "cuda_generations_per_s": (
                    es_generations(population, args.seconds, "cuda") if cuda else None
                ),
            }
            es.append(row)
            print(json.dumps(row), flush=True)
    results = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cuda": torch.cuda.get_device_name(0) if cuda else None,
            "torch": torch.__version__,
        },
        "seconds_per_measurement": args.seconds,
        "agents": rows,
        "es": es,
    }
    Path(args.out).write_text(json.dumps(results, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
