"""Loggers as plugins: the hook, the built-in csv and TensorBoard loggers, MLflow and W&B."""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

import rlx
import rlx.plugin
from rlx import AgentSpec, LoggerSpec, hookimpl, hyperparameter
from rlx.agents.random import RandomAgent
from rlx.discovery import Registry
from rlx.errors import ConfigError, PluginError, UnknownNameError
from rlx.protocols import Iteration
from rlx.trainer import Trainer

QUIET = ["--no-progress", "--seed", "1"]


class RecordingLogger:
    """A third party's logger: keeps every call in ``EVENTS`` (a class attribute)."""

    EVENTS: ClassVar[list[tuple]] = []
    #: None of its options sends data outside the run (rlx.trust): a resume may rebuild it.
    trust_arguments: ClassVar[dict[str, str]] = {}

    def __init__(self, label: str = "x", every: int = 1) -> None:
        self.label = label

    def start(self, run):
        self.EVENTS.append(("start", self.label, run.run_dir, run.identity.agent, run.resumed))

    def log(self, step, row):
        self.EVENTS.append(("log", step, dict(row)))

    def finish(self, result):
        self.EVENTS.append(("finish", result.stop_reason if result is not None else None))


@dataclass
class TunedConfig:
    gamma: float = hyperparameter(0.99, "a hyperparameter for the trackers to record", low=0)


class TunedRandomAgent(RandomAgent):
    """The random agent with one hyperparameter."""

    Config = TunedConfig


def _logger_plugin(name: str, *specs: LoggerSpec, agents=()) -> types.ModuleType:
    module = types.ModuleType(name)

    @hookimpl
    def rlx_register_loggers(register):
        for spec in specs:
            register(spec)

    @hookimpl
    def rlx_register_agents(register):
        for spec in agents:
            register(spec)

    module.rlx_register_loggers = rlx_register_loggers
    module.rlx_register_agents = rlx_register_agents
    return module


RECORDING = LoggerSpec(
    name="recording", target=f"{__name__}:RecordingLogger", summary="records every call"
)


@pytest.fixture
def registry(rlx_registry: Registry) -> Registry:
    """rlx-core's own plugin and a third-party plugin with the recording logger."""
    RecordingLogger.EVENTS = []
    rlx_registry.add_plugin(rlx.plugin, "rlx-core", "0.1.0")
    tuned = AgentSpec(
        name="tuned-random", target=f"{__name__}:TunedRandomAgent", family="test", summary="t"
    )
    plugin = _logger_plugin("third_party", RECORDING, agents=[tuned])
    rlx_registry.add_plugin(plugin, "rlx-recording", "2.0")
    return rlx_registry


def _trainer(tmp_path, name="run", steps=1500, **settings):
    agent = rlx.make("random", "CartPole-v1", seed=2)
    defaults = {"eval_every": 1000, "log_every": 500, "progress": False, "verbose": False}
    return Trainer(agent, steps=steps, run_dir=tmp_path / name, **{**defaults, **settings})


# -- the hook and the registry ---------------------------------------------------------------


