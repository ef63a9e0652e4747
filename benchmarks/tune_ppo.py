"""rlx tune on PPO, CartPole-v1: can a small study beat the zoo's settings at reaching 475?

1. Tune: an Optuna study through ``rlx.tune.tune`` (the code behind ``rlx tune``) over a
   space file of PPO's usual hyperparameters; every trial gets the same budget of environment
   steps and is scored by ``mean_eval_return``, the mean of its evaluations (the area under
   its evaluation curve, which rewards reaching a high return early); the median pruner
   stops the weak ones.
2. Compare: the best trial's settings and the zoo's (``rlx_onpolicy/tuned.toml``) on fresh seeds
   (none of them a tuning seed), each run stopping at a mean evaluation return of 475 or at
   ``--compare-budget``: the environment steps each needed.

Writes ``benchmarks/results/tune_ppo.json``, ``tune_ppo.md`` and the study's Optuna plots
(``tune_ppo_history.png``, ``tune_ppo_importances.png``); the study itself goes to ``--out``
(default a temporary directory).

A study with two worker processes does not repeat exactly (the trials reach the sampler in
another order); two runs on this machine found settings with a median of 10,157 and 13,201
steps to 475 on the 16 comparison seeds, against the zoo's 17,509.

    python benchmarks/tune_ppo.py                      # 32 trials, 16 seeds: about 5 minutes
    python benchmarks/tune_ppo.py --trials 6 --seeds 2  # a smoke test
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import rlx
from rlx.trainer import Trainer
from rlx.tune import tune
from rlx.tuned import hyperparameters

ENV = "CartPole-v1"
THRESHOLD = 475

#: PPO's usual search space (the ranges rl-baselines3-zoo's own tuner searches, narrowed to
#: CartPole-sized problems); everything else keeps its default.
SPACE = {
    "default_space": False,
    "n_envs": 8,
    "learning_rate": {"low": 1e-4, "high": 3e-3, "log": True},
    "n_steps": [32, 64, 128],
    "batch_size": [64, 128, 256],
    "n_epochs": {"low": 4, "high": 20},
    "gamma": [0.95, 0.98, 0.99, 0.995],
    "gae_lambda": {"low": 0.8, "high": 0.99},
    "clip_range": {"low": 0.1, "high": 0.3},
    "lr_schedule": ["constant", "linear"],
    "clip_schedule": ["constant", "linear"],
}


def reach(config: dict, seed: int, budget: int, eval_every: int) -> dict:
    """One run of PPO with ``config`` until it evaluates at 475 or spends ``budget``."""
    agent = rlx.make("ppo", ENV, seed=seed, **config)
    started = time.perf_counter()
    result = Trainer(
        agent,
        steps=budget,
        eval_every=eval_every,
        eval_episodes=10,
        target_return=THRESHOLD,
        progress=False,
        verbose=False,
        plot=False,
    ).fit()
    return {
        "seed": seed,
        "reached": result.stop_reason == "target",
        "steps": result.env_steps,
        "return": result.final_eval.mean_return if result.final_eval else None,
        "seconds": time.perf_counter() - started,
    }


def summary(runs: list[dict], budget: int) -> dict:
    """Seeds reaching the threshold, and the steps needed (a seed that never reached it
    counts as the whole budget)."""
    steps = [run["steps"] if run["reached"] else budget for run in runs]
    return {
        "reached": sum(run["reached"] for run in runs),
        "seeds": len(runs),
        "median_steps": statistics.median(steps),
        "mean_steps": statistics.fmean(steps),
        "seconds": sum(run["seconds"] for run in runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--trial-steps", type=int, default=30_000)
    parser.add_argument("--trial-eval-every", type=int, default=3_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--compare-budget", type=int, default=100_000)
    parser.add_argument("--compare-eval-every", type=int, default=2_500)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()

    started = time.perf_counter()
    out = args.out or Path(tempfile.mkdtemp(prefix="tune_ppo-")) / "study"
    study = tune(
        "ppo",
        ENV,
        trials=args.trials,
        workers=args.workers,
        steps=args.trial_steps,
        eval_every=args.trial_eval_every,
        eval_episodes=5,
        metric="mean_eval_return",
        space=SPACE,
        out=out,
        seed=0,
    )
    tuning_seconds = time.perf_counter() - started
    assert study.best_value is not None, "no trial completed"
    best = {**hyperparameters("ppo", ENV), **_best_settings(study.files["best"])}
    zoo = hyperparameters("ppo", ENV)
    # Fresh seeds: the trials' own seeds derive from the study seed, and these are 1000 + i.
    seeds = [1000 + i for i in range(args.seeds)]
    compared = {}
    for name, config in (("zoo", zoo), ("tuned", best)):
        runs = [reach(config, seed, args.compare_budget, args.compare_eval_every) for seed in seeds]
        compared[name] = {"config": config, "runs": runs, **summary(runs, args.compare_budget)}
        print(name, {k: v for k, v in compared[name].items() if k not in ("runs", "config")})
    document = {
        "env": ENV,
        "threshold": THRESHOLD,
        "tuning": {
            "trials": args.trials,
            "trial_steps": args.trial_steps,
            "trial_eval_every": args.trial_eval_every,
            "workers": args.workers,
            "metric": "mean_eval_return",
            "space": SPACE,
            "counts": study.counts,
            "best_trial": study.best_trial,
            "best_value": study.best_value,
            "best_params": study.best_params,
            "seconds": tuning_seconds,
        },
        "compare_budget": args.compare_budget,
        "compare_eval_every": args.compare_eval_every,
        "compared": compared,
        "total_seconds": time.perf_counter() - started,
    }
    args.results.mkdir(parents=True, exist_ok=True)
    for key in ("history", "importances"):  # Optuna's plots of the study
        if key in study.files:
            shutil.copyfile(study.files[key], args.results / f"tune_ppo_{key}.png")
    (args.results / "tune_ppo.json").write_text(json.dumps(document, indent=2) + "\n")
    (args.results / "tune_ppo.md").write_text(_markdown(document))
    print(_markdown(document))


def _best_settings(path: Path) -> dict:
    """The hyperparameters of best.toml, the file ``rlx run --config`` reads."""
    import tomllib

    return tomllib.loads(path.read_text())["hyperparameters"]


def _markdown(document: dict) -> str:
    tuning, compared = document["tuning"], document["compared"]
    zoo, tuned = compared["zoo"], compared["tuned"]
    counts = ", ".join(f"{n} {state}" for state, n in sorted(tuning["counts"].items()))
    if tuned["median_steps"] < zoo["median_steps"] and tuned["reached"] >= zoo["reached"]:
        verdict = (
            f"The tuned settings reach {document['threshold']} in fewer steps than the zoo's "
            f"(median {tuned['median_steps']:,.0f} against {zoo['median_steps']:,.0f})."
        )
    else:
        verdict = (
            f"The tuned settings do not beat the zoo's here (median "
            f"{tuned['median_steps']:,.0f} steps against {zoo['median_steps']:,.0f}; "
            f"{tuned['reached']} and {zoo['reached']} of {zoo['seeds']} seeds reach "
            f"{document['threshold']})."
        )
    rows = [
        "# rlx tune: PPO on CartPole-v1",
        "",
        f"Study: {tuning['trials']} trials of {tuning['trial_steps']:,} environment steps "
        f"({tuning['workers']} worker processes), evaluated every "
        f"{tuning['trial_eval_every']:,} steps on 5 episodes, maximising "
        f"{tuning['metric']} (the mean of a trial's evaluations), median pruner; {counts}; "
        f"{tuning['seconds']:.0f} s. Best trial {tuning['best_trial']}: "
        f"{tuning['best_value']:.1f}. Optuna's plots of the study: `tune_ppo_history.png`, "
        "`tune_ppo_importances.png`.",
        "",
        f"Comparison: {zoo['seeds']} fresh seeds per configuration, evaluation every "
        f"{document['compare_eval_every']:,} steps on 10 episodes, a run stopping at "
        f"{document['threshold']} or after {document['compare_budget']:,} steps (a seed that "
        "never reaches it counts as the whole budget).",
        "",
        "| settings | seeds reaching 475 | steps to 475 (median) | (mean) | seconds |",
        "|---|---|---|---|---|",
    ]
    for name, entry in (("zoo (rlx_onpolicy/tuned.toml)", zoo), ("tuned (best.toml)", tuned)):
        rows.append(
            f"| {name} | {entry['reached']} / {entry['seeds']} | {entry['median_steps']:,.0f} | "
            f"{entry['mean_steps']:,.0f} | {entry['seconds']:.0f} |"
        )
    for name, entry in (("zoo", zoo), ("tuned", tuned)):
        steps = ", ".join(
            f"{run['steps']:,}" if run["reached"] else "not reached" for run in entry["runs"]
        )
        rows.append(f"\nSteps to 475, seed by seed ({name}): {steps}.")
    changed = {
        key: value for key, value in tuned["config"].items() if zoo["config"].get(key) != value
    }
    rows += [
        "",
        verdict,
        "",
        "Tuned settings that differ from the zoo's: "
        + ", ".join(f"{key}={_short(value)}" for key, value in changed.items())
        + ".",
        "",
        f"Total: {document['total_seconds'] / 60:.1f} minutes on this 2-core machine.",
    ]
    return "\n".join(rows) + "\n"


def _short(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    main()
