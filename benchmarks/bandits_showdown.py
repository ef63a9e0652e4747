"""The Deep Bayesian Bandits Showdown protocol on rlx's contextual agents, on a 2-core budget.

Riquelme, Tucker & Snoek (2018), "Deep Bayesian Bandits Showdown", ICLR: each agent plays a
contextual bandit built from a data set; its cumulative regret is reported relative to that
of uniformly random arms (uniform = 100), mean and standard error over independent runs.
Here, for each data set and seed, every agent plays ``--rounds`` rounds of the same
environment reset with that seed (so all agents see the same contexts in the same order),
the regret is the exact one the environments report, and the ratio to uniform is taken per
seed before averaging.

Data sets (rlx-envs, files from ``shared/data/uci``): Mushroom, Statlog (Shuttle), Adult,
MAGIC and the wheel bandit with delta = 0.95. Agents: rlx's defaults, which are the paper's
hyperparameters (one hidden layer of 50 units, RMSProp at 0.1 with inverse time decay over
all trainings as its code ran, retraining every 50 rounds for 100 minibatches of 512,
a0 = b0 = 6, lambda = 0.25, 3 bootstrapped networks, ...), except where ``neural.py``
documents a deviation (Bayes-by-backprop uses Adam at 0.01, not 0.1). neural-greedy keeps its
default epsilon 0.05 (the paper's RMS is greedy). dropout is the paper's Dropout: the same
network trained with dropout and every decision taken with dropout on, keep probability 0.8
(``keep_prob=0.80`` in the ``hparams_dropout`` of the Showdown's ``example_main.py``), no
epsilon. lin-ucb (Li et al. 2010) is not in the paper.

Three budgets, three results files in ``benchmarks/results/``:

- ``bandits_showdown``: all five data sets, 2,000 rounds x 3 seeds (about 10 minutes).
- ``bandits_showdown_8000``: Mushroom and Statlog, 8,000 rounds x 5 seeds (about 15
  minutes with one process per data set).
- ``bandits_showdown_full`` (with a ``.png`` of the regret curves): Mushroom and Statlog for
  as many rounds as the Showdown plays on them (tens of thousands): 50,000 Mushroom rounds
  (about six shuffled passes over its 8,124 rows) and Statlog's 43,500 training rows once,
  3 seeds (about 50 minutes with one process per data set, then ``--merge``).

Early rounds weigh heavily in short runs, which penalises the methods that explore longest
(the normal-inverse-gamma priors, a0 = b0 = 6, expect far noisier rewards than 0/1 labels),
so the ranking moves with the horizon; the curves show how. The full-horizon tables add each
agent's regret over the last 10% of the rounds, which separates a model that cannot fit the
data (linear models on Statlog's classes; neural-greedy's constant epsilon) from slow
exploration.

The JSON is rewritten after every run, so an interrupted benchmark keeps what it finished.
An agent added later can be played alone (with uniform) and merged into a results file: a
run (data set, agent, seed) present in several files is kept once, from the last of them.

    python benchmarks/bandits_showdown.py --rounds 43500 --seeds 3 --datasets statlog \
        --out /tmp/statlog &
    python benchmarks/bandits_showdown.py --rounds 50000 --seeds 3 --datasets mushroom \
        --out /tmp/mushroom
    python benchmarks/bandits_showdown.py --merge /tmp/statlog.json /tmp/mushroom.json \
        --out benchmarks/results/bandits_showdown_full

    python benchmarks/bandits_showdown.py [--rounds 2000] [--seeds 3] [--datasets ...]

    python benchmarks/bandits_showdown.py --agents uniform dropout --out /tmp/dropout
    python benchmarks/bandits_showdown.py --merge benchmarks/results/bandits_showdown.json \
        /tmp/dropout.json --out benchmarks/results/bandits_showdown
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

import rlx  # noqa: E402
from rlx.runs import package_versions  # noqa: E402

RESULTS = Path(__file__).parent / "results"

#: name -> (environment id, environment arguments)
DATASETS: dict[str, tuple[str, dict[str, Any]]] = {
    "mushroom": ("rlx/Mushroom-v0", {}),
    "statlog": ("rlx/Statlog-v0", {}),
    "adult": ("rlx/Adult-v0", {}),
    "magic": ("rlx/Magic-v0", {}),
    "wheel": ("rlx/Wheel-v0", {"delta": 0.95}),
}
AGENTS = [
    "uniform",
    "linear-posterior",
    "lin-ucb",
    "neural-greedy",
    "dropout",
    "neural-linear",
    "variational",
    "bootstrap",
    "param-noise",
]

#: The Showdown's own Table 2 (cumulative regret relative to Uniform, 50 trials) could not be
#: retrieved from the stored sources this benchmark was written with; these are the published
#: numbers of a rerun of the Showdown's code by Wen, Tran & Ba (2020), "BatchEnsemble", ICLR,
#: Table 3 ("Results are relative to the cumulative regret of the Uniform algorithm ... mean
#: and standard error of the mean over 30 trials"), for the data sets and agents both share.
#: LinFullPost is rlx's linear-posterior and RMS the greedy neural network.
PUBLISHED = {
    "source": "Wen, Tran & Ba (2020), BatchEnsemble, ICLR, Table 3: a rerun of the Showdown's "
    "code, 30 trials, uniform = 100",
    "linear-posterior": {
        "mushroom": "97.42 ± 4.52",
        "statlog": "19.00 ± 1.03",
        "wheel": "42.94 ± 12.68",
    },
    "neural-greedy": {
        "mushroom": "16.31 ± 6.13",
        "statlog": "10.44 ± 5.02",
        "wheel": "84.02 ± 24.67",
    },
}


#: Points of the cumulative-regret curve kept per run (for the plot).
CURVE_POINTS = 100


def play(name: str, env_id: str, env_kwargs: dict[str, Any], seed: int, rounds: int):
    """Cumulative regret, seconds, and the regret curve of agent ``name`` over ``rounds`` rounds.

    The curve holds the cumulative regret after every ``rounds / CURVE_POINTS`` rounds.
    """
    agent = rlx.make(name, env_id, seed=seed, env_kwargs=env_kwargs)
    every = max(1, rounds // CURVE_POINTS)
    curve = []
    start = time.perf_counter()
    for played in range(1, rounds + 1):
        agent.step()
        if played % every == 0 or played == rounds:
            curve.append([played, agent.cumulative_regret])
    return agent.cumulative_regret, time.perf_counter() - start, curve


def plot(results: dict[str, Any], path: Path) -> None:
    """Per data set: mean cumulative regret relative to uniform's at the same round, over rounds."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'rlx-core[plot]')")
        return
    runs = [run for run in results["runs"] if run.get("curve")]
    datasets = list(dict.fromkeys(run["dataset"] for run in runs))
    if not datasets:
        return
    figure, axes = plt.subplots(1, len(datasets), figsize=(5.5 * len(datasets), 4.2), squeeze=False)
    for axis, dataset in zip(axes[0], datasets, strict=True):
        uniform = {
            run["seed"]: dict(map(tuple, run["curve"]))
            for run in runs
            if run["dataset"] == dataset and run["agent"] == "uniform"
        }
        for agent in dict.fromkeys(run["agent"] for run in runs if run["dataset"] == dataset):
            if agent == "uniform":
                continue
            curves = [
                [(t, 100.0 * r / uniform[run["seed"]][t]) for t, r in run["curve"]]
                for run in runs
                if run["dataset"] == dataset and run["agent"] == agent and run["seed"] in uniform
            ]
            if not curves:
                continue
            steps = [t for t, _ in curves[0]]
            mean = [statistics.mean(c[i][1] for c in curves) for i in range(len(steps))]
            axis.plot(steps, mean, label=agent)
        axis.set_title(dataset)
        axis.set_xlabel("round")
        axis.set_ylabel("cumulative regret, % of uniform's")
        axis.set_yscale("log")
        axis.grid(True, which="both", alpha=0.3)
    axes[0][-1].legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def summarise(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per data set and agent: mean and standard error of 100 x regret / uniform's regret."""
    uniform = {(r["dataset"], r["seed"]): r["regret"] for r in runs if r["agent"] == "uniform"}
    table: dict[str, dict[str, dict[str, float]]] = {}
    for dataset in dict.fromkeys(r["dataset"] for r in runs):
        table[dataset] = {}
        for agent in dict.fromkeys(r["agent"] for r in runs if r["dataset"] == dataset):
            ratios = [
                100.0 * r["regret"] / uniform[(dataset, r["seed"])]
                for r in runs
                if r["dataset"] == dataset
                and r["agent"] == agent
                and (dataset, r["seed"]) in uniform
            ]
            if not ratios:
                continue
            sem = statistics.stdev(ratios) / math.sqrt(len(ratios)) if len(ratios) > 1 else 0.0
            seconds = [
                r["seconds"] for r in runs if r["dataset"] == dataset and r["agent"] == agent
            ]
            table[dataset][agent] = {
                "relative_regret": statistics.mean(ratios),
                "standard_error": sem,
                "seeds": len(ratios),
                "seconds_per_run": statistics.mean(seconds),
            }
    return table


def late_regret(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per data set and agent: 100 x the regret of the last 10% of rounds / uniform's (runs
    with curves only)."""

    def last_tenth(curve: list[list[float]]) -> float:
        end_round, end_regret = curve[-1]
        start = min(curve, key=lambda point: abs(point[0] - 0.9 * end_round))
        return end_regret - start[1]

    curved = [run for run in runs if run.get("curve")]
    uniform = {
        (run["dataset"], run["seed"]): last_tenth(run["curve"])
        for run in curved
        if run["agent"] == "uniform"
    }
    collected: dict[str, dict[str, list[float]]] = {}
    for run in curved:
        key = (run["dataset"], run["seed"])
        if key in uniform and uniform[key] > 0:
            collected.setdefault(run["dataset"], {}).setdefault(run["agent"], []).append(
                100.0 * last_tenth(run["curve"]) / uniform[key]
            )
    return {
        dataset: {agent: statistics.mean(values) for agent, values in agents.items()}
        for dataset, agents in collected.items()
    }


def ranks(table: dict[str, dict[str, dict[str, float]]]) -> dict[str, float]:
    """Mean rank of every agent over the data sets where it ran (1 = lowest regret)."""
    collected: dict[str, list[int]] = {}
    for rows in table.values():
        order = sorted(rows, key=lambda agent: rows[agent]["relative_regret"])
        for rank, agent in enumerate(order, start=1):
            collected.setdefault(agent, []).append(rank)
    return {agent: statistics.mean(values) for agent, values in collected.items()}


def markdown(results: dict[str, Any]) -> str:
    table, mean_rank = results["table"], results["mean_rank"]
    datasets = list(table)
    agents = sorted(mean_rank, key=mean_rank.get)
    rounds = results["rounds"]
    if isinstance(rounds, int):
        horizon = f"{rounds:,} rounds"
    else:
        horizon = ", ".join(f"{played:,} rounds on {name}" for name, played in rounds.items())
    lines = [
        "# Deep Bayesian Bandits Showdown protocol, rlx agents",
        "",
        f"Cumulative regret after {horizon} relative to uniform random arms "
        f"(uniform = 100; mean ± standard error over {results['seeds']} seeds; lower is "
        "better), as in Riquelme, Tucker & Snoek (2018), Table 2. Produced by "
        "`benchmarks/bandits_showdown.py`; its docstring gives the protocol and the budget.",
        "",
        "| agent | " + " | ".join(datasets) + " | mean rank |",
        "|---|" + "---:|" * (len(datasets) + 1),
    ]
    for agent in agents:
        cells = []
        for dataset in datasets:
            row = table[dataset].get(agent)
            cells.append(
                "" if row is None else f"{row['relative_regret']:.1f} ± {row['standard_error']:.1f}"
            )
        lines.append(f"| {agent} | " + " | ".join(cells) + f" | {mean_rank[agent]:.2f} |")
    late = late_regret(results["runs"])
    if late:
        lines += [
            "",
            "Regret per round over the last 10% of the rounds, relative to uniform's over the "
            "same rounds (uniform = 100; mean over seeds): what an agent still loses once it "
            "has seen most of the data, so a model that cannot fit the data shows here.",
            "",
            "| agent | " + " | ".join(datasets) + " |",
            "|---|" + "---:|" * len(datasets),
        ]
        for agent in agents:
            cells = [f"{late[d][agent]:.2f}" if agent in late.get(d, {}) else "" for d in datasets]
            lines.append(f"| {agent} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Seconds per run (one agent, one seed, 2 CPU cores shared, one torch thread):",
        "",
        "| agent | " + " | ".join(datasets) + " |",
        "|---|" + "---:|" * len(datasets),
    ]
    for agent in agents:
        cells = [
            f"{table[d][agent]['seconds_per_run']:.1f}" if agent in table[d] else ""
            for d in datasets
        ]
        lines.append(f"| {agent} | " + " | ".join(cells) + " |")
    published = results["published"]
    lines += [
        "",
        f"Published numbers for comparison ({published['source']}):",
        "",
        "| agent | mushroom | statlog | wheel |",
        "|---|---:|---:|---:|",
    ]
    for agent in ("linear-posterior", "neural-greedy"):
        row = published[agent]
        lines.append(f"| {agent} | {row['mushroom']} | {row['statlog']} | {row['wheel']} |")
    return "\n".join(lines) + "\n"


def merge(paths: list[Path], out: Path) -> None:
    """Write ``out.{json,md}`` from the runs of several results files (one per data set, say).

    Data sets may have been played for different numbers of rounds (the paper's horizons
    differ by data set); one data set must have one horizon. A run (data set, agent, seed)
    in several files is kept once, from the last file that has it.
    """
    parts = [json.loads(path.read_text()) for path in paths]
    rounds: dict[str, int] = {}
    for part in parts:
        for dataset in part["datasets"]:
            played = part["rounds"] if isinstance(part["rounds"], int) else part["rounds"][dataset]
            if rounds.setdefault(dataset, played) != played:
                raise SystemExit(
                    f"cannot merge {dataset} played for {rounds[dataset]} and {played} rounds"
                )
    results = dict(parts[0])
    # One run per (data set, agent, seed): uniform, which every file plays, is kept once.
    runs = {(run["dataset"], run["agent"], run["seed"]): run for p in parts for run in p["runs"]}
    results["runs"] = list(runs.values())
    results["datasets"] = {k: v for part in parts for k, v in part["datasets"].items()}
    results["rounds"] = rounds if len(set(rounds.values())) > 1 else next(iter(rounds.values()))
    results["seeds"] = max(part["seeds"] for part in parts)
    results["table"] = summarise(results["runs"])
    results["mean_rank"] = ranks(results["table"])
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(results))
    plot(results, out.with_suffix(".png"))
    print(markdown(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--agents", nargs="+", default=AGENTS, choices=AGENTS)
    parser.add_argument("--out", type=Path, default=RESULTS / "bandits_showdown")
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="play nothing: combine the runs of these results files (same --rounds, e.g. one "
        "process per data set) into --out",
    )
    args = parser.parse_args()
    if args.merge:
        merge(args.merge, args.out)
        return
    if "uniform" not in args.agents:
        parser.error("the agents must include uniform: every regret is relative to it")
    torch.set_num_threads(1)

    results: dict[str, Any] = {
        "benchmark": "Deep Bayesian Bandits Showdown protocol: cumulative regret / uniform's",
        "rounds": args.rounds,
        "seeds": args.seeds,
        "datasets": {name: DATASETS[name] for name in args.datasets},
        "runs": [],
        "published": PUBLISHED,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch_threads": torch.get_num_threads(),
        },
        "versions": package_versions(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for dataset in args.datasets:
        env_id, env_kwargs = DATASETS[dataset]
        for seed in range(args.seeds):
            for agent in args.agents:
                regret, seconds, curve = play(agent, env_id, env_kwargs, seed, args.rounds)
                results["runs"].append(
                    {
                        "dataset": dataset,
                        "agent": agent,
                        "seed": seed,
                        "regret": regret,
                        "seconds": seconds,
                        "curve": curve,
                    }
                )
                print(
                    f"{dataset:>8} seed {seed} {agent:>16}: regret {regret:9.1f} "
                    f"({seconds:5.1f} s)",
                    flush=True,
                )
                results["table"] = summarise(results["runs"])
                results["mean_rank"] = ranks(results["table"])
                args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(results))
    plot(results, args.out.with_suffix(".png"))
    print(markdown(results))


if __name__ == "__main__":
    main()
