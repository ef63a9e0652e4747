"""Bad input found in a third pass: each is one message, exit code 2, and nothing written.

- ``--env-kwargs`` values that the environment's constructor refuses (a KeyError, a
  ValueError of gymnasium's ``make``), values of another type than the constructor's simple
  annotations, and non-finite numbers;
- ``rlx tune --storage`` of an in-memory SQLite database, which no worker process shares and
  no later tune continues;
- ``--resume`` of a regular file, and a seed group whose ``.rlx-group`` marker is a directory
  or a symbolic link: each named for what it is;
- a ``metrics.csv`` whose header was cut or edited, found on resume;
- one learning iteration larger than the whole step budget (``rlx.api.check_iteration_budget``);
- resealed checkpoints (checksums recomputed after the edit) whose replay buffer holds an
  action outside the action space, or whose environment snapshot would set a method, a
  property or another kind of value than the environment keeps.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from rlx.errors import CheckpointError


def one_message(code: int, err: str, expected: str) -> None:
    """Exit code 2 and one line on stderr, ``error: ...`` holding ``expected``."""
    assert code == 2, err
    assert expected in err, err
    assert "Traceback" not in err, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


def snapshot(folder: Path) -> dict[str, str]:
    """Every file and folder under ``folder``, with the SHA-256 of each file's content."""
    return {
        str(path.relative_to(folder)): (
            hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "/"
        )
        for path in sorted(folder.rglob("*"))
    }


# -- --env-kwargs ----------------------------------------------------------------------------


ENV_KWARGS_CASES = [
    (
        "q-learning",
        "FrozenLake-v1",
        'map_name="99x99"',
        "environment 'FrozenLake-v1' rejected its arguments {'map_name': '99x99'}: KeyError",
    ),
    (
        "q-learning",
        "FrozenLake-v1",
        "desc=[1,2]",
        "environment 'FrozenLake-v1' rejected its arguments {'desc': [1, 2]}: ValueError",
    ),
    (
        "ppo",
        "CartPole-v1",
        "max_episode_steps=-5",
        "environment 'CartPole-v1' rejected its arguments {'max_episode_steps': -5}",
    ),
    (
        "q-learning",
        "FrozenLake-v1",
        "is_slippery=maybe",
        "its argument is_slippery must be true or false, got 'maybe'",
    ),
    (
        "q-learning",
        "FrozenLake-v1",
        "map_name=8",
        "its argument map_name must be a string, got 8",
    ),
    (
        "ppo",
        "CartPole-v1",
        "max_episode_steps=many",
        "its argument max_episode_steps must be an integer or null, got 'many'",
    ),
    ("q-learning", "FrozenLake-v1", "success_rate=NaN", "numbers must be finite"),
    ("q-learning", "FrozenLake-v1", "success_rate=-Infinity", "numbers must be finite"),
    ("q-learning", "FrozenLake-v1", "success_rate=1e999", "numbers must be finite"),
    ("q-learning", "FrozenLake-v1", "reward_schedule=[1,NaN,0]", "numbers must be finite"),
]


@pytest.mark.parametrize(
    ("agent", "env", "item", "message"),
    ENV_KWARGS_CASES,
    ids=[case[2] for case in ENV_KWARGS_CASES],
)
def test_env_kwargs_the_environment_cannot_take_are_one_message_and_write_nothing(
    tmp_path, rlx_cli, monkeypatch, agent, env, item, message
):
    monkeypatch.chdir(tmp_path)
    code, _, err = rlx_cli(
        "run", agent, "--env", env, "--steps", "50", "--no-progress", "--env-kwargs", item
    )
    one_message(code, err, message)
    assert snapshot(tmp_path) == {}


def test_env_kwargs_of_the_annotated_types_still_make_the_environment():
    import rlx

    agent = rlx.make(
        "q-learning",
        "FrozenLake-v1",
        env_kwargs={
            "is_slippery": False,
            "map_name": "8x8",
            "success_rate": 1,
            "render_mode": None,
        },
    )
    assert agent.env.unwrapped.nrow == 8


