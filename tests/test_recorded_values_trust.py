"""Every value rlx reads back from a directory and that can name code, an environment or a
place outside the run goes through the one trust check (:mod:`rlx.trust`); a group's seed
directories are the group's own runs (no links, no runs swapped in)."""

from __future__ import annotations

import hashlib
import inspect
import json
import shutil
from pathlib import Path

import pytest
from test_hostile_inputs import edit_run  # edits a run as an attacker would

import rlx.callbacks
from rlx.discovery import get_registry
from rlx.trust import KINDS, declared_arguments
from rlx.wrappers import GYMNASIUM_TRUST_ARGUMENTS, _gymnasium_wrapper_names, _presets

EVIL = 'open(__file__ + ".ran", "w").write("ran")\nclass Evil: pass\n'
QUIET = ("--no-progress",)


def _declared_components() -> list[tuple[str, object]]:
    """rlx's own callbacks and loggers, and every wrapper preset installed."""
    components: list[tuple[str, object]] = [
        (f"callback {name}", cls) for name, cls in rlx.callbacks.BUILT_IN.items()
    ]
    components.append(("callback LogMetrics", rlx.callbacks.LogMetrics))
    for name, spec in get_registry().loggers.items():
        if spec.target.startswith("rlx."):
            components.append((f"logger {name}", spec.load()))
    for name, point in _presets().items():
        components.append((f"wrapper preset {name}", point.load()))
    return components


@pytest.mark.parametrize(
    ("what", "component"), [pytest.param(*pair, id=pair[0]) for pair in _declared_components()]
)
def test_every_built_in_component_declares_its_trusted_arguments(what, component):
    """A new built-in callback, logger or preset cannot be added without saying which of its
    arguments name code, an environment or a destination."""
    own = component.__dict__ if isinstance(component, type) else vars(component)
    assert "trust_arguments" in own, f"{what} does not declare trust_arguments"
    declared = declared_arguments(component)
    assert declared is not None
    parameters = inspect.signature(component).parameters
    for key, kind in declared.items():
        assert kind in KINDS, f"{what}: {key} is declared {kind!r}, not one of {KINDS}"
        assert key in parameters, f"{what} declares {key!r}, which it does not take"


def test_every_gymnasium_wrapper_is_declared():
    missing = sorted(set(_gymnasium_wrapper_names()) - set(GYMNASIUM_TRUST_ARGUMENTS))
    assert not missing, f"gymnasium wrappers without a trust declaration: {missing}"


# -- recorded values that would import code or send data ---------------------------------------


def _run(rlx_cli, path: Path) -> Path:
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "1000", "--out", str(path),
        *QUIET,
    )  # fmt: skip
    assert code == 0, err
    return path


def _group(rlx_cli, path: Path) -> Path:
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--seeds", "0-1", "--jobs", "1",
        "--steps", "1000", "--out", str(path), *QUIET,
    )  # fmt: skip
    assert code == 0, err
    return path


def _edit(file: Path, edit) -> None:
    document = json.loads(file.read_text())
    edit(document)
    file.write_text(json.dumps(document))


def _settings(document: dict) -> dict:
    return document["trainer"] if "trainer" in document else document["settings"]


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its content's hash (links as their target)."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(root))] = "-> " + str(path.readlink())
        elif path.is_file():
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


RECORDED = {
    "evaluate-on names a module env": lambda s: s.__setitem__(
        "callbacks", [{"name": "evaluate-on", "kwargs": {"env": "evilmod:Evil-v0"}}]
    ),
    "evaluate-on env_kwargs name code": lambda s: s.__setitem__(
        "callbacks",
        [{"name": "evaluate-on",
          "kwargs": {"env": "CartPole-v1", "env_kwargs": {"f": "evilmod:Evil"}}}],
    ),
    "a module callback": lambda s: s.__setitem__(
        "callbacks", [{"name": "evilmod:Evil", "kwargs": {}}]
    ),
    "mlflow sends data to a database": lambda s: s.__setitem__(
        "loggers", [{"name": "mlflow", "kwargs": {"tracking_uri": "sqlite:////{root}/elsewhere.db"}}]
    ),
    "wandb sends data to another entity": lambda s: s.__setitem__(
        "loggers", [{"name": "wandb", "kwargs": {"entity": "someone-else", "mode": "offline"}}]
    ),
    "wandb writes in another folder": lambda s: s.__setitem__(
        "loggers", [{"name": "wandb", "kwargs": {"dir": "{root}/elsewhere", "mode": "offline"}}]
    ),
}  # fmt: skip


@pytest.mark.parametrize("where", ["config.json", "group.json", "seed-1/config.json"])
@pytest.mark.parametrize("case", list(RECORDED))
def test_a_recorded_value_that_names_code_or_a_destination_needs_trust(
    tmp_path, rlx_cli, monkeypatch, where, case
):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evilmod.py").write_text(EVIL)
    target = (
        _run(rlx_cli, tmp_path / "run")
        if where == "config.json"
        else _group(rlx_cli, tmp_path / "group")
    )

    def edit(document):
        settings = _settings(document)
        RECORDED[case](settings)
        text = json.dumps(settings).replace("{root}", str(tmp_path))
        settings.clear()
        settings.update(json.loads(text))

    _edit(target / where, edit)
    before = _tree(tmp_path)
    code, _, err = rlx_cli("run", "--resume", str(target), "--steps", "2000", *QUIET)
    assert code == 2, err
    assert "Traceback" not in err and "--trust-code" in err, err
    assert err.strip().count("\n") == 0, err  # one line
    assert not (tmp_path / "evilmod.py.ran").exists()
    assert _tree(tmp_path) == before  # nothing written, no database, no folder


