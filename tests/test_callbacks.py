"""Callbacks (rlx.callbacks): they see every event, stop runs with their own reasons, keep
their state across a resume, fail with their name, and the command line records them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import rlx
from rlx.callbacks import (
    Callback,
    CheckpointEvery,
    EvaluateOn,
    LogMetrics,
    StopAtReturn,
    StopOnPlateau,
    build,
    normalize,
)
from rlx.errors import ConfigError, TrainingError
from rlx.runs import RunDirectory, read_metrics
from rlx.trainer import Trainer

QUIET = {"progress": False, "verbose": False, "tensorboard": False, "plot": False}


def trainer(run_dir: Path | None, steps: int = 3000, callbacks=(), **settings) -> Trainer:
    agent = rlx.make("random", "CartPole-v1", seed=3)
    options = {**QUIET, "eval_every": 500, "eval_episodes": 3, "log_every": 500, **settings}
    return Trainer(agent, run_dir=run_dir, steps=steps, callbacks=callbacks, **options)


class Recorder(Callback):
    """Every event it sees, in order; its count of iterations is its state."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.iterations = 0

    def on_start(self, trainer):
        self.events.append("start")

    def on_iteration(self, trainer, iteration):
        self.iterations += 1
        self.events.append("iteration")

    def on_evaluation(self, trainer, result):
        self.events.append("evaluation")

    def on_checkpoint(self, trainer, path):
        self.events.append(f"checkpoint {path.name}")

    def on_stop(self, trainer, reason):
        self.events.append(f"stop {reason}")

    def on_end(self, trainer, result):
        self.events.append("end" if result is not None else "failed")

    def state(self):
        return {"iterations": self.iterations}

    def load_state(self, state):
        self.iterations = state["iterations"]


def test_a_callback_sees_every_event_in_order(tmp_path):
    recorder = Recorder()
    result = trainer(tmp_path / "run", steps=1000, callbacks=[recorder]).fit()
    events = recorder.events
    assert events[0] == "start" and events[-1] == "end"
    assert events.count("iteration") == result.iterations == recorder.iterations
    assert events.count("evaluation") == 2  # at 500 and 1000 steps; the final one is the last
    assert "checkpoint best" in events
    stop = events.index("stop steps")
    assert events[stop - 1] == "checkpoint final"  # final/ is written before on_stop


def test_built_in_stops_plateau_and_return(tmp_path):
    result = trainer(tmp_path / "a", steps=100_000, callbacks=[StopOnPlateau(patience=2)]).fit()
    assert result.stop_reason == "plateau" and result.env_steps < 100_000
    result = trainer(tmp_path / "b", steps=100_000, callbacks=[StopAtReturn(10.0)]).fit()
    assert result.stop_reason == "target" and result.final_eval.mean_return >= 10.0


