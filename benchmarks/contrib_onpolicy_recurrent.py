"""rlx's recurrent-ppo against sb3-contrib's RecurrentPPO, side by side, with the zoo's settings.

The task is CartPole with its velocities hidden (``rlx/CartPoleNoVel-v1``, the zoo's
``CartPoleNoVel-v1``: the same masking), which needs memory. Both libraries train the same
seeds with rl-baselines3-zoo's ``hyperparams/ppo_lstm.yml`` entry (8 environments, 32 steps,
one minibatch of 256, 20 epochs, gamma 0.98, GAE 0.8, linear learning rate 1e-3 and clip range
0.2 over the budget, observation and reward normalisation, an LSTM of 64 for the actor and one
for the critic, [64] ReLU heads, no orthogonal initialisation), which ``rlx_onpolicy/tuned.toml``
translates. Every ``eval_every`` steps the policy plays 10 deterministic episodes on the same
environment seeds in both (``rlx.evaluation.evaluation_seeds``), its cell state carried through
each episode; the table gives the mean evaluation return at equal steps and the training
wall-clock time (evaluations excluded). Writes
``benchmarks/results/contrib_onpolicy_recurrent.{json,md}``.

    python benchmarks/contrib_onpolicy_recurrent.py             # 3 seeds, the zoo's 100k steps
    python benchmarks/contrib_onpolicy_recurrent.py --quick     # a smoke run: 1 seed, 4k steps
    python benchmarks/contrib_onpolicy_recurrent.py --seeds 2 --steps 50000

Needs ``stable-baselines3`` and ``sb3-contrib`` (2.9), which rlx does not depend on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch

import rlx
import rlx_envs  # noqa: F401 (registers rlx/CartPoleNoVel-v1 with gymnasium)
from rlx import tuned
from rlx.evaluation import evaluate, evaluation_seeds

ENV = "rlx/CartPoleNoVel-v1"
EVAL_EPISODES = 10


def sb3_model(seed: int, budget: int) -> tuple[Any, Any]:
    """sb3-contrib's RecurrentPPO with the zoo's CartPoleNoVel-v1 entry, and its VecNormalize."""
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize
    from torch import nn

    def linear(value: float) -> Any:
        return lambda progress_remaining: progress_remaining * value

    venv = VecNormalize(make_vec_env(ENV, n_envs=8, seed=seed), gamma=0.98)
    model = RecurrentPPO(
        "MlpLstmPolicy",
        venv,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        policy_kwargs={
            "ortho_init": False,
            "activation_fn": nn.ReLU,
            "lstm_hidden_size": 64,
            "enable_critic_lstm": True,
            "net_arch": {"pi": [64], "vf": [64]},
        },
        seed=seed,
        device="cpu",
    )
    return model, venv


def sb3_evaluate(model: Any, venv: Any) -> float:
    """The mean return of sb3-contrib's deterministic policy on rlx's evaluation seeds, its
    LSTM state carried through each episode."""
    env = gymnasium.make(ENV)
    returns = []
    for seed in evaluation_seeds(0, EVAL_EPISODES):
        observation, _ = env.reset(seed=seed)
        state, start, total, done = None, np.ones(1, bool), 0.0, False
        while not done:
            action, state = model.predict(
                venv.normalize_obs(observation[None]),
                state=state,
                episode_start=start,
                deterministic=True,
            )
            observation, reward, terminated, truncated, _ = env.step(int(action[0]))
            start = np.zeros(1, bool)
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def run_sb3(seed: int, budget: int, eval_every: int) -> dict[str, Any]:
    """sb3-contrib's RecurrentPPO learning the whole budget in one call (so that its linear
    schedules span it), evaluated from a callback every ``eval_every`` steps; the time spent
    evaluating is taken out."""
    from stable_baselines3.common.callbacks import BaseCallback

    model, venv = sb3_model(seed, budget)
    curve: list[tuple[int, float]] = []
    paused = [0.0]

    class Evaluations(BaseCallback):
        mark = eval_every

        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:
            # Before a rollout, after the last update: the policy so far.
            if self.num_timesteps >= self.mark:
                started = time.perf_counter()
                curve.append((self.num_timesteps, sb3_evaluate(self.model, venv)))
                paused[0] += time.perf_counter() - started
                self.mark += eval_every

    started = time.perf_counter()
    model.learn(budget, callback=Evaluations())
    seconds = time.perf_counter() - started - paused[0]
    if not curve or curve[-1][0] < model.num_timesteps:
        curve.append((model.num_timesteps, sb3_evaluate(model, venv)))
    return {"curve": curve, "seconds": seconds}


def run_rlx(seed: int, budget: int, eval_every: int) -> dict[str, Any]:
    """rlx's recurrent-ppo with the tuned settings (linear schedules over ``budget``),
    evaluated every ``eval_every`` steps."""
    agent = rlx.make("recurrent-ppo", ENV, seed=seed, **tuned.hyperparameters("recurrent-ppo", ENV))
    agent.set_training_budget(budget)
    env = gymnasium.make(ENV)
    curve, seconds, steps, mark = [], 0.0, 0, eval_every
    while steps < budget:
        started = time.perf_counter()
        while steps < min(mark, budget):
            steps += agent.step().env_steps
        seconds += time.perf_counter() - started
        mark += eval_every
        curve.append((steps, evaluate(agent, env, episodes=EVAL_EPISODES, seed=0).mean_return))
    agent.close()
    return {"curve": curve, "seconds": seconds}


def at(curve: list[tuple[int, float]], index: int) -> float:
    """The ``index``-th evaluation: both evaluate at the first rollout boundary at or past each
    multiple of ``eval_every`` (256 steps past it at most)."""
    return curve[min(index, len(curve) - 1)][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100_000, help="the zoo's n_timesteps")
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="1 seed, 4k steps (smoke run)")
    parser.add_argument("--note", default="", help="a line for the results file")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds, budget, eval_every = args.seeds, args.steps, args.eval_every
    if args.quick:
        seeds, budget, eval_every = 1, 4_096, 2_048
    runs = []
    for seed in range(seeds):
        row: dict[str, Any] = {"seed": seed}
        for library, runner in (("rlx", run_rlx), ("sb3-contrib", run_sb3)):
            row[library] = runner(seed, budget, eval_every)
            print(seed, library, row[library]["curve"][-1],
                  f"{row[library]['seconds']:.1f} s", flush=True)  # fmt: skip
        runs.append(row)
    results = {"env": ENV, "budget": budget, "eval_every": eval_every, "runs": runs}
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    stem = "contrib_onpolicy_recurrent_quick" if args.quick else "contrib_onpolicy_recurrent"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(
        json.dumps({"machine": machine, "note": args.note, "results": results}, indent=1)
    )
    (args.out / f"{stem}.md").write_text(markdown(results, machine, args.note, seeds))
    print(markdown(results, machine, args.note, seeds))


def markdown(results: dict[str, Any], machine: dict[str, Any], note: str, seeds: int) -> str:
    """The results as a Markdown page: returns at equal steps, then wall-clock times."""
    lines = [
        "# Recurrent PPO: rlx vs sb3-contrib",
        "",
        "Written by `benchmarks/contrib_onpolicy_recurrent.py`. Both libraries train with "
        "rl-baselines3-zoo's `hyperparams/ppo_lstm.yml` settings for CartPoleNoVel-v1 (rlx: "
        f"`rlx_onpolicy/tuned.toml`) on `{ENV}`, seeds 0 to {seeds - 1}, and are evaluated on "
        f"the same {EVAL_EPISODES} environment seeds (deterministic policy, the cell state "
        "carried through each episode). Times are training only, evaluations excluded.",
        "",
        f"Machine: {machine['platform']}, {machine['processor']}, {machine['cpus']} CPUs, "
        f"Python {machine['python']}, torch {machine['torch']}, one torch thread.",
    ]
    if note:
        lines += ["", note]
    budget, every = results["budget"], results["eval_every"]
    lines += ["", f"## {results['env']} ({budget:,} steps)", ""]
    lines.append("| steps | rlx mean (min, max) | sb3-contrib mean (min, max) |")
    lines.append("| ---: | ---: | ---: |")
    for index, mark in enumerate(range(every, budget + 1, every)):
        cells = []
        for library in ("rlx", "sb3-contrib"):
            values = [at(run[library]["curve"], index) for run in results["runs"]]
            cells.append(f"{statistics.mean(values):.1f} ({min(values):.1f}, {max(values):.1f})")
        lines.append(f"| {mark:,} | {cells[0]} | {cells[1]} |")
    rlx_s = [run["rlx"]["seconds"] for run in results["runs"]]
    sb3_s = [run["sb3-contrib"]["seconds"] for run in results["runs"]]
    lines += [
        "",
        f"Training time per seed: rlx {statistics.mean(rlx_s):.1f} s, sb3-contrib "
        f"{statistics.mean(sb3_s):.1f} s; rlx / sb3-contrib = "
        f"{statistics.mean(rlx_s) / statistics.mean(sb3_s):.2f}.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
