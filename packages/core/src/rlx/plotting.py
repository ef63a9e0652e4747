"""Learning curves of a run as a PNG (needs matplotlib: ``pip install rlx-core[plot]``).

The returns panel shows training episodes and evaluations against environment steps; when
the agent logs ``cumulative_regret`` (bandit agents do), a second panel shows the regret.
"""

from __future__ import annotations

import io
from pathlib import Path

from rlx.checkpoint import write_bytes_atomic
from rlx.errors import RlxError
from rlx.runs import RunDirectory, read_metrics

REGRET_COLUMN = "agent/cumulative_regret"


def _series(rows: list[dict[str, str]], column: str) -> tuple[list[int], list[float]]:
    steps, values = [], []
    for row in rows:
        if row.get(column):
            steps.append(int(row["env_steps"]))
            values.append(float(row[column]))
    return steps, values


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draw the run's returns (and regret, if logged) against environment steps; returns the PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RlxError("plotting needs matplotlib: pip install 'rlx-core[plot]'") from exc
    run = RunDirectory.open(run_dir)
    if not run.metrics_file.is_file():
        raise RlxError(f"{run.path} has no {run.metrics_file.name} to plot")
    _, rows = read_metrics(run.metrics_file)
    train_steps, train = _series(rows, "train/return_mean")
    eval_steps, evaluation = _series(rows, "eval/return_mean")
    _, spread = _series(rows, "eval/return_std")
    regret_steps, regret = _series(rows, REGRET_COLUMN)
    panels = [name for name, data in (("returns", train or evaluation), ("regret", regret)) if data]
    if not panels:
        raise RlxError(f"{run.metrics_file} holds no returns or regret yet")

    config = run.read_config()
    out = Path(out) if out is not None else run.plot_file
    figure, axes = plt.subplots(
        len(panels), 1, figsize=(8, 4 * len(panels)), dpi=100, squeeze=False
    )
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        if panel == "returns":
            if train:
                ax.plot(train_steps, train, color="tab:blue", alpha=0.6, label="training (mean)")
            if evaluation:
                low = [m - s for m, s in zip(evaluation, spread, strict=True)]
                high = [m + s for m, s in zip(evaluation, spread, strict=True)]
                ax.fill_between(eval_steps, low, high, color="tab:orange", alpha=0.2)
                ax.plot(
                    eval_steps, evaluation, "o-", color="tab:orange", label="evaluation (± std)"
                )
            ax.set_ylabel("return")
            ax.legend(loc="best")
        else:
            ax.plot(regret_steps, regret, color="tab:red")
            ax.set_ylabel("cumulative regret")
        ax.set_xlabel("environment steps")
        ax.grid(alpha=0.3)
    axes[0, 0].set_title(f"{config['agent']} on {config['env']} (seed {config['seed']})")
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png")
    plt.close(figure)
    try:  # a temporary file and a rename: a link at ``out`` is replaced, never followed
        write_bytes_atomic(out, image.getvalue())
    except OSError as exc:
        raise RlxError(f"cannot write the plot {out}: {exc.strerror or exc}") from exc
    return out
