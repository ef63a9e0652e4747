"""rlx's loggers outside a Trainer (:class:`rlx.loggers.MetricsLogger`) and the console table
of every metric (:class:`rlx.loggers.TableLogger`, the trainer's ``table_every``)."""

from __future__ import annotations

import csv
import importlib.util
import io
import types
from typing import ClassVar

import pytest
from rich.console import Console

import rlx
import rlx.plugin
from rlx import LoggerSpec, hookimpl
from rlx.errors import ConfigError, RlxError, UnknownNameError
from rlx.loggers import MetricsLogger, TableLogger
from rlx.trainer import Trainer


class Tracker:
    """A plugin's tracker that keeps every call."""

    EVENTS: ClassVar[list[tuple]] = []

    def __init__(self, project: str = "p") -> None:
        self.project = project

    def start(self, run):
        self.EVENTS.append(
            ("start", run.run_dir.name, run.identity.agent, dict(run.identity.hyperparameters))
        )

    def log(self, step, row):
        self.EVENTS.append(("log", step, dict(row)))

    def finish(self, result):
        self.EVENTS.append(("finish", getattr(result, "stop_reason", None)))


@pytest.fixture
def registry(rlx_registry):
    Tracker.EVENTS = []
    rlx_registry.add_plugin(rlx.plugin, "rlx-core", "0.1.0")
    module = types.ModuleType("tracker_plugin")

    @hookimpl
    def rlx_register_loggers(register):
        register(LoggerSpec(name="tracker", target=f"{__name__}:Tracker", summary="keeps calls"))

    module.rlx_register_loggers = rlx_register_loggers
    rlx_registry.add_plugin(module, "rlx-tracker", "1.0")
    return rlx_registry


def _csv(path) -> list[dict[str, str]]:
    with open(path / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_loop_of_ones_own_logs_to_csv_tensorboard_a_tracker_and_a_table(registry, tmp_path):
    text = io.StringIO()
    console = Console(file=text, width=100)
    with MetricsLogger(
        tmp_path / "mine",
        loggers=["tracker,project=q"],
        table_every=20,
        console=console,
        name="my-agent",
        hyperparameters={"lr": 0.1},
    ) as logger:
        for step in range(10, 50, 10):
            logger.write({"loss": 1 / step, "reward": step}, step)
    rows = _csv(tmp_path / "mine")
    assert [row["step"] for row in rows] == ["10", "20", "30", "40"]
    assert rows[1] == {"step": "20", "loss": "0.05", "reward": "20"}
    assert Tracker.EVENTS[0] == ("start", "mine", "my-agent", {"lr": 0.1})
    assert Tracker.EVENTS[2] == ("log", 20, {"step": 20, "loss": 0.05, "reward": 20})
    assert Tracker.EVENTS[-1] == ("finish", "closed")
    shown = text.getvalue()
    assert shown.count("metric") == 2 and "step 20" in shown and "step 40" in shown
    assert "0.025" in shown  # the newest loss, in the table at step 40
    if importlib.util.find_spec("tensorboard") is not None:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        events = EventAccumulator(str(tmp_path / "mine" / "tensorboard"))
        events.Reload()
        assert set(events.Tags()["scalars"]) == {"loss", "reward"}
        assert [e.step for e in events.Scalars("loss")] == [10, 20, 30, 40]


def test_an_error_in_the_loop_marks_the_trackers_run_failed(registry, tmp_path):
    with pytest.raises(KeyError):
        with MetricsLogger(tmp_path / "mine", loggers=["tracker"], tensorboard=False) as logger:
            logger.write({"x": 1.0}, 1)
            raise KeyError("a bug in the loop")
    assert Tracker.EVENTS[-1] == ("finish", None)
    assert _csv(tmp_path / "mine") == [{"step": "1", "x": "1"}]


def test_bad_input_is_one_clear_error(registry, tmp_path):
    with pytest.raises(UnknownNameError, match="Did you mean: tracker"):
        MetricsLogger(tmp_path / "a", loggers=["trackr"])
    assert not (tmp_path / "a").exists()
    with pytest.raises(ConfigError, match="no option 'projct'"):
        MetricsLogger(tmp_path / "a", loggers=["tracker,projct=x"])
    with pytest.raises(ConfigError, match="whole number of steps"):
        MetricsLogger(tmp_path / "a", table_every=-5)
    logger = MetricsLogger(tmp_path / "a", tensorboard=False)
    with pytest.raises(ConfigError, match="step must be an integer"):
        logger.write({"x": 1}, 1.5)
    logger.write({"x": 1}, 1)
    logger.close()
    logger.close()  # a second close does nothing
    with pytest.raises(RlxError, match="closed"):
        logger.write({"x": 2}, 2)
    with pytest.raises(ConfigError, match=r"holds a metrics\.csv already"):
        MetricsLogger(tmp_path / "a")


def test_the_table_prints_at_each_multiple_and_at_the_end():
    text = io.StringIO()
    table = TableLogger(100, Console(file=text, width=100))
    for step in (40, 80, 120, 160, 250):
        table.log(step, {"env_steps": step, "train/return_mean": step / 10})
    table.finish(object())
    titles = [line.strip() for line in text.getvalue().splitlines() if "step " in line]
    assert titles == ["step 120", "step 250"]  # the one due at 200; nothing new at the end
    assert "│ train/return_mean │ 25 │" in " ".join(text.getvalue().split())


def test_the_trainer_prints_tables_of_every_metric_only_when_asked(tmp_path):
    def run(name, **settings):
        text = io.StringIO()
        agent = rlx.make("random", "CartPole-v1", seed=0)
        Trainer(
            agent,
            steps=1000,
            run_dir=tmp_path / name,
            console=Console(file=text, width=120),
            eval_every=500,
            eval_episodes=2,
            log_every=250,
            verbose=False,
            **settings,
        ).fit()
        return text.getvalue()

    shown = run("table", table_every=500)
    assert shown.count("┃ metric") == 3, shown  # at 500, at 1000, and the final evaluation's row
    for metric in ("env_steps", "train/return_mean", "eval/return_mean", "time/elapsed_s"):
        assert metric in shown
    assert "metric" not in run("quiet")


def test_the_cli_option_prints_tables_and_a_bad_value_exits_2(rlx_cli, tmp_path):
    args = ["run", "random", "--env", "CartPole-v1", "--steps", "600", "--no-progress"]
    code, _, err = rlx_cli(*args, "--out", str(tmp_path / "run"), "--table-every", "300")
    assert code == 0, err
    assert "train/return_mean" in err and "┃ metric" in err
    code, _, err = rlx_cli(*args, "--out", str(tmp_path / "bad"), "--table-every", "-1")
    assert code == 2 and "table_every" in err and "Traceback" not in err
    assert not (tmp_path / "bad").exists()