# -- rlx tune --storage ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["sqlite:///:memory:", "sqlite://", "sqlite:///file:study?mode=memory&uri=true"]
)
def test_tune_refuses_an_in_memory_storage_and_writes_nothing(tmp_path, rlx_cli, monkeypatch, url):
    pytest.importorskip("optuna")
    monkeypatch.chdir(tmp_path)
    code, _, err = rlx_cli(
        "tune", "q-learning", "--env", "FrozenLake-v1", "--trials", "2", "--steps", "50",
        "--storage", url, "--out", str(tmp_path / "study"),
    )  # fmt: skip
    one_message(code, err, f"--storage {url} is an in-memory database")
    assert "cannot be resumed" in err and "drop --storage" in err
    assert snapshot(tmp_path) == {}


# -- --resume of what is not a run directory -------------------------------------------------


def test_resume_of_a_regular_file_says_it_is_a_file(tmp_path, rlx_cli):
    (tmp_path / "notes.txt").write_text("kept")
    before = snapshot(tmp_path)
    code, _, err = rlx_cli("run", "--resume", str(tmp_path / "notes.txt"), "--steps", "100")
    one_message(code, err, "notes.txt is a file, not a run directory; give the run's directory")
    assert "does not exist" not in err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("directory", "its .rlx-group marker is a directory, not the file rlx writes"),
        ("symlink", "its .rlx-group marker is a symbolic link, which rlx never follows"),
    ],
)
@pytest.mark.parametrize("command", ["run", "eval"])
def test_a_group_marker_that_is_no_regular_file_is_named(
    tmp_path, rlx_cli, marker, message, command
):
    from rlx.groups import GroupTrainer

    group = tmp_path / "group"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--seeds", "0-1", "--jobs", "1",
        "--steps", "50", "--eval-episodes", "1", "--no-progress", "--out", str(group),
    )  # fmt: skip
    assert code == 0, err
    (group / ".rlx-group").rename(tmp_path / "marker")
    if marker == "directory":
        (group / ".rlx-group").mkdir()
    else:
        (group / ".rlx-group").symlink_to(tmp_path / "marker")
    before = snapshot(tmp_path)
    args = ("run", "--resume", str(group), "--steps", "100") if command == "run" else ("eval",)
    code, _, err = rlx_cli(*args, *([str(group)] if command == "eval" else []))
    one_message(code, err, message)
    assert "config.json is missing" not in err
    with pytest.raises(CheckpointError, match=f"is not a seed group: {message}"):
        GroupTrainer.resume(group)
    assert snapshot(tmp_path) == before


# -- a metrics.csv cut or edited before a resume ---------------------------------------------


def last_message(code: int, err: str, expected: str) -> None:
    """Exit code 2, no traceback, and ``error: ...`` holding ``expected`` as the last line (a
    resume prints the run directory first)."""
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: ") and expected in lines[-1], err
    assert sum(line.startswith("error: ") for line in lines) == 1, err


def cut_header(text: str) -> str:
    header, rest = text.split("\n", 1)
    return ",".join(header.split(",")[:5]) + "\n" + rest


def drop_a_column_name(text: str) -> str:
    header, rest = text.split("\n", 1)
    names = header.split(",")
    return ",".join(names[:2] + names[3:]) + "\n" + rest


def repeat_a_column_name(text: str) -> str:
    header, rest = text.split("\n", 1)
    names = header.split(",")
    return ",".join([*names[:-1], names[0]]) + "\n" + rest


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (cut_header, "line 2 holds 11 values, its header names 5 columns"),
        (drop_a_column_name, "line 2 holds 11 values, its header names 10 columns"),
        (repeat_a_column_name, "its header names the column 'env_steps' twice"),
    ],
    ids=["header cut short", "a column name dropped", "a column name repeated"],
)
def test_resume_refuses_a_metrics_csv_whose_header_does_not_fit_its_rows(
    tmp_path, rlx_cli, edit, message
):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "2000", "--eval-every", "500",
        "--eval-episodes", "1", "--no-progress", "--out", str(run),
    )  # fmt: skip
    assert code == 0, err
    metrics = run / "metrics.csv"
    assert len(metrics.read_text().split("\n", 1)[0].split(",")) == 11
    metrics.write_text(edit(metrics.read_text()))
    before = snapshot(tmp_path)
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "3000", "--no-progress")
    last_message(code, err, f"{metrics} is cut or edited: {message}")
    assert "move it aside to resume with a new one" in err
    assert snapshot(tmp_path) == before


