"""Seed groups trained as one batched computation (``rlx run ppo --seeds 0-2``, batched by
default): the seeds' run directories are those of the seeds trained one by one, up to
floating-point rounding; resume, Ctrl-C and a failing seed keep the group's promises."""

from __future__ import annotations

import io
import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from test_interrupts import (  # the Ctrl-C harness
    _assert_same_agent_state,
    _csv_rows,
    _finish,
    _process_group,
    _rlx,
)

from rlx.checkpoint import load_checkpoint
from rlx.groups import GroupTrainer, link_seeds, new_group, train_side_by_side
from rlx.testing.checks import SEED_BATCH_TOLERANCE
from rlx.trainer import Trainer, new_run

TIMEOUT = 120.0
SMALL_PPO = {"n_steps": 32, "batch_size": 64, "n_epochs": 4}
QUIET = {
    "eval_every": 1024,
    "eval_episodes": 2,
    "log_every": 256,
    "checkpoint_every": 0,
    "progress": False,
    "plot": False,
    "tensorboard": False,
}

#: A third-party PPO whose seed 1 has a critic of NaN: batched like PPO (it inherits the
#: batched update), its seed 1 must fail alone.
FAILING_PPO = """
import torch
from rlx_onpolicy.ppo import PPO

class NanCriticInSeedOne(PPO):
    def build(self):
        super().build()
        if self.seed == 1:
            with torch.no_grad():
                self.policy.critic_vector.fill_(float("nan"))
"""


SMALL_SAC = {"learning_starts": 64, "batch_size": 32, "train_freq": 16, "gradient_steps": 4,
             "hidden_sizes": (32, 32), "buffer_size": 5_000}  # fmt: skip


def _group(path: Path, steps: int, batched: bool, agent: str = "ppo", **extra) -> object:
    sac = agent == "sac"
    return new_group(
        agent, "Pendulum-v1" if sac else "CartPole-v1", seeds=[0, 1, 2], jobs=1,
        hyperparameters=SMALL_SAC if sac else SMALL_PPO, settings={**QUIET, "steps": steps},
        out=path, batched=batched, **extra,
    ).fit()  # fmt: skip


def _final(group: Path, seed: int):
    return load_checkpoint(group / f"seed-{seed}" / "final")


def _column(group: Path, seed: int, name: str) -> list[str]:
    rows = (group / f"seed-{seed}" / "metrics.csv").read_text().splitlines()
    index = rows[0].split(",").index(name)
    return [row.split(",")[index] for row in rows[1:]]


@pytest.mark.parametrize(("agent", "steps"), [("ppo", 2048), ("sac", 512)])
def test_a_batched_group_is_its_seeds_trained_one_by_one(tmp_path, agent, steps):
    batched = _group(tmp_path / "batched", steps, True, agent)
    alone = _group(tmp_path / "alone", steps, False, agent)
    assert not batched.failed and not alone.failed
    for seed in range(3):
        a, b = _final(tmp_path / "batched", seed), _final(tmp_path / "alone", seed)
        for key, value in a.policy.arrays.items():
            np.testing.assert_allclose(
                value, b.policy.arrays[key], atol=SEED_BATCH_TOLERANCE, rtol=0
            )
        for column in ("env_steps", "iterations"):
            assert _column(tmp_path / "batched", seed, column) == _column(
                tmp_path / "alone", seed, column
            )
    returns = [entry["final_return"] for entry in batched.summary["runs"]]
    assert all(r is not None for r in returns)


