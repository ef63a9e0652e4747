"""Short Atari curves on the CPU: PPO and DQN on Breakout, rlx and Stable-Baselines3, equal frames.

A real Atari result needs 10M steps (40M frames); this machine does a few hundred steps a
second, so this is the beginning of the curve only, at equal frames, with the same settings
(rlx's tuned settings for ``ALE/Breakout-v5``: CleanRL's PPO, the zoo's DQN) and the very same
environments: both libraries train on rlx's ``atari`` preset (sticky actions, no-op starts,
frame skip 4, 84x84 grayscale, episodic life, fire on reset, clipped rewards, 4 stacked frames),
SB3 through a ``DummyVecEnv`` of them (its ``CnnPolicy`` takes the channel-first frames as they
are). Every ``--eval-every`` steps and at the end the greedy policy plays ``--eval-episodes``
whole games without life loss or reward clipping, on the run's evaluation seeds
(``rlx.evaluation.evaluate`` for both), each game cut at ``--eval-max-steps`` agent steps (a
greedy Breakout policy that never fires would otherwise play 27,000 steps). One torch thread
per job, the two libraries' jobs at once on the two cores.

Writes ``benchmarks/results/standard_atari.json`` and ``.md`` (and a plot).

    python benchmarks/standard_atari.py [--ppo-steps 100000] [--dqn-steps 150000] [--seeds 1]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

RESULTS = Path(__file__).parent / "results"
sys.path.insert(0, str(Path(__file__).parent))  # sb3_evaluation
GAME = "ALE/Breakout-v5"
ALGORITHMS = ("ppo", "dqn")
LIBRARIES = ("rlx", "sb3")


def eval_env(max_steps: int) -> Any:
    """A whole game of the preset, no training-only wrappers, cut at ``max_steps``."""
    import gymnasium as gym

    from rlx.api import make_env

    return gym.wrappers.TimeLimit(
        make_env(GAME, wrappers=["atari"], training=False), max_episode_steps=max_steps
    )


def rlx_job(algorithm: str, seed: int, steps: int, every: int, episodes: int, cap: int) -> dict:
    import rlx
    from rlx.callbacks import Callback
    from rlx.evaluation import evaluate
    from rlx.trainer import Trainer
    from rlx.tuned import hyperparameters

    env = eval_env(cap)
    evaluations: list[tuple[int, float]] = []

    class Evaluate(Callback):
        def __init__(self) -> None:
            self.next = every

        def measure(self, trainer: Any) -> None:
            result = evaluate(trainer.agent, env, episodes, seed=seed)
            evaluations.append((trainer.env_steps, result.mean_return))

        def on_iteration(self, trainer: Any, iteration: Any) -> None:
            if trainer.env_steps >= self.next and trainer.env_steps < steps:
                self.measure(trainer)
                while self.next <= trainer.env_steps:
                    self.next += every

    settings = hyperparameters(algorithm, GAME)
    agent = rlx.make(algorithm, GAME, seed=seed, wrappers=["atari"], torch_threads=1, **settings)
    callback = Evaluate()
    trainer = Trainer(
        agent,
        steps=steps,
        eval_episodes=0,
        checkpoint_every=0,
        progress=False,
        verbose=False,
        callbacks=[callback],
    )
    started = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - started
    callback.measure(trainer)
    return {"seconds": seconds, "evaluations": evaluations, "settings": settings}


def sb3_job(algorithm: str, seed: int, steps: int, every: int, episodes: int, cap: int) -> dict:
    import torch
    from sb3_evaluation import callback as evaluation
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from rlx.api import make_env
    from rlx.tuned import hyperparameters

    torch.set_num_threads(1)
    settings = dict(hyperparameters(algorithm, GAME))
    n_envs = settings.pop("n_envs", 1)
    kwargs: dict[str, Any] = {}
    if settings.pop("lr_schedule", "constant") == "linear":
        start = settings.pop("learning_rate")
        kwargs["learning_rate"] = lambda progress: progress * start
    renames = {"exploration_final": "exploration_final_eps"}
    adam_eps = settings.pop("adam_eps", None)
    if adam_eps is not None:
        kwargs["policy_kwargs"] = {"optimizer_kwargs": {"eps": adam_eps}}
    kwargs.update({renames.get(k, k): v for k, v in settings.items()})
    env = DummyVecEnv([lambda: make_env(GAME, wrappers=["atari"]) for _ in range(n_envs)])

    cls = {"ppo": PPO, "dqn": DQN}[algorithm]
    model = cls("CnnPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)
    callback = evaluation(eval_env(cap), every, steps, episodes, seed)
    started = time.perf_counter()
    model.learn(steps, callback=callback)
    seconds = time.perf_counter() - started
    callback.measure()
    shown = {k: (v if not callable(v) else "linear") for k, v in kwargs.items()}
    return {"seconds": seconds, "evaluations": callback.evaluations, "settings": shown}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        algorithm, library, seed, steps, every, episodes, cap, out = sys.argv[2:]
        job = rlx_job if library == "rlx" else sb3_job
        result = job(algorithm, int(seed), int(steps), int(every), int(episodes), int(cap))
        result.update(algorithm=algorithm, library=library, seed=int(seed), steps=int(steps))
        Path(out).write_text(json.dumps(result, indent=1, default=str) + "\n")
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--ppo-steps", type=int, default=100_000)
    parser.add_argument("--dqn-steps", type=int, default=150_000)
    parser.add_argument("--eval-every", type=int, default=25_000)
    parser.add_argument("--eval-episodes", type=int, default=3)
    parser.add_argument("--eval-max-steps", type=int, default=4_500)
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    parts = args.out / "standard_atari"
    parts.mkdir(parents=True, exist_ok=True)
    jobs = [
        (algorithm, library, seed)
        for algorithm in args.algorithms.split(",")
        for seed in range(args.seeds)
        for library in LIBRARIES
    ]
    waiting = [j for j in jobs if args.fresh or not (parts / f"{j[0]}-{j[1]}-{j[2]}.json").exists()]
    running: list[tuple[subprocess.Popen, tuple]] = []
    while waiting or running:
        while waiting and len(running) < 2:
            algorithm, library, seed = job = waiting.pop(0)
            steps = args.ppo_steps if algorithm == "ppo" else args.dqn_steps
            command = [sys.executable, __file__, "--job", algorithm, library, str(seed)]
            command += [str(steps), str(args.eval_every), str(args.eval_episodes)]
            command += [str(args.eval_max_steps), str(parts / f"{algorithm}-{library}-{seed}.json")]
            print(f"start {algorithm} {library} seed {seed} ({steps:,} steps)", flush=True)
            running.append((subprocess.Popen(command), job))
        time.sleep(2)
        for entry in list(running):
            if entry[0].poll() is not None:
                running.remove(entry)
                print(f"ended {entry[1]} with {entry[0].returncode}", flush=True)
    report(parts, args.out)


def report(parts: Path, out: Path) -> None:
    results: dict[str, Any] = {"machine": platform.machine(), "cpus": os.cpu_count(), "runs": []}
    for path in sorted(parts.glob("*.json")):
        results["runs"].append(json.loads(path.read_text()))
    lines = [
        f"# Short Atari curves on the CPU: {GAME}, rlx and Stable-Baselines3 at equal frames",
        "",
        "Greedy evaluation: mean score of whole games (all lives, unclipped) on the run's "
        "evaluation seeds, each game cut at the --eval-max-steps agent steps; 4 frames a step.",
        "",
        "| algorithm | library | seed | steps (frames) | evaluations (step: score) "
        "| training wall-clock |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for run in results["runs"]:
        curve = ", ".join(f"{s // 1000}k: {v:.1f}" for s, v in run["evaluations"])
        lines.append(
            f"| {run['algorithm']} | {run['library']} | {run['seed']} | {run['steps']:,} "
            f"({4 * run['steps']:,}) | {curve} | {run['seconds']:.0f} s |"
        )
    (out / "standard_atari.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "standard_atari.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, algorithm in zip(axes, ALGORITHMS, strict=True):
        for run in results["runs"]:
            if run["algorithm"] == algorithm:
                steps = [s for s, _ in run["evaluations"]]
                values = [v for _, v in run["evaluations"]]
                library = "rlx" if run["library"] == "rlx" else "Stable-Baselines3"
                label = f"{library} seed {run['seed']}"
                ax.plot([4 * s for s in steps], values, marker="o", label=label)
        ax.set_title(f"{algorithm} {GAME}")
        ax.set_xlabel("frames")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("greedy score")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(out / "standard_atari.png", dpi=110)


if __name__ == "__main__":
    main()
