"""Standard MuJoCo results: rlx and Stable-Baselines3 at equal steps, same settings, same seeds.

Rows: PPO on HalfCheetah-v5, Hopper-v5 and Walker2d-v5; SAC and TD3 on HalfCheetah-v5 and
Hopper-v5. Both libraries get rl-baselines3-zoo's settings for the pair (rlx's tuned settings,
``rlx.tuned``, translated key by key into SB3's arguments: normalisation through
``VecNormalize``, network sizes, activation, ``log_std_init`` and ``ortho_init`` through
``policy_kwargs``, TD3's exploration noise through ``NormalActionNoise``) and the same seeds.

Protocol: every ``--steps`` / ``--evaluations`` environment steps and at the end, the greedy
policy plays ``--eval-episodes`` episodes on the run's evaluation seeds
(``rlx.evaluation.evaluate`` for both libraries; SB3's policy sees its ``VecNormalize``
statistics, frozen). Per row and library: the IQM over seeds of the final evaluation return
with a 95% bootstrap interval (``rlx.statistics.summarize``; below four seeds it is the mean),
every seed's value, the wall-clock seconds to train all the seeds (evaluations included, the
same protocol on both sides), and the zoo's published figure (``benchmark.md`` of
rl-baselines3-zoo: one agent trained 1M steps on the v3 task, mean and standard deviation of its
episodes) for reference only: the budgets here are smaller.

Each (row, library) is one job in its own process with one torch thread, two jobs at a time on
the machine's two cores: rlx trains the row's seeds as one batched seed group
(``rlx.groups.new_group(..., jobs=1, batched=True, tuned=True)``), SB3 trains them one after the
other with ``model.learn``. Every finished job is kept in ``benchmarks/results/standard/`` (a
later invocation skips it unless ``--fresh``), so the protocol can be run in parts.

Writes ``benchmarks/results/standard.json``, ``standard.md`` and ``standard.png`` (IQM
learning curves with their intervals). Needs ``pip install mujoco stable-baselines3`` beside
rlx-onpolicy and rlx-offpolicy (neither is a dependency of rlx) and matplotlib for the plot.

    python benchmarks/standard.py                       # every row at the default budgets
    python benchmarks/standard.py --rows ppo-hopper --ppo-steps 50000
    python benchmarks/standard.py --quick --out /tmp/standard   # a smoke test (minutes)
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402
import csv  # noqa: E402
import importlib.metadata  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

RESULTS = Path(__file__).parent / "results"
sys.path.insert(0, str(Path(__file__).parent))  # sb3_evaluation

#: row -> (algorithm, environment)
ROWS: dict[str, tuple[str, str]] = {
    "ppo-halfcheetah": ("ppo", "HalfCheetah-v5"),
    "ppo-hopper": ("ppo", "Hopper-v5"),
    "ppo-walker2d": ("ppo", "Walker2d-v5"),
    "sac-halfcheetah": ("sac", "HalfCheetah-v5"),
    "sac-hopper": ("sac", "Hopper-v5"),
    "td3-halfcheetah": ("td3", "HalfCheetah-v5"),
    "td3-hopper": ("td3", "Hopper-v5"),
}

#: rl-baselines3-zoo's benchmark.md: (task, budget, mean return, standard deviation).
ZOO: dict[str, tuple[str, str, float, float]] = {
    "ppo-halfcheetah": ("HalfCheetah-v3", "1M", 5819.099, 663.530),
    "ppo-hopper": ("Hopper-v3", "1M", 2410.435, 10.026),
    "ppo-walker2d": ("Walker2d-v3", "1M", 3478.798, 821.708),
    "sac-halfcheetah": ("HalfCheetah-v3", "1M", 9535.451, 100.470),
    "sac-hopper": ("Hopper-v3", "1M", 2325.547, 1129.676),
    "td3-halfcheetah": ("HalfCheetah-v3", "1M", 9655.666, 969.916),
    "td3-hopper": ("Hopper-v3", "1M", 3606.390, 4.027),
}

LIBRARIES = ("rlx", "sb3")


# -- settings ------------------------------------------------------------------------------------


def rlx_settings(algorithm: str, env_id: str) -> dict[str, Any]:
    """Every hyperparameter of rlx's agent with its tuned settings on ``env_id`` (resolved)."""
    import rlx
    from rlx.config import to_dict
    from rlx.tuned import hyperparameters

    agent = rlx.make(algorithm, env_id, seed=0, **hyperparameters(algorithm, env_id))
    try:
        return to_dict(agent.config)
    finally:
        close = getattr(agent, "close", None)
        if close is not None:
            close()


