"""``rlx tune`` on many machines: Optuna's storages (database, journal file, gRPC proxy), exactly
``--trials`` trials across workers, a dead worker's trial failed and retried, the sampler and
pruner choices, and outputs that name where a trial ran. Workers are processes on this machine;
the gRPC proxy listens on 127.0.0.1 only. Trials are q-learning on FrozenLake (rlx-classical).
"""

from __future__ import annotations

import csv
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from rlx.errors import ConfigError  # noqa: E402
from rlx.tune import tune  # noqa: E402
from rlx.tune.settings import Settings  # noqa: E402
from rlx.tune.storage import open_storage  # noqa: E402
from rlx.tune.study import OVER_BUDGET, WORKER, within_budget  # noqa: E402
from rlx.tune.workers import _sampler  # noqa: E402

SPACE = """
learning_rate = {low = 0.05, high = 0.9}
gamma = [0.9, 0.95, 0.99]
epsilon_start = 1.0
epsilon_end = 0.05
epsilon_decay_steps = 1500
"""
QUICK = ("--steps", "2000", "--eval-every", "500", "--eval-episodes", "20")
QUICK_KWARGS = {"steps": 2000, "eval_every": 500, "eval_episodes": 20}
STUDY = "q-learning-FrozenLake-v1"
#: How long a test waits for a worker process before it fails (never reached when all is well).
PATIENCE = 120


def _space(tmp_path: Path) -> str:
    path = tmp_path / "space.toml"
    path.write_text(SPACE)
    return str(path)


def _rlx(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlx.cli", *args]


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "trials.csv", newline="") as f:
        return list(csv.DictReader(f))


def _trials(storage: str) -> list:
    return optuna.load_study(study_name=STUDY, storage=open_storage(storage)).trials


def _done(trials: list) -> list:
    return [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]


