"""Environments named as gymnasium's ``make`` takes them (``module:Env-v0``), and their keyword
arguments from the command line, recorded with the run so that eval and resume rebuild them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlx
from rlx.api import evaluation_env
from rlx.errors import RlxError, UnknownNameError, UntrustedCodeError

MODULES = Path(__file__).parent / "env_modules"
TINY = "rlx_tiny_env:RlxTinyCount-v0"


@pytest.fixture
def env_modules(monkeypatch):
    """The test's environment modules importable, as a user's own package would be."""
    monkeypatch.syspath_prepend(str(MODULES))


def test_a_module_id_imports_the_module_and_makes_the_env_it_registers(env_modules):
    env = rlx.make_env(TINY, length=3)
    assert type(env.unwrapped).__name__ == "TinyCountEnv"
    assert env.unwrapped.length == 3
    agent = rlx.make("q-learning", TINY, seed=1)
    assert agent.identity.env == TINY  # recorded as given, so a reload imports it again


def test_a_module_that_fails_to_import_is_one_error_naming_module_and_id(env_modules):
    with pytest.raises(RlxError, match=r"rlx_broken_env:Broken-v0.*'rlx_broken_env'.*on purpose"):
        rlx.make_env("rlx_broken_env:Broken-v0")
    with pytest.raises(RlxError, match=r"'no_such_module_for_rlx'.*ModuleNotFoundError"):
        rlx.make_env("no_such_module_for_rlx:Env-v0")


def test_a_module_that_registers_no_such_id_is_one_error(env_modules):
    with pytest.raises(UnknownNameError, match="'rlx_registers_nothing' was imported but"):
        rlx.make_env("rlx_registers_nothing:Nothing-v0")


def test_a_module_id_on_the_command_line_needs_trust_to_be_loaded_again(
    env_modules, tmp_path, rlx_cli
):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", TINY, "--steps", "40", "--out", str(run),
        "--no-progress", "--env-kwargs", "length=4", "--eval-episodes", "2",
    )  # fmt: skip
    assert code == 0, err
    recorded = json.loads((run / "config.json").read_text())
    assert recorded["env"] == TINY and recorded["env_kwargs"] == {"length": 4}

    with pytest.raises(UntrustedCodeError, match="rlx_tiny_env:RlxTinyCount-v0"):
        rlx.load(run)
    code, _, err = rlx_cli("eval", str(run), "--episodes", "2")
    assert code == 2 and "--trust-code" in err

    agent = rlx.load(run, trust_code=True)
    assert agent.env.unwrapped.length == 4
    code, out, err = rlx_cli("eval", str(run), "--episodes", "2", "--json", "--trust-code")
    assert code == 0, err
    assert json.loads(out)["mean_length"] == 4  # the recorded length=4, not the default 5

    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "80", "--no-progress")
    assert code == 2 and "--trust-code" in err
    code, _, err = rlx_cli(
        "run", "--resume", str(run), "--steps", "80", "--no-progress", "--trust-code"
    )
    assert code == 0, err
    assert json.loads((run / "config.json").read_text())["env_kwargs"] == {"length": 4}


def test_a_bad_module_id_on_the_command_line_exits_2_and_writes_nothing(
    env_modules, tmp_path, rlx_cli
):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "rlx_registers_nothing:Nothing-v0", "--steps", "40",
        "--out", str(run), "--no-progress",
    )  # fmt: skip
    assert code == 2
    assert "rlx_registers_nothing" in err and "Nothing-v0" in err
    assert "Traceback" not in err
    assert not run.exists()


def test_env_kwargs_from_the_command_line_are_recorded_and_rebuilt_by_eval(tmp_path, rlx_cli):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "200", "--out", str(run),
        "--no-progress", "--eval-episodes", "1",
        "--env-kwargs", "is_slippery=false", "--env-kwargs", 'map_name="8x8"',
    )  # fmt: skip
    assert code == 0, err
    recorded = json.loads((run / "config.json").read_text())["env_kwargs"]
    assert recorded == {"is_slippery": False, "map_name": "8x8"}

    agent = rlx.load(run)
    assert agent.env.unwrapped.desc.shape == (8, 8)
    evaluation = evaluation_env(agent)
    assert evaluation.unwrapped.desc.shape == (8, 8)
    assert evaluation.spec.kwargs["is_slippery"] is False
    # The 8x8 map has 64 states; the default 4x4 one 16: eval could not load it otherwise.
    code, out, err = rlx_cli("eval", str(run), "--episodes", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["episodes"] == 2


def test_env_kwargs_go_over_the_config_files_table(tmp_path, rlx_cli):
    config = tmp_path / "run.toml"
    config.write_text(
        'agent = "q-learning"\nenv = "FrozenLake-v1"\n'
        '[env_kwargs]\nis_slippery = true\nmap_name = "8x8"\n'
    )
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "--config", str(config), "--steps", "100", "--out", str(run), "--no-progress",
        "--eval-episodes", "1", "--env-kwargs", "is_slippery=false",
    )  # fmt: skip
    assert code == 0, err
    recorded = json.loads((run / "config.json").read_text())["env_kwargs"]
    assert recorded == {"is_slippery": False, "map_name": "8x8"}


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("is_slippery", "--env-kwargs expects key=value"),
        ("=1", "--env-kwargs expects key=value"),
        ("not a key=1", "--env-kwargs expects key=value"),
        ("bogus_argument=1", "rejected its arguments"),
    ],
)
def test_bad_env_kwargs_exit_2_with_one_message_and_write_nothing(tmp_path, rlx_cli, item, message):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "50", "--out", str(run),
        "--no-progress", "--env-kwargs", item,
    )  # fmt: skip
    assert code == 2
    assert message in err and "Traceback" not in err
    assert not run.exists()


def test_env_kwargs_cannot_change_a_resumed_run(tmp_path, rlx_cli):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "50", "--out", str(run),
        "--no-progress", "--eval-episodes", "1",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = rlx_cli(
        "run", "--resume", str(run), "--steps", "100", "--env-kwargs", "is_slippery=false"
    )
    assert code == 2 and "--env-kwargs" in err
    assert json.loads((run / "config.json").read_text())["env_kwargs"] == {}
