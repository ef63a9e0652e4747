"""``rlx plot --x episodes``: a run's curves against the training episodes finished."""

from __future__ import annotations

import csv

import pytest

import rlx
from rlx.errors import ConfigError
from rlx.trainer import Trainer

pytest.importorskip("matplotlib", reason="optional extra rlx-core[plot]")


@pytest.fixture
def run(tmp_path):
    agent = rlx.make("random", "CartPole-v1", seed=0)
    settings = {"eval_every": 500, "eval_episodes": 2, "log_every": 250, "progress": False}
    Trainer(
        agent, steps=1000, run_dir=tmp_path / "run", plot=False, verbose=False, **settings
    ).fit()
    return tmp_path / "run"


def _drawn(monkeypatch, draw):
    """The figure ``draw()`` makes, kept instead of written."""
    import rlx.plotting

    figures = []
    monkeypatch.setattr(rlx.plotting, "_write_png", lambda figure, out: figures.append(figure))
    draw()
    return figures[0].axes[0]


def test_a_run_is_drawn_against_its_episodes(run, monkeypatch):
    from rlx.plotting import plot_run

    with open(run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    training = [int(row["episodes"]) for row in rows if row["train/return_mean"]]
    steps = [int(row["env_steps"]) for row in rows if row["train/return_mean"]]
    evaluated = [int(row["episodes"]) for row in rows if row["eval/return_mean"]]
    assert training == sorted(training) and training[-1] > 40  # episodes, not steps

    ax = _drawn(monkeypatch, lambda: plot_run(run, x="episodes"))
    lines = {line.get_label(): list(line.get_xdata()) for line in ax.get_lines()}
    assert lines["training (mean)"] == training
    assert lines["evaluation (± std)"] == evaluated
    assert ax.get_xlabel() == "episodes"
    ax = _drawn(monkeypatch, lambda: plot_run(run))
    assert ax.get_xlabel() == "environment steps"
    assert list(ax.get_lines()[0].get_xdata()) == steps


def test_a_metrics_file_without_the_column_is_one_error(run):
    from rlx.errors import RlxError
    from rlx.plotting import plot_run

    path = run / "metrics.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, [key for key in rows[0] if key != "episodes"])
        writer.writeheader()
        writer.writerows({k: v for k, v in row.items() if k != "episodes"} for row in rows)
    with pytest.raises(RlxError, match="no episodes column"):
        plot_run(run, x="episodes")


def test_the_cli_draws_episodes_and_refuses_a_bad_axis(rlx_cli, run, tmp_path):
    code, _, err = rlx_cli("plot", str(run), "--x", "episodes", "--out", str(tmp_path / "e.png"))
    assert code == 0, err
    assert (tmp_path / "e.png").stat().st_size > 0
    code, _, err = rlx_cli("plot", str(run), "--x", "episode")
    assert code == 2 and "Did you mean: episodes" in err and "Traceback" not in err
    code, _, err = rlx_cli("plot", str(run), str(run), "--x", "episodes", "--out", "x.png")
    assert code == 2 and "draws one run" in err


def test_plot_run_refuses_an_unknown_axis(run):
    from rlx.plotting import plot_run

    with pytest.raises(ConfigError, match="choose one of steps, episodes"):
        plot_run(run, x="time")
