"""rlx's tqc and sb3-contrib's TQC on Pendulum-v1 in their first 8,000 steps, many seeds.

The full-budget comparison (``contrib_offpolicy_quantiles.py``, 3 seeds, an evaluation every
2,000 steps) found rlx behind at 4,000 and 6,000 steps and equal from 8,000. This script
looks at that stretch closely: both libraries learn with rl-baselines3-zoo's settings
(``hyperparams/tqc.yml``: learning rate 1e-3, the rest sb3-contrib's defaults; rlx from
``rlx_offpolicy/tuned.toml``), the same seeds, one torch thread each, and every
``eval_every`` steps the deterministic policy plays 10 episodes on the same environment
seeds (``rlx.evaluation.evaluation_seeds``). Reported per step: the mean, median, min and
max over the seeds and how many seeds evaluate below -300 (a policy that fails to swing the
pendulum up from some starts), and over the stretch from 3,000 steps on, the share of all
evaluations below -300 and each seed's count. Times are not compared here (the runs share
the machine's cores). Writes ``benchmarks/results/contrib_tqc_early.{json,md}``.

One update of each library from the same weights, minibatch and noise gives the same
weights (checked by hand against sb3-contrib 2.9.2: 30 updates agree to 1e-5 once rlx's
log-density takes sb3-contrib's ``+ 1e-6``). Two differences stay: rlx's warm-up is a
minibatch, 256 steps, where sb3-contrib learns from step 100, and rlx's log-density of the
squashed Gaussian is exact (the TQC authors' form) where sb3-contrib adds 1e-6 inside the
logarithm, which caps the entropy penalty of saturated actions.

    python benchmarks/contrib_tqc_early.py                 # 10 seeds, 8,000 steps, 2 workers
    python benchmarks/contrib_tqc_early.py --quick         # a smoke run: 2 seeds, 1,000 steps

Needs ``stable-baselines3`` and ``sb3-contrib`` (2.9), which rlx does not depend on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch

FAILED = -300.0  # an evaluation below this fails to swing up from some starts
STRETCH = 3_000  # the stretch the full-budget comparison questioned starts here


def run(library: str, seed: int, steps: int, eval_every: int) -> list[tuple[int, float]]:
    """One seed of one library: its evaluations at every multiple of ``eval_every``."""
    torch.set_num_threads(1)
    marks = list(range(eval_every, steps + 1, eval_every))
    curve: list[tuple[int, float]] = []
    if library == "sb3-contrib":
        from contrib_offpolicy_quantiles import sb3_evaluate
        from sb3_contrib import TQC
        from stable_baselines3.common.callbacks import BaseCallback

        model = TQC("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, seed=seed, device="cpu")

        class Evaluations(BaseCallback):
            def _on_step(self) -> bool:
                return True

            def _on_rollout_start(self) -> None:
                # before collecting, after the last training: the policy so far
                if len(curve) < len(marks) and self.num_timesteps >= marks[len(curve)]:
                    curve.append((self.num_timesteps, sb3_evaluate(self.model, "Pendulum-v1")))

        model.learn(steps + 1, callback=Evaluations())
        return curve
    import rlx
    from rlx import tuned
    from rlx.evaluation import evaluate

    agent = rlx.make("tqc", "Pendulum-v1", seed=seed, **tuned.hyperparameters("tqc", "Pendulum-v1"))
    agent.set_training_budget(steps)
    done = 0
    for mark in marks:
        while done < mark:
            done += agent.step().env_steps
        env = gymnasium.make("Pendulum-v1")
        curve.append((done, evaluate(agent, env, episodes=10, seed=0).mean_return))
    agent.close()
    return curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=8_000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--quick", action="store_true", help="2 seeds, 1,000 steps (smoke run)")
    parser.add_argument("--note", default="", help="a line for the results file")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.steps = 2, 1_000
    libraries = ("rlx", "sb3-contrib")
    jobs = [(library, seed) for seed in range(args.seeds) for library in libraries]
    curves: dict[str, dict[int, list[tuple[int, float]]]] = {name: {} for name in libraries}
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = {
            job: pool.submit(run, job[0], job[1], args.steps, args.eval_every) for job in jobs
        }
        for (library, seed), future in futures.items():
            curves[library][seed] = future.result()
            print(library, seed, [round(r) for _, r in curves[library][seed]], flush=True)
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    results = {
        "machine": machine,
        "note": args.note,
        "steps": args.steps,
        "eval_every": args.eval_every,
        "curves": {name: {str(k): v for k, v in runs.items()} for name, runs in curves.items()},
    }
    stem = "contrib_tqc_early_quick" if args.quick else "contrib_tqc_early"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=1))
    page = markdown(curves, args)
    (args.out / f"{stem}.md").write_text(page)
    print(page)


def markdown(curves: dict[str, dict[int, list[tuple[int, float]]]], args: Any) -> str:
    """Per step the seeds' statistics of each library, then the failures from 3,000 steps."""
    seeds = len(next(iter(curves.values())))
    lines = [
        "# tqc vs sb3-contrib's TQC: Pendulum-v1, the first steps, many seeds",
        "",
        "Written by `benchmarks/contrib_tqc_early.py`: the zoo's settings in both libraries, "
        f"seeds 0 to {seeds - 1}, 10 evaluation episodes on the same environment seeds every "
        f"{args.eval_every} steps. A cell: mean / median (min, max) over the seeds, and how "
        f"many seeds evaluate below {FAILED:.0f}.",
    ]
    if args.note:
        lines += ["", args.note]
    lines += [
        "",
        "| steps | rlx | below | sb3-contrib | below |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    marks = [step for step in range(args.eval_every, args.steps + 1, args.eval_every)]
    for index, mark in enumerate(marks):
        cells = [f"{mark:,}"]
        for runs in curves.values():
            values = [curve[index][1] for curve in runs.values()]
            cells.append(
                f"{statistics.mean(values):.0f} / {statistics.median(values):.0f} "
                f"({min(values):.0f}, {max(values):.0f})"
            )
            cells.append(str(sum(value < FAILED for value in values)))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"From {STRETCH:,} steps on:", ""]
    for name, runs in curves.items():
        late = [
            [value < FAILED for step, value in curve if step >= STRETCH] for curve in runs.values()
        ]
        share = float(np.mean([failed for seed in late for failed in seed]))
        counts = [sum(seed) for seed in late]
        lines.append(
            f"- {name}: {share:.0%} of the evaluations below {FAILED:.0f}; per seed "
            f"{counts} (of {len(late[0])}); seeds never below after {STRETCH:,}: "
            f"{sum(count == 0 for count in counts)} of {len(counts)}"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
