from __future__ import annotations

import csv
import os
import signal
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

import rlx
from rlx.callbacks import Callback
from rlx.checkpoint import load_checkpoint
from rlx.errors import CheckpointError, ConfigError
from rlx.protocols import AgentState, Iteration
from rlx.testing import same_state
from rlx.trainer import Trainer, TrainerConfig

TIMING_COLUMNS = {"time/elapsed_s", "time/steps_per_second"}


def _rows(run_dir) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return [
            {k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in csv.DictReader(f)
        ]


def _train(tmp_path, name, steps, **settings):
    agent = rlx.make("random", "CartPole-v1", seed=3)
    settings = {"eval_every": 1000, "log_every": 500, "progress": False, **settings}
    return Trainer(agent, steps=steps, run_dir=tmp_path / name, **settings).fit()


def test_step_budget_stops_the_run_and_writes_the_run_directory(tmp_path):
    result = _train(tmp_path, "run", 2000)
    assert result.stop_reason == "steps"
    assert 2000 <= result.env_steps < 2000 + 500
    run = tmp_path / "run"
    for name in ("config.json", "metrics.csv", "final/state.json", "best/policy.safetensors"):
        assert (run / name).exists(), name
    assert not (run / "best" / "resume.safetensors").exists()
    rows = _rows(run)
    assert any(row["eval/return_mean"] for row in rows)
    assert any(row["train/return_mean"] for row in rows)
    assert result.final_eval is not None and result.final_eval.episodes == 10


def test_iteration_and_time_budgets(tmp_path):
    agent = rlx.make("random", "CartPole-v1", seed=0)
    result = Trainer(agent, steps=None, iterations=7, eval_every=0, progress=False).fit()
    assert (result.stop_reason, result.iterations) == ("iterations", 7)
    result = Trainer(agent, steps=None, time_limit=0.2, eval_every=0, progress=False).fit()
    # Not before the limit; the upper bound only catches a limit that is never checked (a
    # busy machine stretches the last iteration, so it is no claim of promptness).
    assert result.stop_reason == "time" and 0.2 <= result.elapsed < 30.0


def test_a_run_needs_a_budget():
    with pytest.raises(ConfigError, match="at least one budget"):
        TrainerConfig(steps=None)


def test_early_stop_at_the_target_return(tmp_path):
    result = _train(tmp_path, "run", 100_000, target_return=5.0)
    assert result.stop_reason == "target"
    assert result.env_steps < 2000
    assert result.final_eval.mean_return >= 5.0


def test_a_callback_sees_every_evaluation_and_can_stop_the_run(tmp_path):
    seen = []

    class Prune(Callback):
        def on_evaluation(self, trainer, result):
            seen.append((trainer.env_steps, result.mean_return))
            return "pruned" if len(seen) == 3 else None

    result = _train(tmp_path, "run", 100_000, callbacks=[Prune()])
    assert result.stop_reason == "pruned"
    assert [step for step, _ in seen] == sorted(step for step, _ in seen) and len(seen) == 3
    assert 3000 <= result.env_steps < 4000
    assert result.final_eval.mean_return == seen[-1][1]
    assert (tmp_path / "run" / "final" / "state.json").exists()


def test_without_a_run_directory_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    agent = rlx.make("random", "CartPole-v1", seed=0)
    result = Trainer(agent, steps=500, progress=False).fit()
    assert result.run_dir is None and list(tmp_path.iterdir()) == []


def test_periodic_checkpoints_are_pruned_to_the_newest(tmp_path):
    _train(tmp_path, "run", 5000, checkpoint_every=1000, keep_checkpoints=2)
    kept = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert len(kept) == 2 and int(kept[-1]) >= 4000


def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path):
    _train(tmp_path, "whole", 4000, checkpoint_every=1000)
    _train(tmp_path, "split", 1700, checkpoint_every=1000)
    resumed = Trainer.resume(tmp_path / "split", steps=4000).fit()
    assert resumed.stop_reason == "steps"
    whole = load_checkpoint(tmp_path / "whole" / "final")
    split = load_checkpoint(tmp_path / "split" / "final")
    assert same_state(whole.policy, split.policy) and same_state(whole.resume, split.resume)
    assert _rows(tmp_path / "whole") == _rows(tmp_path / "split")


