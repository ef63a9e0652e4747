"""Comparing and combining seed groups (issue 41): ``rlx eval G1 G2 ...`` and ``rlx plot G1
G2 ...`` show one row and one curve per group, named by its directory; ``rlx merge G1 G2 ...
--out OUT`` makes the group that one machine would have made from groups run apart, and
refuses (one message, exit 2, nothing written) what would make a wrong group: differing
configurations, shared seeds, links, an OUT that exists, a source that is not a group.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from rlx.statistics import summarize

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Short, quiet q-learning runs on FrozenLake: evaluations at 500 and 1000 steps.
QUIET = {
    "steps": 1000,
    "eval_every": 500,
    "eval_episodes": 3,
    "progress": False,
    "verbose": False,
    "plot": False,
    "tensorboard": False,
}


def _group(out: Path, seeds: str, **hyperparameters: float) -> Path:
    from rlx.groups import new_group

    group = new_group(
        "q-learning", "FrozenLake-v1", seeds=seeds, jobs=1, settings=QUIET,
        hyperparameters=hyperparameters, out=out,
    )  # fmt: skip
    result = group.fit()
    assert not result.failed and not result.interrupted
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Three real groups: lake-a (seeds 0-1) and lake-b (seeds 2-3) of one configuration,
    lake-c (seeds 4-5) with another learning rate. Tests copy them before changing them."""
    root = tmp_path_factory.mktemp("groups")
    return {
        "a": _group(root / "lake-a", "0-1"),
        "b": _group(root / "lake-b", "2-3"),
        "c": _group(root / "lake-c", "4-5", learning_rate=0.5),
    }


@pytest.fixture
def groups(made, tmp_path):
    """Copies of the module's groups, in tmp_path/sources/, for a test to change."""
    copies = {}
    for key, path in made.items():
        copies[key] = tmp_path / "sources" / path.name
        shutil.copytree(path, copies[key], symlinks=True)
    return copies


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (a lock's pid file aside), links as their
    target's name: what a test compares before and after a command."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        if path.is_symlink():
            found[relative] = b"-> " + str(path.readlink()).encode()
        elif path.is_file() and path.name != ".lock.pid":
            found[relative] = path.read_bytes()
    return found


def _time_free(path: Path) -> list[list[str]]:
    """metrics.csv's rows without the wall-clock columns."""
    rows = path.read_text().splitlines()
    header = rows[0].split(",")
    keep = [i for i, name in enumerate(header) if not name.startswith("time/")]
    return [[row.split(",")[i] for i in keep] for row in rows]


# --- names ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("paths", "names"),
    [
        (["runs/lake-q", "runs/lake-sarsa"], ["lake-q", "lake-sarsa"]),
        (["a/run", "b/run", "c"], ["a/run", "b/run", "c"]),
        (["x/a/run", "y/a/run"], ["x/a/run", "y/a/run"]),
        (["/a", "/b/a"], ["a", "b/a"]),
        (["g", "g"], ["g", "g (2)"]),
    ],
    ids=["distinct", "same-name", "same-parent-name", "one-shorter", "same-path-twice"],
)
def test_groups_are_named_by_their_directories_told_apart_by_parents_or_a_number(paths, names):
    from rlx.group_compare import group_names

    assert group_names(paths) == names


# --- rlx eval and rlx plot of several groups ----------------------------------------------------


def test_eval_of_two_groups_prints_one_row_per_group_named_by_its_directory(rlx_cli, made):
    code, out, err = rlx_cli("eval", str(made["a"]), str(made["c"]), "--episodes", "2")
    assert code == 0, err
    rows = [line for line in out.splitlines() if "lake-" in line]
    assert len(rows) == 2 and "lake-a" in rows[0] and "lake-c" in rows[1]
    assert all("q-learning" in row and "FrozenLake-v1" in row for row in rows)
    assert "IQM" in out and "median" in out and "95% bootstrap" in out


