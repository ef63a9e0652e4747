"""Seed groups beyond one process: the Ray backend on a cluster of two nodes (loopback only, in
a network namespace of the test's own: tests/ray_group_scenarios.py), groups that grow, and
what a remote worker sends back, as a hostile one would send it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ray")

from ray_group_scenarios import namespaces_work, run_isolated

from rlx.errors import CheckpointError, ConfigError
from rlx.groups import GroupTrainer, new_group

cluster = pytest.mark.skipif(
    not namespaces_work(), reason="needs unshare --net (a network namespace) for a loopback cluster"
)


@cluster
def test_a_group_on_a_two_node_ray_cluster_equals_the_local_group(tmp_path):
    """Tabular, batched PPO and batched SAC: every seed directory equal file for file (metrics
    rows apart from time columns, policies and checkpoints byte for byte)."""
    found = run_isolated("equal", tmp_path)
    for agent in ("q-learning", "ppo", "sac"):
        assert found[agent]["differences"] == [], agent
    assert found["ppo"]["chunks"] == [[0, 1], [2, 3]]
    assert found["sac"]["chunks"] == [[0, 1], [2, 3]]


@cluster
def test_a_node_lost_mid_group_costs_only_the_work_since_the_last_checkpoint(tmp_path):
    found = run_isolated("lost-node", tmp_path)
    assert found["had_checkpoint"] and not found["seed_1_done_before"]
    assert found["finished"] == [0, 1, 2, 3] and found["failed"] == {}
    assert any("seeds 0, 1 lost their Ray worker" in line for line in found["notices"])
    assert found["differences"] == []


@cluster
def test_ctrl_c_on_a_ray_group_keeps_the_promises_of_a_local_one(tmp_path):
    found = run_isolated("interrupt", tmp_path)
    assert found["exit"] == 130, found["output"]
    assert found["finals"] == [True, True]
    assert found["reasons"] == ["interrupted", "interrupted"]
    assert found["resumed"] == 0, found["resumed_output"]
    assert found["local"] == 0
    assert found["differences"] == []


def _small(out: Path, seeds: str):
    settings = {"steps": 1500, "progress": False, "checkpoint_every": 0}
    return new_group("q-learning", "FrozenLake-v1", seeds=seeds, settings=settings, out=out, jobs=1)


def test_seeds_added_to_a_group_train_as_in_a_group_made_with_them(tmp_path):
    _small(tmp_path / "grown", "0-1").fit()
    result = GroupTrainer.resume(tmp_path / "grown", add_seeds="2-3", progress=False).fit()
    assert sorted(result.results) == [2, 3] and result.skipped == [0, 1]
    _small(tmp_path / "whole", "0-3").fit()
    record = json.loads((tmp_path / "grown" / "group.json").read_text())
    assert record["seeds"] == [0, 1, 2, 3]
    summary = json.loads((tmp_path / "grown" / "summary.json").read_text())
    whole = json.loads((tmp_path / "whole" / "summary.json").read_text())
    assert [e["final_return"] for e in summary["runs"]] == [
        e["final_return"] for e in whole["runs"]
    ]
    for seed in range(4):
        grown = tmp_path / "grown" / f"seed-{seed}" / "final" / "policy.safetensors"
        assert (
            grown.read_bytes()
            == (tmp_path / "whole" / f"seed-{seed}" / "final" / "policy.safetensors").read_bytes()
        )


def test_adding_seeds_the_group_has_or_over_a_stray_folder_is_refused(tmp_path):
    _small(tmp_path / "g", "0-1").fit()
    with pytest.raises(ConfigError, match="has every seed of --seeds already"):
        GroupTrainer.resume(tmp_path / "g", add_seeds="0-1")
    (tmp_path / "g" / "seed-5").mkdir()
    with pytest.raises(ConfigError, match=r"group\.json does not list seed 5"):
        GroupTrainer.resume(tmp_path / "g", add_seeds="4-5")


@pytest.mark.parametrize(
    "relative",
    ["../escape", "/etc/passwd", "a/../../escape", ""],
    ids=["parent", "absolute", "parent-inside", "empty"],
)
def test_a_remote_worker_cannot_write_outside_its_seed(tmp_path, relative):
    group = _small(tmp_path / "g", "0")
    group.path.mkdir()
    with pytest.raises(CheckpointError, match="cannot write seed 0's files"):
        group._receive(0, {relative: b"x"}, [])
    assert not (tmp_path / "escape").exists()


def test_a_link_in_a_seed_directory_is_never_written_through(tmp_path):
    group = _small(tmp_path / "g", "0")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "metrics.csv").write_text("theirs")
    group.path.mkdir()
    (group.path / "seed-0").mkdir()
    (group.path / "seed-0" / "final").symlink_to(outside)
    with pytest.raises(CheckpointError, match="symbolic link"):
        group._receive(0, {"final/metrics.csv": b"ours"}, [])
    group._receive(0, {"metrics.csv": b"ours"}, ["final/metrics.csv"])
    assert (outside / "metrics.csv").read_text() == "theirs"
    (group.path / "seed-0" / "metrics.csv").unlink()
    (group.path / "seed-0" / "metrics.csv").symlink_to(outside / "metrics.csv")
    group._receive(0, {"metrics.csv": b"ours"}, [])  # the link is replaced, not followed
    assert (outside / "metrics.csv").read_text() == "theirs"
    assert (group.path / "seed-0" / "metrics.csv").read_text() == "ours"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--seeds", "0-1", "--backend", "rey"], "Did you mean: ray?"),
        (["--seeds", "0-1", "--cpus-per-task", "2"], "apply to --backend ray"),
        (["--seeds", "0-1", "--backend", "ray", "--cpus-per-task", "0"], "--cpus-per-task must"),
        (["--seeds", "0-1", "--backend", "ray", "--gpus-per-task", "-1"], "--gpus-per-task must"),
        (["--seeds", "0-1", "--chunk-size", "0"], "--chunk-size must"),
        (["--backend", "ray"], "apply to a group of seeds"),
        (["--address", "127.0.0.1:1"], "apply to a group of seeds"),
    ],
    ids=[
        "backend-typo",
        "cpus-local",
        "cpus-zero",
        "gpus-negative",
        "chunk-zero",
        "no-seeds",
        "address-no-seeds",
    ],
)
def test_bad_placement_is_one_message_and_exit_2(rlx_cli, tmp_path, args, expected):
    out = tmp_path / "g"
    result = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "100", "--out", str(out), *args
    )
    code, _, err = result
    assert code == 2
    assert expected in err
    assert not out.exists()


def test_a_ray_address_nothing_listens_at_is_one_message(rlx_cli, tmp_path):
    out = tmp_path / "g"
    result = rlx_cli(
        "run",
        "q-learning",
        "--env",
        "FrozenLake-v1",
        "--steps",
        "100",
        "--seeds",
        "0-1",
        "--out",
        str(out),
        "--backend",
        "ray",
        "--address",
        "127.0.0.1:1",
    )
    code, _, err = result
    assert code == 2
    assert "cannot reach a Ray cluster at 127.0.0.1:1" in err
    assert not out.exists()


def test_importing_rlx_its_groups_executors_and_cli_leaves_ray_unloaded():
    import subprocess
    import sys

    script = (
        "import sys, rlx, rlx.groups, rlx.executors, rlx.executors.local, rlx.cli, rlx.tune; "
        "print('ray' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
