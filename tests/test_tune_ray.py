"""``rlx tune --backend ray``: trials as Ray tasks on Ray started on this machine (two CPUs),
Optuna asked and told by the driver, which alone writes the study's folder from what the tasks
send back. Trials are q-learning on FrozenLake (rlx-classical)."""

from __future__ import annotations

import json

import pytest

optuna = pytest.importorskip("optuna")
ray = pytest.importorskip("ray")

from rlx.errors import RlxError  # noqa: E402
from rlx.tune import tune  # noqa: E402
from rlx.tune.remote import _check_result, _write_run  # noqa: E402
from rlx.tune.settings import trial_seeds  # noqa: E402
from rlx.tune.storage import open_storage  # noqa: E402

SPACE = {
    "learning_rate": {"low": 0.05, "high": 0.9},
    "gamma": [0.9, 0.99],
    "epsilon_start": 1.0,
    "epsilon_end": 0.05,
    "epsilon_decay_steps": 1500,
}
QUICK = {"steps": 2000, "eval_every": 500, "eval_episodes": 20}
STUDY = "q-learning-FrozenLake-v1"


@pytest.fixture(scope="module")
def local_ray():
    """A Ray of its own on this machine (not one that `ray start` left), two CPUs: two trials
    at once."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_trials_run_as_ray_tasks_and_the_driver_writes_their_folders(tmp_path, local_ray):
    out = tmp_path / "out"
    result = tune(
        "q-learning", "FrozenLake-v1", trials=3, backend="ray", space=SPACE, out=out, **QUICK
    )  # fmt: skip  (as many trials at once as Ray's two CPUs)
    assert result.counts == {"complete": 3}
    study = optuna.load_study(study_name=STUDY, storage=open_storage(result.storage))
    for trial in study.trials:
        folder = out / "trials" / str(trial.number)
        record = json.loads((folder / "trial.json").read_text())
        assert (record["trial"], record["state"], record["value"]) == (
            trial.number,
            "complete",
            trial.value,
        )
        assert (folder / "metrics.csv").is_file() and (folder / "final").is_dir()
        # the seed a local run of this trial would have had, and where it trained
        assert trial.user_attrs["seed"] == trial_seeds(0, trial.number, 1)[0]
        assert trial.user_attrs["trained_on"] and trial.user_attrs["run_dir"] == str(folder)
        assert len(trial.intermediate_values) == 4  # the curve the task reported, every 500 steps
    import rlx

    agent = rlx.load(out / "trials" / "0")  # a trial's run is an ordinary run
    assert agent is not None
    assert (out / "best.toml").is_file()


def test_a_ray_trial_of_several_seeds_sends_back_every_seeds_run(tmp_path, local_ray):
    pytest.importorskip("scipy")
    out = tmp_path / "out"
    result = tune("q-learning", "FrozenLake-v1", trials=1, backend="ray", seeds=2, space=SPACE,
                  out=out, **QUICK)  # fmt: skip
    assert result.counts == {"complete": 1}
    record = json.loads((out / "trials" / "0" / "trial.json").read_text())
    assert record["seeds"] == trial_seeds(0, 0, 2) and len(record["seed_values"]) == 2
    for k in range(2):
        assert (out / "trials" / "0" / f"seed-{k}" / "metrics.csv").is_file()


def test_a_ray_trial_that_fails_is_failed_with_its_error(tmp_path, local_ray):
    refused = {"epsilon_start": [0.1, 0.2], "epsilon_end": 0.5}  # every trial is refused
    with pytest.raises(RlxError, match=r"all \d+ trials of this rlx tune failed") as error:
        tune("q-learning", "FrozenLake-v1", trials=2, backend="ray", workers=2,
             space=refused, out=tmp_path / "out", **QUICK)  # fmt: skip
    assert "must not exceed" in str(error.value)
    study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{tmp_path / 'out/study.db'}")
    assert all(
        t.state.name == "FAIL" and "epsilon_end" in t.user_attrs["error"] for t in study.trials
    )


@pytest.mark.parametrize(
    "files",
    [{"../outside": b""}, {"/etc/x": b""}, {"a/../../b": b""}, {"text": "not bytes"}, ["a"]],
    ids=["parent", "absolute", "inner-parent", "not-bytes", "not-a-table"],
)
def test_a_tasks_files_outside_its_folder_or_not_bytes_are_refused(tmp_path, files):
    with pytest.raises(RlxError, match="Ray task sent back"):
        _write_run(tmp_path / "run", files)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "result",
    [
        ["not", "a", "record"],
        {"state": "RUNNING"},
        {"state": "COMPLETE", "value": float("nan")},
        {"state": "COMPLETE", "value": "1.0"},
        {"state": "PRUNED", "curve": {"500": 0.5}},
        {"state": "FAIL", "user_attrs": ["x"]},
    ],
    ids=["not-a-table", "unknown-state", "nan-value", "text-value", "text-step", "attrs-list"],
)
def test_a_tasks_record_that_is_not_a_trials_is_refused(result):
    with pytest.raises(RlxError, match="Ray task sent back"):
        _check_result(result)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--backend", "rey"), "Did you mean: ray"),
        (("--address", "127.0.0.1:6379"), "--address names a Ray cluster"),
    ],
    ids=["backend", "address-without-ray"],
)
def test_a_bad_backend_is_refused_with_exit_2(rlx_cli, tmp_path, args, expected):
    code, _, err = rlx_cli(
        "tune", "q-learning", "--env", "FrozenLake-v1", *args, "--steps", "2000",
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 2, err
    assert expected in " ".join(err.split())
    assert not (tmp_path / "out").exists()


class _LosesTheFirstTask:
    """An executor whose first task's worker dies; the others run here, in this process."""

    shares_files = False

    def __init__(self, job):
        self.job, self.queue, self.submitted = job, [], 0

    def submit(self, payload):
        self.submitted += 1
        self.queue.append((self.submitted - 1, payload))
        return self.submitted - 1

    def poll(self, timeout):
        job, payload = self.queue.pop(0)
        if job == 0:
            return [(job, ("lost", "the node died"))]
        events = []
        for _ in self.job(payload, lambda message: events.append((job, message)), None, None):
            pass
        return [*events, (job, ("ended", None))]

    def slots(self):
        return 1

    def terminate(self):
        pass

    def close(self):
        pass


def test_a_trial_whose_task_was_lost_is_sent_again_and_counts_once(tmp_path, monkeypatch):
    import rlx.executors

    made = []
    monkeypatch.setattr(
        rlx.executors,
        "executor_for",
        lambda backend, job, **kw: made.append(_LosesTheFirstTask(job)) or made[-1],
    )
    result = tune("q-learning", "FrozenLake-v1", trials=2, backend="ray", space=SPACE,
                  out=tmp_path / "out", **QUICK)  # fmt: skip
    assert result.counts == {"complete": 2}
    assert made[0].submitted == 3  # trial 0 twice, trial 1 once
    assert sorted(p.name for p in (tmp_path / "out" / "trials").iterdir()) == ["0", "1"]
