"""The replay buffer: transitions of vector environments, stored once, sampled by index.

A NumPy building block for off-policy agents, rlx-offpolicy's and third parties' alike: it
stores what :meth:`rlx.vector.VectorRunner.step` returns, samples minibatches with a
generator the agent owns, and saves and restores itself as checkpoint arrays for exact
resume (:meth:`ReplayBuffer.state`, :meth:`ReplayBuffer.load`). It imports no torch.

Storage is preallocated NumPy, ``capacity // n_envs`` slots per environment (axes
``(slot, env)``), so the footprint is fixed from the start and a buffer that would not fit
in memory is refused before anything is allocated. Each environment writes its own ring.

What is stored follows gymnasium's NEXT_STEP autoreset (see :mod:`rlx.vector`): a step
that ends an episode returns the episode's final observation as its next observation, so
a truncated transition bootstraps from it while a terminated one does not (``terminated``
is stored apart from ``done``); the reset step that follows is no transition and is never
stored. n-step returns are computed at sample time from consecutive slots of one
environment, cut at episode ends, so they cost no extra storage.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.errors import CheckpointError
from rlx.memory import array_nbytes, check_allocation

#: Fields of a sampled batch (all with leading axis ``batch_size``).
BATCH_FIELDS = (
    "observations",
    "actions",
    "rewards",
    "next_observations",
    "terminated",
    "discounts",
)


def check_memory(needed: int, what: str) -> None:
    """Refuse, before anything is allocated, ``what`` needing more bytes than are available
    (:func:`rlx.memory.check_allocation`)."""
    check_allocation(what, needed, "lower buffer_size")


class ReplayBuffer:
    """Up to ``capacity`` transitions of ``n_envs`` environments.

    :meth:`add` takes one vector step (arrays with leading axis ``n_envs``) and stores the
    environments whose step was ``valid``; :meth:`sample` draws transitions uniformly.
    """

    #: The range ``(low, high)`` every stored action lies in, set by the agent that stores
    #: them (its action space: ``(0, n - 1)`` for Discrete(n)); a saved buffer holding an
    #: action outside it is refused on load. None: not checked.
    action_bounds: tuple[float, float] | None = None

    @staticmethod
    def field_specs(
        observation_shape: tuple[int, ...],
        observation_dtype: np.dtype,
        action_shape: tuple[int, ...],
        action_dtype: np.dtype,
    ) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Shape (after the ``(slot, env)`` axes) and dtype of each stored field."""
        return {
            "observations": (observation_shape, observation_dtype),
            "next_observations": (observation_shape, observation_dtype),
            "actions": (action_shape, action_dtype),
            "rewards": ((), np.dtype(np.float32)),
            "terminated": ((), np.dtype(bool)),
            "done": ((), np.dtype(bool)),
        }

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
        """Bytes a buffer built with these arguments allocates, computed before it does (a
        Python integer: no overflow whatever the sizes)."""
        slots = max(1, capacity // n_envs)
        specs = cls.field_specs(observation_shape, observation_dtype, action_shape, action_dtype)
        return sum(
            array_nbytes((slots, n_envs, *field_shape), np.dtype(dtype).itemsize)
            for field_shape, dtype in specs.values()
        )

    def __init__(
        self,
        capacity: int,
        n_envs: int,
        observation_shape: tuple[int, ...],
        observation_dtype: np.dtype,
        action_shape: tuple[int, ...],
        action_dtype: np.dtype,
    ) -> None:
        self.n_envs = n_envs
        self.slots = max(1, capacity // n_envs)
        shape = (self.slots, n_envs)
        specs = self.field_specs(observation_shape, observation_dtype, action_shape, action_dtype)
        check_memory(
            self.nbytes_for(
                capacity, n_envs, observation_shape, observation_dtype, action_shape, action_dtype
            ),
            f"a replay buffer of {self.slots * n_envs:,} transitions",
        )
        self.arrays = {
            name: np.zeros((*shape, *field_shape), dtype)
            for name, (field_shape, dtype) in specs.items()
        }
        self.all_envs = np.arange(n_envs)
        self.positions = np.zeros(n_envs, np.int64)  # next slot each environment writes
        self.counts = np.zeros(n_envs, np.int64)  # filled slots per environment

    def __len__(self) -> int:
        return int(self.counts.sum())

    @property
    def nbytes(self) -> int:
        """Bytes the stored arrays take (allocated in full from the start)."""
        return sum(array.nbytes for array in self.arrays.values())

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
        """Store one vector step; environments whose step is not ``valid`` (the reset step
        after an episode's end) store nothing."""
        envs = self.all_envs if valid.all() else np.flatnonzero(valid)
        if len(envs) == 0:
            return
        slots = self.positions[envs]
        arrays = self.arrays
        arrays["observations"][slots, envs] = observations[envs]
        arrays["next_observations"][slots, envs] = next_observations[envs]
        arrays["actions"][slots, envs] = actions[envs]
        arrays["rewards"][slots, envs] = rewards[envs]
        arrays["terminated"][slots, envs] = terminated[envs]
        arrays["done"][slots, envs] = done[envs]
        self.positions[envs] = (slots + 1) % self.slots
        self.counts[envs] = np.minimum(self.counts[envs] + 1, self.slots)

    def sample_indices(
        self, batch_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Slots and environments of ``batch_size`` transitions drawn uniformly."""
        if len(self.counts) == 1:  # the same draws, without the search over environments
            count = int(self.counts[0])
            start = int(self.positions[0]) if count == self.slots else 0
            drawn = rng.integers(count, size=batch_size)
            return (start + drawn) % self.slots, np.zeros(batch_size, np.intp)
        ends = np.cumsum(self.counts)
        flat = rng.integers(ends[-1], size=batch_size)
        envs = np.searchsorted(ends, flat, side="right")
        offsets = flat - (ends[envs] - self.counts[envs])
        # The oldest filled slot of an environment is its write position once it is full.
        oldest = np.where(self.counts[envs] == self.slots, self.positions[envs], 0)
        return (oldest + offsets) % self.slots, envs

    def sample(
        self, batch_size: int, rng: np.random.Generator, gamma: float, n_step: int = 1
    ) -> dict[str, np.ndarray]:
        """``batch_size`` transitions drawn uniformly, with ``n_step``-step returns.

        ``rewards`` are the discounted sums of up to ``n_step`` rewards, cut at the first
        episode end or at the newest transition; ``next_observations`` and ``terminated``
        are those of the last transition summed, and ``discounts`` the factor ``gamma**k``
        to apply to its bootstrap value (``k`` transitions summed).
        """
        slots, envs = self.sample_indices(batch_size, rng)
        return self.gather(slots, envs, gamma, n_step)

    def gather(
        self, slots: np.ndarray, envs: np.ndarray, gamma: float, n_step: int
    ) -> dict[str, np.ndarray]:
        """The batch of transitions at ``(slots, envs)`` (see :meth:`sample`)."""
        arrays = self.arrays
        rewards, last, discounts = self.n_step_returns(slots, envs, gamma, n_step)
        return {
            "observations": arrays["observations"][slots, envs],
            "actions": arrays["actions"][slots, envs],
            "rewards": rewards,
            "next_observations": arrays["next_observations"][last, envs],
            "terminated": arrays["terminated"][last, envs],
            "discounts": discounts,
        }

    def n_step_returns(
        self, slots: np.ndarray, envs: np.ndarray, gamma: float, n_step: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ``n_step``-step returns of the transitions at ``(slots, envs)`` (float32), the
        slot of the last transition each sums, and the discounts ``gamma**k`` of its
        bootstrap value (float32): from the ``rewards`` and ``done`` arrays alone, so that
        every buffer with them computes the same returns (see :meth:`sample`)."""
        arrays = self.arrays
        rewards = arrays["rewards"][slots, envs].astype(np.float32)
        last = slots
        discounts = np.full(len(slots), gamma, np.float32)
        if n_step > 1:
            # Slots written after ``slot`` in its environment, before the write position.
            newest = (self.positions[envs] - 1) % self.slots
            going = ~arrays["done"][slots, envs] & (slots != newest)
            for k in range(1, n_step):
                following = (slots + k) % self.slots
                rewards += np.where(going, gamma**k * arrays["rewards"][following, envs], 0.0)
                last = np.where(going, following, last)
                discounts = np.where(going, discounts * gamma, discounts)
                going &= ~arrays["done"][following, envs] & (following != newest)
        return rewards, last, discounts.astype(np.float32)

    # -- checkpoints ------------------------------------------------------------------------

    def state(self, prefix: str) -> dict[str, np.ndarray]:
        """The filled part of every array, and the write positions (for exact resume)."""
        filled = int(self.counts.max())
        arrays = {f"{prefix}/{name}": array[:filled] for name, array in self.arrays.items()}
        arrays[f"{prefix}/positions"] = self.positions.copy()
        arrays[f"{prefix}/counts"] = self.counts.copy()
        return arrays

    def load(self, arrays: dict[str, Any], prefix: str) -> None:
        """Restore :meth:`state`. A saved state this buffer could not have written (an array
        missing or of another shape or dtype, counters out of range, non-finite rewards) is a
        :class:`~rlx.errors.CheckpointError`, raised before anything changes."""
        self.set_state(self.checked_state(arrays, prefix))

    def checked_state(self, arrays: dict[str, Any], prefix: str) -> dict[str, np.ndarray]:
        """The arrays of :meth:`state` under ``prefix``, without it, each checked against
        this buffer (its environments, slots, field shapes and dtypes)."""
        n_envs, slots = self.n_envs, self.slots
        counts = saved_array(arrays, prefix, "counts", (n_envs,), np.int64)
        positions = saved_array(arrays, prefix, "positions", (n_envs,), np.int64)
        if (counts < 0).any() or (counts > slots).any():
            raise CheckpointError(
                f"the saved replay buffer holds {counts.tolist()} transitions per environment; "
                f"this one has {n_envs} environments of {slots} slots"
            )
        # An environment writes its slots in order until the ring is full.
        filling = counts < slots
        if (
            (positions < 0).any()
            or (positions >= slots).any()
            or (positions[filling] != counts[filling]).any()
        ):
            raise CheckpointError(
                f"the saved replay buffer's write positions {positions.tolist()} do not fit its "
                f"counts {counts.tolist()} in {slots} slots"
            )
        filled = int(counts.max())
        saved = {"counts": counts, "positions": positions}
        for name, array in self.arrays.items():
            shape = (filled, *array.shape[1:])
            saved[name] = saved_array(arrays, prefix, name, shape, array.dtype)
        stored = self.stored_mask(counts)
        if not np.isfinite(saved["rewards"][stored]).all():
            raise CheckpointError("the saved replay buffer holds NaN or infinite rewards")
        if self.action_bounds is not None:
            low, high = self.action_bounds
            actions = saved["actions"][stored]
            outside = ~((actions >= low) & (actions <= high))  # NaN is outside too
            if outside.any():
                raise CheckpointError(
                    f"the saved replay buffer holds the action {actions[outside].flat[0]}, "
                    f"outside [{low}, {high}], where this agent keeps the actions of its "
                    "action space; the checkpoint was edited or belongs to another environment"
                )
        return saved

    def set_state(self, saved: dict[str, np.ndarray]) -> None:
        """Take the state that :meth:`checked_state` returned."""
        filled = int(saved["counts"].max())
        for name, array in self.arrays.items():
            array[:filled] = saved[name]
        self.counts, self.positions = saved["counts"].copy(), saved["positions"].copy()

    def stored_mask(self, counts: np.ndarray) -> np.ndarray:
        """Which of the first ``counts.max()`` slots of each environment hold a transition
        ``(filled, n_envs)``: an environment fills its slots from the first on."""
        return np.arange(int(counts.max()))[:, None] < counts[None, :]

    def startable_mask(self, counts: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Which of the first ``counts.max()`` slots of each environment a sample can start
        from ``(filled, n_envs)``, for these counters: here every stored transition (a
        buffer that rebuilds observations from earlier slots has fewer)."""
        return self.stored_mask(counts)


def saved_array(
    arrays: dict[str, Any], prefix: str, name: str, shape: tuple[int, ...], dtype: Any
) -> np.ndarray:
    """The saved array ``prefix/name``, a :class:`~rlx.errors.CheckpointError` unless it
    exists with exactly ``shape`` and ``dtype``."""
    key = f"{prefix}/{name}"
    if key not in arrays:
        raise CheckpointError(f"the saved replay buffer has no array {key!r}")
    value = np.asarray(arrays[key])
    if value.shape != tuple(shape) or value.dtype != np.dtype(dtype):
        raise CheckpointError(
            f"the saved replay buffer's {key!r} is {value.dtype} of shape {value.shape}; this "
            f"buffer keeps {np.dtype(dtype)} of shape {tuple(shape)}"
        )
    return value
