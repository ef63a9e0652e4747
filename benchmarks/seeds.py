"""Many seeds of one configuration: rlx seed groups against Stable-Baselines3, side by side.

For each configuration, the wall-clock seconds to train all its seeds on this machine (process
start-up and imports included on every side), with rl-baselines3-zoo's settings given to both
libraries (the tuned settings of rlx-onpolicy and rlx-offpolicy, ``rlx.tuned``), no
evaluation during training, one torch thread per process:

- ``ppo``: PPO CartPole-v1, 16 seeds x 100,000 steps;
- ``dqn``: DQN CartPole-v1, 16 seeds x 50,000 steps;
- ``sac``: SAC Pendulum-v1, 8 seeds x 20,000 steps, 64-64 networks (the zoo setting here)
  and a 256-256 variant (``hidden_sizes=(256, 256)``, SB3 ``net_arch=[256, 256]``).

Three ways to train the K seeds, each on the machine's 2 cores:

- ``sb3``: Stable-Baselines3 at its best here, two spawned processes at a time
  (``ProcessPoolExecutor(2)``), each with ``torch.set_num_threads(1)``, one ``model.learn``
  per seed;
- ``rlx processes``: ``rlx.groups.new_group(..., jobs=2, batched=False).fit()``, one seed per
  worker process at a time;
- ``rlx batched``: the same with ``batched=True``, the seeds of each of the two workers trained
  as one batched computation. Where this rlx's ``new_group`` has no ``batched`` keyword, the
  mode is recorded as ``null`` with a note.

Reported: the ratio of each rlx mode's time to SB3's, against the issue's targets (PPO <= 0.1,
DQN <= 0.5, SAC 64-64 <= 0.33; the 256-256 variant has none), and the arithmetic rate of the
updates: FLOPs of the gradient updates, counted analytically, over the wall seconds, also as a
fraction of the machine's fp32 matmul rate (1024x1024 matmuls for about one second, one torch
thread and ``os.cpu_count()`` threads).

How the FLOPs are counted (per seed, from each library's resolved settings; environment
stepping, acting, optimiser steps, target-network averaging and the entropy coefficient are
left out). An MLP with layer sizes [n_in, h1, h2, n_out] costs ``2 * B * sum(in * out)``
FLOPs for a forward pass over B samples, and forward plus backward about 3 times that:

- PPO: actor [obs, 64, 64, actions] and critic [obs, 64, 64, 1], forward and backward on every
  sample of the rollout in every epoch: ``rollouts * n_epochs * 3 * (actor + critic)`` over
  ``n_envs * n_steps`` samples, with ``ceil(steps / (n_envs * n_steps))`` rollouts;
- DQN: per gradient step, the Q network forward and backward on ``batch_size`` observations
  and the target network forward on the next observations (4 forward passes' worth);
  ``gradient_steps`` per training, one training every ``train_freq`` steps once past
  ``learning_starts``;
- SAC: per gradient step, actor [obs, h, h, 2 * actions] and two critics [obs + actions, h, h,
  1] on ``batch_size`` samples: the target (actor forward on the next observations, two target
  critics forward), the critic loss (two critics forward and backward), the actor loss (actor
  forward and backward, two critics forward and backward to the actions): 4 actor and 14
  critic forward passes' worth; one step per environment step once past ``learning_starts``.

Two more measurements:

- ``scaling``: PPO CartPole environment steps per second of rlx batched with K seeds for K
  in {1, 4, 16, 64} (``jobs=min(2, K)``: each worker trains its share of the seeds as one
  batch), and of the same K seeds trained one at a time in as many workers
  (``batched=False``), so that the batching's own gain shows;
  ``--scaling-steps`` per seed (20,000 by default);
- ``learning``: PPO CartPole, 16 seeds x 100,000 steps, evaluated every 5,000 steps on 10
  episodes, batched and processes: the fraction of seeds whose mean evaluation return reaches
  475 and the median steps to reach it (from each seed's ``metrics.csv``, column
  ``eval/return_mean``), compared by a two-sided Mann-Whitney U test on the steps to 475
  (a seed that never reaches it ranks after every seed that does) and a bootstrap 95%
  interval of the difference of the medians. (A run records its evaluations in
  ``metrics.csv``; it writes no separate ``evaluations.csv``.)

Writes ``benchmarks/results/seeds.json`` (machine, versions, the exact settings given to both
libraries, every raw time) and ``benchmarks/results/seeds.md`` (tables). Needs
``pip install stable-baselines3`` beside rlx-onpolicy and rlx-offpolicy (SB3 is no dependency
of rlx); scipy for the U test (the bootstrap interval is given without it).

    python benchmarks/seeds.py                                # the full protocol (hours)
    python benchmarks/seeds.py --only ppo,dqn                 # some parts
    python benchmarks/seeds.py --quick --out /tmp/seeds.json  # a smoke test (about a minute)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import csv
import importlib.metadata
import inspect
import io
import itertools
import json
import math
import multiprocessing
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

torch.set_num_threads(1)

PARTS = ("ppo", "dqn", "sac", "sac-256", "scaling", "learning")
JOBS = 2
TARGET_RETURN = 475.0

#: name -> (algorithm, environment, rlx hyperparameters over the zoo's, seeds, steps, target).
CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "ppo": dict(algorithm="ppo", env="CartPole-v1", extra={}, seeds=16, steps=100_000, target=0.1),
    "dqn": dict(algorithm="dqn", env="CartPole-v1", extra={}, seeds=16, steps=50_000, target=0.5),
    "sac": dict(algorithm="sac", env="Pendulum-v1", extra={}, seeds=8, steps=20_000, target=0.33),
    "sac-256": dict(
        algorithm="sac",
        env="Pendulum-v1",
        extra={"hidden_sizes": (256, 256)},
        seeds=8,
        steps=20_000,
        target=None,
    ),
}

#: The trainer settings of every rlx run without evaluation (rlx.trainer.TrainerConfig).
QUIET = {
    "eval_episodes": 0,
    "checkpoint_every": 0,
    "progress": False,
    "verbose": False,
    "plot": False,
    "tensorboard": False,
}


# -- settings ----------------------------------------------------------------------------------


def rlx_hyperparameters(algorithm: str, env_id: str, extra: dict[str, Any]) -> dict[str, Any]:
    """rlx's zoo settings of ``algorithm`` on ``env_id`` (its family's tuned settings), with
    ``extra`` on top."""
    from rlx import tuned

    return {**tuned.hyperparameters(algorithm, env_id), **extra}


def sb3_settings(algorithm: str, env_id: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The same settings as Stable-Baselines3's keyword arguments, JSON-able: ``n_envs`` for
    ``make_vec_env``, ``linear`` names the arguments that SB3 gets as linear schedules (rlx's
    ``lr_schedule``/``clip_schedule="linear"``), ``net_arch`` goes into ``policy_kwargs``."""
    config = rlx_hyperparameters(algorithm, env_id, extra)
    settings: dict[str, Any] = {"n_envs": config.pop("n_envs", 1), "linear": []}
    if config.pop("lr_schedule", None) == "linear":
        settings["linear"].append("learning_rate")
    if config.pop("clip_schedule", None) == "linear":
        settings["linear"].append("clip_range")
    if "hidden_sizes" in config:
        settings["policy_kwargs"] = {"net_arch": list(config.pop("hidden_sizes"))}
    renames = {
        "exploration_final": "exploration_final_eps",
        "exploration_initial": "exploration_initial_eps",
    }
    settings["kwargs"] = {renames.get(k, k): v for k, v in config.items()}
    return settings


