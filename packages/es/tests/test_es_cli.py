"""The command line with rlx-es agents: the README's quickstart, resume and bad input."""

from __future__ import annotations

import json

import pytest

SMALL = ["--set", "population_size=16", "--set", "hidden_sizes=8", "--no-progress"]


def test_run_stops_at_the_target_return_and_resumes(rlx_cli, tmp_path):
    run = str(tmp_path / "run")
    code, out, err = rlx_cli(
        "run",
        "openai-es",
        "--env",
        "CartPole-v1",
        "--steps",
        "400000",
        "--target-return",
        "475",
        "--eval-every",
        "5000",
        "--set",
        "population_size=64",
        "--set",
        "hidden_sizes=16",
        "--set",
        "sigma=0.05",
        "--set",
        "learning_rate=0.03",
        "--out",
        run,
        "--no-progress",
    )
    assert code == 0, err
    assert "final evaluation: mean return" in out
    state = json.loads((tmp_path / "run" / "final" / "state.json").read_text())
    assert state["trainer"]["env_steps"] < 400000  # stopped by the target, not the budget
    code, _, err = rlx_cli(
        "run", "--resume", run, "--iterations", "200", "--steps", "500000", "--no-progress"
    )
    assert code == 0, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "population_size=255"], "population_size must be even for mirrored"),
        (["--set", "backend=ray", "--set", "address=127.0.0.1:1"], "cannot reach a Ray cluster"),
        (["--set", "backend=gpu"], "backend must be one of local, process, ray"),
        (["--set", "sigma=0"], "sigma must be in (0"),
    ],
)
def test_bad_input_is_one_message_and_exit_code_2(rlx_cli, tmp_path, args, message):
    if "backend=ray" in args:
        pytest.importorskip("ray")
    code, _, err = rlx_cli(
        "run",
        "openai-es",
        "--env",
        "CartPole-v1",
        "--steps",
        "2000",
        "--out",
        str(tmp_path / "run"),
        *SMALL,
        *args,
    )
    assert code == 2
    assert message in err
    assert "Traceback" not in err
