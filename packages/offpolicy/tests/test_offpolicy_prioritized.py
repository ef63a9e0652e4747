"""Prioritized replay: the sum tree against brute force, proportional draws, importance
weights, max-priority insertion, exact checkpoints, and DQN with it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.testing import check_agent
from rlx.trainer import Trainer
from rlx_offpolicy.prioritized import PrioritizedReplayBuffer, SumTree

FAST = dict(learning_starts=64, batch_size=32, train_freq=16, gradient_steps=4)


def brute_force_find(leaves: np.ndarray, prefix_sums: np.ndarray) -> np.ndarray:
    """The first leaf whose cumulative sum exceeds each prefix sum (the last non-zero leaf
    past the total): a search of the running sums of all the leaves."""
    cumulative = np.cumsum(leaves)
    found = np.searchsorted(cumulative, np.maximum(prefix_sums, 0.0), side="right")
    return np.minimum(found, np.flatnonzero(leaves)[-1])


def check_sums(tree: SumTree) -> None:
    """Every parent is exactly the sum of its two children."""
    nodes = tree.nodes
    parents = np.arange(1, tree.offset)
    np.testing.assert_array_equal(nodes[parents], nodes[2 * parents] + nodes[2 * parents + 1])


# -- the sum tree ----------------------------------------------------------------------------


@pytest.mark.parametrize("capacity", [1, 2, 8, 1000])
def test_vectorised_updates_with_repeated_indices_keep_the_last_write_and_exact_sums(capacity):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity)
    expected = np.zeros(capacity)
    for _ in range(50):
        size = int(rng.integers(1, 3 * capacity + 2))
        indices = rng.integers(capacity, size=size)  # many repeats
        priorities = rng.random(size) * (rng.random(size) > 0.2)  # some zeros
        tree.update(indices, priorities)
        for index, priority in zip(indices, priorities, strict=True):
            expected[index] = priority  # one at a time: the last write wins
        np.testing.assert_array_equal(tree.leaves, expected)
        assert tree.total == pytest.approx(expected.sum(), rel=1e-12, abs=1e-300)
        check_sums(tree)
    # The tree is a function of its leaves: rebuilt from them, it is the same bit for bit.
    rebuilt = SumTree(capacity)
    rebuilt.set_leaves(expected)
    np.testing.assert_array_equal(rebuilt.nodes, tree.nodes)


def test_an_update_with_one_index_repeated_in_a_batch_takes_its_last_value():
    tree = SumTree(5)
    tree.update(np.array([3, 1, 3, 3, 1]), np.array([9.0, 2.0, 7.0, 4.0, 6.0]))
    np.testing.assert_array_equal(tree.leaves, [0.0, 6.0, 0.0, 4.0, 0.0])
    assert tree.total == 10.0
    tree.update(np.array([0, 4]), 0.5)  # a scalar sets them all
    assert tree.total == 11.0


@pytest.mark.parametrize("capacity", [1, 6, 777, 5000, 100_000])
def test_find_agrees_with_a_brute_force_cumulative_search_including_the_boundaries(capacity):
    rng = np.random.default_rng(capacity)
    leaves = rng.integers(0, 5, size=capacity).astype(float)  # integers: exact sums
    leaves[capacity - capacity // 20 - 1 :] = 0.0  # unfilled leaves, as in a new buffer
    leaves[0] = 1.0
    tree = SumTree(capacity)
    tree.update(np.arange(capacity), leaves)
    total = leaves.sum()
    boundaries = np.concatenate([[0.0], np.cumsum(leaves)])  # each leaf's start and end
    queries = np.concatenate(
        [
            boundaries,
            boundaries[1:] - 0.5,
            rng.uniform(0, total, size=5000),
            [total, total + 3.0, -1.0, np.nextafter(total, 0.0)],
        ]
    )
    found = tree.find(queries)
    np.testing.assert_array_equal(found, brute_force_find(leaves, queries))
    assert (leaves[found] > 0).all()  # never a zero leaf


def test_find_agrees_with_brute_force_on_random_real_priorities():
    rng = np.random.default_rng(2)
    capacity = 30_000
    leaves = rng.exponential(size=capacity) * (rng.random(capacity) > 0.1)
    tree = SumTree(capacity)
    tree.set_leaves(leaves)
    queries = rng.uniform(0, tree.total, size=20_000)
    np.testing.assert_array_equal(tree.find(queries), brute_force_find(leaves, queries))


def test_an_empty_tree_and_bad_priorities_are_refused():
    tree = SumTree(4)
    with pytest.raises(ValueError, match="empty"):
        tree.find(np.array([0.0]))
    with pytest.raises(ValueError, match="finite and non-negative"):
        tree.update(np.array([0]), np.array([np.nan]))
    with pytest.raises(ValueError, match="finite and non-negative"):
        tree.update(np.array([0]), np.array([-1.0]))
    with pytest.raises(IndexError, match=r"\[0, 4\)"):
        tree.update(np.array([4]), np.array([1.0]))


# -- the buffer ------------------------------------------------------------------------------


def buffer(capacity: int = 16, n_envs: int = 1, **kwargs) -> PrioritizedReplayBuffer:
    return PrioritizedReplayBuffer(
        capacity, n_envs, (1,), np.dtype(np.float32), (), np.dtype(np.int64), **kwargs
    )


def fill(buf: PrioritizedReplayBuffer, steps: int, rng: np.random.Generator) -> None:
    """``steps`` vector steps whose observation is ``1000 * env + t`` (t counts per buffer)."""
    n = buf.n_envs
    for _ in range(steps):
        t = float(len(buf))
        observations = (1000.0 * np.arange(n) + t)[:, None].astype(np.float32)
        buf.add(
            observations,
            rng.integers(2, size=n),
            rng.normal(size=n),
            observations + 0.5,
            rng.random(n) < 0.1,
            rng.random(n) < 0.2,
            np.ones(n, bool),
        )


def test_draws_are_proportional_to_the_priorities():
    buf = buffer(capacity=8, alpha=0.6, eps=1e-6)
    rng = np.random.default_rng(0)
    fill(buf, 8, rng)
    td_errors = np.array([0.05, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 0.0])
    buf.update_priorities(np.arange(8), td_errors)
    expected = (td_errors + 1e-6) ** 0.6
    expected /= expected.sum()
    draws = np.concatenate([buf.draw(500, rng) for _ in range(100)])  # 50,000 draws
    counts = np.bincount(draws, minlength=8)
    chi_square = float((((counts - 50_000 * expected) ** 2) / (50_000 * expected)).sum())
    assert chi_square < 24.3, (chi_square, counts)  # chi2(7) at 99.9%


def test_importance_weights_follow_the_formula_and_batches_map_leaves_to_transitions():
    buf = buffer(capacity=12, n_envs=2, alpha=0.7, eps=0.01)
    rng = np.random.default_rng(3)
    fill(buf, 5, rng)  # 10 transitions of 12 leaves
    td_errors = rng.exponential(size=10)
    leaves = np.array([s * 2 + e for s in range(5) for e in range(2)])
    buf.update_priorities(leaves, td_errors)
    priorities = buf.priorities
    np.testing.assert_allclose(priorities[leaves], (np.abs(td_errors) + 0.01) ** 0.7)
    for beta in (0.0, 0.4, 1.0):
        batch = buf.sample(64, rng, gamma=0.9, beta=beta)
        drawn = batch["indices"]
        probabilities = priorities[drawn] / priorities.sum()
        weights = (10 * probabilities) ** -beta
        assert batch["weights"].dtype == np.float32
        np.testing.assert_allclose(batch["weights"], weights / weights.max(), rtol=1e-6)
        # Leaf slot * n_envs + env holds the transition of that slot and environment.
        slots, envs = drawn // 2, drawn % 2
        np.testing.assert_array_equal(
            batch["observations"][:, 0], buf.arrays["observations"][slots, envs, 0]
        )
        assert set(envs.tolist()) == {0, 1}


def test_new_transitions_get_the_largest_priority_seen_so_far():
    buf = buffer(capacity=4, alpha=0.5, eps=1e-6)
    rng = np.random.default_rng(4)
    fill(buf, 2, rng)
    np.testing.assert_array_equal(buf.priorities, [1.0, 1.0, 0.0, 0.0])  # 1 at first
    buf.update_priorities(np.array([0, 1]), np.array([15.0, 3.0]))
    largest = (15.0 + 1e-6) ** 0.5
    buf.update_priorities(np.array([0]), np.array([0.0]))  # lowered: the max is kept
    fill(buf, 1, rng)
    assert buf.priorities[2] == largest and buf.max_priority == largest
    fill(buf, 2, rng)  # the ring overwrites slot 0: the new transition gets the max
    np.testing.assert_array_equal(buf.priorities, [largest, (3.0 + 1e-6) ** 0.5, largest, largest])
    assert buf.tree.total == pytest.approx(3 * largest + (3.0 + 1e-6) ** 0.5)


def test_a_long_warm_up_keeps_few_leaves_waiting_and_marks_them_all():
    buf = buffer(capacity=2000)
    rng = np.random.default_rng(7)
    fill(buf, 1500, rng)
    buf.update_priorities(np.array([0]), np.array([8.0]))  # max (8 + 1e-6)^0.6 from now
    fill(buf, 1000, rng)  # wraps around: slots 1500.. then 0..499
    assert len(buf._pending) < 1024
    expected = np.ones(2000)
    expected[list(range(1500, 2000)) + list(range(500))] = (8.0 + 1e-6) ** 0.6
    np.testing.assert_array_equal(buf.priorities, expected)


def test_each_stored_step_marks_the_leaf_of_its_slot_and_environment():
    buf = buffer(capacity=6, n_envs=2)
    zeros = np.zeros((2, 1), np.float32)

    def step(valid):
        no = np.zeros(2, bool)
        buf.add(zeros, np.zeros(2, np.int64), np.zeros(2), zeros, no, no, np.array(valid))

    step([True, False])  # env 1 resets: nothing stored for it
    np.testing.assert_array_equal(buf.priorities, [1, 0, 0, 0, 0, 0])
    step([True, True])  # env 0 writes slot 1 (leaf 2), env 1 its slot 0 (leaf 1)
    np.testing.assert_array_equal(buf.priorities, [1, 1, 1, 0, 0, 0])
    slots, envs = buf.sample_indices(200, np.random.default_rng(0))
    assert set(zip(slots.tolist(), envs.tolist(), strict=True)) == {(0, 0), (1, 0), (0, 1)}


def test_a_checkpoint_of_the_buffer_resumes_sampling_exactly():
    rng = np.random.default_rng(5)
    buf = buffer(capacity=24, n_envs=3, alpha=0.6, eps=1e-3)
    fill(buf, 11, rng)  # the ring wraps around
    for _ in range(5):
        batch = buf.sample(8, rng, gamma=0.9, n_step=2, beta=0.5)
        buf.update_priorities(batch["indices"], rng.normal(size=8) * 3)
    fill(buf, 2, rng)  # pending max-priority leaves at the checkpoint
    twin = buffer(capacity=24, n_envs=3, alpha=0.6, eps=1e-3)
    twin.load(buf.state("b"), "b")
    np.testing.assert_array_equal(twin.tree.nodes, buf.tree.nodes)
    assert twin.max_priority == buf.max_priority
    rngs = np.random.default_rng(6), np.random.default_rng(6)
    for round_ in range(10):
        batches = [
            b.sample(16, r, gamma=0.9, n_step=2, beta=0.5)
            for b, r in zip((buf, twin), rngs, strict=True)
        ]
        for name in batches[0]:
            np.testing.assert_array_equal(batches[0][name], batches[1][name], err_msg=name)
        td_errors = np.random.default_rng(round_).normal(size=16)
        for b in (buf, twin):
            b.update_priorities(batches[0]["indices"], td_errors)
            fill(b, 1, np.random.default_rng(round_))
    np.testing.assert_array_equal(twin.tree.nodes, buf.tree.nodes)


# -- DQN with prioritized replay -------------------------------------------------------------


def test_prioritized_dqn_keeps_the_agent_contract():
    check_agent("prioritized-dqn", "CartPole-v1", iterations=3, **FAST)


def test_prioritized_dqn_with_updates_before_the_checkpoint_resumes_exactly():
    # Five iterations of 2 x 16 steps: updates (and priority updates) before the checkpoint.
    check_agent(
        "prioritized-dqn", "CartPole-v1", iterations=5, n_envs=2, n_step=3, loss="mse", **FAST
    )


def test_the_preset_turns_on_prioritized_double_dqn_at_a_quarter_of_the_step_size():
    config = rlx.make("prioritized-dqn", "CartPole-v1").config
    assert config.prioritized and config.double and not config.dueling
    assert config.learning_rate == rlx.make("dqn", "CartPole-v1").config.learning_rate / 4
    assert isinstance(rlx.make("prioritized-dqn", "CartPole-v1").buffer, PrioritizedReplayBuffer)
    assert not isinstance(rlx.make("dqn", "CartPole-v1").buffer, PrioritizedReplayBuffer)


def test_beta_rises_linearly_to_one_over_the_budget():
    agent = rlx.make("prioritized-dqn", "CartPole-v1", priority_beta=0.4, **FAST)
    assert agent.importance_beta == 0.4  # no budget yet: constant
    agent.set_training_budget(1000)
    agent.env_steps = 500
    assert agent.importance_beta == pytest.approx(0.7)
    agent.env_steps = 1000
    assert agent.importance_beta == 1.0


@pytest.mark.parametrize("loss", ["mse", "huber"])
def test_the_loss_is_weighted_per_sample_and_priorities_become_the_td_errors(loss):
    # One update per training: each update then returns its metrics.
    settings = {**FAST, "gradient_steps": 1}
    agent = rlx.make("prioritized-dqn", "CartPole-v1", seed=0, loss=loss, **settings)
    while len(agent.buffer) < 64:
        agent.step()
    batch = agent.sample()
    assert set(batch) >= {"weights", "indices"} and batch["weights"].max() == 1.0
    with torch.no_grad():
        q = agent.q_network(batch["observations"]).gather(1, batch["actions"][:, None])[:, 0]
        chosen = agent.q_network(batch["next_observations"]).argmax(1, keepdim=True)
        value = agent.target_network(batch["next_observations"]).gather(1, chosen)[:, 0]
        target = batch["rewards"] + batch["discounts"] * (~batch["terminated"]) * value
        delta = target - q
        if loss == "mse":
            terms = delta**2
        else:
            terms = torch.where(delta.abs() < 1, 0.5 * delta**2, delta.abs() - 0.5)
    metrics = agent.update(batch)
    assert float(metrics["loss"]) == pytest.approx(
        float((terms * batch["weights"]).mean()), rel=1e-5
    )
    leaves = batch["indices"].numpy()
    # A leaf drawn twice got the same TD error both times: any write gives the same value.
    np.testing.assert_allclose(
        agent.buffer.priorities[leaves],
        (delta.abs().numpy().astype(np.float64) + 1e-6) ** 0.6,
        rtol=1e-6,
    )


def test_prioritized_dqn_solves_cartpole_within_100k_steps():
    # DQN's settings (its learning rate included) with prioritized replay's defaults.
    from rlx.tuned import hyperparameters

    settings = hyperparameters("dqn", "CartPole-v1")
    agent = rlx.make("prioritized-dqn", "CartPole-v1", seed=0, **settings)
    result = Trainer(
        agent,
        steps=100_000,
        eval_every=5_000,
        eval_episodes=10,
        target_return=475,
        progress=False,
        verbose=False,
    ).fit()
    assert result.best_return is not None and result.best_return >= 475, result
