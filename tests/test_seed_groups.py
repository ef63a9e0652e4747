"""Seed groups: ``rlx run AGENT --seeds 0-2 --jobs 2`` trains one ordinary run per seed in
worker processes, in a group directory that ``--resume`` continues as a whole.

The group is only a way of running the single-seed runs: each ``seed-<k>/`` equals the run
``rlx run AGENT --seed k`` writes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_interrupts import _csv_rows, _process_group, _rlx  # the Ctrl-C harness

from rlx.checkpoint import load_checkpoint
from rlx.errors import ConfigError
from rlx.groups import parse_seeds

#: Seconds any one ``rlx run`` may take before the test gives up on it.
TIMEOUT = 120.0

#: Short runs: an evaluation every 1000 steps, no plot or TensorBoard events.
TRAINER_SETTINGS = """
[trainer]
log_every = 500
eval_every = 1000
eval_episodes = 5
plot = false
tensorboard = false
"""

#: A random agent that fails (as a non-finite loss would) after 600 steps, in seed 1 only.
FAILING_AGENT = """
from rlx.agents.random import RandomAgent
from rlx.errors import TrainingError


class FailsInSeedOne(RandomAgent):
    steps = 0

    def step(self):
        iteration = super().step()
        self.steps += iteration.env_steps
        if self.seed == 1 and self.steps > 600:
            raise TrainingError("the loss became nan")
        return iteration