# -- storages ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "journal"], ids=["sqlite", "journal"])
def test_two_processes_on_one_study_finish_exactly_the_budget(tmp_path, kind):
    """Two commands (one with two worker processes) on one study: exactly --trials done
    trials; a trial created past the budget by a race never trained (no folder), and no
    output lists it or names a folder that does not exist."""
    storage = (
        f"sqlite:///{tmp_path / 'shared.db'}" if kind == "sqlite" else f"journal:{tmp_path}/s.log"
    )
    common = ("tune", "q-learning", "--env", "FrozenLake-v1", "--trials", "4", *QUICK)
    options = ("--space", _space(tmp_path), "--storage", storage)
    processes = [
        subprocess.Popen(
            _rlx(*common, *options, "--out", str(tmp_path / side), *extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for side, extra in (("a", ("--workers", "2")), ("b", ()))
    ]
    for process in processes:
        _, err = process.communicate(timeout=PATIENCE)
        assert process.returncode == 0, err
    trials = _trials(storage)
    done = _done(trials)
    assert len(done) == 4
    over = [t for t in trials if t.user_attrs.get(OVER_BUDGET)]
    assert all(t.state.name == "FAIL" and "run_dir" not in t.user_attrs for t in over)
    folders = {
        p.name for side in ("a", "b") for p in (tmp_path / side / "trials").glob("*") if p.is_dir()
    }
    assert folders == {str(t.number) for t in done}
    finished = []
    for side in ("a", "b"):
        # each side's outputs list the whole study as it stood when that side ended (the
        # side that ended first may list the other's trials as running)
        rows = _rows(tmp_path / side)
        assert {row["number"] for row in rows} <= {str(t.number) for t in trials} - {
            str(t.number) for t in over
        }
        finished.append(sum(row["state"] in ("complete", "pruned") for row in rows))
        assert all(Path(row["run_dir"]).is_dir() for row in rows if row["run_dir"])
    assert max(finished) == 4


def test_a_trial_created_past_the_budget_is_failed_before_it_trains_and_not_listed(
    tmp_path, capsys
):
    """Trial 1 runs in another worker (this test holds it): with --trials 3 this worker runs
    trial 2, and trial 3, created while 0 and 2 are done and 1 runs, gives way."""
    storage = f"journal:{tmp_path / 's.log'}"
    kwargs = {"space": {"learning_rate": 0.5}, "storage": storage, **QUICK_KWARGS}
    tune("q-learning", "FrozenLake-v1", trials=1, out=tmp_path / "out", **kwargs)
    study = optuna.load_study(study_name=STUDY, storage=open_storage(storage))
    held = study.ask()  # another worker's trial, alive: this test's own process
    worker = {"host": socket.gethostname(), "pid": os.getpid(), "trial": held.number}
    held.set_user_attr(WORKER, worker)
    result = tune("q-learning", "FrozenLake-v1", trials=3, out=tmp_path / "out", **kwargs)
    trials = _trials(storage)
    assert [t.state.name for t in trials] == ["COMPLETE", "RUNNING", "COMPLETE", "FAIL"]
    assert trials[3].user_attrs[OVER_BUDGET] is True
    assert not (tmp_path / "out" / "trials" / "3").exists()
    assert [row["number"] for row in _rows(tmp_path / "out")] == ["0", "1", "2"]
    assert result.counts == {"complete": 2, "running": 1}
    assert "trial 3 not run: other workers hold the study's 3 trials" in capsys.readouterr().err


def test_within_budget_lets_the_earlier_of_two_racing_trials_win():
    """Both trials exist before either checks: the later one gives way to the earlier,
    whichever checks first."""
    study = optuna.create_study()
    study.tell(study.ask(), 1.0)
    first, second = study.ask(), study.ask()
    assert not within_budget(study, second.number, 2)
    assert within_budget(study, first.number, 2)


def test_outputs_name_a_trial_run_on_another_machine_host_colon_folder(tmp_path, monkeypatch):
    storage = f"journal:{tmp_path / 's.log'}"
    kwargs = {"space": _space(tmp_path), "storage": storage, **QUICK_KWARGS}
    out = tmp_path / "out"
    tune("q-learning", "FrozenLake-v1", trials=2, out=out, prune=False, **kwargs)
    here = socket.gethostname()
    rows = _rows(out)
    assert [row["run_dir"] for row in rows] == [str(out / "trials" / n) for n in ("0", "1")]
    # the same study's outputs written on another machine, where trial 1's folder is gone
    import shutil

    shutil.rmtree(out / "trials" / "1")
    monkeypatch.setattr(socket, "gethostname", lambda: "another-machine")
    other = tmp_path / "other"
    tune("q-learning", "FrozenLake-v1", trials=2, out=other, prune=False, **kwargs)
    named = [row["run_dir"] for row in _rows(other)]
    assert named == [f"{here}:{out / 'trials' / n}" for n in ("0", "1")]
    assert f"# its run: {here}:{out / 'trials'}" in (other / "best.toml").read_text()
    monkeypatch.undo()
    tune("q-learning", "FrozenLake-v1", trials=2, out=out, prune=False, **kwargs)
    assert [row["run_dir"] for row in _rows(out)] == [str(out / "trials" / "0"), ""]


def test_a_study_behind_optunas_grpc_proxy(tmp_path):
    """Optuna's gRPC proxy on 127.0.0.1 in front of an SQLite file: rlx tune's trials land in
    the file."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    database = f"sqlite:///{tmp_path / 'behind.db'}"
    serve = (
        "import optuna, sys\n"
        "optuna.logging.set_verbosity(optuna.logging.ERROR)\n"
        "storage = optuna.storages.RDBStorage(sys.argv[1])\n"
        "optuna.storages.run_grpc_proxy_server(storage, host='127.0.0.1', port=int(sys.argv[2]))\n"
    )
    server = subprocess.Popen([sys.executable, "-c", serve, database, str(port)])
    try:
        result = tune(
            "q-learning",
            "FrozenLake-v1",
            trials=3,
            storage=f"grpc://127.0.0.1:{port}",
            space=_space(tmp_path),
            out=tmp_path / "out",
            **QUICK_KWARGS,
        )
    finally:
        server.kill()
        server.wait(timeout=PATIENCE)
    assert sum(result.counts.get(state, 0) for state in ("complete", "pruned")) == 3
    assert len(_done(_trials(database))) == 3


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        ("study.log", "give journal:study.log for Optuna's journal file"),
        ("journal:/no/such/folder/s.log", "the folder /no/such/folder does not exist"),
        ("grpc://127.0.0.1", "a gRPC storage proxy is grpc://HOST:PORT"),
    ],
    ids=["bare-path", "journal-no-folder", "grpc-no-port"],
)
def test_a_storage_no_worker_could_open_is_refused_with_exit_2(
    rlx_cli, tmp_path, storage, expected
):
    code, _, err = rlx_cli(
        "tune", "q-learning", "--env", "FrozenLake-v1", "--storage", storage, *QUICK,
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 2, err
    assert expected in " ".join(err.split())
    assert not (tmp_path / "out").exists()


def test_an_unreachable_grpc_proxy_is_one_clear_error(tmp_path, monkeypatch):
    import rlx.tune.storage

    monkeypatch.setattr(rlx.tune.storage, "GRPC_CONNECT_SECONDS", 0.2)
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConfigError, match=r"cannot reach the gRPC storage proxy at 127\.0\.0\.1"):
        open_storage(f"grpc://127.0.0.1:{port}")


# -- a worker that dies ------------------------------------------------------------------------


def _wait_for_a_running_trial(storage: str, process: subprocess.Popen, heartbeat: bool) -> None:
    """Until the worker's trial 0 trains (and, on a database, sent its first heartbeat)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            trials = _trials(storage)
        except Exception:  # the study is not created yet
            trials = []
        training = trials and len(trials[0].params) == 2  # both hyperparameters drawn
        if training and trials[0].state.name == "RUNNING":
            if not heartbeat:
                return
            database = storage.removeprefix("sqlite:///")
            with sqlite3.connect(database) as db:
                if db.execute("select count(*) from trial_heartbeats").fetchone()[0]:
                    return
        time.sleep(0.05)
    pytest.fail("the worker never started its trial")


@pytest.mark.parametrize(
    "kind", ["sqlite-heartbeat", "journal-same-host"], ids=["sqlite-heartbeat", "journal-same-host"]
)
def test_a_killed_workers_trial_is_failed_and_run_again_by_another(tmp_path, kind):
    """kill -9 of a worker mid-trial. On a database its trial stops sending heartbeats (the
    test moves it to another machine, where this one cannot see its process): a second worker
    fails it once twice --heartbeat has passed, and runs it again. On a journal file (no
    heartbeats) a worker on the same machine sees its process gone and does the same."""
    database = kind.startswith("sqlite")
    storage = f"sqlite:///{tmp_path / 's.db'}" if database else f"journal:{tmp_path}/s.log"
    command = _rlx(
        "tune", "q-learning", "--env", "FrozenLake-v1", "--trials", "1", "--steps", "60000",
        "--eval-every", "20000", "--eval-episodes", "20", "--space", _space(tmp_path),
        "--storage", storage, "--heartbeat", "1", "--no-prune",
    )  # fmt: skip
    first = subprocess.Popen(
        [*command, "--out", str(tmp_path / "a")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for_a_running_trial(storage, first, heartbeat=database)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=PATIENCE)
    if database:
        with sqlite3.connect(storage.removeprefix("sqlite:///")) as db:
            db.execute(
                "update trial_user_attributes set value_json = "
                "json_set(value_json, '$.host', 'another-machine') where key = ?",
                (WORKER,),
            )
        time.sleep(2.5)  # more than the grace period, twice --heartbeat: the trial is stale
    second = subprocess.run(
        [*command, "--out", str(tmp_path / "b")],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert second.returncode == 0, second.stderr
    trials = _trials(storage)
    assert [t.state.name for t in trials] == ["FAIL", "COMPLETE"]
    assert trials[1].system_attrs["failed_trial"] == 0
    assert trials[1].params == trials[0].params
    assert (tmp_path / "b" / "trials" / "1").is_dir()


# -- samplers and pruners ------------------------------------------------------------------------


def _settings(**changes) -> Settings:
    base = dict(agent="q-learning", env="FrozenLake-v1", trials=4, storage="sqlite:///x.db",
                study_name="s", out="out", metric="eval_return", steps=2000, eval_every=500,
                eval_episodes=5, seed=0, prune=True)  # fmt: skip
    return Settings(**{**base, **changes})


@pytest.mark.parametrize("shared", [False, True], ids=["alone", "shared"])
def test_tpe_is_told_that_trials_run_in_parallel_where_they_do(shared):
    sampler = _sampler(_settings(shared=shared), worker=0, started=0)
    assert isinstance(sampler, optuna.samplers.TPESampler)
    assert sampler._constant_liar is shared


@pytest.mark.parametrize(
    ("option", "name", "expected"),
    [
        ("--sampler", "tpee", "unknown --sampler 'tpee'. Did you mean: tpe"),
        ("--pruner", "hyperbnd", "unknown --pruner 'hyperbnd'. Did you mean: hyperband"),
    ],
    ids=["sampler", "pruner"],
)
def test_an_unknown_sampler_or_pruner_is_refused_with_the_closest_name(
    rlx_cli, tmp_path, option, name, expected
):
    code, _, err = rlx_cli(
        "tune", "q-learning", "--env", "FrozenLake-v1", option, name, *QUICK,
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 2, err
    assert expected in " ".join(err.split())
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("sampler", "pruner", "expected"),
    [
        ("random", "hyperband", optuna.pruners.HyperbandPruner),
        ("qmc", "successive-halving", optuna.pruners.SuccessiveHalvingPruner),
    ],
    ids=["random-hyperband", "qmc-successive-halving"],
)
def test_a_study_runs_with_the_sampler_and_pruner_it_names(
    tmp_path, monkeypatch, sampler, pruner, expected
):
    import rlx.tune.workers

    pytest.importorskip("scipy")
    made = []
    make = rlx.tune.workers._pruner
    monkeypatch.setattr(rlx.tune.workers, "_pruner", lambda s: made.append(make(s)) or made[-1])
    result = tune("q-learning", "FrozenLake-v1", trials=3, sampler=sampler, pruner=pruner,
                  space=_space(tmp_path), out=tmp_path / "out", **QUICK_KWARGS)  # fmt: skip
    assert sum(result.counts.get(state, 0) for state in ("complete", "pruned")) == 3
    assert isinstance(made[0], expected)