def test_resume_refuses_a_corrupt_newest_checkpoint(tmp_path):
    _train(tmp_path, "run", 1000)
    (tmp_path / "run" / "final" / "resume.safetensors").write_bytes(b"garbage")
    before = (tmp_path / "run" / "metrics.csv").read_text()
    with pytest.raises(CheckpointError, match="corrupt"):
        Trainer.resume(tmp_path / "run", steps=2000)
    assert (tmp_path / "run" / "metrics.csv").read_text() == before


def test_an_existing_run_directory_is_never_overwritten(tmp_path):
    _train(tmp_path, "run", 500)
    before = (tmp_path / "run" / "config.json").read_text()
    with pytest.raises(CheckpointError, match="already exists"):
        _train(tmp_path, "run", 500)
    assert (tmp_path / "run" / "config.json").read_text() == before


@dataclass
class _NoConfig:
    pass


class InterruptingAgent:
    """Counts iterations and sends itself SIGINT during iteration ``interrupt_at``."""

    Config = _NoConfig

    def __init__(self, env, config, seed, interrupt_at=5):
        self.env, self.config, self.seed = env, config, seed
        self.count, self.interrupt_at = 0, interrupt_at

    def step(self):
        self.count += 1
        if self.count == self.interrupt_at:
            os.kill(os.getpid(), signal.SIGINT)
        return Iteration(env_steps=10, episode_returns=[float(self.count)], episode_lengths=[10])

    def act(self, observation, deterministic=True):
        return 0

    def policy_state(self):
        return AgentState()

    def load_policy_state(self, state):
        pass

    def resume_state(self):
        return AgentState(arrays={"count": np.array([self.count])})

    def load_resume_state(self, state):
        self.count = int(state.arrays["count"][0])


def test_ctrl_c_finishes_the_iteration_saves_and_stops(tmp_path):
    import gymnasium

    agent = InterruptingAgent(gymnasium.make("CartPole-v1"), _NoConfig(), 0)
    result = Trainer(agent, steps=1000, run_dir=tmp_path / "run", progress=False).fit()
    assert result.stop_reason == "interrupted"
    assert result.iterations == 5
    checkpoint = load_checkpoint(tmp_path / "run" / "final")
    assert int(checkpoint.resume.arrays["count"][0]) == 5
    assert checkpoint.document["trainer"]["env_steps"] == 50
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_tensorboard_events_are_written_when_tensorboard_is_installed(tmp_path):
    pytest.importorskip("tensorboard", reason="optional extra rlx-core[tensorboard]")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _train(tmp_path, "run", 2000)
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    assert "eval/return_mean" in events.Tags()["scalars"]
    assert len(events.Scalars("train/return_mean")) >= 3


def test_the_progress_bar_shows_the_live_return_on_a_terminal():
    import io

    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=150)
    agent = rlx.make("random", "CartPole-v1", seed=0)
    Trainer(agent, steps=3000, eval_every=1000, console=console).fit()
    text = screen.getvalue()
    assert "random on CartPole-v1" in text
    assert "return " in text and "best eval" in text
    assert "eval return" in text


class RegretAgent(InterruptingAgent):
    """Logs a growing cumulative regret, as bandit agents do, and suggests trainer settings."""

    trainer_defaults: ClassVar[dict[str, int]] = {"eval_episodes": 0, "log_every": 20}

    def step(self):
        self.count += 1
        return Iteration(env_steps=10, metrics={"cumulative_regret": float(self.count)})


def test_agent_trainer_defaults_apply_and_explicit_settings_win(tmp_path):
    import gymnasium

    agent = RegretAgent(gymnasium.make("CartPole-v1"), _NoConfig(), 0)
    trainer = Trainer(agent, steps=200, run_dir=tmp_path / "run", progress=False)
    assert (trainer.config.eval_episodes, trainer.config.log_every) == (0, 20)
    result = trainer.fit()
    assert result.final_eval is None, "eval_episodes=0 never evaluates"
    assert Trainer(agent, steps=10, log_every=5).config.log_every == 5


def test_the_run_ends_with_a_learning_curve_including_regret(tmp_path):
    pytest.importorskip("matplotlib", reason="optional extra rlx-core[plot]")
    import gymnasium

    agent = RegretAgent(gymnasium.make("CartPole-v1"), _NoConfig(), 0)
    result = Trainer(agent, steps=200, run_dir=tmp_path / "run", progress=False).fit()
    assert result.metrics == {"cumulative_regret": 20.0}
    png = tmp_path / "run" / "learning_curve.png"
    assert png.read_bytes()[:4] == b"\x89PNG"
    rows = _rows(tmp_path / "run")
    assert [float(r["agent/cumulative_regret"]) for r in rows][-1] == 20.0


