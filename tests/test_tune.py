"""``rlx tune``: search spaces from the agents' declarations, space files, the Optuna study
(outputs, pruning, Ctrl-C and continuing) and bad input; studies shared by many processes
are in test_tune_shared.py.

Trials are q-learning on FrozenLake (rlx-classical) with a few thousand steps: well under a
second each.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from rlx.config import hyperparameter  # noqa: E402
from rlx.discovery import get_registry  # noqa: E402
from rlx.errors import ConfigError  # noqa: E402
from rlx.seeding import derive  # noqa: E402
from rlx.tune import _declared, build_space, tune  # noqa: E402

#: Epsilon fixed (q-learning refuses epsilon_end above epsilon_start, which would fail trials).
SPACE = """
learning_rate = {low = 0.05, high = 0.9}
gamma = [0.9, 0.95, 0.99]
epsilon_start = 1.0
epsilon_end = 0.05
epsilon_decay_steps = 1500
"""

QUICK = ("--steps", "2000", "--eval-every", "500", "--eval-episodes", "20")


def _space(tmp_path: Path, text: str = SPACE) -> str:
    path = tmp_path / "space.toml"
    path.write_text(text)
    return str(path)


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "trials.csv", newline="") as f:
        return list(csv.DictReader(f))


def _study(out: Path, name: str = "q-learning-FrozenLake-v1") -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{out / 'study.db'}")


# -- search spaces ----------------------------------------------------------------------------


def test_default_space_comes_from_the_declarations():
    space = build_space("q-learning")
    dims = {d.name: d for d in space.dimensions}
    assert set(dims) == {"learning_rate", "gamma", "epsilon_start", "epsilon_end"}
    rate = dims["learning_rate"]  # declared search=(0.01, 1.0) inside its valid (0, 1]
    assert (rate.kind, rate.low, rate.high, rate.low_open, rate.log) == (
        "float",
        0.01,
        1.0,
        False,
        True,
    )
    assert rate.text() == "[0.01, 1] log"
    # epsilon_end's search range lies under epsilon_start's: no trial is refused for them.
    assert dims["epsilon_end"].high <= dims["epsilon_start"].low
    assert space.skipped == {
        "size": ["epsilon_decay_steps", "start_steps"],
        "unbounded": ["initial_q"],
    }

    ppo = build_space("ppo")
    kinds = {d.name: d.kind for d in ppo.dimensions}
    assert kinds["gamma"] == "float" and kinds["ortho_init"] == "choice"
    assert {d.name: d.choices for d in ppo.dimensions}["activation"] == ("tanh", "relu", "elu")
    assert {"device", "torch_threads", "vectorization"} <= set(ppo.skipped["execution"])
    assert {"optimizer", "policy"} <= set(ppo.skipped["code"])
    # Settings an environment may refuse (masks, noise on Box actions) would fail trials.
    assert ppo.skipped["environment"] == ["action_noise", "action_masks"]
    assert {"n_envs", "n_steps", "batch_size", "hidden_sizes"} <= set(ppo.skipped["size"])
    dims = {d.name: d for d in ppo.dimensions}
    rate = dims["learning_rate"]  # valid for any positive value; searched where declared
    assert (rate.low, rate.high, rate.log) == (1e-5, 1e-2, True)
    assert (dims["gamma"].low, dims["gamma"].high) == (0.9, 0.9999)
    assert dims["n_epochs"].kind == "int"  # a size, searched because it declares a range


def test_log_scale_where_the_range_spans_decades_or_the_declaration_says_so():
    def dimension(**metadata):
        field = hyperparameter(0.5, "a rate", **metadata)
        return _declared("rate", field.metadata, float)[0]

    assert dimension(low=1e-5, high=1e-1).log
    assert not dimension(low=0.01, high=0.5).log
    assert not dimension(low=0, high=1).log
    assert dimension(low=1, high=10, log=True).log
    assert _declared("rate", hyperparameter(0.5, "x", low=0).metadata, float) == (
        None,
        "unbounded",
    )
    searched = dimension(low=0, low_open=True, search=(1e-4, 1e-1))
    assert (searched.low, searched.high, searched.log, searched.low_open) == (
        1e-4,
        0.1,
        True,
        False,
    )


@pytest.mark.parametrize(
    "metadata",
    [
        dict(low=0, high=1, search=(0.5, 1.5)),
        dict(low=0, low_open=True, search=(0, 1)),
        dict(search=(1.0, 0.1)),
    ],
)
def test_a_search_range_outside_the_valid_range_is_refused(metadata):
    with pytest.raises(ValueError, match="search must be"):
        hyperparameter(0.5, "a rate", **metadata)


def test_every_installed_agent_has_a_space_third_party_plugins_included():
    names = sorted(get_registry().agents)
    assert "hill-climbing" in names  # examples/: a third-party plugin distribution
    for name in names:
        space = build_space(name)
        assert all(d.kind != "fixed" for d in space.dimensions), name


def test_a_space_file_narrows_adds_and_fixes():
    space = build_space(
        "q-learning",
        {
            "learning_rate": {"low": 0.01, "high": 0.5, "log": True},
            "gamma": [0.9, 0.99],
            "epsilon_end": 0.05,
            "epsilon_decay_steps": {"low": 100, "high": 5000, "step": 100},
            "default_space": False,
        },
    )
    dims = {d.name: d for d in space.dimensions}
    assert set(dims) == {"learning_rate", "gamma", "epsilon_end", "epsilon_decay_steps"}
    assert dims["learning_rate"].log and dims["learning_rate"].low == 0.01
    assert dims["gamma"].choices == (0.9, 0.99)
    assert space.fixed == {"epsilon_end": 0.05}
    assert (dims["epsilon_decay_steps"].kind, dims["epsilon_decay_steps"].step) == ("int", 100)


def test_choices_of_a_tuple_setting_go_through_optuna_and_back():
    space = build_space("ppo", {"hidden_sizes": [[64, 64], [128]], "n_steps": 128})
    dims = {d.name: d for d in space.dimensions}
    assert dims["hidden_sizes"].choices == ((64, 64), (128,))
    assert dims["n_steps"].kind == "fixed" and space.fixed["n_steps"] == 128
    trial = optuna.trial.FixedTrial({"hidden_sizes": "[128]"})
    assert dims["hidden_sizes"].sample(trial) == (128,)
    # One array for a tuple setting is a value, not choices.
    assert build_space("ppo", {"hidden_sizes": [32, 32]}).fixed["hidden_sizes"] == (32, 32)


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ({"learning_rate": {"low": 0.1, "high": 2.0}}, "leaves the declared range"),
        ({"learning_rate": {"low": 0, "high": 0.5}}, "leaves the declared range"),
        ({"gama": [0.9, 0.99]}, "Did you mean: gamma"),
        ({"gamma": [0.9, 1.5]}, "gamma must be in [0, 1]"),
        ({"learning_rate": {"low": 0.5, "high": 0.1}}, "must be below"),
        ({"learning_rate": {"low": 0.1}}, "needs both low and high"),
        ({"epsilon_decay_steps": {"low": 1.5, "high": 10}}, "integer"),
        ({"gamma": "high"}, "expects a number"),
    ],
)
def test_a_bad_space_entry_is_one_config_error(entries, expected):
    with pytest.raises(ConfigError) as error:
        build_space("q-learning", entries)
    assert expected in str(error.value)


# -- the study ---------------------------------------------------------------------------------


def test_tune_writes_the_study_and_best_toml_reruns_the_best_trial(rlx_cli, tmp_path):
    out = tmp_path / "tune"
    code, stdout, err = rlx_cli(
        "tune",
        "q-learning",
        "--env",
        "FrozenLake-v1",
        "--trials",
        "4",
        *QUICK,
        "--space",
        _space(tmp_path),
        "--out",
        str(out),
        "--no-prune",
    )
    assert code == 0, err
    assert "search space" in err and "learning_rate" in err
    names = {p.name for p in out.iterdir()}
    assert {"study.db", "trials", "trials.csv", "best.toml", "optimization_history.png"} <= names
    assert "param_importances.png" in names
    rows = _rows(out)
    assert [row["state"] for row in rows] == ["complete"] * 4
    for row in rows:  # seeds derive from the study seed and the trial number, and are recorded
        assert int(row["seed"]) == derive(0, "tune-trial", int(row["number"])) % 2**32
        assert (out / "trials" / row["number"] / "config.json").is_file()
    best = max(rows, key=lambda row: float(row["eval_return"]))
    config = tomllib.loads((out / "best.toml").read_text())
    assert config["seed"] == int(best["seed"])
    assert config["hyperparameters"]["epsilon_end"] == 0.05
    assert config["hyperparameters"]["learning_rate"] == pytest.approx(float(best["learning_rate"]))
    assert f"trial {best['number']}" in stdout

    code, stdout, err = rlx_cli(
        "run", "--config", str(out / "best.toml"), "--out", str(tmp_path / "rerun"), "--no-progress"
    )
    assert code == 0, err
    assert f"final evaluation: mean return {float(best['eval_return']):.3f}" in stdout


def _interrupting_pruner(trial_number: int):
    """A pruner that, at ``trial_number``'s first evaluation, does what Ctrl-C does: SIGINT."""

    class Pruner(optuna.pruners.BasePruner):
        def prune(self, study, trial):
            if trial.number == trial_number:
                os.kill(os.getpid(), signal.SIGINT)
            return False

    return Pruner()