def test_a_batched_group_resumes_exactly(tmp_path):
    """Trained to 1,024 steps and resumed to 2,048: the same weights, optimiser state and
    metrics rows as the group trained to 2,048 at once."""
    _group(tmp_path / "resumed", 1024, batched=True)
    GroupTrainer.resume(tmp_path / "resumed", jobs=1, steps=2048).fit()
    _group(tmp_path / "straight", 2048, batched=True)
    for seed in range(3):
        a, b = _final(tmp_path / "resumed", seed), _final(tmp_path / "straight", seed)
        assert a.resume is not None and b.resume is not None
        for part, other in ((a.policy, b.policy), (a.resume, b.resume)):
            for key, value in part.arrays.items():
                np.testing.assert_array_equal(value, other.arrays[key], err_msg=key)
        for column in ("env_steps", "episodes", "agent/policy_loss"):
            assert _column(tmp_path / "resumed", seed, column) == _column(
                tmp_path / "straight", seed, column
            )


def _train_batch(trainers: dict[int, Trainer]) -> None:
    """Train ``trainers`` (seed -> trainer) as a group's worker trains its chunk, in this
    process: linked into one batch, in lockstep."""
    batch, why = link_seeds([trainer.agent for trainer in trainers.values()])
    assert batch is not None, why
    for seed, outcome in train_side_by_side(trainers, batch):
        assert not isinstance(outcome, Exception), f"seed {seed}: {outcome}"


def _new_batch(group: Path, agent: str, env: str, budgets: list[int], **run) -> None:
    """Seeds 0, 1, 2 of ``agent`` in new runs ``group/seed-K``, seed K to ``budgets[K]``
    steps, trained as one batch (:func:`_train_batch`); ``run``: :func:`new_run`'s settings."""
    settings, quiet = run.pop("settings"), Console(file=io.StringIO())
    trainers = {}
    for seed, steps in enumerate(budgets):
        out = group / f"seed-{seed}"
        budget = {**settings, "steps": steps}
        trainers[seed] = new_run(
            agent, env, seed=seed, settings=budget, out=out, console=quiet, **run
        )
    _train_batch(trainers)


def _rows(run: Path) -> list[dict[str, str]]:
    """metrics.csv's rows, less the wall-clock columns."""
    header, *rows = (run / "metrics.csv").read_text().splitlines()
    names = header.split(",")
    return [
        {n: v for n, v in zip(names, row.split(","), strict=True) if not n.startswith("time/")}
        for row in rows
    ]


def _assert_same_seeds(group: Path, other: Path) -> None:
    """Every seed's final checkpoint (weights, optimiser state, buffers, random streams,
    counters) array for array, and its metrics.csv row for row, as in ``other``."""
    for seed in range(3):
        _assert_same_agent_state(group / f"seed-{seed}" / "final", other / f"seed-{seed}" / "final")
        rows = _rows(group / f"seed-{seed}")
        assert len(rows) > 2 and rows == _rows(other / f"seed-{seed}"), f"seed {seed}"


#: Every agent whose seeds train as one batch, with networks and budgets small enough for a
#: few seconds each: (environment, hyperparameters, steps of one round of a seed).
ON_POLICY = {"n_envs": 2, "n_steps": 16, "hidden_sizes": (16,)}
OFF_POLICY = {"learning_starts": 32, "batch_size": 16, "train_freq": 8, "gradient_steps": 2,
              "hidden_sizes": (16,), "buffer_size": 1_000}  # fmt: skip
#: DQN's epsilon decays over a share of the training budget unless given in steps; a budget
#: raised on resume would change it (in a single run too).
EPSILON = {"exploration_steps": 64}
EVERY_BATCHED_AGENT = {
    "ppo": ("CartPole-v1", {**ON_POLICY, "batch_size": 16, "n_epochs": 2}, 32),
    "a2c": ("CartPole-v1", ON_POLICY, 32),
    "vpg": ("CartPole-v1", {**ON_POLICY, "value_iterations": 2}, 32),
    "trpo": ("CartPole-v1", ON_POLICY, 32),
    "maskable-ppo": ("rlx/MaskedPick-v0", {**ON_POLICY, "batch_size": 16, "n_epochs": 2}, 32),
    "dqn": ("CartPole-v1", {**OFF_POLICY, **EPSILON, "target_update_interval": 40}, 8),
    "qr-dqn": ("CartPole-v1", {**OFF_POLICY, **EPSILON, "n_quantiles": 8}, 8),
    "ddpg": ("Pendulum-v1", OFF_POLICY, 8),
    # 3 updates a round, a policy step every 2nd: the seeds' phases alternate round by round
    "td3": ("Pendulum-v1", {**OFF_POLICY, "gradient_steps": 3}, 8),
    "sac": ("Pendulum-v1", OFF_POLICY, 8),
}
TINY = {**QUIET, "eval_every": 100_000, "eval_episodes": 1, "log_every": 16}