def sb3_settings(algorithm: str, env_id: str) -> dict[str, Any]:
    """The same settings as SB3 arguments (JSON-able): ``kwargs`` for the model,
    ``policy_kwargs``, ``normalize`` for ``VecNormalize`` (or None), ``action_noise_std``."""
    c = rlx_settings(algorithm, env_id)
    if c.get("n_envs", 1) != 1:
        raise SystemExit(f"{algorithm} {env_id}: this benchmark runs one environment per seed")
    policy_kwargs: dict[str, Any] = {"activation": c["activation"]}
    actor = list(c.get("actor_hidden_sizes") or c["hidden_sizes"])
    critic = list(c.get("critic_hidden_sizes") or c["hidden_sizes"])
    if algorithm == "ppo":
        keys = (
            "learning_rate n_steps batch_size n_epochs gamma gae_lambda clip_range ent_coef "
            "vf_coef max_grad_norm"
        ).split()
        policy_kwargs.update(
            net_arch={"pi": actor, "vf": critic},
            log_std_init=c["log_std_init"],
            ortho_init=c["ortho_init"],
        )
        normalize = (
            {"norm_obs": c["normalize_observations"], "norm_reward": c["normalize_rewards"]}
            if c["normalize_observations"] or c["normalize_rewards"]
            else None
        )
        for key in ("lr_schedule", "clip_schedule"):
            if c.get(key, "constant") != "constant":
                raise SystemExit(f"{algorithm} {env_id}: {key} {c[key]} is not translated")
    else:
        keys = (
            "learning_rate buffer_size learning_starts batch_size tau gamma train_freq "
            "gradient_steps"
        ).split()
        policy_kwargs["net_arch"] = {"pi": actor, "qf": critic}
        normalize = None
        if c.get("normalize_observations"):
            raise SystemExit(f"{algorithm} {env_id}: observation normalisation is not translated")
        if algorithm == "td3":
            keys += ["policy_delay", "target_policy_noise", "target_noise_clip"]
        else:
            if c.get("alpha") is not None:
                raise SystemExit(f"{algorithm} {env_id}: a fixed alpha is not translated")
    kwargs = {key: c[key] for key in keys}
    if algorithm == "sac":
        kwargs["ent_coef"] = f"auto_{c['initial_alpha']}"
        if c.get("target_entropy") is not None:
            kwargs["target_entropy"] = c["target_entropy"]
    return {
        "kwargs": kwargs,
        "policy_kwargs": policy_kwargs,
        "normalize": normalize,
        "action_noise_std": c.get("action_noise_std") if algorithm == "td3" else None,
    }


# -- the two sides (each in its own process) ----------------------------------------------------


def rlx_side(algorithm: str, env_id: str, seeds: list[int], steps: int, every: int, episodes: int):
    """Train the seeds as one batched rlx seed group; each seed's evaluations."""
    from rlx.groups import new_group

    settings = {
        "steps": steps,
        "eval_every": every,
        "eval_episodes": episodes,
        "checkpoint_every": 0,
        "progress": False,
        "verbose": False,
        "plot": False,
        "tensorboard": False,
    }
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        group = new_group(
            algorithm,
            env_id,
            seeds=seeds,
            jobs=1,
            batched=True,
            tuned=True,
            hyperparameters={"torch_threads": 1},
            settings=settings,
            out=Path(tmp) / "group",
        )
        group.fit()
        seconds = time.perf_counter() - started
        runs = []
        for seed in seeds:
            with open(Path(tmp) / "group" / f"seed-{seed}" / "metrics.csv", newline="") as f:
                rows = [r for r in csv.DictReader(f) if r.get("eval/return_mean")]
            runs.append(
                {
                    "seed": seed,
                    "steps": [int(float(r["env_steps"])) for r in rows],
                    "returns": [float(r["eval/return_mean"]) for r in rows],
                }
            )
    return {"seconds": seconds, "runs": runs}


