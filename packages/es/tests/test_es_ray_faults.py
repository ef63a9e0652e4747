"""Ray workers lost and joining mid-run, on a two-node cluster started on this machine.

A lost actor's members are evaluated again elsewhere, so a run equals an uninterrupted one
with the same seed (a local run: every backend plays the same episodes for the same blocks).
"""

from __future__ import annotations

import functools
import logging
import sys
import time

import pytest

import rlx
from rlx.errors import RlxError, TrainingError
from rlx.testing import same_state
from rlx.trainer import Trainer
from rlx_es import evaluation

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

#: Two shards of 16 members: block_size=0 with workers=2 cuts the population into 2 blocks.
SETTINGS = {"env": "CartPole-v1", "seed": 5, "population_size": 32, "hidden_sizes": (8,)}


def _never_ray_init(monkeypatch) -> list:
    """``ray.init`` replaced by one that records its call and fails: the list stays empty when
    rlx refused the address itself (``ray.init`` would wait minutes). Checked this way rather
    than by the time taken, which a busy machine stretches."""
    calls: list = []

    def init(*args, **kwargs):
        calls.append(kwargs)
        raise RuntimeError("ray.init was called")

    monkeypatch.setattr(ray, "init", init)
    return calls


def _no_ray_cluster_here(monkeypatch):
    """As if no Ray cluster ran on this machine (other test runs may have one)."""
    if ray.is_initialized():
        pytest.skip("Ray is already initialised in this process")
    from ray._private import services

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(services, "find_gcs_addresses", lambda: [])
    monkeypatch.setattr(services, "find_bootstrap_address", lambda temp_dir: None)


def test_address_auto_without_a_cluster_is_one_clear_message(monkeypatch):
    _no_ray_cluster_here(monkeypatch)
    agent = rlx.make("openai-es", backend="ray", address="auto", **SETTINGS)
    init = _never_ray_init(monkeypatch)
    with pytest.raises(RlxError, match="address=auto found no running Ray cluster") as error:
        agent.step()
    assert "ray start --head" in str(error.value)
    assert init == []
    assert not ray.is_initialized()


def test_address_auto_with_an_unreachable_ray_address_fails_fast(monkeypatch):
    _no_ray_cluster_here(monkeypatch)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # ray.init would wait minutes
    agent = rlx.make("openai-es", backend="ray", address="auto", **SETTINGS)
    init = _never_ray_init(monkeypatch)
    with pytest.raises(RlxError, match="cannot reach a Ray cluster at"):
        agent.step()
    assert init == []


def test_a_ray_client_address_without_grpc_names_the_install_command(monkeypatch):
    if ray.is_initialized():
        pytest.skip("Ray is already initialised in this process")
    monkeypatch.setitem(sys.modules, "grpc", None)  # import grpc raises ImportError
    agent = rlx.make("openai-es", backend="ray", address="ray://127.0.0.1:10001", **SETTINGS)
    with pytest.raises(RlxError, match=r"pip install 'ray\[client\]'"):
        agent.step()


# -- on a cluster ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    """A head and one worker node of one CPU each, joined with ``address=auto``."""
    ray.shutdown()
    cluster = cluster_utils.Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("RAY_ADDRESS", cluster.address)  # what `ray start` users have
            yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def _reference(generations):
    """Returns and resume state of an uninterrupted run with the same seed and blocks."""
    agent = rlx.make("openai-es", backend="local", block_size=16, **SETTINGS)
    try:
        returns = [agent.step().episode_returns for _ in range(generations)]
        return returns, agent.resume_state()
    finally:
        agent.close()


def _sabotage(backend, action):
    """Run ``action(backend, running)`` once, just after the next shards are handed out."""
    original = backend._dispatch
    armed = []

    def dispatch(queue, running, population, block_seeds):
        original(queue, running, population, block_seeds)
        if armed and running:
            armed.clear()
            action(backend, running)

    backend._dispatch = dispatch
    return armed.append


def _wait_started(backend, timeout=120.0):
    """Wait until the actors Ray is placing have started (or ``timeout``: generous, for a
    busy machine)."""
    starting = [a.starting for a in backend.actors if a.starting is not None]
    if starting:
        ray.wait(starting, num_returns=len(starting), timeout=timeout)


def _kill_one(backend, running):
    actor, _ = next(iter(running.values()))
    ray.kill(actor.handle)


def _crashing_worker(armed_file):
    """A Ray actor class whose first task to start after ``armed_file`` appears ends its
    process (``os._exit``) in the middle of the task: exactly one crash, wherever it runs."""
    from rlx_es.evaluation import _RayWorker

    class CrashingWorker(_RayWorker):
        def evaluate(self, population, first, count, block_seeds):
            import os

            try:
                os.remove(armed_file)  # only one task wins the file
            except FileNotFoundError:
                return super().evaluate(population, first, count, block_seeds)
            os._exit(1)

    return CrashingWorker


