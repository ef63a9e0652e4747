"""Ctrl-C as a terminal sends it: SIGINT to the whole process group, worker processes included.

Each test starts ``rlx run`` in a process group of its own, waits until it is training, signals
the whole group and checks that the run still stops the way one Ctrl-C should: the iteration
finishes, ``final/`` is saved, the exit code is 130 with no traceback, and the run resumes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from rlx.checkpoint import load_checkpoint

#: Seconds any one ``rlx run`` may take before the test gives up on it.
TIMEOUT = 120.0

#: Trainer settings that keep the runs short: a row of metrics.csv every 500 steps (the sign
#: that a run is training), no evaluation, plot or TensorBoard events.
TRAINER_SETTINGS = """
[trainer]
log_every = 500
eval_episodes = 0
plot = false
tensorboard = false
"""


def _rlx(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlx.cli", *args]


@contextmanager
def _process_group(command: list[str], log: Path) -> Iterator[subprocess.Popen]:
    """``command`` in a new session (so a process group of its own, as a terminal's foreground
    job), output in ``log``.{out,err}; whatever of the group is left is killed at the end."""
    with open(f"{log}.out", "w") as out, open(f"{log}.err", "w") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, start_new_session=True)
    try:
        yield process
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def _csv_rows(run: Path) -> int:
    try:
        return max(0, len((run / "metrics.csv").read_text().splitlines()) - 1)
    except FileNotFoundError:
        return 0


def _settings(tmp_path: Path) -> tuple[str, str]:
    """``--config FILE`` with :data:`TRAINER_SETTINGS`."""
    file = tmp_path / "trainer.toml"
    file.write_text(TRAINER_SETTINGS)
    return "--config", str(file)


def _interrupt(tmp_path: Path, run: Path, *args: str) -> tuple[int, str]:
    """Start ``rlx run ARGS --out RUN``; once it has logged a row of metrics.csv, Ctrl-C the
    whole group. Returns the exit code and stderr."""
    log = tmp_path / f"{run.name}-interrupted"
    command = _rlx("run", *args, *_settings(tmp_path), "--out", str(run), "--no-progress")
    with _process_group(command, log) as process:
        deadline = time.monotonic() + TIMEOUT
        while _csv_rows(run) < 1 and process.poll() is None:
            assert time.monotonic() < deadline, "the run did not start training in time"
            time.sleep(0.05)
        assert process.poll() is None, Path(f"{log}.err").read_text()
        time.sleep(0.2)  # into a later iteration: the workers are busy when the signal comes
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=TIMEOUT)
    return code, Path(f"{log}.err").read_text()


def _finish(tmp_path: Path, name: str, *args: str) -> tuple[int, str]:
    """Run ``rlx run ARGS`` to its end (in a group of its own); exit code and stderr."""
    log = tmp_path / name
    with _process_group(_rlx("run", *args, "--no-progress"), log) as process:
        code = process.wait(timeout=TIMEOUT)
    return code, Path(f"{log}.err").read_text()


def _env_steps(checkpoint: Path) -> int:
    return json.loads((checkpoint / "state.json").read_text())["trainer"]["env_steps"]


def _assert_stopped_cleanly(code: int, err: str, run: Path) -> int:
    assert code == 130, err
    assert "Traceback" not in err, err
    assert "continue with: rlx run --resume" in err, err
    steps = _env_steps(run / "final")
    assert steps > 0
    return steps


def _assert_same_agent_state(a: Path, b: Path) -> None:
    first, second = load_checkpoint(a), load_checkpoint(b)
    for part in ("policy", "resume"):
        x, y = getattr(first, part), getattr(second, part)
        assert x.meta == y.meta, part
        assert x.arrays.keys() == y.arrays.keys(), part
        for key in x.arrays:
            np.testing.assert_array_equal(x.arrays[key], y.arrays[key], err_msg=f"{part}/{key}")


ES_PROCESS = (
    "openai-es",
    "--env",
    "CartPole-v1",
    "--seed",
    "5",
    "--set",
    "backend=process",
    "--set",
    "workers=2",
    "--set",
    "population_size=16",
    # Two blocks of 8, so that both workers get one (the default block holds 128 members).
    "--set",
    "block_size=8",
    "--set",
    "hidden_sizes=[8]",
)


def test_ctrl_c_to_the_group_stops_es_with_worker_processes_and_resumes_exactly(tmp_path):
    """Process workers ignore SIGINT, so the generation finishes and ``final/`` is saved.

    ES generations are deterministic given the checkpoint, and the trainer checks its step
    budget only between generations, so a run interrupted after ``k < n`` steps and resumed
    with ``--steps n`` stops after the same generation as a run given ``--steps n`` from the
    start, with the same state. ``n`` is chosen once the interrupted run has stopped.
    """
    run = tmp_path / "es"
    code, err = _interrupt(tmp_path, run, *ES_PROCESS, "--steps", "100000000")
    interrupted_at = _assert_stopped_cleanly(code, err, run)

    budget = str(interrupted_at + 1500)
    code, err = _finish(tmp_path, "es-resumed", "--resume", str(run), "--steps", budget)
    assert code == 0, err
    assert _env_steps(run / "final") >= int(budget)

    reference = tmp_path / "es-reference"
    code, err = _finish(
        tmp_path,
        "es-reference",
        *ES_PROCESS,
        *_settings(tmp_path),
        "--steps",
        budget,
        "--out",
        str(reference),
    )
    assert code == 0, err
    assert _env_steps(reference / "final") == _env_steps(run / "final")
    _assert_same_agent_state(run / "final", reference / "final")


def test_ctrl_c_to_the_group_stops_a2c_with_async_environments_and_resumes(tmp_path):
    """Async vector environments' workers ignore SIGINT; they restart their episodes on
    resume, so only that the run resumes and finishes is checked."""
    run = tmp_path / "a2c"
    code, err = _interrupt(
        tmp_path,
        run,
        "a2c",
        "--env",
        "CartPole-v1",
        "--set",
        "vectorization=async",
        "--set",
        "n_envs=2",
        # Long rollouts: a Ctrl-C then nearly always comes while the environments step, when
        # a worker that died of it breaks the run (during an update it would go unnoticed).
        "--set",
        "n_steps=64",
        "--steps",
        "100000000",
    )
    interrupted_at = _assert_stopped_cleanly(code, err, run)
    budget = interrupted_at + 500
    code, err = _finish(tmp_path, "a2c-resumed", "--resume", str(run), "--steps", str(budget))
    assert code == 0, err
    assert _env_steps(run / "final") >= budget


def test_es_worker_processes_start_with_sigint_ignored():
    """A spawned worker ignores SIGINT from its first instruction, not only once the worker
    function runs: Ctrl-C while it still imports (the first generation) is safe too."""
    import multiprocessing

    from rlx_es.evaluation import _children_ignore_sigint

    handler = signal.getsignal(signal.SIGINT)
    # Its first and only instruction: a SIGINT to itself, fatal unless ignored.
    process = multiprocessing.get_context("spawn").Process(
        target=signal.raise_signal, args=(signal.SIGINT,)
    )
    with _children_ignore_sigint():
        process.start()
    process.join(TIMEOUT)
    assert process.exitcode == 0
    assert signal.getsignal(signal.SIGINT) is handler


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_async_vector_env_workers_ignore_sigint(start_method):
    """Workers started either way survive a SIGINT of their own and go on stepping."""
    import multiprocessing

    import gymnasium as gym

    from rlx.vector import make_vector_env

    previous = multiprocessing.get_start_method()
    multiprocessing.set_start_method(start_method, force=True)
    try:
        envs = make_vector_env(gym.make("CartPole-v1"), 2, "async")
    finally:
        multiprocessing.set_start_method(previous, force=True)
    try:
        envs.reset(seed=0)
        for process in envs.processes:
            os.kill(process.pid, signal.SIGINT)
        time.sleep(0.2)
        for _ in range(20):
            envs.step(envs.action_space.sample())
        assert all(process.is_alive() for process in envs.processes)
    finally:
        envs.close()


def test_ray_actors_ignore_sigint():
    """The Ray backend's actors ignore SIGINT.

    No Ctrl-C test of a whole run: Ray (2.x) starts its workers in process groups of their own
    and its own processes with SIGINT blocked, so such a test passes without rlx's part, and
    with its resume it takes about 20 seconds here (two Ray starts).
    """
    ray = pytest.importorskip("ray")
    import rlx

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        agent = rlx.make(
            "openai-es",
            env="CartPole-v1",
            backend="ray",
            workers=1,
            population_size=4,
            hidden_sizes=(4,),
        )
        try:
            (actor,) = agent.backend.actors
            disposition = ray.get(
                actor.handle.__ray_call__.remote(lambda _: signal.getsignal(signal.SIGINT)),
                timeout=TIMEOUT,
            )
        finally:
            agent.close()
    finally:
        ray.shutdown()
    assert disposition == signal.SIG_IGN


def test_a_run_started_with_sigint_ignored_keeps_it_ignored(tmp_path):
    """A script's background job starts with SIGINT ignored: a Ctrl-C meant for the script
    does not stop the training, which runs to its budget."""
    run = tmp_path / "run"
    command = _rlx(
        "run", "random", "--env", "CartPole-v1", "--steps", "3000", *_settings(tmp_path),
        "--out", str(run), "--no-progress",
    )  # fmt: skip
    log = tmp_path / "ignored"
    with open(f"{log}.out", "w") as out, open(f"{log}.err", "w") as err:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=err,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
    try:
        deadline = time.monotonic() + TIMEOUT
        while _csv_rows(run) < 1 and process.poll() is None:
            assert time.monotonic() < deadline, "the run did not start training in time"
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert code == 0, Path(f"{log}.err").read_text()
    assert _env_steps(run / "final") >= 3000
