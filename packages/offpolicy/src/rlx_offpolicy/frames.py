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
  (one frame per truncated episode). The newest transition of each environment is not
  sampled until its successor arrives.

The footprint is one frame per transition plus a few bytes: 1,000,000 Atari transitions
take about 7.1 GB where two stacks per transition take 56 GB.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx.errors import CheckpointError, ConfigError
from rlx.memory import array_nbytes
from rlx.replay import ReplayBuffer, check_memory, saved_array


class FrameReplayBuffer(ReplayBuffer):
    """Up to ``capacity`` transitions whose observations are ``(stack, H, W)`` frame stacks."""

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
        """One frame, one action and 7 bytes of scalars per transition."""
        slots = max(1, capacity // n_envs)
        itemsize = np.dtype(observation_dtype).itemsize
        frames = array_nbytes((slots, n_envs, *observation_shape[1:]), itemsize)
        actions = array_nbytes((slots, n_envs, *action_shape), np.dtype(action_dtype).itemsize)
        return frames + actions + slots * n_envs * 7

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
        self.n_envs = n_envs
        self.slots = max(1, capacity // n_envs)
        self.stack = observation_shape[0]
        frame_shape = observation_shape[1:]
        shape = (self.slots, n_envs)
        check_memory(
            self.nbytes_for(
                capacity, n_envs, observation_shape, observation_dtype, action_shape, action_dtype
            ),
            f"a frame replay buffer of {self.slots * n_envs:,} transitions",
        )
        self.arrays = {
            "frames": np.zeros((*shape, *frame_shape), observation_dtype),
            "actions": np.zeros((*shape, *action_shape), action_dtype),
            "rewards": np.zeros(shape, np.float32),
            "terminated": np.zeros(shape, bool),
            "done": np.zeros(shape, bool),
            "first": np.zeros(shape, bool),  # the transition starts an episode
        }
        self.positions = np.zeros(n_envs, np.int64)
        self.counts = np.zeros(n_envs, np.int64)
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
        """Transitions per environment that can be sampled: not the newest (whose next
        observation has not arrived unless it ended an episode), and, once the ring is
        full, not the oldest ``stack - 1`` (their earlier frames were overwritten)."""
        full = self.counts == self.slots
        return np.maximum(self.counts - 1 - np.where(full, self.stack - 1, 0), 0)

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
        on) the last ``stack``. Frames before the episode's start are its padding."""
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
        return window

    def gather(
        self, slots: np.ndarray, envs: np.ndarray, gamma: float, n_step: int
    ) -> dict[str, np.ndarray]:
        if n_step != 1:
            raise ConfigError("the frame replay buffer samples one-step transitions only")
        arrays = self.arrays
        window = self.windows(slots, envs)
        observations, next_observations = window[:, :-1], window[:, 1:]
        # At an episode's end the frame after t is another episode's: a terminated
        # transition never uses its next observation, a truncated one takes its final frame.
        for i in np.flatnonzero(arrays["done"][slots, envs] & ~arrays["terminated"][slots, envs]):
            window[i, -1] = self.final_frames[int(slots[i]) * self.n_envs + int(envs[i])]
        return {
            "observations": observations,
            "actions": arrays["actions"][slots, envs],
            "rewards": arrays["rewards"][slots, envs].astype(np.float32),
            "next_observations": next_observations,
            "terminated": arrays["terminated"][slots, envs],
            "discounts": np.full(len(slots), gamma, np.float32),
        }

    # -- checkpoints ------------------------------------------------------------------------

    def state(self, prefix: str) -> dict[str, np.ndarray]:
        arrays = super().state(prefix)
        keys = np.array(sorted(self.final_frames), np.int64)
        frame_shape = self.arrays["frames"].shape[2:]
        arrays[f"{prefix}/final_keys"] = keys
        arrays[f"{prefix}/final_frames"] = (
            np.stack([self.final_frames[int(k)] for k in keys])
            if len(keys)
            else np.zeros((0, *frame_shape), self.arrays["frames"].dtype)
        )
        arrays[f"{prefix}/starting"] = self.starting.copy()
        arrays[f"{prefix}/zero_padding"] = np.array(self.zero_padding)
        return arrays

    def checked_state(self, arrays: dict[str, Any], prefix: str) -> dict[str, np.ndarray]:
        """Also the final frames, one for each stored truncated transition, and the flags."""
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
        saved["starting"] = saved_array(arrays, prefix, "starting", (self.n_envs,), bool)
        saved["zero_padding"] = saved_array(arrays, prefix, "zero_padding", (), bool)
        return saved

    def set_state(self, saved: dict[str, np.ndarray]) -> None:
        super().set_state(saved)
        keys, frames = saved["final_keys"], saved["final_frames"]
        self.final_frames = {int(k): f.copy() for k, f in zip(keys, frames, strict=True)}
        self.starting = saved["starting"].copy()
        self.zero_padding = bool(saved["zero_padding"])
