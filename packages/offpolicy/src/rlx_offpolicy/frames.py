"""A replay buffer for stacked image frames that stores each frame once.

An Atari observation is a stack of the last ``k`` frames (gymnasium's
``FrameStackObservation``, shape ``(k, H, W)``): consecutive observations share ``k - 1``
frames, and an observation and its next observation share ``k - 1`` more. Storing both
stacks per transition, as a plain buffer does, keeps every frame ``2k`` times. Here each
transition keeps only the newest frame of its observation, in a per-environment ring, and
the stacks are rebuilt by index when a minibatch is drawn:

- the observation of transition ``t`` is the frames of slots ``t - k + 1 .. t``; slots
  before the episode's first transition are replaced by the padding the environment used
  at reset (its first frame repeated, or zeros);
- the next observation is the observation of transition ``t + 1`` while the episode goes
  on. When it ends, the next observation is the final one: a terminated transition does not
  bootstrap, so any stack serves; a truncated one does, so its final frame is kept aside
  (one frame per truncated episode). The newest transition of each environment takes the
  newest frame of its next observation from a frame per environment kept aside too, so
  every stored transition can be sampled, as in a plain buffer;
- n-step returns are summed over the following slots and cut at episode ends by
  :meth:`~rlx.replay.ReplayBuffer.n_step_returns`, the plain buffer's own code, and the
  next observation is that of the last transition summed, rebuilt by index the same way.

Once an environment's ring is full, its oldest ``stack - 1`` transitions cannot be sampled:
the frames before them were overwritten. :class:`PrioritizedFrameReplayBuffer` draws by
priority over the frame slots, those slots holding priority 0.

The footprint is one frame per transition plus a few bytes: 1,000,000 Atari transitions
take about 7.1 GB where two stacks per transition take 56 GB; with priorities the sum tree
adds 17 MB (``benchmarks/offpolicy_frame_replay.py`` measures the resident memory).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.errors import CheckpointError, ConfigError
from rlx.replay import ReplayBuffer, saved_array
from rlx_offpolicy.prioritized import Prioritized


class FrameReplayBuffer(ReplayBuffer):
    """Up to ``capacity`` transitions whose observations are ``(stack, H, W)`` frame stacks."""

    @staticmethod
    def field_specs(
        observation_shape: tuple[int, ...],
        observation_dtype: np.dtype,
        action_shape: tuple[int, ...],
        action_dtype: np.dtype,
    ) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """One frame, one action and 7 bytes of scalars per transition (``first``: the
        transition starts an episode)."""
        return {
            "frames": (tuple(observation_shape[1:]), np.dtype(observation_dtype)),
            "actions": (tuple(action_shape), np.dtype(action_dtype)),
            "rewards": ((), np.dtype(np.float32)),
            "terminated": ((), np.dtype(bool)),
            "done": ((), np.dtype(bool)),
            "first": ((), np.dtype(bool)),
        }

    def __init__(
        self,
        capacity: int,
        n_envs: int,
        observation_shape: tuple[int, ...],
        observation_dtype: np.dtype,
        action_shape: tuple[int, ...],
        action_dtype: np.dtype,
    ) -> None:
        if len(observation_shape) != 3:
            raise ConfigError(
                f"the frame buffer stores (stack, height, width) observations, got shape "
                f"{observation_shape}"
            )
        super().__init__(
            capacity, n_envs, observation_shape, observation_dtype, action_shape, action_dtype
        )
        self.stack = observation_shape[0]
        #: The newest frame of each environment's last next observation: the newest
        #: transition's next stack ends with it.
        self.next_frames = np.zeros((n_envs, *observation_shape[1:]), observation_dtype)
        #: Whether the environment pads a reset stack with zeros (else with its first frame).
        self.zero_padding = False
        #: Each environment's next transition starts an episode.
        self.starting = np.ones(n_envs, bool)
        #: Final frames of truncated transitions, by ``slot * n_envs + env``.
        self.final_frames: dict[int, np.ndarray] = {}

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
        envs = np.flatnonzero(valid)
        if len(envs) == 0:
            return
        slots = self.positions[envs]
        first = self.starting[envs]
        if first.any():
            stack = observations[envs[np.argmax(first)]]
            self.zero_padding = bool(not stack[0].any() and stack[-1].any())
        if self.final_frames:  # a slot being overwritten may hold a truncated final frame
            for slot, env in zip(slots, envs, strict=True):
                self.final_frames.pop(int(slot) * self.n_envs + int(env), None)
        arrays = self.arrays
        arrays["frames"][slots, envs] = observations[envs, -1]
        arrays["actions"][slots, envs] = actions[envs]
        arrays["rewards"][slots, envs] = rewards[envs]
        arrays["terminated"][slots, envs] = terminated[envs]
        arrays["done"][slots, envs] = done[envs]
        arrays["first"][slots, envs] = first
        self.next_frames[envs] = next_observations[envs, -1]
        truncated = done[envs] & ~terminated[envs]
        for slot, env in zip(slots[truncated], envs[truncated], strict=True):
            self.final_frames[int(slot) * self.n_envs + int(env)] = next_observations[
                env, -1
            ].copy()
        self.starting[envs] = done[envs]
        self.positions[envs] = (slots + 1) % self.slots
        self.counts[envs] = np.minimum(self.counts[envs] + 1, self.slots)

    def __len__(self) -> int:
        return int(self._sampleable().sum())

    def _sampleable(self) -> np.ndarray:
        """Transitions per environment that can be sampled: all of them but, once the ring
        is full, the oldest ``stack - 1`` (their earlier frames were overwritten)."""
        full = self.counts == self.slots
        return np.maximum(self.counts - np.where(full, self.stack - 1, 0), 0)

    def startable_mask(self, counts: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The stored transitions less, in a full ring, the oldest ``stack - 1``."""
        mask = self.stored_mask(counts)
        full = np.flatnonzero(counts == self.slots)
        for back in range(self.stack - 1):
            mask[(positions[full] + back) % self.slots, full] = False
        return mask

    def sample_indices(
        self, batch_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        sampleable = self._sampleable()
        ends = np.cumsum(sampleable)
        flat = rng.integers(ends[-1], size=batch_size)
        envs = np.searchsorted(ends, flat, side="right")
        offsets = flat - (ends[envs] - sampleable[envs])
        full = self.counts[envs] == self.slots
        oldest = np.where(full, self.positions[envs] + self.stack - 1, 0)
        return (oldest + offsets) % self.slots, envs

    def windows(self, slots: np.ndarray, envs: np.ndarray) -> np.ndarray:
        """Frames ``t - stack + 1 .. t + 1`` of each transition ``(batch, stack + 1, H, W)``:
        its observation is the first ``stack``, its next observation (while the episode goes
        on) the last ``stack``. Frames before the episode's start are its padding; frame
        ``t + 1`` of an environment's newest transition is the one kept aside."""
        frames, first = self.arrays["frames"], self.arrays["first"]
        # How many frames back the episode reaches (at most stack - 1).
        reach = np.full(len(slots), self.stack - 1)
        for back in range(self.stack - 2, -1, -1):
            reach = np.where(first[(slots - back) % self.slots, envs], back, reach)
        backs = np.arange(self.stack - 1, -2, -1)  # stack - 1, ..., 0, then -1: slot t + 1
        # Reset padding repeats the episode's first frame; zero padding blanks it below.
        sources = slots[:, None] - np.minimum(backs[None, :], reach[:, None])
        window = frames[sources % self.slots, envs[:, None]]
        if self.zero_padding:
            window[backs[None, :] > reach[:, None]] = 0
        newest = np.flatnonzero((slots + 1) % self.slots == self.positions[envs])
        window[newest, -1] = self.next_frames[envs[newest]]
        return window

    def gather(
        self, slots: np.ndarray, envs: np.ndarray, gamma: float, n_step: int
    ) -> dict[str, np.ndarray]:
        """The batch of transitions at ``(slots, envs)``, stacks rebuilt by index, with the
        plain buffer's ``n_step``-step returns (:meth:`~rlx.replay.ReplayBuffer.sample`)."""
        arrays = self.arrays
        rewards, last, discounts = self.n_step_returns(slots, envs, gamma, n_step)
        if n_step == 1:
            window = self.windows(slots, envs)
            observations = window[:, :-1]
        else:
            # The windows of the first and the last transition summed, in one array: a
            # second array of this size would be page-faulted in anew at every draw.
            both = self.windows(np.concatenate([slots, last]), np.concatenate([envs, envs]))
            observations, window = both[: len(slots), :-1], both[len(slots) :]
        next_observations = window[:, 1:]
        # At an episode's end the frame after the last transition summed is another
        # episode's: a terminated transition never uses its next observation, a truncated
        # one takes its final frame.
        ended = arrays["done"][last, envs] & ~arrays["terminated"][last, envs]
        for i in np.flatnonzero(ended):
            window[i, -1] = self.final_frames[int(last[i]) * self.n_envs + int(envs[i])]
        return {
            "observations": observations,
            "actions": arrays["actions"][slots, envs],
            "rewards": rewards,
            "next_observations": next_observations,
            "terminated": arrays["terminated"][last, envs],
            "discounts": discounts,
        }

    # -- checkpoints ------------------------------------------------------------------------

    def state(self, prefix: str) -> dict[str, np.ndarray]:
        """The base's arrays, the final frames of truncated transitions with their keys, the
        frames kept aside for the newest transitions, and the padding and episode flags."""
        arrays = super().state(prefix)
        keys = np.array(sorted(self.final_frames), np.int64)
        frame_shape = self.arrays["frames"].shape[2:]
        arrays[f"{prefix}/final_keys"] = keys
        arrays[f"{prefix}/final_frames"] = (
            np.stack([self.final_frames[int(k)] for k in keys])
            if len(keys)
            else np.zeros((0, *frame_shape), self.arrays["frames"].dtype)
        )
        arrays[f"{prefix}/next_frames"] = self.next_frames.copy()
        arrays[f"{prefix}/starting"] = self.starting.copy()
        arrays[f"{prefix}/zero_padding"] = np.array(self.zero_padding)
        return arrays

    def checked_state(self, arrays: dict[str, Any], prefix: str) -> dict[str, np.ndarray]:
        """Also the final frames, one for each stored truncated transition, the frames kept
        aside and the flags."""
        saved = super().checked_state(arrays, prefix)
        frames = self.arrays["frames"]
        stored = self.stored_mask(saved["counts"])
        slots, envs = np.nonzero(stored & saved["done"] & ~saved["terminated"])
        truncated = np.sort(slots * self.n_envs + envs).astype(np.int64)
        keys = saved_array(arrays, prefix, "final_keys", truncated.shape, np.int64)
        if not np.array_equal(keys, truncated):
            raise CheckpointError(
                "the saved frame replay buffer's final_keys are not the slots of its "
                "truncated transitions"
            )
        saved["final_keys"] = keys
        saved["final_frames"] = saved_array(
            arrays, prefix, "final_frames", (len(keys), *frames.shape[2:]), frames.dtype
        )
        saved["next_frames"] = saved_array(
            arrays, prefix, "next_frames", self.next_frames.shape, frames.dtype
        )
        saved["starting"] = saved_array(arrays, prefix, "starting", (self.n_envs,), bool)
        saved["zero_padding"] = saved_array(arrays, prefix, "zero_padding", (), bool)
        return saved

    def set_state(self, saved: dict[str, np.ndarray]) -> None:
        """Take the state that :meth:`checked_state` returned."""
        super().set_state(saved)
        keys, frames = saved["final_keys"], saved["final_frames"]
        self.final_frames = {int(k): f.copy() for k, f in zip(keys, frames, strict=True)}
        self.next_frames[...] = saved["next_frames"]
        self.starting = saved["starting"].copy()
        self.zero_padding = bool(saved["zero_padding"])


class PrioritizedFrameReplayBuffer(Prioritized, FrameReplayBuffer):
    """A :class:`FrameReplayBuffer` that draws by priority (see
    :class:`~rlx_offpolicy.prioritized.Prioritized`): leaf ``slot * n_envs + env`` of the sum
    tree is the transition at that frame slot; the slots that cannot start a sample (the
    oldest ``stack - 1`` of a full ring) hold priority 0, so they are never drawn."""

    def closed_leaves(self, envs: np.ndarray) -> np.ndarray:
        """After a step of ``envs``: the leaves of the oldest ``stack - 1`` slots of their
        full rings (each step overwrites the frame one of them needed)."""
        full = envs[self.counts[envs] == self.slots]
        backs = np.arange(self.stack - 1)
        slots = (self.positions[full][:, None] + backs[None, :]) % self.slots
        return (slots * self.n_envs + full[:, None]).reshape(-1)
