"""Learning curves of a run as a PNG (needs matplotlib: ``pip install rlx-core[plot]``).

The returns panel shows training episodes and evaluations against environment steps (or
the training episodes finished); when
the agent logs ``cumulative_regret`` (bandit agents do), a second panel shows the regret.
:func:`plot_groups` draws seed groups instead: a statistic over seeds of the evaluation return
with its bootstrap band (also needs scipy: ``pip install rlx-core[stats]``).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError, RlxError, did_you_mean
from rlx.files import write_bytes_atomic
from rlx.runs import PLOT_FILE, RunDirectory, read_metrics

REGRET_COLUMN = "agent/cumulative_regret"
#: What the x-axis of a run's plot counts: its name, the metrics.csv column and the label.
X_AXES = {"steps": ("env_steps", "environment steps"), "episodes": ("episodes", "episodes")}


def check_x(x: str) -> str:
    """``x`` if it names an x-axis (:data:`X_AXES`), else a ConfigError with a did-you-mean."""
    if x not in X_AXES:
        raise ConfigError(
            f"unknown x-axis {x!r}; choose one of {', '.join(X_AXES)}." + did_you_mean(x, X_AXES)
        )
    return x


def _series(
    rows: list[dict[str, str]], column: str, x: str = "env_steps"
) -> tuple[list[int], list[float]]:
    steps, values = [], []
    for row in rows:
        if row.get(column) and row.get(x):
            steps.append(int(row[x]))
            values.append(float(row[column]))
    return steps, values


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RlxError("plotting needs matplotlib: pip install 'rlx-core[plot]'") from exc
    return plt


def _write_png(figure: Any, out: Path) -> None:
    import matplotlib.pyplot as plt

    image = io.BytesIO()
    figure.savefig(image, format="png")
    plt.close(figure)
    try:  # a temporary file and a rename: a link at ``out`` is replaced, never followed
        write_bytes_atomic(out, image.getvalue())
    except OSError as exc:
        raise RlxError(f"cannot write the plot {out}: {exc.strerror or exc}") from exc


def plot_run(run_dir: str | Path, out: str | Path | None = None, x: str = "steps") -> Path:
    """Draw the run's returns (and regret, if logged) against environment steps, or with
    ``x="episodes"`` against the training episodes finished (metrics.csv's ``episodes``
    column); returns the PNG."""
    column, label = X_AXES[check_x(x)]
    plt = _pyplot()
    run = RunDirectory.open(run_dir)
    if not run.metrics_file.is_file():
        raise RlxError(f"{run.path} has no {run.metrics_file.name} to plot")
    columns, rows = read_metrics(run.metrics_file)
    if column not in columns:
        raise RlxError(f"{run.metrics_file} has no {column} column to put on the x-axis")
    train_steps, train = _series(rows, "train/return_mean", column)
    eval_steps, evaluation = _series(rows, "eval/return_mean", column)
    _, spread = _series(rows, "eval/return_std", column)
    regret_steps, regret = _series(rows, REGRET_COLUMN, column)
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
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0, 0].set_title(f"{config['agent']} on {config['env']} (seed {config['seed']})")
    figure.tight_layout()
    _write_png(figure, out)
    return out


def plot_groups(
    paths: Sequence[str | Path], out: str | Path | None = None, statistic: str = "iqm"
) -> Path:
    """Draw, per seed group, ``statistic`` of the evaluation return over its seeds against
    environment steps, with a 95% stratified-bootstrap band (Agarwal et al. 2021).

    ``paths`` are groups or single runs (a run counts as a group of one seed: no band). Each
    evaluation is placed at the multiple of ``eval_every`` it was due at, where the seeds line
    up (:func:`rlx.group_results.evaluation_curve`); a seed without an evaluation at a step is
    left out at that step, and the legend says at how many steps that happened. Several
    groups are labelled by their directories' names (:func:`rlx.group_compare.group_names`).
    The PNG goes to ``out``, by default ``GROUP/learning_curve.png`` when there is one path;
    several paths need ``out``.
    """
    from rlx.group_compare import group_names, open_groups
    from rlx.group_results import group_curve
    from rlx.statistics import STATISTICS

    if statistic not in STATISTICS:
        raise RlxError(f"unknown statistic {statistic!r}; choose one of {', '.join(STATISTICS)}")
    if not paths:
        raise RlxError("plot needs at least one group or run directory")
    if out is None and len(paths) > 1:
        raise RlxError(f"{len(paths)} groups or runs make one figure: name its file with --out")
    groups = open_groups(paths)
    curves = [group_curve(group, statistic) for group in groups]
    labels = [group.label for group in groups]
    shared = len({(group.agent, group.env) for group in groups}) == 1
    if len(groups) > 1:
        labels = [
            f"{name}{'' if shared else f': {group.agent} on {group.env}'} "
            f"({len(group.seeds)} seed{'s' if len(group.seeds) != 1 else ''})"
            for name, group in zip(group_names(paths), groups, strict=True)
        ]
    target = Path(out) if out is not None else groups[0].path / PLOT_FILE
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (group, line, label) in enumerate(zip(groups, curves, labels, strict=True)):
        color = colors[index % len(colors)]
        ax.fill_between(line.steps, line.low, line.high, color=color, alpha=0.2, linewidth=0)
        short = sum(count < len(group.seeds) for count in line.seeds)
        steps = f"{short} step{'s' if short != 1 else ''}"
        label = label if not short else f"{label[:-1]}; fewer at {steps})"
        ax.plot(line.steps, line.value, "o-", color=color, markersize=3, label=label)
    name = {"iqm": "IQM", "mean": "mean", "median": "median"}[statistic]
    ax.set_xlabel("environment steps")
    ax.set_ylabel(f"evaluation return ({name} over seeds)")
    title = f"{name} of the evaluation return, 95% bootstrap confidence band"
    if len(groups) > 1 and shared:
        title = f"{groups[0].agent} on {groups[0].env}\n{title}"
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    figure.tight_layout()
    _write_png(figure, target)
    return target
