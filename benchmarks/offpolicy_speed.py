"""rlx-offpolicy against Stable-Baselines3 on one machine, in one invocation.

Wall-clock training time to a mean deterministic evaluation return (10 episodes on fixed
seeds, every ``--eval-every`` steps, evaluation time left out for both libraries), with
rl-baselines3-zoo's hyperparameters given to both (``rlx_offpolicy/tuned.toml``), one torch thread
each, on the CPU, the same seeds; the libraries alternate seed by seed so that both see the
same machine load. Reported: the median over seeds of each library's time, their ratio, the
steps each needed, and gradient updates per second.

- ``dqn``: CartPole-v1 to 475 within 50,000 steps (the zoo's budget; the exploration decay
  is a fraction of it for both);
- ``sac``, ``td3``: Pendulum-v1 to -200 within 20,000 steps.

Writes ``benchmarks/results/offpolicy_speed.json``. Needs ``pip install stable-baselines3``
beside rlx-offpolicy (not a dependency of rlx).

    python benchmarks/offpolicy_speed.py                       # the committed results
    python benchmarks/offpolicy_speed.py --algorithms dqn --seeds 2
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from rlx import tuned

torch.set_num_threads(1)

TASKS = {
    "dqn": ("CartPole-v1", 475.0, 50_000),
    "sac": ("Pendulum-v1", -200.0, 20_000),
    "td3": ("Pendulum-v1", -200.0, 20_000),
}
EVAL_EPISODES = 10


def evaluate(env_id: str, act: Callable[[np.ndarray], object], seed: int) -> float:
    env = gym.make(env_id)
    seeds = np.random.SeedSequence([seed, 99]).generate_state(EVAL_EPISODES)
    returns = []
    for s in seeds:
        observation, _ = env.reset(seed=int(s))
        total, done = 0.0, False
        while not done:
            observation, reward, terminated, truncated, _ = env.step(act(observation))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


# -- rlx --------------------------------------------------------------------------------------


def rlx_time_to_target(algorithm: str, seed: int, eval_every: int) -> dict:
    import rlx

    env_id, target, budget = TASKS[algorithm]
    agent = rlx.make(algorithm, env_id, seed=seed, **tuned.hyperparameters(algorithm, env_id))
    if hasattr(agent, "set_training_budget"):
        agent.set_training_budget(budget)
    training, next_eval, score = 0.0, eval_every, -np.inf
    while agent.env_steps < budget:
        started = time.perf_counter()
        agent.step()
        training += time.perf_counter() - started
        if agent.env_steps >= next_eval:
            next_eval += eval_every
            score = evaluate(env_id, lambda o: agent.act(o, deterministic=True), seed)
            if score >= target:
                break
    return {
        "seconds": training if score >= target else None,
        "steps": agent.env_steps,
        "return": score,
        "updates_per_second": agent.updates / training,
    }


# -- Stable-Baselines3 -------------------------------------------------------------------------


def sb3_model(algorithm: str, seed: int):
    from stable_baselines3 import DQN, SAC, TD3

    env_id = TASKS[algorithm][0]
    config = tuned.hyperparameters(algorithm, env_id)
    hidden = list(config.pop("hidden_sizes"))
    renames = {
        "exploration_final": "exploration_final_eps",
        "exploration_initial": "exploration_initial_eps",
    }
    config = {renames.get(k, k): v for k, v in config.items()}
    config.pop("n_envs", None)
    cls = {"dqn": DQN, "sac": SAC, "td3": TD3}[algorithm]
    if algorithm == "td3" and "action_noise_std" in config:
        from stable_baselines3.common.noise import NormalActionNoise

        std = config.pop("action_noise_std")
        config["action_noise"] = NormalActionNoise(np.zeros(1), std * np.ones(1))
    return cls(
        "MlpPolicy",
        gym.make(env_id),
        seed=seed,
        device="cpu",
        verbose=0,
        policy_kwargs={"net_arch": hidden},
        **config,
    )


def sb3_time_to_target(algorithm: str, seed: int, eval_every: int) -> dict:
    from stable_baselines3.common.callbacks import BaseCallback

    env_id, target, budget = TASKS[algorithm]
    model = sb3_model(algorithm, seed)
    result = {"seconds": None, "steps": 0, "return": -np.inf}

    class EvaluateAndStop(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next_eval = eval_every
            self.evaluating = 0.0

        def _on_step(self) -> bool:
            if self.num_timesteps < self.next_eval:
                return True
            self.next_eval += eval_every
            started = time.perf_counter()
            act = lambda o: model.predict(o, deterministic=True)[0]  # noqa: E731
            score = evaluate(env_id, act, seed)
            self.evaluating += time.perf_counter() - started
            result.update(steps=self.num_timesteps, **{"return": score})
            if score >= target:
                result["seconds"] = time.perf_counter() - began - self.evaluating
                return False
            return True

    callback = EvaluateAndStop()
    began = time.perf_counter()
    model.learn(budget, callback=callback)
    training = time.perf_counter() - began - callback.evaluating
    result["updates_per_second"] = model._n_updates / training
    return result


# -- the comparison ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--eval-every", type=int, default=5_000)
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results" / "offpolicy_speed.json")
    )
    args = parser.parse_args()

    import stable_baselines3

    path = Path(args.out)
    results = json.loads(path.read_text()) if path.exists() else {}
    results.update(
        machine=f"{platform.processor() or platform.machine()}, torch threads 1",
        versions={"torch": torch.__version__, "stable_baselines3": stable_baselines3.__version__},
    )
    for algorithm in args.algorithms:
        env_id, target, budget = TASKS[algorithm]
        eval_every = args.eval_every if algorithm == "dqn" else 1_000
        rlx_runs, sb3_runs = [], []
        for seed in range(args.seeds):
            rlx_runs.append(rlx_time_to_target(algorithm, seed, eval_every))
            sb3_runs.append(sb3_time_to_target(algorithm, seed, eval_every))
            print(f"{algorithm} seed {seed}: rlx {rlx_runs[-1]}  sb3 {sb3_runs[-1]}", flush=True)

        def median(runs: list[dict], key: str = "seconds") -> float:
            return statistics.median(r[key] if r[key] is not None else np.inf for r in runs)

        results[algorithm] = {
            "env": env_id,
            "target": target,
            "budget": budget,
            "eval_every": eval_every,
            "rlx": rlx_runs,
            "sb3": sb3_runs,
            "rlx_median_s": median(rlx_runs),
            "sb3_median_s": median(sb3_runs),
            "ratio_rlx_over_sb3": median(rlx_runs) / median(sb3_runs),
            "rlx_median_steps": median(rlx_runs, "steps"),
            "sb3_median_steps": median(sb3_runs, "steps"),
            "rlx_updates_per_second": median(rlx_runs, "updates_per_second"),
            "sb3_updates_per_second": median(sb3_runs, "updates_per_second"),
        }
        r = results[algorithm]
        print(
            f"{algorithm}: time to {target:g}, median over {args.seeds} seeds: rlx "
            f"{r['rlx_median_s']:.1f} s, sb3 {r['sb3_median_s']:.1f} s, ratio "
            f"{r['ratio_rlx_over_sb3']:.2f}; updates/s rlx {r['rlx_updates_per_second']:.0f}, "
            f"sb3 {r['sb3_updates_per_second']:.0f}",
            flush=True,
        )
    path.write_text(json.dumps(results, indent=2, default=float) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