def test_ctrl_c_stops_the_trial_and_the_same_command_continues(rlx_cli, tmp_path, monkeypatch):
    import rlx.tune.workers

    out = tmp_path / "tune"
    command = (
        "tune",
        "q-learning",
        "--env",
        "FrozenLake-v1",
        "--trials",
        "3",
        *QUICK,
        "--space",
        _space(tmp_path),
        "--out",
        str(out),
    )
    monkeypatch.setattr(rlx.tune.workers, "_pruner", lambda settings: _interrupting_pruner(1))
    code, _, err = rlx_cli(*command)
    assert code == 130, err
    assert "continue the study with: rlx tune q-learning" in err
    states = [t.state.name for t in _study(out).trials]
    assert states == ["COMPLETE", "FAIL"]  # the interrupted trial does not count
    assert '"state": "interrupted"' in (out / "trials" / "1" / "trial.json").read_text()
    assert (out / "trials" / "1" / "final").is_dir()  # the trainer saved it on the way out
    assert (out / "trials.csv").is_file()

    monkeypatch.undo()
    code, _, err = rlx_cli(*command)
    assert code == 0, err
    assert "continuing from 1 finished trials" in err
    states = [t.state.name for t in _study(out).trials]
    assert states == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]


def test_a_pruned_trial_stops_early_and_its_run_stays_marked(tmp_path):
    out = tmp_path / "tune"
    result = tune(
        "q-learning",
        "FrozenLake-v1",
        trials=2,
        steps=2000,
        eval_every=500,
        space={"epsilon_start": 1.0, "epsilon_end": 0.05},
        out=out,
        pruner=optuna.pruners.ThresholdPruner(lower=2.0),  # FrozenLake never returns 2
    )
    assert result.counts == {"pruned": 2}
    assert result.best_value is None and "best" not in result.files
    for trial in _study(out).trials:
        assert trial.user_attrs["env_steps"] < 1000  # stopped at its first evaluation
        run = out / "trials" / str(trial.number)
        assert '"state": "pruned"' in (run / "trial.json").read_text()
        assert (run / "final").is_dir()