def sb3_side(algorithm: str, env_id: str, seeds: list[int], steps: int, every: int, episodes: int):
    """Train the seeds one after the other with SB3; each seed's evaluations."""
    import gymnasium as gym
    import numpy as np
    import torch
    from sb3_evaluation import callback as evaluation
    from stable_baselines3 import PPO, SAC, TD3
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.noise import NormalActionNoise
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    settings = sb3_settings(algorithm, env_id)
    activations = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}

    started = time.perf_counter()
    runs = []
    for seed in seeds:
        env = make_vec_env(env_id, n_envs=1, seed=seed)
        normalizer = None
        if settings["normalize"] is not None:
            env = normalizer = VecNormalize(
                env, gamma=settings["kwargs"]["gamma"], **settings["normalize"]
            )
        policy_kwargs = dict(settings["policy_kwargs"])
        policy_kwargs["activation_fn"] = activations[policy_kwargs.pop("activation")]
        kwargs = dict(settings["kwargs"])
        if algorithm != "ppo":
            arch = policy_kwargs.pop("net_arch")
            policy_kwargs["net_arch"] = arch["pi"] if arch["pi"] == arch["qf"] else arch
        if settings["action_noise_std"] is not None:
            n = env.action_space.shape[0]
            kwargs["action_noise"] = NormalActionNoise(
                np.zeros(n), settings["action_noise_std"] * np.ones(n)
            )
        cls = {"ppo": PPO, "sac": SAC, "td3": TD3}[algorithm]
        model = cls(
            "MlpPolicy",
            env,
            seed=seed,
            device="cpu",
            verbose=0,
            policy_kwargs=policy_kwargs,
            **kwargs,
        )
        callback = evaluation(gym.make(env_id), every, steps, episodes, seed, normalizer)
        model.learn(steps, callback=callback)
        callback.measure()  # the final evaluation, as rlx's run ends with one
        steps_done, returns = zip(*callback.evaluations, strict=True)
        runs.append({"seed": seed, "steps": list(steps_done), "returns": list(returns)})
    return {"seconds": time.perf_counter() - started, "runs": runs, "settings": settings}


# -- the driver ---------------------------------------------------------------------------------


def budget(row: str, args: argparse.Namespace) -> int:
    return args.ppo_steps if ROWS[row][0] == "ppo" else args.offpolicy_steps


def part_path(parts: Path, row: str, library: str) -> Path:
    return parts / f"{row}-{library}.json"


def job_main(argv: list[str]) -> None:
    """``--job ROW LIBRARY STEPS EVERY EPISODES SEEDS OUT``: one side of one row."""
    row, library, steps, every, episodes, seeds, out = argv
    algorithm, env_id = ROWS[row]
    side = rlx_side if library == "rlx" else sb3_side
    listed = [int(s) for s in seeds.split(",")]
    result = side(algorithm, env_id, listed, int(steps), int(every), int(episodes))
    result.update(row=row, library=library, steps=int(steps), eval_every=int(every))
    result.update(eval_episodes=int(episodes), seeds=listed)
    Path(out).write_text(json.dumps(result, indent=1) + "\n")


def run_jobs(jobs: list[tuple[str, str]], args: argparse.Namespace, parts: Path) -> None:
    """Run the jobs two at a time (longest first), each in its own process."""
    waiting = list(jobs)
    running: list[tuple[subprocess.Popen, str, str, float]] = []
    seeds = ",".join(str(s) for s in range(args.seeds))
    while waiting or running:
        while waiting and len(running) < args.jobs:
            row, library = waiting.pop(0)
            steps = budget(row, args)
            every = steps // args.evaluations
            command = [sys.executable, __file__, "--job", row, library, str(steps), str(every)]
            command += [str(args.eval_episodes), seeds, str(part_path(parts, row, library))]
            print(f"start {row} {library} ({steps:,} steps x {args.seeds} seeds)", flush=True)
            running.append((subprocess.Popen(command), row, library, time.perf_counter()))
        time.sleep(2)
        for entry in list(running):
            process, row, library, started = entry
            if process.poll() is None:
                continue
            running.remove(entry)
            state = "done" if process.returncode == 0 else f"failed ({process.returncode})"
            print(f"{state} {row} {library} in {time.perf_counter() - started:.0f} s", flush=True)