def test_loggers_given_again_replace_the_recorded_ones(tmp_path, rlx_cli):
    run = _run(rlx_cli, tmp_path / "run")
    mlflow = {"name": "mlflow", "kwargs": {"tracking_uri": f"sqlite:///{tmp_path}/x.db"}}
    _edit(run / "config.json", lambda d: _settings(d).__setitem__("loggers", [mlflow]))
    code, _, err = rlx_cli(
        "run", "--resume", str(run), "--steps", "2000", "--logger", "csv", *QUIET
    )
    assert code == 0, err
    assert not (tmp_path / "x.db").exists()
    assert json.loads((run / "config.json").read_text())["trainer"]["loggers"] == [
        {"name": "csv", "kwargs": {}}
    ]


def test_a_callback_given_on_resume_replaces_the_recorded_ones(tmp_path, rlx_cli):
    run = _run(rlx_cli, tmp_path / "run")
    code, _, err = rlx_cli(
        "run", "--resume", str(run), "--steps", "2000", "--callback", "stop-on-plateau,patience=1",
        *QUIET,
    )  # fmt: skip
    assert code == 0, err
    assert json.loads((run / "config.json").read_text())["trainer"]["callbacks"] == [
        {"name": "stop-on-plateau", "kwargs": {"patience": 1}}
    ]


def test_recorded_env_kwargs_that_name_code_need_trust(tmp_path, rlx_cli, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "evilmod.py").write_text(EVIL)
    run = _run(rlx_cli, tmp_path / "run")
    edit_run(run, env_kwargs={"entry": "evilmod:Evil"})  # checkpoints resealed too
    for command in (("run", "--resume", str(run), "--steps", "2000", *QUIET), ("eval", str(run))):
        code, _, err = rlx_cli(*command)
        assert code == 2 and "--trust-code" in err, err
    assert not (tmp_path / "evilmod.py.ran").exists()


# -- a group's seed directories are its own ---------------------------------------------------


def test_a_seed_directory_that_is_a_link_is_refused_and_its_target_untouched(tmp_path, rlx_cli):
    group = _group(rlx_cli, tmp_path / "group")
    other = _run(rlx_cli, tmp_path / "other")
    shutil.rmtree(group / "seed-1")
    (group / "seed-1").symlink_to(other)
    before = _tree(other)
    for command in (
        ("run", "--resume", str(group), "--steps", "2000", *QUIET),
        ("eval", str(group), "--episodes", "1"),
        ("plot", str(group), "--out", str(tmp_path / "plot.png")),
    ):
        code, _, err = rlx_cli(*command)
        assert code == 2 and "symbolic link" in err and "Traceback" not in err, (command, err)
    assert _tree(other) == before


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ("swap", "records seed 1"),
        ("agent", "records agent"),
        ("hyperparameters", "records other hyperparameters"),
    ],
)
def test_a_seed_directory_that_is_not_the_groups_run_is_refused(tmp_path, rlx_cli, edit, said):
    group = _group(rlx_cli, tmp_path / "group")
    if edit == "swap":
        (group / "seed-0").rename(tmp_path / "zero")
        (group / "seed-1").rename(group / "seed-0")
        (tmp_path / "zero").rename(group / "seed-1")
    elif edit == "agent":
        _edit(group / "seed-1" / "config.json", lambda d: d.__setitem__("agent", "sarsa"))
    else:
        _edit(
            group / "seed-1" / "config.json",
            lambda d: d["hyperparameters"].__setitem__("learning_rate", 0.5),
        )
    before = _tree(group)
    for command in (
        ("run", "--resume", str(group), "--steps", "2000", *QUIET),
        ("eval", str(group), "--episodes", "1"),
        ("plot", str(group), "--out", str(tmp_path / "plot.png")),
    ):
        code, _, err = rlx_cli(*command)
        assert code == 2 and said in err and "Traceback" not in err, (command, err)
    assert _tree(group) == before


@pytest.mark.parametrize("content", ["text", "foreign schema"])
def test_a_tracker_database_that_is_not_mlflows_is_one_message(tmp_path, rlx_cli, content):
    """Trusted or given, an MLflow tracking URI naming a file that is not a database, or a
    database of another schema, is one message with nothing written (was a traceback)."""
    pytest.importorskip("mlflow")
    import sqlite3

    database = tmp_path / "other.db"
    if content == "text":
        database.write_text("not a database\n")
    else:
        with sqlite3.connect(database) as connection:
            connection.execute("create table alembic_version (version_num varchar(32))")
            connection.execute("insert into alembic_version values ('not-mlflows')")
    before = database.read_bytes()
    logger = f"mlflow,tracking_uri=sqlite:///{database}"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "500", "--out",
        str(tmp_path / "run"), "--logger", logger, *QUIET,
    )  # fmt: skip
    assert code == 2 and "Traceback" not in err and "MLflow" in err, err
    assert not (tmp_path / "run").exists()
    if content == "text":
        assert database.read_bytes() == before