def test_refused_hyperparameters_fail_their_trial_and_a_worker_gives_up_after_enough(
    rlx_cli, tmp_path
):
    out = tmp_path / "tune"
    space = _space(tmp_path, "epsilon_start = [0.1, 0.2]\nepsilon_end = 0.5\n")
    code, _, err = rlx_cli(
        "tune", "q-learning", "--env", "FrozenLake-v1", "--trials", "2", *QUICK,
        "--space", space, "--out", str(out),
    )  # fmt: skip
    assert code == 2
    assert "all 5 trials of this rlx tune failed" in err and "must not exceed" in err
    rows = _rows(out)
    assert [row["state"] for row in rows] == ["fail"] * 5
    assert all("epsilon_end" in row["error"] for row in rows)


def test_a_lone_study_is_reproducible_from_its_seed(tmp_path):
    def study(out: Path) -> list[tuple]:
        tune(
            "q-learning",
            "FrozenLake-v1",
            trials=3,
            steps=1000,
            eval_every=500,
            space={"epsilon_start": 1.0, "epsilon_end": 0.05},
            out=out,
            seed=7,
        )
        return [(t.params, t.value, t.user_attrs["seed"]) for t in _study(out).trials]

    assert study(tmp_path / "one") == study(tmp_path / "two")


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("q-lerning", "--env", "FrozenLake-v1"), "Did you mean: q-learning"),
        (("q-learning", "--env", "FrozenLak-v1"), "unknown environment"),
        (("q-learning", "--env", "FrozenLake-v1", "--metric", "return"), "unknown metric"),
        (("q-learning", "--env", "FrozenLake-v1", "--space", "SPACE"), "leaves the declared"),
        (
            ("q-learning", "--env", "FrozenLake-v1", "--storage", "sqlite:////no/such/dir/s.db"),
            "cannot open the study storage",
        ),
        (
            ("q-learning", "--env", "FrozenLake-v1", "--storage", "postgresql://127.0.0.1:1/x"),
            "storage postgresql://127.0.0.1:1/x",
        ),
        (("q-learning", "--env", "FrozenLake-v1", "--workers", "0"), "--workers"),
        (("q-learning", "--env", "FrozenLake-v1", "--out", "FILE/tune"), "cannot create --out"),
    ],
)
def test_bad_input_is_one_message_exit_2_and_writes_nothing(rlx_cli, tmp_path, args, expected):
    space = tmp_path / "space.toml"
    space.write_text("learning_rate = {low = 0.5, high = 3.0}\n")
    out = tmp_path / "tune"
    file = tmp_path / "file"
    file.write_text("not a directory")
    replace = {"SPACE": str(space), "FILE/tune": str(file / "tune")}
    args = tuple(replace.get(arg, arg) for arg in args)
    if "--out" not in args:
        args += ("--out", str(out))
    code, _, err = rlx_cli("tune", *args, "--trials", "2")
    assert code == 2
    assert expected in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert not out.exists()  # refused before any trial trains