"""


def _settings(tmp_path: Path) -> tuple[str, str]:
    file = tmp_path / "trainer.toml"
    file.write_text(TRAINER_SETTINGS)
    return "--config", str(file)


def _time_free(rows: list[str]) -> list[list[str]]:
    """metrics.csv rows without the wall-clock columns."""
    header = rows[0].split(",")
    keep = [i for i, name in enumerate(header) if not name.startswith("time/")]
    return [[row.split(",")[i] for i in keep] for row in rows]


def _env_steps(checkpoint: Path) -> int:
    return json.loads((checkpoint / "state.json").read_text())["trainer"]["env_steps"]


def test_a_group_holds_its_marker_record_summary_and_the_single_seed_runs(tmp_path, rlx_cli):
    group = tmp_path / "group"
    args = ("q-learning", "--env", "FrozenLake-v1", "--steps", "2000", *_settings(tmp_path))
    code, _, err = rlx_cli("run", *args, "--seeds", "0,2", "--jobs", "2", "--out", str(group))
    assert code == 0, err
    assert json.loads((group / ".rlx-group").read_text()) == {"format": "rlx-group", "version": 1}
    record = json.loads((group / "group.json").read_text())
    assert (record["agent"], record["env"], record["seeds"]) == (
        "q-learning",
        "FrozenLake-v1",
        [0, 2],
    )
    assert record["settings"]["steps"] == 2000 and record["hyperparameters"] == {}
    assert sorted(p.name for p in group.glob("seed-*")) == ["seed-0", "seed-2"]
    summary = json.loads((group / "summary.json").read_text())
    assert [entry["seed"] for entry in summary["runs"]] == [0, 2]
    assert all(entry["stop_reason"] == "steps" for entry in summary["runs"])
    assert all(entry["env_steps"] >= 2000 for entry in summary["runs"])
    if importlib.util.find_spec("scipy") is not None:
        assert summary["aggregate"]["n"] == 2
    assert "seed 2: stopped (steps)" in err

    single = tmp_path / "single"
    code, _, err = rlx_cli("run", *args, "--seed", "2", "--out", str(single))
    assert code == 0, err
    grouped = (group / "seed-2" / "metrics.csv").read_text().splitlines()
    assert _time_free(grouped) == _time_free((single / "metrics.csv").read_text().splitlines())
    first, second = load_checkpoint(group / "seed-2" / "final"), load_checkpoint(single / "final")
    for key in first.policy.arrays:
        np.testing.assert_array_equal(first.policy.arrays[key], second.policy.arrays[key])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789-, x", max_size=12))
def test_seeds_are_a_list_of_distinct_seeds_or_one_message(text):
    try:
        seeds = parse_seeds(text)
    except ConfigError as exc:
        assert str(exc).startswith("--seeds") and "\n" not in str(exc)
    else:
        assert seeds and len(set(seeds)) == len(seeds)
        assert parse_seeds(",".join(map(str, seeds))) == seeds


def test_seeds_ranges_and_lists_mix():
    assert parse_seeds("0-3,9") == [0, 1, 2, 3, 9]
    assert parse_seeds("7") == [7]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--seeds", "0-1", "--seed", "3"), "not both"),
        (("--seeds", "3-1"), "goes down"),
        (("--seeds", "0,-1"), "not a seed"),
        (("--seeds", "0,1,0"), "given twice"),
        (("--seeds", ""), "empty"),
        (("--seeds", "0-1", "--jobs", "3"), "--jobs must be"),
        (("--seeds", "0-1", "--jobs", "0"), "--jobs must be"),
        (("--jobs", "2"), "--jobs applies"),
    ],
)
def test_bad_seeds_or_jobs_are_one_message_and_write_nothing(tmp_path, rlx_cli, extra, message):
    out = tmp_path / "group"
    code, _, err = rlx_cli("run", "random", "--env", "CartPole-v1", *extra, "--out", str(out))
    assert code == 2
    assert message in err and err.startswith("error: ") and err.count("\n") == 1, err
    assert not out.exists()


def test_resume_skips_finished_seeds_restarts_a_missing_one_and_continues_every_seed(
    tmp_path, rlx_cli
):
    group = tmp_path / "group"
    args = ("random", "--env", "CartPole-v1", "--seeds", "0-1", "--jobs", "2", "--steps", "1000")
    code, _, err = rlx_cli("run", *args, *_settings(tmp_path), "--out", str(group))
    assert code == 0, err
    shutil.rmtree(group / "seed-1")
    code, _, err = rlx_cli("run", "--resume", str(group), "--no-progress")
    assert code == 0, err
    assert "seed 0 already used its budget" in err
    assert "seed-1 is missing; starting seed 1 again from scratch" in err
    runs = json.loads((group / "summary.json").read_text())["runs"]
    assert [entry["stop_reason"] for entry in runs] == ["steps", "steps"]
    code, _, err = rlx_cli("run", "--resume", str(group), "--steps", "2000", "--no-progress")
    assert code == 0, err
    assert all(_env_steps(group / f"seed-{k}" / "final") >= 2000 for k in (0, 1))
    assert json.loads((group / "group.json").read_text())["settings"]["steps"] == 2000
    code, _, err = rlx_cli("run", "--resume", str(group), "--steps", "2000")
    assert code == 2 and "already used its budget" in err and err.count("\n") == 1, err


def test_a_failing_seed_stops_alone_and_the_group_exits_2(tmp_path, rlx_cli, monkeypatch):
    (tmp_path / "failing_agent.py").write_text(FAILING_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned workers get this sys.path too
    group = tmp_path / "group"
    code, _, err = rlx_cli(
        "run", "failing_agent:FailsInSeedOne", "--env", "CartPole-v1", "--seeds", "0-2",
        "--jobs", "2", "--steps", "1500", *_settings(tmp_path), "--out", str(group),
    )  # fmt: skip
    assert code == 2, err
    assert "seed 1: failed: the loss became nan" in err
    assert "error: 1 of 3 seeds failed (seed 1: the loss became nan)" in err
    runs = {
        entry["seed"]: entry for entry in json.loads((group / "summary.json").read_text())["runs"]
    }
    assert runs[1]["stop_reason"] == "failed" and "the loss became nan" in runs[1]["error"]
    assert runs[0]["stop_reason"] == runs[2]["stop_reason"] == "steps"
    assert _env_steps(group / "seed-2" / "final") >= 1500
    # The failed seed wrote no checkpoint, so resuming starts it again from group.json, whose
    # module:Class agent is code that a saved file names: refused without --trust-code.
    assert not (group / "seed-1").exists()
    code, _, err = rlx_cli("run", "--resume", str(group))
    assert code == 2 and "module:Class target" in err and err.count("\n") == 1, err
    assert not (group / "seed-1").exists()


def test_ctrl_c_to_the_group_stops_every_seed_and_resume_completes_it(tmp_path):
    """SIGINT to the whole process group: the workers ignore it, the main process asks each
    seed to stop after its iteration; the seeds that started save final/, and --resume
    finishes them and the seed that never started."""
    group = tmp_path / "group"
    command = _rlx(
        "run", "random", "--env", "CartPole-v1", "--seeds", "0-2", "--jobs", "2",
        "--steps", "100000000", *_settings(tmp_path), "--out", str(group), "--no-progress",
    )  # fmt: skip
    log = tmp_path / "interrupted"
    with _process_group(command, log) as process:
        deadline = time.monotonic() + TIMEOUT
        while _csv_rows(group / "seed-0") < 1 and process.poll() is None:
            assert time.monotonic() < deadline, "the group did not start training in time"
            time.sleep(0.05)
        assert process.poll() is None, Path(f"{log}.err").read_text()
        alone = subprocess.run(
            _rlx("run", "--resume", str(group / "seed-0"), "--steps", "200000000"),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert alone.returncode == 2, alone.stderr
        assert "is in use by another rlx process" in alone.stderr
        assert alone.stderr.count("\n") == 1, alone.stderr
        time.sleep(0.2)
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=TIMEOUT)
    err = Path(f"{log}.err").read_text()
    assert code == 130, err
    assert "Traceback" not in err, err
    assert f"continue with: rlx run --resume {group}" in err, err
    started = sorted(group.glob("seed-*"))
    assert started and all(_env_steps(run / "final") > 0 for run in started)

    budget = max(_env_steps(run / "final") for run in started) + 500
    with _process_group(
        _rlx("run", "--resume", str(group), "--steps", str(budget), "--no-progress"),
        tmp_path / "resumed",
    ) as process:
        code = process.wait(timeout=TIMEOUT)
    err = (tmp_path / "resumed.err").read_text()
    assert code == 0, err
    assert all(_env_steps(group / f"seed-{k}" / "final") >= budget for k in range(3))
    summary = json.loads((group / "summary.json").read_text())
    assert [entry["stop_reason"] for entry in summary["runs"]] == ["steps"] * 3


def test_the_python_api_trains_and_resumes_a_group(tmp_path):
    from rlx.groups import GroupTrainer, new_group

    quiet = {"steps": 600, "eval_every": 300, "eval_episodes": 2, "plot": False}
    group = new_group(
        "random", "CartPole-v1", seeds=[4, 5], jobs=2, settings={**quiet, "tensorboard": False},
        out=tmp_path / "group",
    )  # fmt: skip
    result = group.fit()
    assert sorted(result.results) == [4, 5] and not result.failed and not result.interrupted
    assert result.results[5].run_dir == tmp_path / "group" / "seed-5"
    assert [entry["seed"] for entry in result.summary["runs"]] == [4, 5]
    again = GroupTrainer.resume(tmp_path / "group", steps=900).fit()
    assert all(again.results[seed].env_steps >= 900 for seed in (4, 5))


def test_iqm_is_the_mean_of_the_middle_half():
    from rlx.statistics import iqm, median

    assert iqm([100.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -100.0]) == 3.5
    assert median([3.0, 1.0, 2.0]) == 2.0 and median([4.0, 1.0]) == 2.5


def test_a_script_without_a_main_guard_is_told_to_add_one(tmp_path):
    """Workers are spawned, so they import the script again; without ``if __name__ ==
    "__main__":`` the group would start again in each worker. The worker stops with a message
    that says what to do (before: an AssertionError, or a refusal of the existing group
    directory), and the group ends crashed."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from rlx.groups import new_group\n"
        "group = new_group('random', 'CartPole-v1', seeds=[0, 1], jobs=2,"
        f" out={str(tmp_path / 'g')!r}, settings={{'steps': 200, 'progress': False}})\n"
        "result = group.fit()\n"
        "print('crashed', result.crashed)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert "can only join a started process" not in done.stderr, done.stderr[-2000:]
    assert 'start the group under `if __name__ == "__main__":`' in done.stderr, done.stderr[-2000:]
    assert "crashed True" in done.stdout