def report(parts: Path, rows: list[str], out: Path) -> None:
    from rlx.statistics import curve, summarize

    table = [
        "# Standard MuJoCo results: rlx against Stable-Baselines3",
        "",
        "Same settings (rl-baselines3-zoo's), same seeds, equal steps; each library's job on "
        "one core, two jobs at a time. Final return: IQM over seeds of the last evaluation "
        "(mean return of the evaluation episodes) with its 95% bootstrap interval; below four "
        "seeds the IQM is the mean. The zoo's figure is one agent after 1M steps on the v3 task.",
        "",
        "| row | steps x seeds | rlx final return | SB3 final return | rlx / SB3 wall-clock "
        "| rlx per seed | SB3 per seed | zoo (1M steps) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    record: dict[str, Any] = {
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "versions": {
            name: importlib.metadata.version(name)
            for name in (
                "rlx-core",
                "rlx-onpolicy",
                "rlx-offpolicy",
                "stable-baselines3",
                "torch",
                "gymnasium",
                "mujoco",
            )
        },
        "rows": {},
    }
    curves: dict[str, dict[str, Any]] = {}
    for row in rows:
        sides = {}
        for library in LIBRARIES:
            path = part_path(parts, row, library)
            if path.exists():
                sides[library] = json.loads(path.read_text())
        if not sides:
            continue
        cells = {}
        for library, side in sides.items():
            finals = [run["returns"][-1] for run in side["runs"]]
            side["final"] = summarize(finals)
            iqm = side["final"]["iqm"]
            cells[library] = (
                f"{iqm['value']:.0f} [{iqm['low']:.0f}, {iqm['high']:.0f}]",
                ", ".join(f"{v:.0f}" for v in finals),
                side["seconds"],
            )
            grid = side["eval_every"]
            snapped = [[grid * round(s / grid) for s in run["steps"]] for run in side["runs"]]
            c = curve(snapped, [run["returns"] for run in side["runs"]])
            curves.setdefault(row, {})[library] = c
            side["curve"] = {"steps": c.steps, "iqm": c.value, "low": c.low, "high": c.high}
        record["rows"][row] = sides
        any_side = next(iter(sides.values()))
        zoo = ZOO[row]
        ratio = "-"
        if len(cells) == 2:
            mine, theirs = cells["rlx"][2], cells["sb3"][2]
            ratio = f"{mine:.0f} / {theirs:.0f} s ({mine / theirs:.2f})"
        table.append(
            f"| {row} | {any_side['steps']:,} x {len(any_side['seeds'])} | "
            f"{cells.get('rlx', ('-',))[0]} | {cells.get('sb3', ('-',))[0]} | {ratio} | "
            f"{cells.get('rlx', ('', '-'))[1]} | {cells.get('sb3', ('', '-'))[1]} | "
            f"{zoo[2]:.0f} ± {zoo[3]:.0f} |"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "standard.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "standard.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    plot(curves, out / "standard.png")


def plot(curves: dict[str, dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    if not curves:
        return
    columns = min(4, len(curves))
    lines = -(-len(curves) // columns)
    fig, grid = plt.subplots(lines, columns, figsize=(4 * columns, 3.2 * lines), squeeze=False)
    axes = list(grid.flat)
    for ax in axes[len(curves) :]:
        ax.set_visible(False)
    for ax, (row, sides) in zip(axes, curves.items(), strict=False):
        for library, c in sides.items():
            label = "rlx" if library == "rlx" else "Stable-Baselines3"
            ax.plot(c.steps, c.value, label=label)
            ax.fill_between(c.steps, c.low, c.high, alpha=0.25)
        ax.set_title(row)
        ax.set_xlabel("environment steps")
        ax.grid(alpha=0.3)
    for ax in grid[:, 0]:
        ax.set_ylabel("evaluation return (IQM)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        job_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated rows")
    parser.add_argument("--libraries", default=",".join(LIBRARIES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--ppo-steps", type=int, default=100_000)
    parser.add_argument("--offpolicy-steps", type=int, default=20_000)
    parser.add_argument("--evaluations", type=int, default=10, help="evaluations per run")
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="jobs at a time")
    parser.add_argument("--fresh", action="store_true", help="rerun the jobs already kept")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a smoke test: tiny budgets")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.ppo_steps, args.offpolicy_steps = 2, 2_048, 11_000
        args.evaluations, args.eval_episodes = 2, 1
    rows = [r for r in args.rows.split(",") if r]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        raise SystemExit(f"unknown rows {unknown}; known: {', '.join(ROWS)}")
    parts = args.out / "standard"
    parts.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        jobs = [
            (row, library)
            for row in rows
            for library in args.libraries.split(",")
            if args.fresh or not part_path(parts, row, library).exists()
        ]
        # longest first: SB3's off-policy rows, then rlx's, then PPO
        jobs.sort(key=lambda job: (ROWS[job[0]][0] == "ppo", job[1] == "rlx"))
        run_jobs(jobs, args, parts)
    report(parts, rows, args.out)


if __name__ == "__main__":
    main()