# -- Stable-Baselines3 (in pool workers) -------------------------------------------------------


def _one_thread() -> None:
    torch.set_num_threads(1)


def sb3_kwargs(settings: dict[str, Any]) -> dict[str, Any]:
    """The model's keyword arguments from :func:`sb3_settings` (linear schedules as
    functions of SB3's remaining progress)."""
    kwargs = dict(settings["kwargs"])
    for name in settings["linear"]:
        start = kwargs[name]
        kwargs[name] = lambda progress, start=start: progress * start
    if "policy_kwargs" in settings:
        kwargs["policy_kwargs"] = settings["policy_kwargs"]
    return kwargs


def sb3_train(algorithm: str, env_id: str, settings: dict[str, Any], seed: int, steps: int):
    """Train one seed with Stable-Baselines3; its learn time and resolved settings."""
    from stable_baselines3 import DQN, PPO, SAC
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    kwargs = sb3_kwargs(settings)
    env = make_vec_env(env_id, n_envs=settings["n_envs"], seed=seed)
    cls = {"ppo": PPO, "dqn": DQN, "sac": SAC}[algorithm]
    model = cls("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)
    started = time.perf_counter()
    model.learn(steps)
    seconds = time.perf_counter() - started
    resolved: dict[str, Any] = {"batch_size": model.batch_size}
    if algorithm == "ppo":
        resolved.update(n_envs=model.n_envs, n_steps=model.n_steps, n_epochs=model.n_epochs)
        resolved["hidden_sizes"] = (64, 64)  # MlpPolicy's default for PPO, actor and critic
    else:
        resolved.update(
            learning_starts=model.learning_starts,
            train_freq=model.train_freq.frequency,
            gradient_steps=model.gradient_steps,
            hidden_sizes=tuple(settings.get("policy_kwargs", {}).get("net_arch", (64, 64))),
        )
    return {
        "seed": seed,
        "learn_s": seconds,
        "env_steps": int(model.num_timesteps),
        "n_updates": int(model._n_updates),
        "resolved": resolved,
    }


def run_sb3(algorithm: str, env_id: str, extra: dict, seeds: int, steps: int) -> dict[str, Any]:
    settings = sb3_settings(algorithm, env_id, extra)
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(
        JOBS, mp_context=context, initializer=_one_thread
    ) as pool:
        futures = [
            pool.submit(sb3_train, algorithm, env_id, settings, seed, steps)
            for seed in range(seeds)
        ]
        runs = [future.result() for future in futures]
    wall = time.perf_counter() - started
    return {"wall_s": wall, "runs": runs}


# -- rlx ---------------------------------------------------------------------------------------


def has_batched() -> bool:
    from rlx.groups import new_group

    return "batched" in inspect.signature(new_group).parameters


def batches_seeds(algorithm: str) -> bool | None:
    """Whether rlx's ``algorithm`` agent can train seeds as one batch (None: unknown)."""
    try:
        from rlx.discovery import agent_spec

        return callable(getattr(agent_spec(algorithm).load(), "seed_batch", None))
    except Exception:
        return None


def run_rlx(
    algorithm: str,
    env_id: str,
    hyperparameters: dict[str, Any],
    seeds: int,
    settings: dict[str, Any],
    jobs: int,
    batched: bool,
    keep: Path | None = None,
) -> dict[str, Any]:
    """One seed group, timed from ``new_group`` to the end of ``fit``. With ``keep`` the
    group is written there (and left for the caller), otherwise into a temporary folder."""
    from rich.console import Console

    from rlx.groups import new_group

    console = Console(file=io.StringIO())  # the per-seed lines stay out of the report
    extra = {"batched": batched} if has_batched() else {}
    with contextlib.ExitStack() as stack:
        root = keep or Path(stack.enter_context(tempfile.TemporaryDirectory())) / "group"
        started = time.perf_counter()
        group = new_group(
            algorithm,
            env_id,
            seeds=range(seeds),
            hyperparameters=hyperparameters,
            settings=settings,
            jobs=jobs,
            out=root,
            console=console,
            **extra,
        )
        result = group.fit()
        wall = time.perf_counter() - started
    if result.failed:
        raise RuntimeError(f"rlx group {algorithm} {env_id}: {result.failure_text()}")
    if len(result.results) != seeds:  # e.g. a worker that died before it reported
        raise RuntimeError(
            f"rlx group {algorithm} {env_id}: {len(result.results)} of {seeds} seeds finished "
            f"(interrupted {result.interrupted}); summary: {result.summary['runs']}"
        )
    runs = [
        {"seed": seed, "elapsed_s": r.elapsed, "env_steps": r.env_steps}
        for seed, r in sorted(result.results.items())
    ]
    return {"wall_s": wall, "jobs": jobs, "runs": runs}


def rlx_resolved(algorithm: str, env_id: str, hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """The settings rlx's agent really uses (its defaults filled in)."""
    import rlx

    agent = rlx.make(algorithm, env_id, seed=0, **hyperparameters)
    c = agent.config
    if hasattr(agent, "close"):
        agent.close()
    if algorithm == "ppo":
        return dict(
            n_envs=c.n_envs,
            n_steps=c.n_steps,
            n_epochs=c.n_epochs,
            batch_size=c.batch_size,
            hidden_sizes=tuple(c.hidden_sizes),
        )
    return dict(
        batch_size=c.batch_size,
        learning_starts=c.learning_starts,
        train_freq=c.train_freq,
        gradient_steps=c.gradient_steps,
        hidden_sizes=tuple(c.hidden_sizes),
    )


# -- arithmetic --------------------------------------------------------------------------------


def mlp_flops(sizes: list[int], samples: int) -> int:
    """FLOPs of one forward pass of an MLP with layer ``sizes`` over ``samples`` inputs."""
    return 2 * samples * sum(a * b for a, b in itertools.pairwise(sizes))


def trainings(steps: int, train_freq: int, learning_starts: int) -> int:
    """Trainings in ``steps`` environment steps: one every ``train_freq`` once past
    ``learning_starts``."""
    return sum(1 for k in range(1, steps // train_freq + 1) if k * train_freq > learning_starts)


def update_flops(algorithm: str, env_id: str, resolved: dict[str, Any], steps: int) -> int:
    """FLOPs of one seed's gradient updates over ``steps`` environment steps (the docstring
    says how they are counted)."""
    env = gym.make(env_id)
    n_obs = int(np.prod(env.observation_space.shape))
    space = env.action_space
    n_act = int(space.n) if hasattr(space, "n") else int(np.prod(space.shape))
    hidden = list(resolved["hidden_sizes"])
    if algorithm == "ppo":
        rollout = resolved["n_envs"] * resolved["n_steps"]
        samples = resolved["n_epochs"] * rollout
        per_rollout = 3 * (
            mlp_flops([n_obs, *hidden, n_act], samples) + mlp_flops([n_obs, *hidden, 1], samples)
        )
        return math.ceil(steps / rollout) * per_rollout
    batch = resolved["batch_size"]
    gradient_steps = resolved["gradient_steps"] * trainings(
        steps, resolved["train_freq"], resolved["learning_starts"]
    )
    if algorithm == "dqn":
        return gradient_steps * 4 * mlp_flops([n_obs, *hidden, n_act], batch)
    actor = mlp_flops([n_obs, *hidden, 2 * n_act], batch)
    critic = mlp_flops([n_obs + n_act, *hidden, 1], batch)
    return gradient_steps * (4 * actor + 14 * critic)


def matmul_gflops(threads: int, size: int = 1024, seconds: float = 1.0) -> float:
    """fp32 GFLOP/s of ``size`` x ``size`` matmuls with ``threads`` torch threads."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(size, size), torch.randn(size, size)
        for _ in range(3):
            a @ b
        count, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds:
            a @ b
            count += 1
        return 2 * size**3 * count / elapsed / 1e9
    finally:
        torch.set_num_threads(previous)


# -- the parts -------------------------------------------------------------------------------


def compare(name: str, seeds: int, steps: int, peak: float, repeats: int) -> dict[str, Any]:
    """One configuration: SB3, rlx processes and rlx batched, ``repeats`` times each."""
    spec = CONFIGURATIONS[name]
    algorithm, env_id, extra = spec["algorithm"], spec["env"], spec["extra"]
    hyperparameters = rlx_hyperparameters(algorithm, env_id, extra)
    settings = {"steps": steps, **QUIET}
    batched = has_batched()
    raw: dict[str, list] = {"sb3": [], "rlx_processes": [], "rlx_batched": []}
    for repeat in range(repeats):
        raw["sb3"].append(run_sb3(algorithm, env_id, extra, seeds, steps))
        raw["rlx_processes"].append(
            run_rlx(algorithm, env_id, hyperparameters, seeds, settings, JOBS, False)
        )
        if batched:
            raw["rlx_batched"].append(
                run_rlx(algorithm, env_id, hyperparameters, seeds, settings, JOBS, True)
            )
        times = {mode: runs[-1]["wall_s"] for mode, runs in raw.items() if runs}
        shown = ", ".join(f"{mode} {t:.1f} s" for mode, t in times.items())
        print(f"{name} ({seeds} seeds x {steps:,} steps), repeat {repeat}: {shown}", flush=True)

    sb3_resolved = raw["sb3"][0]["runs"][0]["resolved"]
    resolved = {"sb3": sb3_resolved, "rlx": rlx_resolved(algorithm, env_id, hyperparameters)}
    flops = {
        "sb3": seeds * update_flops(algorithm, env_id, sb3_resolved, steps),
        "rlx": seeds * update_flops(algorithm, env_id, resolved["rlx"], steps),
    }
    sb3_s = statistics.median(r["wall_s"] for r in raw["sb3"])
    modes: dict[str, Any] = {}
    for mode, runs in raw.items():
        if not runs:
            modes[mode] = None
            continue
        seconds = statistics.median(r["wall_s"] for r in runs)
        total = flops["sb3" if mode == "sb3" else "rlx"]
        entry = {
            "wall_s": seconds,
            "update_gflop": total / 1e9,
            "update_gflops_per_s": total / seconds / 1e9,
            "fraction_of_matmul_peak": total / seconds / 1e9 / peak,
        }
        if mode != "sb3":
            ratio = seconds / sb3_s
            entry["ratio_over_sb3"] = ratio
            entry["passes_target"] = None if spec["target"] is None else ratio <= spec["target"]
        modes[mode] = entry
    return {
        "algorithm": algorithm,
        "env": env_id,
        "seeds": seeds,
        "steps_per_seed": steps,
        "jobs": JOBS,
        "rlx_agent_batches_seeds": batches_seeds(algorithm),
        "target_ratio": spec["target"],
        "settings": {
            "rlx_hyperparameters": hyperparameters,
            "rlx_trainer_settings": settings,
            "sb3": sb3_settings(algorithm, env_id, extra),
            "resolved": resolved,
        },
        "modes": modes,
        "note": None if batched else "rlx.groups.new_group has no batched keyword yet",
        "raw": raw,
    }


def scaling(ks: list[int], steps: int) -> dict[str, Any]:
    """PPO CartPole steps per second: K seeds batched (each of the min(2, K) workers trains
    its share as one batch), and the same K seeds one at a time in as many workers."""
    hyperparameters = rlx_hyperparameters("ppo", "CartPole-v1", {})
    settings = {"steps": steps, **QUIET}
    batched = has_batched()
    rows = []
    for k in ks:
        row: dict[str, Any] = {"k": k}
        jobs_k = min(JOBS, k)  # the same cores on both sides
        modes = [("processes", jobs_k, False)] + ([("batched", jobs_k, True)] if batched else [])
        for mode, jobs, flag in modes:
            run = run_rlx("ppo", "CartPole-v1", hyperparameters, k, settings, jobs, flag)
            env_steps = sum(r["env_steps"] for r in run["runs"])
            elapsed = statistics.median(r["elapsed_s"] for r in run["runs"])
            row[mode] = {
                **run,
                "steps_per_s_all_seeds": env_steps / run["wall_s"],
                "steps_per_s_per_seed": env_steps / k / run["wall_s"],
                "median_seed_training_steps_per_s": env_steps / k / elapsed,
            }
        row.setdefault("batched", None)
        if row["batched"] is not None:
            row["batched_over_processes"] = (
                row["batched"]["steps_per_s_all_seeds"] / row["processes"]["steps_per_s_all_seeds"]
            )
        rows.append(row)
        shown = ", ".join(
            f"{m} {row[m]['steps_per_s_per_seed']:,.0f} steps/s per seed"
            for m in ("processes", "batched")
            if row[m] is not None
        )
        print(f"scaling K={k}: {shown}", flush=True)
    return {
        "algorithm": "ppo",
        "env": "CartPole-v1",
        "steps_per_seed": steps,
        "settings": {"rlx_hyperparameters": hyperparameters, "rlx_trainer_settings": settings},
        "note": None if batched else "rlx.groups.new_group has no batched keyword yet",
        "rows": rows,
    }


def steps_to_target(metrics: Path, target: float) -> int | None:
    """The first env_steps whose mean evaluation return reaches ``target`` (None: never)."""
    with open(metrics, newline="") as f:
        for row in csv.DictReader(f):
            value = row.get("eval/return_mean")
            if value and float(value) >= target:
                return int(float(row["env_steps"]))
    return None


def learning(seeds: int, steps: int, eval_every: int, eval_episodes: int) -> dict[str, Any]:
    """Whether batching changes what PPO learns: steps to 475, batched against processes."""
    hyperparameters = rlx_hyperparameters("ppo", "CartPole-v1", {})
    settings = {
        **QUIET,
        "steps": steps,
        "eval_every": eval_every,
        "eval_episodes": eval_episodes,
    }
    modes = {"processes": False, **({"batched": True} if has_batched() else {})}
    outcome: dict[str, Any] = {}
    for mode, flag in modes.items():
        with tempfile.TemporaryDirectory() as scratch:
            group = Path(scratch) / "group"
            run = run_rlx("ppo", "CartPole-v1", hyperparameters, seeds, settings, JOBS, flag, group)
            reached = [
                steps_to_target(group / f"seed-{seed}" / "metrics.csv", TARGET_RETURN)
                for seed in range(seeds)
            ]
        hits = [s for s in reached if s is not None]
        outcome[mode] = {
            "wall_s": run["wall_s"],
            "steps_to_475": reached,
            "fraction_reached": len(hits) / seeds,
            "median_steps_to_475": statistics.median(hits) if hits else None,
        }
        print(
            f"learning, {mode}: {len(hits)}/{seeds} seeds reach {TARGET_RETURN:g}, "
            f"median steps {outcome[mode]['median_steps_to_475']}",
            flush=True,
        )
    result: dict[str, Any] = {
        "algorithm": "ppo",
        "env": "CartPole-v1",
        "seeds": seeds,
        "steps_per_seed": steps,
        "target_return": TARGET_RETURN,
        "settings": {"rlx_hyperparameters": hyperparameters, "rlx_trainer_settings": settings},
        "modes": outcome,
        "batched": outcome.get("batched"),
        "test": None,
        "note": None if "batched" in outcome else "rlx.groups.new_group has no batched keyword yet",
    }
    if "batched" in outcome:
        result["test"] = compare_steps(
            outcome["batched"]["steps_to_475"], outcome["processes"]["steps_to_475"], steps
        )
    return result


def compare_steps(a: list[int | None], b: list[int | None], budget: int) -> dict[str, Any]:
    """A two-sided Mann-Whitney U test of the steps to the target and a bootstrap 95%
    interval of the difference of the medians (a - b); a seed that never reaches the target
    counts as one step more than any seed took (a run may end a little past its budget)."""
    never = max([budget, *(s for s in a + b if s is not None)]) + 1
    x = np.array([never if s is None else s for s in a], dtype=float)
    y = np.array([never if s is None else s for s in b], dtype=float)
    rng = np.random.default_rng(0)
    differences = [
        np.median(rng.choice(x, len(x))) - np.median(rng.choice(y, len(y))) for _ in range(10_000)
    ]
    low, high = np.percentile(differences, [2.5, 97.5])
    test: dict[str, Any] = {
        "censored_at": never,
        "median_difference": float(np.median(x) - np.median(y)),
        "bootstrap_95": [float(low), float(high)],
        "mann_whitney_u": None,
        "mann_whitney_p": None,
    }
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:
        return test
    if len(set(x) | set(y)) > 1:
        u = mannwhitneyu(x, y, alternative="two-sided")
        test.update(mann_whitney_u=float(u.statistic), mann_whitney_p=float(u.pvalue))
    return test


# -- the report --------------------------------------------------------------------------------


def fmt(value: Any, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def markdown(results: dict[str, Any]) -> str:
    machine, peak = results["machine"], results["matmul_gflops"]
    lines = [
        "# Many seeds of one configuration: rlx against Stable-Baselines3",
        "",
        f"Machine: {machine['processor']}, {machine['cpus']} cores; torch "
        f"{results['versions']['torch']}, Stable-Baselines3 "
        f"{results['versions']['stable_baselines3']}, rlx-core {results['versions']['rlx_core']}."
        f" fp32 1024x1024 matmul: {peak['one_thread']:.1f} GFLOP/s on one thread, "
        f"{peak['all_cores']:.1f} on {machine['cpus']}. {JOBS} processes at a time on every "
        "side, one torch thread each, no evaluation; wall-clock seconds for all seeds, process "
        "start-up included (`python benchmarks/seeds.py`; raw times in seeds.json).",
        "",
    ]
    if peak["all_cores"] < peak["one_thread"]:
        lines += [
            "Note: the all-cores matmul rate came out below the one-thread rate, so the "
            "machine was busy with other work while this ran; the percentages of the peak "
            "are then too high.",
            "",
        ]
    if results["configurations"]:
        lines += [
            "| configuration | seeds x steps | mode | seconds | rlx/SB3 | target | "
            "update GFLOP/s | % of matmul peak |",
            "|---|---|---|---:|---:|---|---:|---:|",
        ]
        for name, c in results["configurations"].items():
            for mode, label in (
                ("sb3", "SB3"),
                ("rlx_processes", "rlx processes"),
                ("rlx_batched", "rlx batched"),
            ):
                e = c["modes"][mode]
                if e is None:
                    lines.append(
                        f"| {name} | {c['seeds']} x {c['steps_per_seed']:,} | {label} | "
                        "n/a (no `batched` keyword) | | | | |"
                    )
                    continue
                target = ""
                if mode != "sb3" and c["target_ratio"] is not None:
                    verdict = "pass" if e["passes_target"] else "FAIL"
                    target = f"<= {c['target_ratio']:g}: {verdict}"
                lines.append(
                    f"| {name} | {c['seeds']} x {c['steps_per_seed']:,} | {label} | "
                    f"{e['wall_s']:.1f} | {fmt(e.get('ratio_over_sb3'))} | {target} | "
                    f"{e['update_gflops_per_s']:.2f} | "
                    f"{100 * e['fraction_of_matmul_peak']:.1f} |"
                )
        lines += [
            "",
            "Update FLOPs are counted analytically (the module docstring of "
            "benchmarks/seeds.py says how) and divided by the wall seconds; the percentage is "
            "of the all-cores matmul rate.",
            "",
        ]
    if "scaling" in results:
        s = results["scaling"]
        lines += [
            f"## PPO CartPole scaling ({s['steps_per_seed']:,} steps per seed)",
            "",
            "Environment steps per second per seed (wall clock, start-up included): K seeds "
            "batched (min(2, K) workers, each training its share of the seeds as one batch), "
            "and one seed at a time in as many workers.",
            "",
            "| K | processes | batched | batched / processes |",
            "|---:|---:|---:|---:|",
        ]
        for row in s["rows"]:
            b = row["batched"]
            lines.append(
                f"| {row['k']} | {row['processes']['steps_per_s_per_seed']:,.0f} | "
                f"{'n/a' if b is None else format(b['steps_per_s_per_seed'], ',.0f')} | "
                f"{fmt(row.get('batched_over_processes'))} |"
            )
        lines.append("")
    if "learning" in results:
        r = results["learning"]
        lines += [
            f"## Learning unchanged: PPO CartPole, {r['seeds']} seeds x {r['steps_per_seed']:,}"
            " steps",
            "",
            f"Evaluation every {r['settings']['rlx_trainer_settings']['eval_every']:,} steps on "
            f"{r['settings']['rlx_trainer_settings']['eval_episodes']} episodes; a seed reaches "
            f"{r['target_return']:g} at the first evaluation whose mean return is at least that "
            "(metrics.csv, eval/return_mean).",
            "",
            "| mode | seeds reaching 475 | median steps to 475 |",
            "|---|---:|---:|",
        ]
        for mode in ("processes", "batched"):
            m = r["modes"].get(mode)
            if m is None:
                lines.append(f"| {mode} | n/a (no `batched` keyword) | |")
                continue
            lines.append(
                f"| {mode} | {100 * m['fraction_reached']:.0f}% | "
                f"{fmt(m['median_steps_to_475'], ',.0f')} |"
            )
        t = r["test"]
        if t is not None:
            p = t["mann_whitney_p"]
            lines += [
                "",
                "Judged by a two-sided Mann-Whitney U test on the steps to 475 (a seed that "
                f"never reaches it counts as {t['censored_at']:,.0f} steps, ranked last): "
                + (f"p = {p:.3g}" if p is not None else "not run (scipy missing or no spread)")
                + f"; median difference batched - processes {t['median_difference']:,.0f} "
                f"steps, bootstrap 95% interval [{t['bootstrap_95'][0]:,.0f}, "
                f"{t['bootstrap_95'][1]:,.0f}].",
            ]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated: {PARTS}")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny budgets for a smoke test: 2 seeds x 3,000 steps (SAC 1,000), K in 1, 2",
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs of each mode (median)")
    parser.add_argument("--scaling-steps", type=int, default=20_000)
    parser.add_argument("--scaling-k", default="1,4,16,64")
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results" / "seeds.json"), help="JSON path"
    )
    args = parser.parse_args()
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--only: unknown part(s) {unknown}; choose from {PARTS}")

    import stable_baselines3

    peak = {"one_thread": matmul_gflops(1), "all_cores": matmul_gflops(os.cpu_count() or 1)}
    print(
        f"matmul fp32 1024x1024: {peak['one_thread']:.1f} GFLOP/s (1 thread), "
        f"{peak['all_cores']:.1f} GFLOP/s ({os.cpu_count()} threads)",
        flush=True,
    )
    results: dict[str, Any] = {
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "system": platform.platform(),
        },
        "versions": {
            "torch": torch.__version__,
            "stable_baselines3": stable_baselines3.__version__,
            "rlx_core": importlib.metadata.version("rlx-core"),
            "rlx_onpolicy": importlib.metadata.version("rlx-onpolicy"),
            "rlx_offpolicy": importlib.metadata.version("rlx-offpolicy"),
        },
        "quick": args.quick,
        "new_group_has_batched": has_batched(),
        "matmul_gflops": peak,
        "configurations": {},
    }
    for name, spec in CONFIGURATIONS.items():
        if name not in parts:
            continue
        seeds, steps = (spec["seeds"], spec["steps"])
        if args.quick:  # SAC updates on every step: a tenth of its budget at most
            seeds, steps = 2, 1_000 if spec["algorithm"] == "sac" else 3_000
        results["configurations"][name] = compare(
            name, seeds, steps, peak["all_cores"], args.repeats
        )
    if "scaling" in parts:
        ks = [1, 2] if args.quick else [int(k) for k in args.scaling_k.split(",")]
        results["scaling"] = scaling(ks, 3_000 if args.quick else args.scaling_steps)
    if "learning" in parts:
        if args.quick:
            results["learning"] = learning(2, 3_000, 1_000, 2)
        else:
            results["learning"] = learning(16, 100_000, 5_000, 10)

    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    report = markdown(results)
    path.with_suffix(".md").write_text(report)
    print(report)
    print(f"wrote {path} and {path.with_suffix('.md')}")


if __name__ == "__main__":
    main()