def test_checkpoint_every_evaluate_on_and_log_metrics(tmp_path):
    callbacks = [
        CheckpointEvery(700, keep=10),
        EvaluateOn("CartPole-v1", episodes=2, env_kwargs={"max_episode_steps": 20}),
        LogMetrics(lambda t: {"twice_steps": 2 * t.env_steps}),
    ]
    trainer(tmp_path / "run", steps=2200, callbacks=callbacks, checkpoint_every=0).fit()
    names = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert [int(n) // 700 for n in names] == [1, 2, 3]
    _, rows = read_metrics(tmp_path / "run" / "metrics.csv")
    other = [
        float(r["eval/CartPole-v1/return_mean"])
        for r in rows
        if r.get("eval/CartPole-v1/return_mean")
    ]
    assert len(other) >= 4 and max(other) <= 20  # the capped episodes of the other environment
    custom = [r for r in rows if r.get("custom/twice_steps")]
    assert custom and all(float(r["custom/twice_steps"]) == 2 * int(r["env_steps"]) for r in custom)


def test_a_callback_that_raises_stops_the_run_with_its_name_and_the_last_checkpoint(tmp_path):
    class Broken(Callback):
        def on_iteration(self, trainer, iteration):
            if trainer.env_steps > 1500:
                raise ValueError("no such metric")

    recorder = Recorder()
    run = tmp_path / "run"
    with pytest.raises(TrainingError) as caught:
        trainer(run, steps=5000, callbacks=[recorder, Broken()], checkpoint_every=500).fit()
    message = str(caught.value)
    assert "callback Broken failed in on_iteration: no such metric" in message
    assert "last good checkpoint is" in message and "checkpoints" in message
    assert recorder.events[-1] == "failed"  # every started callback still ends
    latest = RunDirectory(run).latest_checkpoint()  # nothing lost: the run resumes from there
    assert json.loads((latest / "state.json").read_text())["trainer"]["env_steps"] >= 1500


def test_callback_state_joins_the_checkpoint_and_resume_stays_exact(tmp_path):
    whole = Recorder()
    plateau = StopOnPlateau(patience=3)
    expected = trainer(tmp_path / "whole", steps=100_000, callbacks=[whole, plateau]).fit()
    before = StopOnPlateau(patience=3)
    trainer(tmp_path / "split", steps=1200, callbacks=[Recorder(), before]).fit()
    again, plateau_again = Recorder(), StopOnPlateau(patience=3)
    resumed = Trainer.resume(tmp_path / "split", steps=100_000, callbacks=[again, plateau_again])
    saved = json.loads((tmp_path / "split" / "final" / "state.json").read_text())["trainer"]
    assert saved["callbacks"]["Recorder"] == {"iterations": again.iterations} and again.iterations
    # final/ is written before the split run's own final evaluation, which the whole run
    # never made: the state taken back is the one before it.
    assert saved["callbacks"]["stop-on-plateau"] == plateau_again.state()
    assert plateau_again.stale == before.stale - 1
    result = resumed.fit()
    assert (result.stop_reason, result.env_steps) == ("plateau", expected.env_steps)
    assert again.iterations == whole.iterations


def test_bad_callbacks_are_one_message():
    with pytest.raises(ConfigError, match="patience must be an integer"):
        StopOnPlateau(patience=0)
    with pytest.raises(ConfigError, match="Did you mean: stop-on-plateau"):
        build(normalize("stop-on-platea")[0])
    with pytest.raises(ConfigError, match="patient"):
        build(normalize("stop-on-plateau,patient=3")[0])
    with pytest.raises(ConfigError, match=r"not a subclass of rlx\.callbacks\.Callback"):
        build(normalize("collections:OrderedDict")[0])


# -- the command line ------------------------------------------------------------------------

MODULE = """
from rlx.callbacks import Callback

class Halfway(Callback):
    def __init__(self, at=1000):
        self.at = at

    def on_iteration(self, trainer, iteration):
        return "halfway" if trainer.env_steps >= self.at else None
"""


def test_the_command_line_records_callbacks_and_resume_needs_trust_for_code(
    tmp_path, rlx_cli, monkeypatch
):
    (tmp_path / "my_callbacks.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_callbacks", raising=False)
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "random", "--env", "CartPole-v1", "--steps", "3000", "--out", str(run),
        "--callback", "my_callbacks:Halfway,at=1000", "--callback", "stop-on-plateau,patience=50",
        "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    config = json.loads((run / "config.json").read_text())
    assert config["trainer"]["callbacks"] == [
        {"name": "my_callbacks:Halfway", "kwargs": {"at": 1000}},
        {"name": "stop-on-plateau", "kwargs": {"patience": 50}},
    ]
    assert (
        json.loads((run / "final" / "state.json").read_text())["trainer"]["stop_reason"]
        == "halfway"
    )
    before = (run / "config.json").read_text()
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "4000", "--no-progress")
    assert code == 2 and "my_callbacks:Halfway" in err and "--trust-code" in err, err
    assert (run / "config.json").read_text() == before
    code, out, err = rlx_cli(
        "run", "--resume", str(run), "--steps", "4000", "--trust-code", "--no-progress"
    )
    assert code == 0 and "stopped (halfway)" in out, err


def test_an_unknown_callback_on_the_command_line_is_one_message(tmp_path, rlx_cli):
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "random", "--env", "CartPole-v1", "--out", str(run), "--callback", "stop-on-platea"
    )
    assert code == 2 and "Did you mean: stop-on-plateau" in err, err
    assert not run.exists()
