"""Seeds as an axis: rlx.statistics, and rlx eval / rlx plot on seed groups."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlx.statistics import curve, summarize

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_iqm_of_one_to_eight_is_the_mean_of_three_to_six():
    summary = summarize([1, 2, 3, 4, 5, 6, 7, 8])
    assert summary["n"] == 8
    assert summary["iqm"]["value"] == pytest.approx(4.5)  # (3 + 4 + 5 + 6) / 4
    assert summarize([1, 2, 3, 4, 5, 6, 7, 100])["iqm"]["value"] == pytest.approx(4.5)
    assert summarize([1, 2, 3, 4, 5, 6, 7, 100])["mean"]["value"] == pytest.approx(16)
    assert summarize([1, 2, 3, 4, 5, 6, 7, 100])["median"]["value"] == pytest.approx(4.5)


def test_intervals_contain_the_estimate_and_are_not_empty():
    summary = summarize([0.1, 0.5, 0.4, 0.9, 0.3, 0.7])
    for name in ("iqm", "mean", "median"):
        estimate = summary[name]
        assert estimate["low"] < estimate["value"] < estimate["high"], name


def test_summarize_is_reproducible_with_its_seed():
    values = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    assert summarize(values, seed=7) == summarize(values, seed=7)
    assert summarize(values, seed=7, resamples=2000) != summarize(values, seed=8, resamples=2000)


def test_one_seed_gives_zero_width_intervals():
    summary = summarize([0.75])
    assert summary["n"] == 1
    for name in ("iqm", "mean", "median"):
        assert summary[name] == {"value": 0.75, "low": 0.75, "high": 0.75}


def test_summarize_refuses_no_values_and_non_finite_ones():
    from rlx.errors import ConfigError

    with pytest.raises(ConfigError, match="at least one"):
        summarize([])
    with pytest.raises(ConfigError, match="finite"):
        summarize([1.0, math.nan])


def test_summarize_is_exact_near_the_float_limit():
    assert summarize([1.7e308, 1.7e308])["mean"] == {
        "value": 1.7e308,
        "low": 1.7e308,
        "high": 1.7e308,
    }
    summary = summarize([1.5e308, 1.5e308, 1.0e308, -1.0e308])
    assert summary["mean"]["value"] == pytest.approx(0.75e308)
    assert summary["iqm"]["value"] == pytest.approx(1.25e308)


def test_without_scipy_the_error_names_the_extra(monkeypatch):
    import sys

    from rlx.errors import RlxError

    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    with pytest.raises(RlxError, match=r"pip install 'rlx-core\[stats\]'"):
        summarize([1.0, 2.0])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=12))
def test_summarize_never_raises_and_brackets_its_estimates(values):
    summary = summarize(values, resamples=200)
    assert summary["n"] == len(values)
    for name in ("iqm", "mean", "median"):
        estimate = summary[name]
        assert estimate["low"] <= estimate["value"] <= estimate["high"], (name, estimate)
        assert all(math.isfinite(bound) for bound in estimate.values()), (name, estimate)


def test_importing_the_statistics_and_plots_leaves_scipy_and_matplotlib_unloaded():
    import subprocess
    import sys

    code = (
        "import sys, rlx, rlx.cli, rlx.statistics, rlx.group_results, rlx.plotting; "
        "print([m for m in ('scipy', 'matplotlib', 'torch') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_curve_aligns_seeds_on_steps_and_leaves_out_missing_rows():
    line = curve([[0, 100, 200], [0, 100], [0, 200]], [[1, 2, 3], [3, 4], [5, 6]], "mean")
    assert line.steps == (0, 100, 200)
    assert line.seeds == (3, 2, 2)
    assert line.value == pytest.approx((3.0, 3.0, 4.5))
    assert all(lo <= v <= hi for lo, v, hi in zip(line.low, line.value, line.high, strict=True))


# --- groups on disk -------------------------------------------------------------------------


def _run(path, seed):
    from rlx.trainer import new_run

    settings = {
        "steps": 1500,
        "eval_every": 500,
        "eval_episodes": 5,
        "progress": False,
        "verbose": False,
        "plot": False,
        "tensorboard": False,
    }
    new_run("q-learning", "FrozenLake-v1", seed=seed, settings=settings, out=path).fit()


def _group(path, runs):
    path.mkdir()
    (path / ".rlx-group").write_text(json.dumps({"format": "rlx-group", "version": 1}))
    seeds = sorted(runs)
    (path / "group.json").write_text(
        json.dumps({"agent": "q-learning", "env": "FrozenLake-v1", "seeds": seeds})
    )
    for seed, run in runs.items():
        shutil.copytree(run, path / f"seed-{seed}")
    return path


@pytest.fixture(scope="module")
def seed_runs(tmp_path_factory):
    """Three real q-learning runs on FrozenLake, 1,500 steps each, seeds 0, 1 and 2."""
    root = tmp_path_factory.mktemp("seed-runs")
    runs = {}
    for seed in (0, 1, 2):
        runs[seed] = root / f"run-{seed}"
        _run(runs[seed], seed)
    return runs


@pytest.fixture
def group(seed_runs, tmp_path):
    return _group(tmp_path / "group", seed_runs)


def test_the_seeds_evaluations_line_up_on_the_evaluation_schedule(group):
    """Each seed evaluates a few steps past each multiple of eval_every (at an episode's
    end), never at the same step as another: the curve places them at the multiple."""
    from rlx.group_results import group_curve, open_group

    line = group_curve(open_group(group), "mean")
    assert line.steps == (500, 1000, 1500)
    assert line.seeds == (3, 3, 3)


def test_eval_of_a_group_reports_each_seed_and_the_aggregate(rlx_cli, group):
    code, out, err = rlx_cli("eval", str(group), "--episodes", "3", "--json")
    assert code == 0, err
    document = json.loads(out)
    assert [entry["seed"] for entry in document["seeds"]] == [0, 1, 2]
    assert all(entry["episodes"] == 3 for entry in document["seeds"])
    assert document["agent"] == "q-learning" and document["env"] == "FrozenLake-v1"
    aggregate = document["aggregate"]
    assert aggregate["n"] == 3
    means = [entry["mean_return"] for entry in document["seeds"]]
    assert aggregate == summarize(means)
    assert aggregate["mean"]["value"] == pytest.approx(sum(means) / 3)


def test_eval_of_a_group_evaluates_each_seed_like_its_single_run(rlx_cli, group):
    code, out, _ = rlx_cli("eval", str(group), "--episodes", "4", "--best", "--json")
    assert code == 0
    seed_1 = json.loads(out)["seeds"][1]
    code, out, _ = rlx_cli("eval", str(group / "seed-1"), "--episodes", "4", "--best", "--json")
    assert code == 0 and json.loads(out)["returns"] == seed_1["returns"]


def test_eval_of_a_group_prints_a_table_and_the_intervals(rlx_cli, group):
    code, out, err = rlx_cli("eval", str(group), "--episodes", "2")
    assert code == 0, err
    assert "IQM" in out and "median" in out and "over 3 seeds" in out


def test_a_group_missing_a_seed_directory_is_one_message_to_plot(rlx_cli, group):
    shutil.rmtree(group / "seed-1")
    code, out, err = rlx_cli("plot", str(group))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "seed 1" in err, err


def test_eval_of_a_group_evaluates_the_seeds_with_a_checkpoint_and_names_the_others(rlx_cli, group):
    shutil.rmtree(group / "seed-1")
    code, out, err = rlx_cli("eval", str(group), "--episodes", "2", "--json")
    assert code == 0, err
    assert "notice: seed 1 of" in err and "has no checkpoint yet and is left out" in err
    document = json.loads(out)
    assert [entry["seed"] for entry in document["seeds"]] == [0, 2]
    assert document["left_out"] == [1]


def test_plot_of_two_groups_writes_one_png(rlx_cli, seed_runs, tmp_path):
    first = _group(tmp_path / "first", seed_runs)
    second = _group(tmp_path / "second", {0: seed_runs[0], 2: seed_runs[2]})
    png = tmp_path / "both.png"
    code, out, err = rlx_cli("plot", str(first), str(second), "--out", str(png))
    assert code == 0, err
    assert out.strip() == str(png)
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 10_000


def test_plot_of_one_group_defaults_into_it_and_takes_runs_beside_groups(
    rlx_cli, group, seed_runs, tmp_path
):
    code, out, err = rlx_cli("plot", str(group), "--statistic", "median")
    assert code == 0, err
    assert out.strip() == str(group / "learning_curve.png")
    assert (group / "learning_curve.png").read_bytes()[:8] == PNG_SIGNATURE
    mixed = tmp_path / "mixed.png"
    code, _, err = rlx_cli("plot", str(group), str(seed_runs[0]), "--out", str(mixed))
    assert code == 0, err
    assert mixed.read_bytes()[:8] == PNG_SIGNATURE


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("plot", "{group}", "{group}"), "--out"),
        (("plot", "{group}", "--statistic", "mode"), "unknown --statistic 'mode'"),
        (("plot", "{plain}", "{group}", "--out", "{plain}/x.png"), "neither an rlx run"),
        (("eval", "{plain}"), "{plain}"),
    ],
)
def test_bad_group_inputs_are_one_message(rlx_cli, group, tmp_path, arguments, message):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine")
    names = {"group": group, "plain": plain}
    code, out, err = rlx_cli(*(argument.format(**names) for argument in arguments))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message.format(**names) in err, err
    assert sorted(p.name for p in plain.iterdir()) == ["notes.txt"]