@pytest.mark.parametrize("agent", list(EVERY_BATCHED_AGENT))
def test_batched_seeds_stopped_apart_resume_exactly(tmp_path, agent):
    """Seeds stopped at different rounds (seed K K rounds later, as a Ctrl-C between two
    seeds' iterations leaves them: the later ones went on alone) and resumed as one batch
    end as the batch trained straight on: no seed's arithmetic depends on which seeds step
    with it, or at what counts."""
    env, hyperparameters, round_steps = EVERY_BATCHED_AGENT[agent]
    half, full = 4 * round_steps, 12 * round_steps
    run = {"hyperparameters": hyperparameters, "settings": TINY}
    _new_batch(tmp_path / "resumed", agent, env, [half + k * round_steps for k in range(3)], **run)
    quiet = Console(file=io.StringIO())
    _train_batch(
        {
            seed: Trainer.resume(tmp_path / "resumed" / f"seed-{seed}", console=quiet, steps=full)
            for seed in range(3)
        },
    )
    _new_batch(tmp_path / "straight", agent, env, [full] * 3, **run)
    _assert_same_seeds(tmp_path / "resumed", tmp_path / "straight")


def test_a_batched_seed_whose_loss_is_not_finite_fails_alone(tmp_path, monkeypatch):
    (tmp_path / "nan_ppo.py").write_text(FAILING_PPO)
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned workers get this sys.path too
    result = _group(tmp_path / "group", 1024, True, "nan_ppo:NanCriticInSeedOne", trust_code=True)
    assert sorted(result.failed) == [1] and "the loss became nan" in result.failed[1]
    assert sorted(result.results) == [0, 2]
    assert all(result.results[seed].env_steps >= 1024 for seed in (0, 2))


def test_seeds_that_cannot_be_batched_train_one_by_one_with_a_notice(tmp_path, rlx_cli):
    group = tmp_path / "group"
    code, _, err = rlx_cli(
        "run", "ppo", "--env", "CartPole-v1", "--seeds", "0-1", "--jobs", "1", "--steps", "512",
        "-s", "n_steps=32", "-s", "target_kl=0.02", "--out", str(group),
    )  # fmt: skip
    assert code == 0, err
    assert "notice: these seeds train one by one: PPO's target_kl early stop is not batched" in err
    assert all(_csv_rows(group / f"seed-{k}") > 0 for k in (0, 1))


@pytest.mark.parametrize("agent", ["tqc", "crossq"])
def test_seeds_whose_batches_measured_slower_train_one_after_another(agent):
    """TQC's and CrossQ's batches measured slower than their seeds one after another
    (``seed_batches_pay = False``): a group does not link them, and says why; their class
    still links them for whoever asks (``seed_batch``)."""
    import rlx
    from rlx.groups import link_seeds

    small = {"hidden_sizes": (8, 8), "batch_size": 8, "learning_starts": 8}
    agents = [rlx.make(agent, "Pendulum-v1", seed=seed, **small) for seed in (0, 1)]
    batch, why = link_seeds(agents)
    assert batch is None
    assert why is not None and "faster one after another" in why
    assert type(agents[0]).seed_batch(agents) is not None


def test_no_batched_needs_a_group(tmp_path, rlx_cli):
    code, _, err = rlx_cli("run", "ppo", "--env", "CartPole-v1", "--no-batched")
    assert code == 2 and "--no-batched applies to a group of seeds" in err
    assert err.count("\n") == 1, err