# -- one iteration larger than the whole step budget -----------------------------------------


def agent_config(name: str, **hyperparameters):
    from rlx.api import agent_spec
    from rlx.config import build_config

    return build_config(agent_spec(name).load().Config, hyperparameters)


@pytest.mark.parametrize(
    ("name", "hyperparameters", "steps", "message"),
    [
        (
            "dqn",
            {"n_envs": 100_000, "train_freq": 4},
            500,
            "one iteration of dqn takes 400,000 environment steps (n_envs 100000 x train_freq "
            "4), more than the whole budget of 500 (--steps), which it would overshoot "
            "800-fold; lower n_envs or train_freq, or raise --steps",
        ),
        ("ppo", {"n_envs": 64, "n_steps": 256}, 1000, "takes 16,384 environment steps"),
    ],
)
def test_an_iteration_larger_than_the_budget_is_one_config_error(
    name, hyperparameters, steps, message
):
    from rlx.api import check_iteration_budget
    from rlx.errors import ConfigError

    with pytest.raises(ConfigError) as raised:
        check_iteration_budget(name, agent_config(name, **hyperparameters), steps)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("name", "hyperparameters", "steps"),
    [
        ("dqn", {"n_envs": 4, "train_freq": 4}, 16),
        ("ppo", {"n_envs": 8, "n_steps": 256}, 2048),
        ("ppo", {"n_envs": 8, "n_steps": 256}, None),  # a budget in iterations or time
        ("q-learning", {}, 1),  # no iteration size to judge
    ],
)
def test_an_iteration_within_the_budget_is_accepted(name, hyperparameters, steps):
    from rlx.api import check_iteration_budget

    check_iteration_budget(name, agent_config(name, **hyperparameters), steps)


# -- resealed checkpoints: replay-buffer actions outside the action space --------------------


def reseal(run: Path, edit) -> None:
    """Edit the resume arrays of every checkpoint of ``run`` and recompute the resume part's
    sha256 and the document checksum, as a careful forger would."""
    import json

    from safetensors.numpy import load_file, save_file

    from rlx.checkpoint import RESUME_FILE, STATE_FILE, _sha256, json_checksum

    for checkpoint in [run / "final", *run.glob("checkpoints/*")]:
        arrays = load_file(str(checkpoint / RESUME_FILE))
        edit(arrays)
        save_file(arrays, str(checkpoint / RESUME_FILE))
        document = json.loads((checkpoint / STATE_FILE).read_text())
        document.pop("checksum")
        document["resume"]["sha256"] = _sha256(checkpoint / RESUME_FILE)
        document["checksum"] = json_checksum(document)
        (checkpoint / STATE_FILE).write_text(json.dumps(document))


def setting_an_action(value):
    import numpy as np

    def edit(arrays):
        actions = arrays["buffer/actions"].copy()
        actions.flat[3] = value
        arrays["buffer/actions"] = np.ascontiguousarray(actions)

    return edit


