"""The Ray backend on a two-node cluster started on this machine (loopback only)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")


@pytest.fixture
def two_node_cluster():
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False},
    )
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def _run(**backend):
    """Returns of three generations, the final centre and the nodes that evaluated them."""
    agent = rlx.make(
        "openai-es",
        env="CartPole-v1",
        seed=3,
        population_size=32,
        block_size=8,
        hidden_sizes=(8,),
        **backend,
    )
    try:
        returns = [agent.step().episode_returns for _ in range(3)]
        nodes = agent.backend.node_ids() if backend["backend"] == "ray" else []
        return returns, agent.strategy.mean.copy(), nodes
    finally:
        agent.close()


def test_a_run_on_a_two_node_ray_cluster_matches_a_local_run(two_node_cluster):
    local_returns, local_centre, _ = _run(backend="local")
    ray_returns, ray_centre, nodes = _run(
        backend="ray", address=two_node_cluster.address, workers=2
    )
    assert len(set(nodes)) == 2  # one actor on each node
    assert ray_returns == local_returns
    np.testing.assert_array_equal(ray_centre, local_centre)