def _interrupt_group(tmp_path: Path, group: Path, *args: str) -> list[int]:
    """``rlx run ARGS --seeds 0-2 --out GROUP``, Ctrl-C'd (SIGINT to its process group) once
    every seed has logged a row; checks the clean stop and returns each seed's steps."""
    command = _rlx("run", *args, "--seeds", "0-2", "--out", str(group), "--no-progress")
    with _process_group(command, tmp_path / "interrupted") as process:
        deadline = time.monotonic() + TIMEOUT
        while _csv_rows(group / "seed-2") < 1 and process.poll() is None:
            assert time.monotonic() < deadline, "the group did not start training in time"
            time.sleep(0.05)
        assert process.poll() is None, (tmp_path / "interrupted.err").read_text()
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=TIMEOUT)
    err = (tmp_path / "interrupted.err").read_text()
    assert code == 130 and "Traceback" not in err, err
    steps = [
        json.loads((group / f"seed-{k}" / "final" / "state.json").read_text())["trainer"][
            "env_steps"
        ]
        for k in range(3)
    ]
    assert all(n > 0 for n in steps)
    return steps


@pytest.mark.skipif(os.name != "posix", reason="process groups and SIGINT")
def test_ctrl_c_stops_a_batched_group_and_resume_completes_it(tmp_path):
    group = tmp_path / "group"
    config = tmp_path / "trainer.toml"
    config.write_text("[trainer]\nlog_every = 256\nplot = false\ntensorboard = false\n")
    steps = _interrupt_group(
        tmp_path, group, "ppo", "--env", "CartPole-v1", "--jobs", "1", "--steps", "100000000",
        "-s", "n_steps=32", "--config", str(config),
    )  # fmt: skip
    budget = max(steps) + 512
    code, err = _finish(tmp_path, "resumed", "--resume", str(group), "--steps", str(budget))
    assert code == 0, err
    summary = json.loads((group / "summary.json").read_text())
    assert [entry["stop_reason"] for entry in summary["runs"]] == ["steps"] * 3


@pytest.mark.skipif(os.name != "posix", reason="process groups and SIGINT")
def test_a_batched_sac_group_ctrl_c_d_and_resumed_is_the_group_never_stopped(tmp_path):
    """Ctrl-C stops each seed after its round, a seed after the next one when the signal
    comes between two seeds' iterations (it goes on alone); resumed in one batch (as
    ``--resume`` with the same ``--jobs`` does), every seed ends as in the group trained
    straight to the same budget. Both are trained here as a worker trains its chunk
    (:func:`_train_batch`): two more starts of rlx would double the test's time."""
    group, straight = tmp_path / "group", tmp_path / "straight"
    config = tmp_path / "trainer.toml"
    config.write_text(
        "[trainer]\nlog_every = 64\neval_episodes = 0\nplot = false\ntensorboard = false\n"
    )
    hyperparameters = {"learning_starts": 32, "batch_size": 16, "hidden_sizes": [16],
                       "train_freq": 8, "gradient_steps": 2}  # fmt: skip
    settings = [f"{name}={json.dumps(value)}" for name, value in hyperparameters.items()]
    steps = _interrupt_group(
        tmp_path, group, "sac", "--env", "Pendulum-v1", "--jobs", "1", "--config", str(config),
        "--steps", "100000000", *(part for each in settings for part in ("-s", each)),
    )  # fmt: skip
    budget = max(steps) + 64
    quiet = Console(file=io.StringIO())
    _train_batch(
        {
            seed: Trainer.resume(group / f"seed-{seed}", console=quiet, steps=budget)
            for seed in range(3)
        }
    )
    trainer = {"log_every": 64, "eval_episodes": 0, "plot": False, "tensorboard": False}
    _new_batch(
        straight, "sac", "Pendulum-v1", [budget] * 3, hyperparameters=hyperparameters,
        settings={**trainer, "progress": False}, tuned=True,
    )  # fmt: skip
    _assert_same_seeds(group, straight)