def test_core_registers_its_loggers_through_the_hook(rlx_cli):
    code, out, _ = rlx_cli("plugins", "--json")
    core = next(p for p in json.loads(out) if p["distribution"] == "rlx-core")
    assert code == 0 and core["loggers"] == ["csv", "tensorboard", "mlflow", "wandb"]
    code, out, _ = rlx_cli("list", "loggers", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["mlflow"]["extra"] == "rlx-core[mlflow]" and rows["csv"]["extra"] == ""
    assert rows["wandb"]["distribution"] == "rlx-core" and rows["wandb"]["version"]
    code, out, _ = rlx_cli("list", "loggers")
    assert code == 0 and "pip install 'rlx-core[wandb]'" in out
    code, out, _ = rlx_cli("plugins")
    assert code == 0 and "loggers" in out and "mlflow" in out


def test_listing_loggers_imports_no_logger_nor_tracker_library():
    import subprocess

    code = (
        "import sys\nfrom rlx.cli import main\n"
        "for args in (['list', 'loggers'], ['plugins', '--json']):\n"
        "    try:\n        main(args)\n    except SystemExit:\n        pass\n"
        "print([m for m in ('rlx.loggers', 'mlflow', 'wandb', 'tensorboard', 'torch') "
        "if m in sys.modules], file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_a_third_party_logger_is_stamped_and_listing_never_imports_it(rlx_registry):
    spec = LoggerSpec(name="far", target="not_installed_anywhere.module:Far", summary="s")
    record = rlx_registry.add_plugin(_logger_plugin("far_plugin", spec), "rlx-far", "3.1")
    assert record.loaded and record.loggers == ["far"]
    assert rlx_registry.loggers["far"].distribution == "rlx-far"
    assert rlx_registry.loggers["far"].version == "3.1"
    assert "not_installed_anywhere" not in sys.modules
    with pytest.raises(PluginError, match="cannot import logger 'far'"):
        rlx_registry.loggers["far"].load()


def test_one_logger_name_from_two_distributions_is_an_error_naming_both(rlx_registry):
    rlx_registry.add_plugin(_logger_plugin("one", RECORDING), "rlx-one")
    rlx_registry.add_plugin(_logger_plugin("two", RECORDING), "rlx-two")
    with pytest.raises(PluginError, match="rlx-one and rlx-two"):
        rlx_registry.logger("recording")
    assert any("registered by both rlx-one and rlx-two" in line for line in rlx_registry.errors())


def test_bad_target_strings_are_refused_at_registration():
    with pytest.raises(PluginError, match="module:Attribute"):
        LoggerSpec(name="bad", target="no_colon", summary="")


# -- the protocol as the trainer drives it ------------------------------------------------------


def test_a_plugin_logger_sees_start_every_row_and_finish(registry, tmp_path):
    _trainer(tmp_path, "run2", loggers=["recording,label=a"]).fit()
    events = RecordingLogger.EVENTS
    assert events[0] == ("start", "a", tmp_path / "run2", "random", None)
    assert events[-1] == ("finish", "steps")
    logged = [event[2] for event in events if event[0] == "log"]
    with open(tmp_path / "run2" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(logged) == len(rows) and len(rows) >= 4
    assert [row["env_steps"] for row in logged] == [int(row["env_steps"]) for row in rows]
    assert any("eval/return_mean" in row for row in logged)
    saved = json.loads((tmp_path / "run2" / "config.json").read_text())
    assert saved["trainer"]["loggers"] == [{"name": "recording", "kwargs": {"label": "a"}}]


class FailingAgent:
    """A random agent whose third iteration raises."""

    def __init__(self, agent):
        self.inner, self.count = agent, 0
        self.identity = agent.identity

    def step(self):
        self.count += 1
        if self.count == 3:
            raise RuntimeError("boom")
        return Iteration(env_steps=100, episode_returns=[1.0], episode_lengths=[100])

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_loggers_are_finished_when_training_fails_and_the_empty_run_is_removed(registry, tmp_path):
    agent = FailingAgent(rlx.make("random", "CartPole-v1", seed=0))
    trainer = Trainer(
        agent,
        steps=1000,
        log_every=100,
        run_dir=tmp_path / "run",
        progress=False,
        loggers=["recording"],
    )
    with pytest.raises(RuntimeError, match="boom"):
        trainer.fit()
    kinds = [event[0] for event in RecordingLogger.EVENTS]
    assert kinds[0] == "start" and kinds.count("log") == 2
    assert RecordingLogger.EVENTS[-1] == ("finish", None)
    assert not (tmp_path / "run").exists()


class InterruptedAgent(FailingAgent):
    """Sends itself Ctrl-C during its third iteration."""

    def step(self):
        self.count += 1
        if self.count == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return Iteration(env_steps=100, episode_returns=[1.0], episode_lengths=[100])


def test_ctrl_c_finishes_the_loggers_with_the_interrupted_result(registry, tmp_path):
    agent = InterruptedAgent(rlx.make("random", "CartPole-v1", seed=0))
    trainer = Trainer(
        agent,
        steps=1000,
        log_every=100,
        run_dir=tmp_path / "run",
        progress=False,
        loggers=["recording"],
    )
    assert trainer.fit().stop_reason == "interrupted"
    assert RecordingLogger.EVENTS[-1] == ("finish", "interrupted")
    assert (tmp_path / "run" / "final").is_dir()


def test_a_resumed_run_uses_its_recorded_loggers_and_continues_csv_exactly(registry, tmp_path):
    agent = rlx.make("random", "CartPole-v1", seed=3)
    settings = dict(eval_every=1000, log_every=500, progress=False, verbose=False)
    Trainer(agent, steps=4000, run_dir=tmp_path / "whole", **settings).fit()
    agent = rlx.make("random", "CartPole-v1", seed=3)
    Trainer(
        agent,
        steps=1700,
        checkpoint_every=1000,
        run_dir=tmp_path / "split",
        loggers=["recording,label=first"],
        **settings,
    ).fit()
    RecordingLogger.EVENTS = []
    Trainer.resume(tmp_path / "split", steps=4000).fit()
    start = RecordingLogger.EVENTS[0]
    assert start[:2] == ("start", "first") and start[4]["env_steps"] >= 1700
    assert all(event[1] > start[4]["env_steps"] for event in RecordingLogger.EVENTS[1:-1])

    def rows(name):
        with open(tmp_path / name / "metrics.csv", newline="") as f:
            return [
                {k: v for k, v in row.items() if not k.startswith("time/")}
                for row in csv.DictReader(f)
            ]

    assert rows("whole") == rows("split")


def test_a_recorded_logger_that_declares_nothing_is_rebuilt_with_options_only_when_trusted(
    registry, tmp_path, monkeypatch
):
    """A third party's logger that does not say which options send data elsewhere: its
    recorded options could name any destination, so a resume needs trust for them."""
    from rlx.errors import UntrustedCodeError

    monkeypatch.delattr(RecordingLogger, "trust_arguments")
    agent = rlx.make("random", "CartPole-v1", seed=3)
    Trainer(
        agent, steps=600, run_dir=tmp_path / "run", loggers=["recording,label=first"],
        progress=False, verbose=False,
    ).fit()  # fmt: skip
    with pytest.raises(UntrustedCodeError, match="does not declare which of its arguments"):
        Trainer.resume(tmp_path / "run", steps=1200)
    Trainer.resume(tmp_path / "run", steps=1200, trust_code=True).fit()


def test_a_tracker_that_fails_while_logging_is_dropped_and_training_goes_on(registry, tmp_path):
    class Broken(RecordingLogger):
        def log(self, step, row):
            raise OSError("disk of the tracker is full")

    trainer = _trainer(tmp_path)
    trainer.logging.configured = [Broken()]
    result = trainer.fit()
    assert result.stop_reason == "steps" and (tmp_path / "run" / "final").is_dir()
    kinds = [event[0] for event in RecordingLogger.EVENTS]
    assert kinds == ["start"], kinds  # dropped after its first failure: never finished


def test_tensorboard_setting_keeps_working_and_can_be_turned_off(registry, tmp_path):
    pytest.importorskip("tensorboard")
    _trainer(tmp_path, "on").fit()
    assert any((tmp_path / "on" / "tensorboard").iterdir())
    agent = rlx.make("random", "CartPole-v1", seed=2)
    Trainer(agent, steps=600, run_dir=tmp_path / "off", tensorboard=False, progress=False).fit()
    assert not (tmp_path / "off" / "tensorboard").exists()
    assert (tmp_path / "off" / "metrics.csv").is_file()


# -- bad input: one message, exit 2, nothing written -------------------------------------------


def _refused(rlx_cli, tmp_path, *logger_args, match):
    code, _, err = rlx_cli(
        "run",
        "random",
        "--env",
        "CartPole-v1",
        "--steps",
        "300",
        "--out",
        str(tmp_path / "run"),
        *QUIET,
        *logger_args,
    )
    assert code == 2, err
    assert match in err and err.count("error:") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "run").exists()
    return err


def test_an_unknown_logger_or_option_is_refused_with_a_did_you_mean(rlx_cli, tmp_path):
    _refused(
        rlx_cli,
        tmp_path,
        "--logger",
        "mlfow",
        match="unknown logger 'mlfow'. Did you mean: mlflow?",
    )
    _refused(
        rlx_cli,
        tmp_path,
        "--logger",
        "mlflow,tracking_url=x",
        match="logger 'mlflow' has no option 'tracking_url'. Did you mean: tracking_uri?",
    )
    _refused(rlx_cli, tmp_path, "--logger", "wandb,offline", match="expected Name,key=value")
    _refused(
        rlx_cli,
        tmp_path,
        "--logger",
        "wandb,mode=ofline",
        match="got 'ofline'. Did you mean: offline",
    )


@pytest.mark.parametrize(("name", "module"), [("mlflow", "mlflow"), ("wandb", "wandb")])
def test_a_missing_extra_names_the_install_command(rlx_cli, tmp_path, monkeypatch, name, module):
    monkeypatch.setitem(sys.modules, module, None)  # "import mlflow" now fails
    _refused(rlx_cli, tmp_path, "--logger", name, match=f"pip install 'rlx-core[{name}]'")


def test_logger_settings_are_checked_when_the_trainer_is_built(registry):
    agent = rlx.make("random", "CartPole-v1", seed=0)
    with pytest.raises(UnknownNameError, match="Did you mean: recording"):
        Trainer(agent, steps=10, loggers=["recordng"])
    with pytest.raises(ConfigError, match="has no option 'colour'"):
        Trainer(agent, steps=10, loggers=[{"name": "recording", "kwargs": {"colour": 1}}])
    with pytest.raises(ConfigError, match="give loggers as a list"):  # TOML: a string, split
        Trainer(agent, steps=10, loggers="recording,label=a")
    with pytest.raises(ConfigError, match="unknown key 'args'"):
        Trainer(agent, steps=10, loggers=[{"name": "recording", "args": {}}])


# -- MLflow -------------------------------------------------------------------------------------


def _mlflow_run(uri: str, experiment: str):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment!r}"
    runs = client.search_runs([found.experiment_id])
    assert len(runs) == 1
    return client, runs[0]


def _csv_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def _check_mlflow_run(client, run, run_dir: Path, stale: list | None = None) -> None:
    """MLflow holds what metrics.csv holds, and the params, tags and artifacts. ``stale``:
    rows that the first part of a resumed run logged after its last checkpoint (cut from
    metrics.csv on resume; MLflow's history keeps them)."""
    rows = _csv_rows(run_dir) + (stale or [])

    def points(metric):
        return sorted(
            (m.step, round(m.value, 3)) for m in client.get_metric_history(run.info.run_id, metric)
        )

    assert points("eval/return_mean") == sorted(
        (int(r["env_steps"]), round(float(r["eval/return_mean"]), 3))
        for r in rows
        if r["eval/return_mean"]
    )
    assert [step for step, _ in points("env_steps")] == sorted(int(r["env_steps"]) for r in rows)
    assert run.data.params["seed"] == "1" and run.data.params["trainer.log_every"] == "500"
    assert run.data.params["gamma"] == "0.97"
    assert (
        run.data.tags["rlx.agent"] == "tuned-random" and run.data.tags["rlx.env"] == "CartPole-v1"
    )
    assert run.data.tags["rlx.run_dir"] == str(run_dir.resolve())
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    final = {a.path for a in client.list_artifacts(run.info.run_id, "final")}
    assert {"learning_curve.png", "final"} <= artifacts, artifacts
    assert {"final/state.json", "final/policy.safetensors"} <= final, final
    assert client.get_run(run.info.run_id).info.status == "FINISHED"


def _tuned_run(rlx_cli, tmp_path, *args):
    """``rlx run tuned-random`` with gamma 0.97, 1500 steps, a row every 500."""
    config = tmp_path / "run.toml"
    if not config.exists():
        config.write_text("[trainer]\nlog_every = 500\n")
    return rlx_cli(
        "run",
        "tuned-random",
        "--env",
        "CartPole-v1",
        "--set",
        "gamma=0.97",
        "--steps",
        "1500",
        "--eval-every",
        "1000",
        "--config",
        str(config),
        *QUIET,
        *args,
    )


def test_mlflow_sqlite_store_gets_params_metrics_by_step_artifacts_and_tags(
    registry, rlx_cli, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # MLflow puts a database store's artifacts in ./mlruns
    pytest.importorskip("mlflow")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    (tmp_path / "run.toml").write_text(  # the TOML key: [trainer] loggers
        f'[trainer]\nlog_every = 500\nloggers = ["mlflow,tracking_uri={uri},experiment=rlx-test"]\n'
    )
    code, _, err = _tuned_run(rlx_cli, tmp_path, "--out", str(tmp_path / "run"))
    assert code == 0, err
    client, run = _mlflow_run(uri, "rlx-test")
    _check_mlflow_run(client, run, tmp_path / "run")


def test_mlflow_file_store_and_resume_continue_one_mlflow_run(
    registry, rlx_cli, tmp_path, monkeypatch
):
    pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)
    uri = (tmp_path / "mlruns").as_uri()
    logger = f"mlflow,tracking_uri={uri}"
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    err = _refused(rlx_cli, tmp_path, "--logger", logger, match="MLFLOW_ALLOW_FILE_STORE=true")
    assert "sqlite:///" in err
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    code, _, err = _tuned_run(
        rlx_cli,
        tmp_path,
        "--checkpoint-every",
        "1000",
        "--out",
        str(tmp_path / "run"),
        "--logger",
        logger,
        "--steps",
        "1200",
    )
    assert code == 0, err
    kept = json.loads((tmp_path / "run" / "final" / "state.json").read_text())["trainer"]
    stale = _csv_rows(tmp_path / "run")[kept["csv_rows"] :]
    assert stale  # the end-of-run row and evaluation come after the final checkpoint
    resume = ("run", "--resume", str(tmp_path / "run"), "--steps", "3000", "--no-progress")
    code, _, err = rlx_cli(*resume)  # the recorded store is outside the run: trust it first
    assert code == 2 and "tracking_uri" in err and "--trust-code" in err, err
    code, _, err = rlx_cli(*resume, "--trust-code")
    assert code == 0, err
    client, run = _mlflow_run(uri, "rlx/CartPole-v1")  # one MLflow run for both parts
    _check_mlflow_run(client, run, tmp_path / "run", stale=stale)
    assert client.get_metric_history(run.info.run_id, "env_steps")[-1].step >= 3000


def test_an_unreachable_mlflow_server_is_one_quick_message(rlx_cli, tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    # MLflow's own client retries an unreachable server for minutes: rlx must refuse it before
    # making one. (Checked directly rather than by the time taken, which a busy machine
    # stretches.)
    asked = []

    def client(*args, **kwargs):
        asked.append(kwargs)
        raise RuntimeError("MLflow's client was made for an unreachable server")

    monkeypatch.setattr(mlflow, "MlflowClient", client)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _refused(
        rlx_cli,
        tmp_path,
        "--logger",
        f"mlflow,tracking_uri=http://127.0.0.1:{port}",
        match=f"cannot reach the MLflow server at http://127.0.0.1:{port}",
    )
    assert asked == []


# -- Weights & Biases -----------------------------------------------------------------------------


def _wandb_records(path: Path) -> list:
    """The records of a ``.wandb`` file: a ':W&B' header, then leveldb-log framed protobufs
    (32 KiB blocks; 7-byte chunk headers: checksum, length, type)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    position, block, records, pending = 7, 32768, [], b""
    while position + 7 <= len(data):
        left = block - position % block
        if left < 7:  # the rest of a block is padding
            position += left
            continue
        length = int.from_bytes(data[position + 4 : position + 6], "little")
        kind = data[position + 6]
        chunk = data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk  # full/first, middle/last
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def test_wandb_offline_run_records_config_metrics_curve_and_checkpoint(
    registry, rlx_cli, tmp_path, monkeypatch
):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")  # never the network, whatever the option says
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-default"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    run_dir = tmp_path / "run"
    code, _, err = _tuned_run(
        rlx_cli, tmp_path, "--out", str(run_dir), "--logger", "wandb,mode=offline,project=rlx-test"
    )
    assert code == 0, err
    files = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1
    records = _wandb_records(files[0])
    kinds = [record.WhichOneof("record_type") for record in records]
    run = records[kinds.index("run")].run
    assert (
        run.project == "rlx-test" and run.run_id == (run_dir / "wandb" / "rlx-run-id").read_text()
    )
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    assert config["agent"] == "tuned-random" and config["hyperparameters"]["gamma"] == 0.97
    assert config["trainer"]["log_every"] == 500
    history = [
        {
            "/".join(item.nested_key) or item.key: json.loads(item.value_json)
            for item in r.history.item
        }
        for r in records
        if r.WhichOneof("record_type") == "history"
    ]
    with open(run_dir / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    logged = [h for h in history if "iterations" in h]
    assert [h["env_steps"] for h in logged] == [int(r["env_steps"]) for r in rows]
    evaluations = [
        (h["env_steps"], h["eval/return_mean"]) for h in logged if "eval/return_mean" in h
    ]
    assert evaluations == [
        (int(r["env_steps"]), pytest.approx(float(r["eval/return_mean"]), rel=1e-5))
        for r in rows
        if r["eval/return_mean"]
    ]
    images = [h["learning_curve/path"] for h in history if "learning_curve/path" in h]
    assert len(images) == 1 and images[0].endswith(".png")
    assert (files[0].parent / "files" / images[0]).is_file()
    artifact = records[kinds.index("artifact")].artifact
    assert artifact.type == "model"
    assert {entry.path for entry in artifact.manifest.contents} >= {
        "state.json",
        "policy.safetensors",
    }
    assert records[kinds.index("exit")].exit.exit_code == 0
    assert not (tmp_path / "wandb-default").exists()  # everything went into the run directory
    assert _wandb_children() == [], "wandb's service process outlived the run"


def _wandb_children() -> list[str]:
    """Names of this process's child processes that belong to wandb (Linux /proc)."""
    names = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :]
        if int(rest.split()[1]) == os.getpid() and "wandb" in name:
            names.append(name)
    return names
