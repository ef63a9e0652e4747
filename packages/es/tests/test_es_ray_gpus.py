"""``gpus_per_worker``: Ray actors with GPUs, checked against a stand-in for Ray.

No GPU and no cluster is needed: a fake ``ray`` module records the options each actor is
created with and reports the GPUs a cluster would have, so the tests take milliseconds.
"""

from __future__ import annotations

import sys
import types

import pytest

import rlx
from rlx.errors import ConfigError, RlxError
from rlx_es import evaluation

SMALL = {"env": "CartPole-v1", "seed": 0, "population_size": 16, "hidden_sizes": (8,)}


class _Ref:
    """What a fake remote call returns: its value, at once."""

    def __init__(self, value):
        self.value = value


class _Method:
    def __init__(self, value):
        self.value = value

    def remote(self, *args):
        return _Ref(self.value)


class _Handle:
    """A fake actor: answers ``node_id`` and remembers the settings it was built with."""

    def __init__(self, options, settings):
        self.options, self.settings = options, settings
        self.node_id = _Method("node-0")


class _ActorClass:
    def __init__(self, ray):
        self.ray = ray

    def options(self, **options):
        ray = self.ray

        class _Bound:
            def remote(self, settings):
                handle = _Handle(options, settings)
                ray.actors.append(handle)
                return handle

        return _Bound()


class FakeRay(types.SimpleNamespace):
    """The calls RayBackend makes, over a cluster of nodes with ``gpus_per_node`` GPUs."""

    def __init__(self, gpus_per_node):
        super().__init__(exceptions=types.SimpleNamespace(), actors=[])
        self.gpus_per_node = list(gpus_per_node)

    def nodes(self):
        return [{"Alive": True, "Resources": {"CPU": 4.0, "GPU": g}} for g in self.gpus_per_node]

    def cluster_resources(self):
        return {"CPU": 4.0 * len(self.gpus_per_node), "GPU": float(sum(self.gpus_per_node))}

    available_resources = cluster_resources

    def remote(self, cls):
        assert cls is evaluation._RayWorker
        return _ActorClass(self)

    def put(self, value):
        return value

    def wait(self, refs, num_returns=1, timeout=None):
        refs = list(refs)
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        return ref.value

    def kill(self, handle):
        pass


@pytest.fixture
def fake_ray(monkeypatch):
    """Install a fake Ray of two nodes with one GPU each; set ``gpus_per_node`` to change it."""
    ray = FakeRay([1, 1])
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setattr(evaluation, "connect_ray", lambda address: None)
    return ray


@pytest.mark.parametrize("gpus", [0.25, 1])
def test_each_actor_is_created_with_its_gpus_and_evaluates_on_cuda(fake_ray, gpus):
    agent = rlx.make("openai-es", backend="ray", workers=2, gpus_per_worker=gpus, **SMALL)
    try:
        backend = agent.backend
        assert backend._actor_options["num_gpus"] == gpus
        assert len(fake_ray.actors) == 2
        for actor in fake_ray.actors:
            assert actor.options["num_gpus"] == gpus
            assert actor.options["num_cpus"] == 1
            assert actor.settings.device == "cuda"
        assert agent.settings.device == "cpu"  # the driver itself keeps the CPU
    finally:
        agent.close()


def test_without_gpus_per_worker_actors_ask_for_no_gpu_and_stay_on_the_cpu(fake_ray):
    fake_ray.gpus_per_node = [0]
    agent = rlx.make("openai-es", backend="ray", workers=2, **SMALL)
    try:
        assert agent.backend is not None
        assert [a.options["num_gpus"] for a in fake_ray.actors] == [0, 0]
        assert {a.settings.device for a in fake_ray.actors} == {"cpu"}
    finally:
        agent.close()


@pytest.mark.parametrize(
    "gpus_per_node, gpus, message",
    [
        (
            [0],
            1,
            "gpus_per_worker=1: each Ray worker needs 1 GPUs on one node, but the cluster "
            "has 0 GPUs.",
        ),
        ([0, 0], 0.5, "needs 0.5 GPUs on one node, but the cluster has 0 GPUs."),
        ([1, 1], 2, "needs 2 GPUs on one node, but the cluster has 2 GPUs (1 on its largest node)"),
    ],
)
def test_a_cluster_without_the_gpus_one_worker_needs_is_one_config_error(
    fake_ray, gpus_per_node, gpus, message
):
    fake_ray.gpus_per_node = gpus_per_node
    agent = rlx.make("openai-es", backend="ray", workers=2, gpus_per_worker=gpus, **SMALL)
    with pytest.raises(ConfigError) as error:
        _ = agent.backend
    assert message in str(error.value)
    assert fake_ray.actors == []  # refused before any actor waits for a GPU forever


@pytest.mark.parametrize("backend", ["local", "process"])
def test_gpus_per_worker_without_ray_is_refused(backend):
    with pytest.raises(ConfigError, match=f"backend={backend} starts none: set backend=ray"):
        rlx.make("openai-es", backend=backend, gpus_per_worker=1, **SMALL)


def test_more_than_one_gpu_must_be_whole():
    with pytest.raises(ConfigError, match="above 1 give a whole number of GPUs"):
        rlx.make("openai-es", backend="ray", gpus_per_worker=1.5, **SMALL)


def test_device_cuda_with_ray_points_to_gpus_per_worker():
    with pytest.raises(ConfigError, match="gpus_per_worker=1"):
        rlx.make("openai-es", backend="ray", device="cuda", **SMALL)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "gpus_per_worker=1"], "backend=local starts none"),
        (["--set", "gpus_per_worker=-1"], "gpus_per_worker"),
    ],
)
def test_the_command_line_refuses_it_with_exit_code_2(rlx_cli, tmp_path, args, message):
    code, _, err = rlx_cli(
        "run",
        "openai-es",
        "--env",
        "CartPole-v1",
        "--steps",
        "2000",
        "--out",
        str(tmp_path / "run"),
        "--set",
        "population_size=16",
        "--no-progress",
        *args,
    )
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_the_command_line_refuses_a_cluster_without_gpus_with_exit_code_2(
    fake_ray, rlx_cli, tmp_path
):
    fake_ray.gpus_per_node = [0, 0]
    code, _, err = rlx_cli(
        "run",
        "openai-es",
        "--env",
        "CartPole-v1",
        "--steps",
        "2000",
        "--out",
        str(tmp_path / "run"),
        "--set",
        "population_size=16",
        "--set",
        "backend=ray",
        "--set",
        "gpus_per_worker=1",
        "--no-progress",
    )
    assert code == 2
    assert "the cluster has 0 GPUs" in err
    assert "Traceback" not in err


def test_an_actor_given_a_gpu_its_torch_cannot_see_does_not_start(monkeypatch):
    import dataclasses

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(evaluation, "_ignore_sigint", lambda: None)  # keep pytest's Ctrl-C
    agent = rlx.make("openai-es", **SMALL)
    settings = dataclasses.replace(agent.settings, device="cuda")
    with pytest.raises(RlxError, match="its torch sees no CUDA device"):
        evaluation._RayWorker(settings)
