"""The frame replay buffer rebuilds exactly the stacks a plain buffer stores, while it
stores each frame once instead of twice per stacked observation."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlx.errors import ConfigError
from rlx.replay import ReplayBuffer
from rlx.vector import VectorRunner
from rlx_offpolicy.frames import FrameReplayBuffer


class CountingFrames(gym.Env):
    """6x6 frames whose pixels hold a counter, so that every frame says where it came from;
    episodes end at random (terminated) or at a time limit (truncated)."""

    observation_space = gym.spaces.Box(0, 255, (6, 6), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = int(self.np_random.integers(1, 200))
        return self._frame(), {}

    def _frame(self):
        return np.full((6, 6), self.t % 250 + 1, np.uint8)

    def step(self, action):
        self.t += 1
        terminated = bool(self.np_random.random() < 0.05)
        return self._frame(), float(self.t), terminated, False, {}


for _padding in ("reset", "zero"):
    gym.register(
        f"rlx-test/CountingFrames-{_padding}-v0",
        lambda padding=_padding: gym.wrappers.FrameStackObservation(
            gym.wrappers.TimeLimit(CountingFrames(), 30), 4, padding_type=padding
        ),
    )


def fill(padding: str, steps: int = 400, capacity: int = 200):
    """A plain and a frame buffer fed the same vector steps (the ring wraps twice)."""
    runner = VectorRunner(gym.make(f"rlx-test/CountingFrames-{padding}-v0"), 2, "sync", seed=0)
    buffers = [
        cls(capacity, 2, (4, 6, 6), np.dtype(np.uint8), (), np.dtype(np.int64))
        for cls in (ReplayBuffer, FrameReplayBuffer)
    ]
    rng = np.random.default_rng(0)
    for _ in range(steps):
        observations = runner.observations
        actions = rng.integers(2, size=2)
        step = runner.step(actions)
        for buffer in buffers:
            buffer.add(
                observations,
                actions,
                step.rewards,
                step.next_observations,
                step.terminated,
                step.done,
                step.valid,
            )
    return buffers


@pytest.mark.parametrize("padding", ["reset", "zero"])
def test_rebuilt_stacks_equal_the_stored_ones_across_episode_ends_and_the_ring(padding):
    plain, frames = fill(padding)
    assert (plain.arrays["done"] & ~plain.arrays["terminated"]).any(), "some truncations"
    slots, envs = frames.sample_indices(3000, np.random.default_rng(1))
    expected = plain.gather(slots, envs, 0.9, 1)
    rebuilt = frames.gather(slots, envs, 0.9, 1)
    for name in ("observations", "actions", "rewards", "terminated", "discounts"):
        np.testing.assert_array_equal(expected[name], rebuilt[name], err_msg=name)
    # A terminated transition's next observation is never used (no bootstrap); every other
    # one, truncated ones included, is exactly the environment's.
    used = ~expected["terminated"]
    np.testing.assert_array_equal(
        expected["next_observations"][used], rebuilt["next_observations"][used]
    )


def test_each_frame_is_stored_once():
    plain, frames = fill("reset", steps=10)
    stacks = plain.arrays["observations"].nbytes + plain.arrays["next_observations"].nbytes
    assert frames.arrays["frames"].nbytes * 8 == stacks  # 1 frame where 2 stacks of 4 were


def test_a_checkpoint_of_the_frame_buffer_resumes_sampling_exactly():
    _, frames = fill("reset")
    twin = FrameReplayBuffer(200, 2, (4, 6, 6), np.dtype(np.uint8), (), np.dtype(np.int64))
    twin.load(frames.state("b"), "b")
    a = frames.sample(64, np.random.default_rng(3), 0.9)
    b = twin.sample(64, np.random.default_rng(3), 0.9)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_only_frame_stacks_are_taken():
    with pytest.raises(ConfigError, match=r"\(stack, height, width\)"):
        FrameReplayBuffer(10, 1, (84, 84), np.dtype(np.uint8), (), np.dtype(np.int64))
