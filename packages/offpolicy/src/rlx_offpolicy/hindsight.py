"""Hindsight experience replay (Andrychowicz et al. 2017), the "future" strategy.

For goal-conditioned tasks (Dict observations with ``achieved_goal`` and ``desired_goal``
keys and an environment ``compute_reward(achieved_goal, desired_goal, info)``), a failed
episode still shows how to reach the goals it did reach. Each sampled transition is, with
probability ``k / (k + 1)`` (``k`` relabelled goals per real one, the paper's 4 by default in
practice), given as goal what the episode achieved at a uniformly drawn later step of the
same episode (the transition's own next state included), and its reward is recomputed for
that goal. Relabelling happens at sample time, so the buffer stores each transition once.

Observations here are the packed byte rows of :class:`rlx.observations.ObservationCoder`; the
goal keys are byte ranges of them (the two keys have one space, so one layout). The buffer
also records where each stored episode ends (``episode_ends``, -1 while it runs), so that
"later in the same episode" is one lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlx.errors import CheckpointError
from rlx.replay import ReplayBuffer, saved_array


class HindsightReplayBuffer(ReplayBuffer):
    """A :class:`ReplayBuffer` whose samples have their goals relabelled (see the module).

    ``coder`` packs the observations (its ``achieved_goal`` and ``desired_goal`` columns are
    read and written), ``compute_reward`` is the environment's, ``goals`` is ``k``. n-step
    returns are not supported (a relabelled goal changes every reward summed).
    """

    @staticmethod
    def field_specs(
        observation_shape: tuple[int, ...],
        observation_dtype: np.dtype,
        action_shape: tuple[int, ...],
        action_dtype: np.dtype,
    ) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        specs = ReplayBuffer.field_specs(
            observation_shape, observation_dtype, action_shape, action_dtype
        )
        return {**specs, "episode_ends": ((), np.dtype(np.int64))}

    def __init__(
        self,
        *args: Any,
        coder: Any,
        compute_reward: Callable[[Any, Any, Any], Any],
        goals: int,
    ) -> None:
        super().__init__(*args)
        self.coder = coder
        self.compute_reward = compute_reward
        self.relabel_probability = goals / (goals + 1)
        self.achieved = coder.columns("achieved_goal")
        self.desired = coder.columns("desired_goal")
        #: The slot where each environment's running episode began.
        self.starts = np.zeros(self.n_envs, np.int64)

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
        slots = self.positions.copy()
        super().add(observations, actions, rewards, next_observations, terminated, done, valid)
        ends = self.arrays["episode_ends"]
        for env in np.flatnonzero(valid):
            slot = slots[env]
            ends[slot, env] = -1
            if done[env]:
                length = (slot - self.starts[env]) % self.slots + 1
                ends[(self.starts[env] + np.arange(length)) % self.slots, env] = slot
                self.starts[env] = (slot + 1) % self.slots

    def sample(
        self, batch_size: int, rng: np.random.Generator, gamma: float, n_step: int = 1
    ) -> dict[str, np.ndarray]:
        """Uniform transitions, a ``k / (k + 1)`` share of them relabelled with a goal the
        episode achieved later, their rewards recomputed for it."""
        slots, envs = self.sample_indices(batch_size, rng)
        batch = self.gather(slots, envs, gamma, 1)
        relabel = np.flatnonzero(rng.random(batch_size) < self.relabel_probability)
        if len(relabel) == 0:
            return batch
        slots, envs = slots[relabel], envs[relabel]
        ends = self.arrays["episode_ends"][slots, envs]
        newest = (self.positions[envs] - 1) % self.slots
        last = np.where(ends >= 0, ends, newest)
        later = (last - slots) % self.slots
        future = (slots + (rng.random(len(relabel)) * (later + 1)).astype(np.int64)) % self.slots
        goals = self.arrays["next_observations"][future, envs][:, self.achieved]
        batch["observations"][relabel, self.desired] = goals
        batch["next_observations"][relabel, self.desired] = goals
        next_rows = batch["next_observations"][relabel]
        rewards = self.compute_reward(
            self.coder.unpack(next_rows, "achieved_goal"),
            self.coder.unpack(next_rows, "desired_goal"),
            {},
        )
        batch["rewards"][relabel] = np.asarray(rewards, np.float32).reshape(len(relabel))
        return batch

    # -- checkpoints ------------------------------------------------------------------------

    def state(self, prefix: str) -> dict[str, np.ndarray]:
        arrays = super().state(prefix)
        arrays[f"{prefix}/episode_starts"] = self.starts.copy()
        return arrays

    def checked_state(self, arrays: dict[str, Any], prefix: str) -> dict[str, np.ndarray]:
        saved = super().checked_state(arrays, prefix)
        starts = saved_array(arrays, prefix, "episode_starts", (self.n_envs,), np.int64)
        ends = saved["episode_ends"][self.stored_mask(saved["counts"])]
        if (starts < 0).any() or (starts >= self.slots).any() or (ends >= self.slots).any():
            raise CheckpointError(
                "the saved hindsight replay buffer's episode bounds lie outside its "
                f"{self.slots} slots"
            )
        saved["episode_starts"] = starts
        return saved

    def set_state(self, saved: dict[str, np.ndarray]) -> None:
        super().set_state(saved)
        self.starts = saved["episode_starts"].copy()