@pytest.mark.parametrize(
    ("agent", "env", "value", "message"),
    [
        ("dqn", "CartPole-v1", 7, "holds the action 7, outside [0, 1]"),
        ("sac", "Pendulum-v1", 1.5, "holds the action 1.5, outside [-1.0, 1.0]"),
        ("sac", "Pendulum-v1", float("nan"), "holds the action nan, outside [-1.0, 1.0]"),
    ],
    ids=["dqn: 7 of Discrete(2)", "sac: 1.5", "sac: NaN"],
)
def test_a_resealed_buffer_with_an_action_outside_the_space_is_refused(
    tmp_path, rlx_cli, agent, env, value, message
):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", agent, "--env", env, "--untuned", "--steps", "128", "--eval-episodes", "0",
        "--no-progress", "--set", "train_freq=1",
        "--out", str(run), "--set", "n_envs=2", "--set", "learning_starts=64",
        "--set", "batch_size=8", "--set", "hidden_sizes=16", "--set", "buffer_size=256",
    )  # fmt: skip
    assert code == 0, err
    reseal(run, setting_an_action(value))
    before = snapshot(tmp_path)
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "1000", "--no-progress")
    last_message(code, err, message)
    assert snapshot(tmp_path) == before


# -- resealed checkpoints: environment snapshots that set what is no value -------------------


def reseal_snapshot(run: Path, changes: dict) -> None:
    """Set entries of the environment snapshot in every checkpoint's state.json and recompute
    the document checksum, as a careful forger would."""
    import json

    from rlx.checkpoint import STATE_FILE, json_checksum

    for checkpoint in [run / "final", *run.glob("checkpoints/*")]:
        document = json.loads((checkpoint / STATE_FILE).read_text())
        document.pop("checksum")
        document["resume"]["meta"]["runner"]["envs"].update(changes)
        document["checksum"] = json_checksum(document)
        (checkpoint / STATE_FILE).write_text(json.dumps(document))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"e0.3/step": 5}, "sets 'step' of CartPoleEnv (e0.3), which is a method"),
        ({"e0.3/reset": None}, "sets 'reset' of CartPoleEnv (e0.3), which is a method"),
        ({"e0.0/spec": "x"}, "sets 'spec' of TimeLimit (e0.0), which is a method, a property"),
        ({"e0.3/__class__": None}, "sets '__class__' of CartPoleEnv (e0.3), which is a method"),
        (
            {"e0.3/gravity": "heavy"},
            "sets 'gravity' of CartPoleEnv (e0.3) to a string, where this environment keeps a "
            "number",
        ),
        (
            {"e0.3/_np_random": 3},
            "sets '_np_random' of CartPoleEnv (e0.3) to a number, where this environment keeps "
            "a random generator",
        ),
        ({"e0.3/gravity": [1, 2]}, "sets 'e0.3/gravity' to a list, which no snapshot holds"),
        ({"e9.3/gravity": 9.8}, "names 'e9.3', an object this environment does not have"),
    ],
    ids=[
        "a method",
        "a method to None",
        "a property",
        "__class__",
        "a string for a number",
        "a number for a generator",
        "a list",
        "an unknown object",
    ],
)
def test_a_resealed_environment_snapshot_sets_only_plain_values_of_their_kind(
    tmp_path, rlx_cli, changes, message
):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "dqn", "--env", "CartPole-v1", "--untuned", "--steps", "128", "--eval-episodes",
        "0", "--no-progress", "--out", str(run), "--set", "n_envs=2", "--set", "train_freq=1",
        "--set", "learning_starts=64", "--set", "batch_size=8", "--set", "hidden_sizes=16",
        "--set", "buffer_size=256", "--set", "vectorization=sync",
    )  # fmt: skip
    assert code == 0, err
    reseal_snapshot(run, changes)
    before = snapshot(tmp_path)
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "1000", "--no-progress")
    last_message(code, err, f"the saved environment state {message}")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("value", ["nan", "inf", "[1.0, -inf]"])
def test_a_config_files_env_kwargs_must_be_finite(tmp_path, rlx_cli, value):
    config = tmp_path / "run.toml"
    config.write_text(f"[env_kwargs]\nmax_episode_steps = {value}\n")
    before = snapshot(tmp_path)
    code, _, err = rlx_cli(
        "run", "ppo", "--env", "CartPole-v1", "--config", str(config), "--steps", "100",
        "--out", str(tmp_path / "run"), "--no-progress",
    )  # fmt: skip
    one_message(code, err, "numbers must be finite")
    assert snapshot(tmp_path) == before