def test_a_different_budget_does_not_continue_a_study(rlx_cli, tmp_path):
    out = tmp_path / "tune"
    base = ("tune", "q-learning", "--env", "FrozenLake-v1", "--trials", "1", "--space")
    code, _, err = rlx_cli(*base, _space(tmp_path), *QUICK, "--out", str(out))
    assert code == 0, err
    before = sorted(p.name for p in out.rglob("*"))
    code, _, err = rlx_cli(*base, _space(tmp_path), "--steps", "1000", "--out", str(out))
    assert code == 2 and "was started with steps=2000, not 1000" in err
    assert sorted(p.name for p in out.rglob("*")) == before


def test_import_rlx_and_rlx_list_do_not_import_optuna():
    code = (
        "import sys\nimport rlx, rlx.cli\nfrom rlx.cli import main\n"
        "try:\n    main(['list'])\nexcept SystemExit:\n    pass\n"
        "assert 'optuna' not in sys.modules, 'optuna imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_every_trial_logs_to_the_trackers_of_logger(rlx_cli, tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)  # MLflow puts a new experiment's artifacts in ./mlruns
    out, uri = tmp_path / "tune", f"sqlite:///{tmp_path / 'mlflow.db'}"
    code, _, err = rlx_cli(
        "tune",
        "q-learning",
        "--env",
        "FrozenLake-v1",
        "--trials",
        "2",
        *QUICK,
        "--out",
        str(out),
        "--no-prune",
        "--logger",
        f"mlflow,tracking_uri={uri},experiment=tune-test",
    )
    assert code == 0, err
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("tune-test")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 2
    assert {run.info.run_name for run in runs} == {
        "q-learning-FrozenLake-v1/trial-0",
        "q-learning-FrozenLake-v1/trial-1",
    }
    rows = {row["number"]: row for row in _rows(out)}
    for run in runs:
        number = Path(run.data.tags["rlx.run_dir"]).name
        assert run.data.params["learning_rate"].startswith(rows[number]["learning_rate"][:4])
        history = client.get_metric_history(run.info.run_id, "eval/return_mean")
        assert history and history[-1].value == pytest.approx(float(rows[number]["eval_return"]))


def test_an_unknown_logger_is_refused_before_the_study_starts(rlx_cli, tmp_path):
    out = tmp_path / "tune"
    code, _, err = rlx_cli(
        "tune", "q-learning", "--env", "FrozenLake-v1", "--out", str(out), "--logger", "mlfow"
    )
    assert code == 2 and "Did you mean: mlflow" in err
    assert not out.exists()


def test_a_metric_the_agent_logs_can_be_minimised_without_evaluations(rlx_cli, tmp_path):
    """Bandits are judged by regret, not by evaluations (their runs evaluate nothing)."""
    out = tmp_path / "tune"
    code, _, err = rlx_cli(
        "tune",
        "thompson",
        "--env",
        "rlx/BernoulliMAB-v0",
        "--trials",
        "4",
        "--steps",
        "500",
        "--metric",
        "cumulative_regret",
        "--direction",
        "minimize",
        "--out",
        str(out),
    )
    assert code == 0, err
    assert "not evaluated; minimising cumulative_regret" in err
    rows = _rows(out)
    assert [row["state"] for row in rows] == ["complete"] * 4
    best = min(rows, key=lambda row: float(row["cumulative_regret"]))
    config = tomllib.loads((out / "best.toml").read_text())
    assert config["seed"] == int(best["seed"])
    assert (
        f"(cumulative_regret = {float(best['cumulative_regret']):.6g})"
        in (out / "best.toml").read_text()
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--metric", "cumulative_regert"), "Did you mean: cumulative_regret"),
        (("--metric", "cumulative_regret", "--direction", "down"), "--direction is maximize"),
    ],
)
def test_a_bad_metric_or_direction_is_one_message(rlx_cli, tmp_path, args, expected):
    out = tmp_path / "tune"
    code, _, err = rlx_cli(
        "tune",
        "thompson",
        "--env",
        "rlx/BernoulliMAB-v0",
        "--steps",
        "500",
        "--out",
        str(out),
        *args,
    )
    assert code == 2 and expected in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_ctrl_c_to_the_process_group_stops_every_worker_and_the_study_continues(tmp_path):
    """What a terminal's Ctrl-C does to ``rlx tune --workers 2``: SIGINT reaches the whole
    process group; every running trial stops and is marked failed, the finished ones stay,
    the outputs are written, exit 130; the same command then runs the missing trials."""
    out = tmp_path / "tune"
    command = [
        sys.executable,
        "-m",
        "rlx.cli",
        "tune",
        "ppo",
        "--env",
        "CartPole-v1",
        "--steps",
        "12000",
        "--workers",
        "2",
        "--out",
        str(out),
        "--no-prune",
    ]
    process = subprocess.Popen(
        [*command, "--trials", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not any((out / "trials").glob("*/final")) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the next trials are under way
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)  # only to stop a hung study
    assert process.returncode == 130, err
    assert "interrupted; continue the study with" in err
    rows = _rows(out)
    states = [row["state"] for row in rows]
    assert "complete" in states and "fail" in states and "running" not in states
    assert (out / "best.toml").is_file() and (out / "trials.csv").is_file()
    finished = states.count("complete")

    again = subprocess.run(
        [*command, "--trials", str(finished + 1)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert [row["state"] for row in _rows(out)].count("complete") >= finished + 1


# -- progress ---------------------------------------------------------------------------------


@pytest.mark.parametrize("terminal", [True, False])
def test_each_trial_is_a_line_with_the_best_so_far_and_a_terminal_gets_a_bar(tmp_path, terminal):
    """The best so far is the least value when the study minimises; a bar of finished trials
    is drawn only on a terminal, a log file gets the lines alone."""
    import io
    import re

    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=terminal, width=200, highlight=False)
    tune(
        "q-learning",
        "FrozenLake-v1",
        trials=3,
        steps=1000,
        eval_every=500,
        eval_episodes=20,
        direction="minimize",
        space={"epsilon_start": 1.0, "epsilon_end": 0.05},
        out=tmp_path / "tune",
        console=console,
    )
    text = screen.getvalue()
    line = r"trial (\d) complete: eval_return (\S+) .*; best (\S+) \(trial \d\); (\d)/3 done"
    lines = re.findall(line, text)
    assert [int(line[0]) for line in lines] == [0, 1, 2]
    values = [float(line[1]) for line in lines]
    assert [float(line[2]) for line in lines] == pytest.approx(
        [min(values[: i + 1]) for i in range(3)], abs=1e-4
    )
    assert [line[3] for line in lines] == ["1", "2", "3"]
    assert ("0/3" in text) is terminal  # the bar before the first trial ends


def test_tune_env_kwargs_reach_every_trial_best_toml_and_the_rerun(rlx_cli, tmp_path):
    out = tmp_path / "tune"
    args = ["tune", "q-learning", "--env", "FrozenLake-v1", *QUICK, "--space", _space(tmp_path)]
    code, _, err = rlx_cli(
        *args, "--trials", "2", "--out", str(out), "--env-kwargs", "is_slippery=false"
    )
    assert code == 0, err
    for trial in (out / "trials").iterdir():
        recorded = json.loads((trial / "config.json").read_text())
        assert recorded["env_kwargs"] == {"is_slippery": False}
    config = tomllib.loads((out / "best.toml").read_text())
    assert config["env_kwargs"] == {"is_slippery": False}
    assert 'env_kwargs = {"is_slippery" = false}' in (out / "tuned.toml").read_text()
    code, _, err = rlx_cli(
        "run", "--config", str(out / "best.toml"), "--out", str(tmp_path / "rerun"), "--no-progress"
    )
    assert code == 0, err
    rerun = json.loads((tmp_path / "rerun" / "config.json").read_text())
    assert rerun["env_kwargs"] == {"is_slippery": False}
    # The same study continued with other arguments is another study: refused.
    code, _, err = rlx_cli(*args, "--trials", "3", "--out", str(out))
    assert code == 2 and "env_kwargs" in err, err
