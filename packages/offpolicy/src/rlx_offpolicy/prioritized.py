"""Prioritized experience replay, proportional variant, with a vectorised sum tree.

Schaul, Quan, Antonoglou & Silver (2016), "Prioritized Experience Replay", Algorithm 1:
transition ``i`` is drawn with probability ``P(i) = p_i^alpha / sum_k p_k^alpha`` where
``p_i = |delta_i| + eps`` is its last absolute TD error; a new transition gets the largest
priority seen so far, so that it is replayed at least once; the bias of the non-uniform
draws is corrected by importance-sampling weights ``w_i = (N P(i))^-beta``, normalised by
their maximum so that they only ever scale an update down, ``beta`` annealed to 1.

:class:`SumTree` holds the ``p^alpha`` and answers the proportional draws: every operation
takes a whole batch and runs one NumPy pass per tree level, with no Python loop over the
items (the top ten levels, 1,023 nodes, are handled whole: a draw crosses them in one
binary search, an update recomputes them a slice per level).
``benchmarks/offpolicy_prioritized.py`` measures it against the usual per-item loop.
Parents are always recomputed from their two children, never adjusted by deltas, so the
tree is a function of its leaves alone: no rounding drift builds up over millions of
updates, repeated indices in a batch are harmless, and a checkpoint need only store the
leaves to be restored bit for bit.

The weights are normalised by the largest weight of the sampled batch (as Dopamine does),
not by the weight of the globally smallest priority (as OpenAI Baselines does with a second,
min tree): both bound the weights by 1, the batch maximum needs no second tree (half the
update cost), and it does not let one stale transition whose priority is ``eps^alpha``
shrink every update of the run by orders of magnitude.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.errors import CheckpointError, ConfigError
from rlx.replay import ReplayBuffer, saved_array


class SumTree:
    """A binary tree of sums over ``capacity`` non-negative leaves (float64).

    Array layout: node 1 is the root, node ``n`` has children ``2n`` and ``2n + 1``, and
    the leaves are nodes ``2**depth ... 2**depth + capacity - 1`` (padded with zero leaves
    up to a power of two, so that every leaf lies at the same depth and one pass per level
    reaches all of them).
    """

    #: The top levels, of ``2**TOP_LEVELS - 1`` nodes, are handled whole: :meth:`find`
    #: crosses them in one search and :meth:`update` recomputes them level by level.
    TOP_LEVELS = 10

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a sum tree needs at least one leaf, got capacity {capacity}")
        self.capacity = int(capacity)
        self.depth = (self.capacity - 1).bit_length()
        self.offset = 1 << self.depth  # the node of leaf 0
        self.nodes = np.zeros(2 * self.offset, np.float64)  # node 0 is unused
        # The same memory seen as complex numbers: ``pairs[n]`` holds nodes 2n (real part)
        # and 2n + 1 (imaginary part), the two children of node n, for one gather of both.
        self.pairs = self.nodes.view(np.complex128)

    def __len__(self) -> int:
        return self.capacity

    @property
    def nbytes(self) -> int:
        """Bytes the tree's nodes take."""
        return self.nodes.nbytes

    @property
    def total(self) -> float:
        """The sum of all leaves."""
        return float(self.nodes[1])

    @property
    def leaves(self) -> np.ndarray:
        """The leaf values (a read-only view)."""
        view = self.nodes[self.offset : self.offset + self.capacity]
        view.flags.writeable = False
        return view

    def get(self, indices: np.ndarray) -> np.ndarray:
        """The values of the leaves ``indices``."""
        return self.nodes[np.asarray(indices, np.int64) + self.offset]

    def update(self, indices: np.ndarray, priorities: np.ndarray | float) -> None:
        """Set leaves ``indices`` to ``priorities`` (a scalar sets them all) and repair the sums.

        An index given more than once takes its last value. The leaves are written once
        each, then the parents of the touched nodes are recomputed from their children,
        for all of them in one NumPy pass per level; the ``2**TOP_LEVELS - 1`` nodes of the
        top levels are recomputed whole, one slice per level.
        """
        indices = np.asarray(indices, np.int64).reshape(-1)
        values = np.broadcast_to(np.asarray(priorities, np.float64), indices.shape)
        if indices.size == 0:
            return
        if not (values.min() >= 0 and values.max() < np.inf):  # NaN fails both
            raise ValueError("sum tree priorities must be finite and non-negative")
        # A stable sort keeps repeats in the order given: the last of each run is the last
        # write, and the only one kept (NumPy's own a[i] = v leaves the order of repeated
        # writes unspecified). Sorted, the nodes are also visited in memory order.
        order = np.argsort(indices, kind="stable")
        ordered = indices[order]
        if ordered[0] < 0 or ordered[-1] >= self.capacity:
            raise IndexError(
                f"sum tree leaf indices must lie in [0, {self.capacity}), got "
                f"[{ordered[0]}, {ordered[-1]}]"
            )
        last = np.empty(len(ordered), bool)
        last[-1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
        nodes = ordered[last] + self.offset
        tree = self.nodes
        tree[nodes] = values[order[last]]
        top = min(self.depth, self.TOP_LEVELS)
        for _ in range(self.depth - top):
            # The parents of the nodes just written, recomputed from their children (final
            # by now). Siblings share a parent, so a parent may come up more than once, each
            # time with the same sum: the repeats are harmless, and cheaper to write than to
            # remove. One gather fetches both children: ``pairs[n]`` is nodes 2n and 2n + 1.
            nodes >>= 1
            children = self.pairs[nodes]
            tree[nodes] = children.real + children.imag
        # The top levels hold few nodes: they are recomputed whole, a level at a time.
        self._rebuild(1 << top)

    def set_leaves(self, values: np.ndarray) -> None:
        """Replace every leaf (``values`` of length ``capacity``) and rebuild all the sums."""
        values = np.asarray(values, np.float64)
        if values.shape != (self.capacity,):
            raise ValueError(f"expected {self.capacity} leaves, got shape {values.shape}")
        if not (np.isfinite(values) & (values >= 0)).all():
            raise ValueError("sum tree priorities must be finite and non-negative")
        tree = self.nodes
        tree[self.offset :] = 0.0
        tree[self.offset : self.offset + self.capacity] = values
        self._rebuild(self.offset)

    def _rebuild(self, first: int) -> None:
        """Recompute every node above the level that starts at node ``first``, a level at a
        time, each parent as ``left + right`` (as :meth:`update` does: the same tree, bit
        for bit)."""
        tree = self.nodes
        while first > 1:
            tree[first // 2 : first] = tree[first : 2 * first : 2] + tree[first + 1 : 2 * first : 2]
            first //= 2

    def find(self, prefix_sums: np.ndarray) -> np.ndarray:
        """The leaf of each prefix sum: the first non-zero leaf ``i`` whose cumulative sum
        ``leaves[0] + ... + leaves[i]`` exceeds it.

        Prefix sums at or beyond the total (rounding can produce them) give the last
        non-zero leaf and negative ones the first: a zero leaf is never returned.

        The whole batch descends together, one NumPy pass per level. The top
        ``TOP_LEVELS`` levels are crossed at once: a binary search in the running sums of
        the ``2**TOP_LEVELS`` nodes below them (a fixed cost per call, whatever the
        capacity) finds the same node as descending through them would.
        """
        tree = self.nodes
        if not tree[1] > 0:
            raise ValueError("the sum tree is empty: every leaf is zero")
        prefix_sums = np.maximum(np.asarray(prefix_sums, np.float64).reshape(-1), 0.0)
        top = min(self.depth, self.TOP_LEVELS)
        first = 1 << top  # the first node of level ``top``
        before = np.empty(first + 1)  # the sum of the nodes of the level before each
        before[0] = 0.0
        np.cumsum(tree[first : 2 * first], out=before[1:])
        nodes = np.searchsorted(before[1:], prefix_sums, side="right")
        np.minimum(nodes, first - 1, out=nodes)
        remaining = prefix_sums - before[nodes]
        nodes += first
        nodes = self._descend(nodes, remaining, self.depth - top, guarded=False)
        # In exact arithmetic a sum below the total never reaches a zero leaf; rounding (a
        # sum at the very end of a subtree) or a sum past the total can. Those few descend
        # again from the root, never into an empty subtree.
        stray = tree[nodes] == 0
        if stray.any():
            count = int(stray.sum())
            nodes[stray] = self._descend(
                np.ones(count, np.int64), prefix_sums[stray], self.depth, guarded=True
            )
        return nodes - self.offset

    def _descend(
        self, nodes: np.ndarray, remaining: np.ndarray, levels: int, guarded: bool
    ) -> np.ndarray:
        """Descend ``levels`` levels from ``nodes`` with the sums ``remaining`` within
        them, one pass per level (both arrays are updated in place); ``guarded`` never goes
        into a subtree whose sum is zero."""
        tree = self.nodes
        for _ in range(levels):
            nodes <<= 1  # the left children
            left = tree[nodes]
            right = remaining >= left  # the sum lies past the left subtree
            if guarded:
                # ... and there is something on the right: else the left holds it all.
                right &= tree[nodes + 1] > 0
            remaining -= left * right
            nodes += right
        return nodes


class Prioritized:
    """Proportional prioritized replay over the slots of a ring buffer, mixed into a
    :class:`~rlx.replay.ReplayBuffer` or a subclass (``class B(Prioritized, Base)``).

    The transition at ``(slot, env)`` is leaf ``slot * n_envs + env`` of the sum tree. New
    transitions get the largest ``p^alpha`` set so far (1 at first); the leaves that
    :meth:`closed_leaves` names after a step (slots that can no longer start a sample) get
    0. :meth:`sample` adds ``weights`` (float32 importance-sampling weights) and ``indices``
    (the leaves, for :meth:`update_priorities`) to the batch.
    """

    # What the buffer mixed with provides.
    n_envs: int
    slots: int
    positions: np.ndarray
    counts: np.ndarray

    @classmethod
    def nbytes_for(
        cls,
        capacity: int,
        n_envs: int,
        observation_shape: tuple[int, ...],
        observation_dtype: np.dtype,
        action_shape: tuple[int, ...],
        action_dtype: np.dtype,
    ) -> int:
        """The buffer's bytes and the sum tree's: float64 nodes, twice the leaves rounded up
        to a power of two."""
        leaves = max(1, capacity // n_envs) * n_envs
        tree = 2 * (1 << (leaves - 1).bit_length()) * 8
        return tree + super().nbytes_for(  # type: ignore[misc]
            capacity, n_envs, observation_shape, observation_dtype, action_shape, action_dtype
        )

    def __init__(
        self,
        capacity: int,
        n_envs: int,
        observation_shape: tuple[int, ...],
        observation_dtype: np.dtype,
        action_shape: tuple[int, ...],
        action_dtype: np.dtype,
        alpha: float = 0.6,
        eps: float = 1e-6,
    ) -> None:
        if alpha < 0 or not eps > 0:
            raise ConfigError(f"priority alpha must be >= 0 and eps > 0, got {alpha} and {eps}")
        super().__init__(  # type: ignore[call-arg]
            capacity, n_envs, observation_shape, observation_dtype, action_shape, action_dtype
        )
        self.alpha = float(alpha)
        self.eps = float(eps)
        self._tree = SumTree(self.slots * n_envs)
        self.max_priority = 1.0  # the largest p^alpha set so far
        # Leaves written since the tree was last read, in order, each batch due either
        # max_priority (new transitions) or 0 (closed slots): writing them at the next read
        # (one vectorised update for many steps) gives the same tree, since max_priority
        # only changes in update_priorities, which reads the tree first.
        self._pending: list[tuple[np.ndarray, bool]] = []

    @property
    def tree(self) -> SumTree:
        """The sum tree of ``p^alpha``, up to date."""
        if self._pending:
            self._flush()
        return self._tree

    def _flush(self) -> None:
        """Write the leaves stored since the last read (the max priority) and those closed
        since (0), the later write of a leaf winning."""
        leaves = np.concatenate([batch for batch, _ in self._pending])
        values = np.concatenate(
            [np.full(len(batch), self.max_priority if new else 0.0) for batch, new in self._pending]
        )
        self._pending.clear()
        self._tree.update(leaves, values)

    @property
    def priorities(self) -> np.ndarray:
        """``p^alpha`` of every leaf (0 where nothing can be sampled), a copy."""
        return self.tree.leaves.copy()

    @property
    def nbytes(self) -> int:
        """Bytes the stored arrays and the sum tree take."""
        return super().nbytes + self._tree.nbytes  # type: ignore[misc]

    def closed_leaves(self, envs: np.ndarray) -> np.ndarray:
        """Leaves that can no longer start a sample after a step of ``envs``: none here (a
        buffer that rebuilds observations from earlier slots names them)."""
        return np.zeros(0, np.int64)

    def add(
        self,
        observations: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_observations: np.ndarray,
        terminated: np.ndarray,
        done: np.ndarray,
        valid: np.ndarray,
    ) -> None:
        """Store one vector step (the buffer's own ``add``); the new transitions get the max
        priority and the :meth:`closed_leaves` 0."""
        envs = np.flatnonzero(valid)
        slots = self.positions[envs]  # a copy: the buffer's add moves the positions on
        super().add(  # type: ignore[misc]
            observations, actions, rewards, next_observations, terminated, done, valid
        )
        if len(envs):
            self._pending.append((slots * self.n_envs + envs, True))
            closed = self.closed_leaves(envs)
            if len(closed):
                self._pending.append((closed, False))
            if len(self._pending) >= 1024:  # a long warm-up: bound what waits
                self._flush()

    def draw(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Leaves of ``batch_size`` transitions drawn in proportion to their priorities,
        stratified: the total is cut into ``batch_size`` equal segments, one uniform draw
        in each."""
        tree = self.tree
        segment = tree.total / batch_size
        prefix_sums = (np.arange(batch_size) + rng.random(batch_size)) * segment
        return tree.find(prefix_sums)

    def sample_indices(
        self, batch_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Slots and environments of ``batch_size`` transitions drawn by priority."""
        leaves = self.draw(batch_size, rng)
        return leaves // self.n_envs, leaves % self.n_envs

    def weights(self, leaves: np.ndarray, beta: float) -> np.ndarray:
        """Importance-sampling weights ``(N P(i))^-beta / max_j (N P(j))^-beta`` of the
        leaves drawn (float32)."""
        tree = self.tree
        probabilities = tree.get(leaves) / tree.total
        weights = (len(self) * probabilities) ** -beta  # type: ignore[arg-type]
        return (weights / weights.max()).astype(np.float32)

    def sample(
        self,
        batch_size: int,
        rng: np.random.Generator,
        gamma: float,
        n_step: int = 1,
        beta: float = 1.0,
    ) -> dict[str, np.ndarray]:
        """``batch_size`` transitions drawn by priority (see :meth:`ReplayBuffer.sample`),
        with their ``weights`` for exponent ``beta`` and their leaf ``indices``."""
        leaves = self.draw(batch_size, rng)
        batch = self.gather(leaves // self.n_envs, leaves % self.n_envs, gamma, n_step)  # type: ignore[attr-defined]
        batch["weights"] = self.weights(leaves, beta)
        batch["indices"] = leaves
        return batch

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Set the priorities of leaves ``indices`` to ``(|td_errors| + eps)^alpha``."""
        tree = self.tree  # writes the pending leaves with the priority they were due
        priorities = (np.abs(np.asarray(td_errors, np.float64)) + self.eps) ** self.alpha
        if priorities.size and not np.isfinite(priorities).all():
            raise ValueError("TD errors for priorities must be finite")
        tree.update(indices, priorities)
        if priorities.size:
            self.max_priority = max(self.max_priority, float(priorities.max()))

    # -- checkpoints ------------------------------------------------------------------------

    def state(self, prefix: str) -> dict[str, np.ndarray]:
        """The transitions, the filled leaves of the tree and the max priority: the rest of
        the tree is their function (see :class:`SumTree`)."""
        arrays = super().state(prefix)  # type: ignore[misc]
        filled = int(self.counts.max()) * self.n_envs
        arrays[f"{prefix}/priorities"] = self.tree.leaves[:filled].copy()
        arrays[f"{prefix}/max_priority"] = np.array([self.max_priority], np.float64)
        return arrays

    def checked_state(self, arrays: dict[str, Any], prefix: str) -> dict[str, np.ndarray]:
        """Also the priorities: finite, positive where a sample can start and 0 elsewhere,
        and at most the max priority, which is finite and positive."""
        saved = super().checked_state(arrays, prefix)  # type: ignore[misc]
        startable = self.startable_mask(saved["counts"], saved["positions"]).reshape(-1)  # type: ignore[attr-defined]
        priorities = saved_array(arrays, prefix, "priorities", startable.shape, np.float64)
        max_priority = saved_array(arrays, prefix, "max_priority", (1,), np.float64)
        if not (np.isfinite(max_priority).all() and max_priority[0] > 0):
            raise CheckpointError(
                f"the saved replay buffer's max priority {max_priority[0]} is not a positive number"
            )
        fitting = (priorities > 0) & (priorities <= max_priority[0])  # NaN fails both
        if not (fitting[startable].all() and (priorities[~startable] == 0).all()):
            raise CheckpointError(
                "the saved replay buffer's priorities are not in (0, max priority] for the "
                "transitions a sample can start from and 0 for its other slots"
            )
        saved["priorities"], saved["max_priority"] = priorities, max_priority
        return saved

    def set_state(self, saved: dict[str, np.ndarray]) -> None:
        """Take the state that :meth:`checked_state` returned, the tree rebuilt from its
        leaves."""
        super().set_state(saved)  # type: ignore[misc]
        leaves = np.zeros(self._tree.capacity, np.float64)
        leaves[: len(saved["priorities"])] = saved["priorities"]
        self._pending.clear()
        self._tree.set_leaves(leaves)
        self.max_priority = float(saved["max_priority"][0])


class PrioritizedReplayBuffer(Prioritized, ReplayBuffer):
    """A :class:`~rlx.replay.ReplayBuffer` that draws transitions in proportion to
    ``p^alpha``, ``p = |TD error| + eps`` (:class:`Prioritized`)."""