class CountingAgent(InterruptingAgent):
    """Records which state parts the trainer asks for, and whether it was closed."""

    def __init__(self, env, config, seed):
        super().__init__(env, config, seed, interrupt_at=-1)
        self.calls = {"policy": 0, "resume": 0, "close": 0}

    def step(self):
        iteration = super().step()
        if self.count == self.fail_at:
            raise RuntimeError("boom")
        return iteration

    fail_at = -1

    def act(self, observation, deterministic=True):
        # Improves at every evaluation, so each evaluation is a new best.
        return int(self.count % 2)

    def policy_state(self):
        self.calls["policy"] += 1
        return AgentState(arrays={"count": np.array([self.count])})

    def resume_state(self):
        self.calls["resume"] += 1
        return super().resume_state()

    def close(self):
        self.calls["close"] += 1


def test_a_new_best_writes_the_policy_and_never_the_resume_part(tmp_path):
    import gymnasium

    agent = CountingAgent(gymnasium.make("CartPole-v1"), _NoConfig(), 0)
    trainer = Trainer(
        agent,
        steps=100,
        eval_every=10,
        eval_episodes=1,
        checkpoint_every=50,
        run_dir=tmp_path / "run",
        progress=False,
        verbose=False,
        plot=False,
    )
    trainer.fit()
    periodic = len(list((tmp_path / "run" / "checkpoints").iterdir()))
    # resume_state: once per periodic checkpoint and once for final/, never for best/.
    assert periodic == 2 and agent.calls["resume"] == periodic + 1
    assert agent.calls["policy"] > agent.calls["resume"]
    best = load_checkpoint(tmp_path / "run" / "best")
    assert best.resume is None and not (tmp_path / "run" / "best" / "resume.safetensors").exists()


@pytest.mark.parametrize("fail", [False, True])
def test_fit_closes_the_agent_whatever_the_ending(tmp_path, fail):
    import gymnasium

    agent = CountingAgent(gymnasium.make("CartPole-v1"), _NoConfig(), 0)
    agent.fail_at = 3 if fail else -1
    trainer = Trainer(agent, steps=100, eval_episodes=0, progress=False, plot=False)
    if fail:
        with pytest.raises(RuntimeError, match="boom"):
            trainer.fit()
    else:
        trainer.fit()
    assert agent.calls["close"] == 1


def test_an_agent_built_without_make_gets_a_correct_identity(tmp_path):
    import gymnasium

    from rlx.agents.random import RandomAgent, RandomConfig
    from rlx.protocols import RunIdentity

    agent = RandomAgent(gymnasium.make("CartPole-v1"), RandomConfig(), 7)
    trainer = Trainer(agent, steps=300, run_dir=tmp_path / "run", progress=False, plot=False)
    assert trainer.identity == RunIdentity(
        agent="random",
        env="CartPole-v1",
        seed=7,
        env_kwargs=dict(agent.env.spec.kwargs),
        family="baseline",
        distribution=trainer.identity.distribution,
    )
    trainer.fit()
    resumed = Trainer.resume(tmp_path / "run", steps=600, progress=False, plot=False)
    assert resumed.identity == trainer.identity
    assert resumed.fit().env_steps >= 600


def test_the_run_identity_is_frozen():
    import dataclasses

    agent = rlx.make("random", "CartPole-v1", seed=3)
    assert agent.identity.seed == 3 and agent.identity.agent == "random"
    with pytest.raises(dataclasses.FrozenInstanceError):
        agent.identity.seed = 4
    with pytest.raises(TypeError):
        agent.identity.hyperparameters["x"] = 1


def test_a_run_that_fails_before_its_first_checkpoint_leaves_no_folder_it_made(tmp_path):
    from rlx.errors import TrainingError

    agent = rlx.make("random", "CartPole-v1", seed=0)

    def fail() -> None:
        raise TrainingError("diverged")

    agent.step = fail
    (tmp_path / "kept").mkdir()
    for run_dir in (tmp_path / "runs" / "nested" / "run", tmp_path / "kept" / "run"):
        with pytest.raises(TrainingError, match="diverged"):
            Trainer(agent, steps=1000, run_dir=run_dir, progress=False).fit()
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]  # folders that were there stay
    assert list((tmp_path / "kept").iterdir()) == []