@pytest.mark.parametrize("how", ["killed", "crashed"])
def test_an_actor_lost_mid_generation_changes_nothing(cluster, caplog, monkeypatch, tmp_path, how):
    """``killed``: ``ray.kill`` just after its shard is handed out; ``crashed``: its process
    exits while it evaluates."""
    expected_returns, expected_state = _reference(4)
    armed_file = tmp_path / "crash-now"
    if how == "crashed":
        monkeypatch.setattr(evaluation, "_RayWorker", _crashing_worker(str(armed_file)))
    agent = rlx.make("openai-es", backend="ray", workers=2, address="auto", **SETTINGS)
    try:
        backend = agent.backend
        _wait_started(backend)  # the previous test's actors may still hold the CPUs
        assert len(ray.nodes()) == 2  # auto joined the running cluster, started none
        assert len(backend.node_ids()) == 2
        if how == "killed":
            arm = functools.partial(_sabotage(backend, _kill_one), True)
        else:
            arm = armed_file.touch
        returns = []
        with caplog.at_level(logging.WARNING, logger="rlx_es.evaluation"):
            for generation in range(4):
                if generation == 1:
                    arm()
                returns.append(agent.step().episode_returns)
        lost = [r.getMessage() for r in caplog.records if "lost Ray worker" in r.getMessage()]
        assert len(lost) == 1
        assert "its 16 members (0 to 15)" in lost[0] or "its 16 members (16 to 31)" in lost[0]
        assert not armed_file.exists()
        assert returns == expected_returns
        assert same_state(agent.resume_state(), expected_state)
        _wait_started(backend)
        assert len(backend.node_ids()) == 2  # the lost actor was replaced
    finally:
        agent.close()


def test_a_node_removed_mid_generation_and_one_added_later(cluster, caplog):
    """The removed node's members are evaluated on the other; a node that joins gets work
    from the generation after its actor started."""
    expected_returns, expected_state = _reference(4)
    agent = rlx.make("openai-es", backend="ray", workers=2, address="auto", **SETTINGS)
    head = ray.get_runtime_context().get_node_id()
    try:
        backend = agent.backend
        _wait_started(backend)  # the previous test's actors may still hold the CPUs
        assert set(backend.node_ids()) == {head, cluster.list_all_nodes()[1].node_id}

        def remove_worker_node(backend, running):
            cluster.remove_node(cluster.list_all_nodes()[1])

        arm = _sabotage(backend, remove_worker_node)
        arm(True)
        with caplog.at_level(logging.WARNING, logger="rlx_es.evaluation"):
            returns = [agent.step().episode_returns]
        assert any("lost Ray worker" in r.getMessage() for r in caplog.records)
        assert backend.node_ids() == [head]  # its replacement waits for a CPU
        returns.append(agent.step().episode_returns)

        joined = cluster.add_node(num_cpus=1)
        waiting = [a.starting for a in backend.actors if a.starting is not None]
        assert len(waiting) == 1
        _wait_started(backend)
        returns.extend(agent.step().episode_returns for _ in range(2))
        assert set(backend.node_ids()) == {head, joined.node_id}
        assert all(actor.home is not None for actor in backend.actors)  # both got work
        assert returns == expected_returns
        assert same_state(agent.resume_state(), expected_state)
    finally:
        agent.close()


def test_every_actor_lost_and_none_placeable_stops_the_run_at_its_last_checkpoint(
    cluster, tmp_path
):
    """The run stops with one message before the generation changes anything; resumed, it
    goes on as if nothing had happened."""
    agent = rlx.make("openai-es", backend="ray", workers=2, address="auto", **SETTINGS)
    backend = agent.backend
    _wait_started(backend)

    def kill_all_and_starve(backend, running):
        # Replacements ask for a resource no node has: Ray keeps them waiting.
        backend.start_timeout = 1.0
        backend._actor_options = {"num_cpus": 1, "resources": {"rlx-test-absent": 1}}
        for actor in list(backend.actors):
            ray.kill(actor.handle)

    arm = _sabotage(backend, kill_all_and_starve)
    trainer = Trainer(
        agent,
        run_dir=tmp_path / "run",
        iterations=3,
        checkpoint_every=1,
        eval_episodes=0,
        plot=False,
        progress=False,
        verbose=False,
    )
    calls = []
    step = agent.step

    def step_and_arm():
        calls.append(1)
        if len(calls) == 2:
            arm(True)
        return step()

    agent.step = step_and_arm
    start = time.perf_counter()
    with pytest.raises(TrainingError) as error:
        trainer.fit()
    message = str(error.value)
    # Generous, for a busy machine: only a run that waited out the default start_timeout
    # (120 s) instead of the 1 s set above fails it.
    assert time.perf_counter() - start < 100
    assert "no Ray worker started within 1 s" in message
    assert "rlx run --resume" in message
    assert "last good checkpoint is" in message  # the trainer names the generation-1 one
    assert agent.generation == 1  # the generation that lost its workers changed nothing

    # Resumed from that checkpoint (new actors), the run equals an uninterrupted one.
    _, expected_state = _reference(3)
    resumed = Trainer.resume(tmp_path / "run")
    result = resumed.fit()
    assert result.iterations == 3
    assert same_state(resumed.agent.resume_state(), expected_state)


def test_a_worker_that_cannot_start_is_one_message_not_a_loss(cluster):
    """An actor whose constructor fails (a package missing on a node) would fail anywhere."""
    from rlx_es.evaluation import _RayWorker

    class Unstartable(_RayWorker):
        def __init__(self, settings):
            raise ModuleNotFoundError("No module named 'rlx_es_on_that_node'")

    def kill_all_and_break(backend, running):
        backend._actor_cls = ray.remote(Unstartable)
        for actor in list(backend.actors):
            ray.kill(actor.handle)

    agent = rlx.make("openai-es", backend="ray", workers=2, address="auto", **SETTINGS)
    try:
        backend = agent.backend
        _wait_started(backend)
        _sabotage(backend, kill_all_and_break)(True)
        message = r"could not start: ModuleNotFoundError: No module named 'rlx_es_on_that_node'"
        with pytest.raises(RlxError, match=message + r"\. Every node"):
            agent.step()
        assert backend.actors == []  # the backend stopped its other actors
    finally:
        agent.close()