def test_eval_json_of_groups_and_a_run_aggregates_each_as_its_own_rlx_eval(rlx_cli, made, tmp_path):
    run = tmp_path / "lone-run"
    shutil.copytree(made["b"] / "seed-2", run)
    code, out, err = rlx_cli(
        "eval", str(made["a"]), str(made["c"]), str(run), "--episodes", "2", "--json"
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["policy"] == "latest"
    entries = document["groups"]
    assert [entry["name"] for entry in entries] == ["lake-a", "lake-c", "lone-run"]
    assert [[seed["seed"] for seed in entry["seeds"]] for entry in entries] == [[0, 1], [4, 5], [2]]
    for entry in entries:
        assert entry["aggregate"] == summarize([seed["mean_return"] for seed in entry["seeds"]])
    code, out, _ = rlx_cli("eval", str(made["a"]), "--episodes", "2", "--json")
    assert code == 0 and json.loads(out)["seeds"] == entries[0]["seeds"]  # as rlx eval G


def test_eval_of_several_groups_refuses_the_single_run_options(rlx_cli, made, tmp_path):
    code, out, err = rlx_cli(
        "eval", str(made["a"]), str(made["b"]), "--video", str(tmp_path / "v.mp4")
    )
    assert code == 2 and out == "" and err.count("\n") == 1 and "--video" in err, err
    assert not (tmp_path / "v.mp4").exists()


def test_plot_of_groups_labels_each_curve_by_its_directory(rlx_cli, made, tmp_path, monkeypatch):
    import rlx.plotting

    first, second = tmp_path / "x" / "lake", tmp_path / "y" / "lake"
    shutil.copytree(made["a"], first)
    shutil.copytree(made["c"], second)
    drawn = {}
    write_png = rlx.plotting._write_png

    def keep_legend(figure, out):
        axes = figure.axes[0]
        drawn["labels"] = [text.get_text() for text in axes.get_legend().get_texts()]
        drawn["title"] = axes.get_title()
        drawn["lines"] = [list(line.get_xdata()) for line in axes.get_lines()]
        write_png(figure, out)

    monkeypatch.setattr(rlx.plotting, "_write_png", keep_legend)
    png = tmp_path / "both.png"
    code, _, err = rlx_cli("plot", str(first), str(second), "--out", str(png))
    assert code == 0, err
    assert drawn["labels"] == ["x/lake (2 seeds)", "y/lake (2 seeds)"]
    assert drawn["title"].startswith("q-learning on FrozenLake-v1\n")
    assert drawn["lines"] == [[500, 1000], [500, 1000]]
    assert png.read_bytes()[:8] == PNG_SIGNATURE


@pytest.mark.parametrize(
    ("steps", "eval_every", "plotted"),
    [(700, 500, (500, 700)), (700, 10_000, (700,)), (1000, 500, (500, 1000))],
    ids=["budget-between-multiples", "budget-before-the-first-multiple", "budget-a-multiple"],
)
def test_the_final_evaluation_is_plotted_at_the_step_budget(tmp_path, steps, eval_every, plotted):
    from rlx.group_results import group_curve, run_as_group
    from rlx.trainer import new_run

    settings = {**QUIET, "steps": steps, "eval_every": eval_every}
    new_run("q-learning", "FrozenLake-v1", seed=0, settings=settings, out=tmp_path / "run").fit()
    assert group_curve(run_as_group(tmp_path / "run"), "mean").steps == plotted


# --- rlx merge ------------------------------------------------------------------------------


def test_merge_makes_the_group_one_machine_would_have_made(rlx_cli, groups, tmp_path):
    out = tmp_path / "merged" / "lake"
    before = {key: _files(path) for key, path in groups.items()}
    code, stdout, err = rlx_cli("merge", str(groups["b"]), str(groups["a"]), "--out", str(out))
    assert code == 0, err
    assert "merged 4 seeds of q-learning on FrozenLake-v1" in stdout and str(out) in stdout
    assert {key: _files(path) for key, path in groups.items()} == before  # sources untouched
    assert sorted(p.name for p in out.parent.iterdir()) == ["lake"]  # no building folder left
    assert json.loads((out / ".rlx-group").read_text()) == {"format": "rlx-group", "version": 1}
    record = json.loads((out / "group.json").read_text())
    source = json.loads((groups["a"] / "group.json").read_text())
    assert record["seeds"] == [0, 1, 2, 3]
    assert sorted(sorted(chunk) for chunk in record["chunks"]) == [[0], [1], [2], [3]]
    assert {k: v for k, v in record.items() if k not in ("seeds", "chunks", "merged_from")} == {
        k: v for k, v in source.items() if k not in ("seeds", "chunks")
    }
    assert record["merged_from"] == [
        {"group": str(groups["b"].resolve()), "seeds": [2, 3]},
        {"group": str(groups["a"].resolve()), "seeds": [0, 1]},
    ]
    for key, seeds in (("a", (0, 1)), ("b", (2, 3))):
        for seed in seeds:
            copied = _files(out / f"seed-{seed}")
            assert copied == {
                name: data
                for name, data in _files(groups[key] / f"seed-{seed}").items()
                if name != ".lock"
            }
    summary = json.loads((out / "summary.json").read_text())
    entries = {
        entry["seed"]: entry
        for key in ("a", "b")
        for entry in json.loads((groups[key] / "summary.json").read_text())["runs"]
    }
    assert [entry["seed"] for entry in summary["runs"]] == [0, 1, 2, 3]
    for entry in summary["runs"]:
        assert entry["run_dir"] == str(out / f"seed-{entry['seed']}")
        assert {**entry, "run_dir": None} == {**entries[entry["seed"]], "run_dir": None}
    finals = [entries[seed]["final_return"] for seed in (0, 1, 2, 3)]
    assert summary["aggregate"] == summarize(finals)


def test_a_merged_group_is_read_by_eval_plot_and_load(rlx_cli, groups, tmp_path):
    import rlx

    out = tmp_path / "merged"
    assert rlx_cli("merge", str(groups["a"]), str(groups["b"]), "--out", str(out))[0] == 0
    code, stdout, err = rlx_cli("eval", str(out), "--episodes", "2", "--json")
    assert code == 0, err
    assert [entry["seed"] for entry in json.loads(stdout)["seeds"]] == [0, 1, 2, 3]
    code, stdout, err = rlx_cli("plot", str(out))
    assert code == 0, err
    assert (out / "learning_curve.png").read_bytes()[:8] == PNG_SIGNATURE
    assert rlx.load(out / "seed-3").seed == 3


def test_resuming_a_merged_group_continues_each_seed_as_its_own_group_would(
    rlx_cli, groups, tmp_path
):
    out = tmp_path / "merged"
    assert rlx_cli("merge", str(groups["a"]), str(groups["b"]), "--out", str(out))[0] == 0
    code, _, err = rlx_cli("run", "--resume", str(out), "--steps", "1500")
    assert code == 0, err
    code, _, err = rlx_cli("run", "--resume", str(groups["a"]), "--steps", "1500")
    assert code == 0, err
    for seed in (0, 1):
        merged, alone = out / f"seed-{seed}", groups["a"] / f"seed-{seed}"
        policy = "final/policy.safetensors"
        assert (merged / policy).read_bytes() == (alone / policy).read_bytes()
        assert _time_free(merged / "metrics.csv") == _time_free(alone / "metrics.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert all(entry["env_steps"] >= 1500 for entry in summary["runs"])


def test_merge_keeps_each_sources_batches_and_the_most_workers(rlx_cli, groups, tmp_path):
    for key, chunks, jobs in (("a", [[0, 1]], 1), ("b", [[2, 3]], 3)):
        record = json.loads((groups[key] / "group.json").read_text())
        (groups[key] / "group.json").write_text(
            json.dumps({**record, "chunks": chunks, "jobs": jobs})
        )
    out = tmp_path / "merged"
    code, _, err = rlx_cli("merge", str(groups["a"]), str(groups["b"]), "--out", str(out))
    assert code == 0, err
    record = json.loads((out / "group.json").read_text())
    assert record["chunks"] == [[0, 1], [2, 3]] and record["jobs"] == 3


def test_a_seed_its_summary_does_not_describe_is_summarised_from_its_files(
    rlx_cli, groups, tmp_path
):
    """A group killed before it wrote summary.json: each seed's entry is read from its
    final/ checkpoint and the final evaluation that metrics.csv logged."""
    recorded = json.loads((groups["a"] / "summary.json").read_text())["runs"]
    (groups["a"] / "summary.json").unlink()
    out = tmp_path / "merged"
    code, _, err = rlx_cli("merge", str(groups["a"]), str(groups["b"]), "--out", str(out))
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    for entry, source in zip(summary["runs"][:2], recorded, strict=True):
        assert entry["seed"] == source["seed"] and entry["stop_reason"] == "steps"
        assert entry["env_steps"] == source["env_steps"]
        assert entry["final_return"] == pytest.approx(source["final_return"], rel=1e-5)


def _link_a_seed(groups, tmp_path):
    moved = tmp_path / "elsewhere"
    (groups["b"] / "seed-3").rename(moved)
    (groups["b"] / "seed-3").symlink_to(moved)
    return [str(groups["a"]), str(groups["b"])], "is a symbolic link"


def _link_inside_a_seed(groups, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not a run's\n")
    (groups["b"] / "seed-2" / "notes.txt").symlink_to(secret)
    return [str(groups["a"]), str(groups["b"])], "seed-2/notes.txt is a symbolic link"


def _overlapping_seeds(groups, tmp_path):
    twin = tmp_path / "twin"
    shutil.copytree(groups["a"], twin)
    return [str(groups["a"]), str(groups["b"]), str(twin)], "seeds 0-1 of"


def _other_hyperparameters(groups, tmp_path):
    return [str(groups["a"]), str(groups["c"])], "hyperparameters.learning_rate = (not set)"


def _other_budget(groups, tmp_path):
    record = json.loads((groups["b"] / "group.json").read_text())
    record["settings"]["steps"] = 2000
    (groups["b"] / "group.json").write_text(json.dumps(record))
    return [str(groups["a"]), str(groups["b"])], "settings.steps = 1000"


def _out_exists(groups, tmp_path):
    (tmp_path / "out").mkdir()
    return [str(groups["a"]), str(groups["b"])], "already exists"


def _out_is_a_link(groups, tmp_path):
    (tmp_path / "out").symlink_to(tmp_path / "nowhere")
    return [str(groups["a"]), str(groups["b"])], "is a symbolic link"


def _not_a_group(groups, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine")
    return [str(groups["a"]), str(plain)], "is not a seed group"


def _a_single_run(groups, tmp_path):
    return [str(groups["a"]), str(groups["b"] / "seed-2")], "it is a single run"


def _given_twice(groups, tmp_path):
    return [str(groups["a"]), str(groups["a"])], "is given twice"


def _one_group(groups, tmp_path):
    return [str(groups["a"])], "two groups or more"


def _code_named(groups, tmp_path):
    for key in ("a", "b"):
        path = groups[key] / "group.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "agent": "evilmod:Agent"}))
        for run in groups[key].glob("seed-*"):
            config = json.loads((run / "config.json").read_text())
            (run / "config.json").write_text(json.dumps({**config, "agent": "evilmod:Agent"}))
    return [str(groups["a"]), str(groups["b"])], "evilmod:Agent"


HOSTILE = {
    "seed-directory-is-a-link": _link_a_seed,
    "link-inside-a-seed": _link_inside_a_seed,
    "overlapping-seeds": _overlapping_seeds,
    "other-hyperparameters": _other_hyperparameters,
    "other-budget": _other_budget,
    "out-exists": _out_exists,
    "out-is-a-link": _out_is_a_link,
    "not-a-group": _not_a_group,
    "a-single-run": _a_single_run,
    "given-twice": _given_twice,
    "one-group": _one_group,
    "code-named-without-trust-code": _code_named,
}


@pytest.mark.parametrize("case", list(HOSTILE), ids=list(HOSTILE))
def test_a_merge_that_would_make_a_wrong_group_is_one_message_and_writes_nothing(
    rlx_cli, groups, tmp_path, case
):
    arguments, message = HOSTILE[case](groups, tmp_path)
    before = _files(tmp_path)
    code, out, err = rlx_cli("merge", *arguments, "--out", str(tmp_path / "out"))
    assert code == 2 and out == "", err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert _files(tmp_path) == before  # no OUT, no building folder, sources as they were
    assert "evilmod" not in sys.modules


@pytest.mark.parametrize("where", ["", "seed-3"], ids=["the-group", "one-seed"])
def test_a_group_in_use_by_another_rlx_process_is_not_merged(rlx_cli, groups, tmp_path, where):
    """A group, or one seed of it, that a process trains (its lock held) is refused, not
    copied halfway through a checkpoint."""
    import subprocess

    held = groups["b"] / where

    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from rlx.runs import RunDirectory; "
         "held = RunDirectory(sys.argv[1]); held.lock(); print('locked', flush=True); "
         "time.sleep(60)",
         str(held)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        code, out, err = rlx_cli(
            "merge", str(groups["a"]), str(groups["b"]), "--out", str(tmp_path / "out")
        )
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "in use by another rlx process" in err and str(held) in err, err
    assert not (tmp_path / "out").exists()
