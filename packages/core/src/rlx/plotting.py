"""Learning curves of a run as a PNG (needs matplotlib: ``pip install rlx-core[plot]``)."""

from __future__ import annotations

import csv
from pathlib import Path

from rlx.errors import RlxError
from rlx.runs import RunDirectory


def _series(rows: list[dict[str, str]], column: str) -> tuple[list[int], list[float]]:
    steps, values = [], []
    for row in rows:
        if row.get(column):
            steps.append(int(row["env_steps"]))
            values.append(float(row[column]))
    return steps, values


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draw training and evaluation returns against environment steps; returns the PNG path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RlxError("plotting needs matplotlib: pip install 'rlx-core[plot]'") from exc
    run = RunDirectory.open(run_dir)
    if not run.metrics_file.is_file():
        raise RlxError(f"{run.path} has no {run.metrics_file.name} to plot")
    with open(run.metrics_file, newline="") as f:
        rows = list(csv.DictReader(f))
    config = run.read_config()
    out = Path(out) if out is not None else run.path / "learning_curve.png"
    figure, axes = plt.subplots(figsize=(8, 4.5), dpi=100)
    train_steps, train = _series(rows, "train/return_mean")
    eval_steps, evaluation = _series(rows, "eval/return_mean")
    _, spread = _series(rows, "eval/return_std")
    if not train and not evaluation:
        plt.close(figure)
        raise RlxError(f"{run.metrics_file} holds no returns yet")
    if train:
        axes.plot(train_steps, train, color="tab:blue", alpha=0.6, label="training episodes (mean)")
    if evaluation:
        low = [m - s for m, s in zip(evaluation, spread, strict=True)]
        high = [m + s for m, s in zip(evaluation, spread, strict=True)]
        axes.fill_between(eval_steps, low, high, color="tab:orange", alpha=0.2)
        axes.plot(eval_steps, evaluation, "o-", color="tab:orange", label="evaluation (mean ± std)")
    axes.set_xlabel("environment steps")
    axes.set_ylabel("return")
    axes.set_title(f"{config['agent']} on {config['env']} (seed {config['seed']})")
    axes.grid(alpha=0.3)
    axes.legend(loc="best")
    figure.tight_layout()
    figure.savefig(out)
    plt.close(figure)
    return out
