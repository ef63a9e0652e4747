from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest


def test_list_shows_name_family_distribution_version_and_spaces(rlx_cli):
    code, out, _ = rlx_cli("list", "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["random"]["distribution"] == "rlx-core"
    assert rows["random"]["family"] == "baseline"
    assert rows["random"]["observation_spaces"] == ["Any"]
    assert {"name", "family", "distribution", "version", "summary", "action_spaces"} <= set(
        rows["random"]
    )


def test_list_filters_by_family(rlx_cli):
    code, out, _ = rlx_cli("list", "--family", "baseline", "--json")
    assert code == 0 and {row["family"] for row in json.loads(out)} == {"baseline"}


def test_piped_list_keeps_each_agent_on_one_line(rlx_cli):
    """Piped output is not cut to 80 columns: ``rlx list | grep NAME`` finds the whole row."""
    import os

    environment = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run(
        [sys.executable, "-m", "rlx.cli", "list"],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
    )
    _, out, _ = rlx_cli("list", "--json")
    for row in json.loads(out):
        lines = [line for line in done.stdout.splitlines() if f" {row['name']} " in line]
        assert any(row["summary"] in line for line in lines), (row["name"], lines)


def test_list_never_imports_torch_or_implementations(rlx_subprocess):
    """``rlx list`` reads the entry points' metadata only. (How long it takes is measured by
    benchmarks/cli_startup.py, not asserted here: a wall-clock bound fails on a busy machine.)"""
    code = (
        "import sys\n"
        "from rlx.cli import main\n"
        "try:\n    main(['list'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'gymnasium', 'rlx_classical.q_learning', 'rlx.trainer')\n"
        "         if m in sys.modules]\n"
        "print(heavy, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "[]", f"rlx list imported {done.stderr.strip()}"
    assert rlx_subprocess("list").returncode == 0


def test_info_lists_every_hyperparameter(rlx_cli):
    code, out, _ = rlx_cli("info", "random", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["name"] == "random" and data["hyperparameters"] == []


def test_plugins_reports_each_distribution_and_whether_it_loaded(rlx_cli):
    code, out, _ = rlx_cli("plugins", "--json")
    core = next(p for p in json.loads(out) if p["distribution"] == "rlx-core")
    assert code == 0 and core["loaded"] and core["agents"] == ["random"] and core["version"]


def test_run_trains_and_prints_the_run_directory_and_final_evaluation(rlx_cli, tmp_path):
    code, out, err = rlx_cli(
        "run",
        "random",
        "--env",
        "CartPole-v1",
        "--steps",
        "1500",
        "--out",
        str(tmp_path / "run"),
        "--no-progress",
        "--seed",
        "4",
    )
    assert code == 0, err
    assert f"run directory: {tmp_path / 'run'}" in out
    assert "final evaluation: mean return" in out
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (
        config["agent"] == "random" and config["seed"] == 4 and config["trainer"]["steps"] == 1500
    )
    assert config["versions"]["rlx-core"]

    code, out, _ = rlx_cli("eval", str(tmp_path / "run"), "--episodes", "5", "--json")
    result = json.loads(out)
    assert code == 0 and result["episodes"] == 5
    assert {"mean_return", "std_return", "episodes"} <= set(result)


def test_run_reads_a_toml_config_and_flags_override_it(rlx_cli, tmp_path):
    (tmp_path / "run.toml").write_text(
        'agent = "random"\nenv = "CartPole-v1"\nseed = 9\n'
        "[trainer]\nsteps = 300\neval_episodes = 2\n"
    )
    code, _, err = rlx_cli(
        "run",
        "--config",
        str(tmp_path / "run.toml"),
        "--steps",
        "400",
        "--out",
        str(tmp_path / "run"),
        "--no-progress",
    )
    assert code == 0, err
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["seed"], config["trainer"]["steps"], config["trainer"]["eval_episodes"]) == (
        9,
        400,
        2,
    )


def test_resume_extends_the_budget(rlx_cli, tmp_path):
    run = str(tmp_path / "run")
    assert (
        rlx_cli(
            "run", "random", "--env", "CartPole-v1", "--steps", "500", "--out", run, "--no-progress"
        )[0]
        == 0
    )
    code, _, err = rlx_cli("run", "--resume", run, "--steps", "1200", "--no-progress")
    assert code == 0, err
    state = json.loads((tmp_path / "run" / "final" / "state.json").read_text())
    assert state["trainer"]["env_steps"] >= 1200


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "randm", "--env", "CartPole-v1"], "Did you mean: random"),
        (["run", "random", "--env", "CartPol-v1"], "Did you mean: CartPole-v1"),
        (["run", "random", "--env", "Taxi-v3"], "Please use `Taxi-v4` instead"),
        (["run", "q-learning", "--env", "CartPole-v1"], "takes Discrete observation spaces"),
        (
            ["run", "q-learning", "--env", "Taxi-v4", "--set", "gamma=1.5"],
            "gamma must be in [0, 1]",
        ),
        (["run", "q-learning", "--env", "Taxi-v4", "--set", "gama=0.9"], "Did you mean: gamma"),
        (["run", "random", "--env", "CartPole-v1", "--set", "gamma=0.9"], "has no hyperparameters"),
        (["run", "random", "--env", "CartPole-v1", "--set", "gamma"], "key=value"),
        (["run", "random", "--env", "CartPole-v1", "--steps", "0"], "steps must be in [1, inf]"),
        (["run", "random", "--env", "CartPole-v1", "--config", "missing.toml"], "does not exist"),
        (["run", "random"], "give an agent name and --env"),
        (["run", "--resume", "no-such-run"], "does not exist"),
        (["eval", "no-such-run"], "does not exist"),
        (["info", "nothing-like-it"], "unknown agent"),
        (["list", "--family", "classicl"], "unknown family"),
    ],
)
def test_bad_input_is_one_message_exit_code_2_and_writes_nothing(
    rlx_cli, tmp_path, monkeypatch, args, message
):
    monkeypatch.chdir(tmp_path)
    code, out, err = rlx_cli(*args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err + out
    assert list(tmp_path.iterdir()) == []


def test_unreadable_config_file_is_a_clear_error(rlx_cli, tmp_path):
    (tmp_path / "bad.toml").write_text("steps = [")
    code, _, err = rlx_cli(
        "run", "random", "--env", "CartPole-v1", "--config", str(tmp_path / "bad.toml")
    )
    assert code == 2 and "is unreadable" in err


def test_an_existing_run_directory_is_not_overwritten(rlx_cli, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "precious.txt").write_text("keep me")
    code, _, err = rlx_cli("run", "random", "--env", "CartPole-v1", "--out", str(run))
    assert code == 2 and "already exists" in err
    assert [p.name for p in run.iterdir()] == ["precious.txt"]


def test_corrupt_checkpoint_is_a_clear_error_and_is_left_alone(rlx_cli, tmp_path):
    run = tmp_path / "run"
    assert (
        rlx_cli(
            "run",
            "random",
            "--env",
            "CartPole-v1",
            "--steps",
            "300",
            "--out",
            str(run),
            "--no-progress",
        )[0]
        == 0
    )
    (run / "final" / "state.json").write_text("{broken")
    for args in (["eval", str(run)], ["run", "--resume", str(run), "--steps", "900"]):
        code, _, err = rlx_cli(*args)
        assert code == 2 and "corrupt" in err and "Traceback" not in err
    assert (run / "final" / "state.json").read_text() == "{broken"


def test_debug_shows_the_traceback(rlx_cli):
    from rlx.errors import UnknownNameError

    with pytest.raises(UnknownNameError):
        rlx_cli("--debug", "run", "randm", "--env", "CartPole-v1")


def test_resume_refuses_changed_hyperparameters(rlx_cli, tmp_path):
    run = str(tmp_path / "run")
    rlx_cli(
        "run", "random", "--env", "CartPole-v1", "--steps", "300", "--out", run, "--no-progress"
    )
    code, _, err = rlx_cli("run", "--resume", run, "--set", "x=1")
    assert code == 2 and "saved hyperparameters" in err
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    code, _, err = rlx_cli("run", "--resume", run)
    assert code == 2 and "raise it (e.g. --steps)" in err
    after = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    assert after == before, "a refused resume must not touch config.json or metrics.csv"


def test_ctrl_c_saves_a_checkpoint_exits_cleanly_and_the_run_resumes(tmp_path, rlx_subprocess):
    run = tmp_path / "run"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlx.cli",
            "run",
            "random",
            "--env",
            "CartPole-v1",
            "--steps",
            "100000000",
            "--out",
            str(run),
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Generous limits, only to stop a hung run: start-up takes seconds, more on a busy machine.
    deadline = time.monotonic() + 120
    while not (run / "metrics.csv").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "continue with: rlx run --resume" in err
    assert "Traceback" not in err
    state = json.loads((run / "final" / "state.json").read_text())
    steps = state["trainer"]["env_steps"]
    assert steps > 0
    done = rlx_subprocess("run", "--resume", str(run), "--steps", str(steps + 500), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert (
        json.loads((run / "final" / "state.json").read_text())["trainer"]["env_steps"]
        >= steps + 500
    )


def test_shell_completion_is_available(rlx_subprocess):
    done = rlx_subprocess("--show-completion", "bash")
    assert done.returncode == 0 and "_rlx_completion" in done.stdout


def test_completion_proposes_agent_names(rlx_subprocess):
    done = rlx_subprocess(
        env={"_RLX_COMPLETE": "complete_bash", "COMP_WORDS": "rlx run ran", "COMP_CWORD": "2"}
    )
    assert "random" in done.stdout, done.stdout + done.stderr


def test_protocols_are_satisfied_by_the_builtin_agent_and_trainer():
    import rlx
    from rlx.protocols import Agent, Trainer

    agent = rlx.make("random", "CartPole-v1")
    assert isinstance(agent, Agent)
    assert isinstance(rlx.Trainer(agent, steps=10), Trainer)


def test_plot_draws_the_learning_curve_as_a_png(rlx_cli, tmp_path):
    pytest.importorskip("matplotlib", reason="optional extra rlx-core[plot]")
    run = str(tmp_path / "run")
    rlx_cli(
        "run",
        "random",
        "--env",
        "CartPole-v1",
        "--steps",
        "3000",
        "--eval-every",
        "1000",
        "--out",
        run,
        "--no-progress",
    )
    code, out, err = rlx_cli("plot", run)
    assert code == 0, err
    png = tmp_path / "run" / "learning_curve.png"
    assert out.strip() == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_plot_of_a_run_without_metrics_is_a_clear_error(rlx_cli, tmp_path):
    run = tmp_path / "run"
    assert (
        rlx_cli(
            "run",
            "random",
            "--env",
            "CartPole-v1",
            "--steps",
            "200",
            "--out",
            str(run),
            "--no-progress",
        )[0]
        == 0
    )
    (run / "metrics.csv").unlink()
    code, _, err = rlx_cli("plot", str(run))
    assert code == 2 and "no metrics.csv" in err


def test_a_run_whose_final_evaluation_fell_below_its_best_says_how_to_play_the_best(
    capsys, tmp_path
):
    """DQN can fall back after solving a task: the end of the run points at ``best/``."""
    from types import SimpleNamespace

    from rlx.cli import _print_result
    from rlx.evaluation import EvalResult

    def result(best):
        return SimpleNamespace(
            stop_reason="steps",
            env_steps=50_000,
            episodes=300,
            elapsed=12.0,
            final_eval=EvalResult((200.0, 240.0), (200, 240)),
            best_return=best,
            metrics={},
            run_dir=tmp_path / "run",
        )

    _print_result(result(500.0))
    out = capsys.readouterr().out
    assert "best evaluation: mean return 500.000" in out
    assert f"rlx eval {tmp_path / 'run'} --best" in " ".join(out.split())
    _print_result(result(220.0))  # the final evaluation is the best: nothing more to say
    assert "best evaluation" not in capsys.readouterr().out
