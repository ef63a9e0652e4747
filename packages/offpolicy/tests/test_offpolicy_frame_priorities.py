"""Prioritized replay and n-step returns on the frame buffer: the stacks, n-step returns,
discounts and next stacks it rebuilds by index are the plain buffer's, the sum tree's
leaves are its frame slots (0 where no sample can start), priorities drive the draws, and
checkpoints round-trip exactly while hostile ones are refused."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import rlx
from rlx.errors import CheckpointError
from rlx.replay import ReplayBuffer
from rlx.testing import check_agent
from rlx.vector import VectorRunner
from rlx_offpolicy.frames import FrameReplayBuffer, PrioritizedFrameReplayBuffer

SHAPE = (4, 5, 7)


class StampedFrames(gym.Env):
    """5x7 uint8 frames stamped with a step counter (so every frame says where it came
    from) and random pixels; episodes end at random, terminated, or at a time limit,
    truncated; rewards are distinct per step."""

    action_space = gym.spaces.Discrete(3)

    def __init__(self, size: tuple[int, int] = SHAPE[1:]) -> None:
        self.observation_space = gym.spaces.Box(0, 255, size, np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = int(self.np_random.integers(1, 250))
        return self._frame(), {}

    def _frame(self):
        frame = self.np_random.integers(0, 256, self.observation_space.shape, dtype=np.uint8)
        frame[0, 0] = self.t % 250 + 1  # never 0: zero padding stays recognisable
        return frame

    def step(self, action):
        self.t += 1
        terminated = bool(self.np_random.random() < 0.06)
        return self._frame(), float(self.t) + 0.25 * int(action), terminated, False, {}


for _padding in ("reset", "zero"):
    gym.register(
        f"rlx-test/StampedFrames-{_padding}-v0",
        lambda padding=_padding: gym.wrappers.FrameStackObservation(
            gym.wrappers.TimeLimit(StampedFrames(), 17), SHAPE[0], padding_type=padding
        ),
    )
gym.register(  # Atari's frame size, for the agent's CNN
    "rlx-test/StampedFrames-84-v0",
    lambda: gym.wrappers.FrameStackObservation(
        gym.wrappers.TimeLimit(StampedFrames((84, 84)), 17), SHAPE[0]
    ),
)


def new_buffers(capacity: int, n_envs: int):
    """A plain, a uniform frame and a prioritized frame buffer of the same layout."""
    layout = (capacity, n_envs, SHAPE, np.dtype(np.uint8), (), np.dtype(np.uint8))
    return (
        ReplayBuffer(*layout),
        FrameReplayBuffer(*layout),
        PrioritizedFrameReplayBuffer(*layout, alpha=0.7, eps=1e-3),
    )


def feed(runner: VectorRunner, buffers, steps: int, rng: np.random.Generator) -> None:
    """``steps`` vector steps of ``runner`` into every buffer."""
    for _ in range(steps):
        observations = runner.observations
        actions = rng.integers(3, size=runner.n_envs).astype(np.uint8)
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


def startable(buffer: FrameReplayBuffer) -> tuple[np.ndarray, np.ndarray]:
    """Every ``(slot, env)`` a sample can start from now."""
    return np.nonzero(buffer.startable_mask(buffer.counts, buffer.positions))


def assert_same_batches(plain, frames, slots, envs, n_step):
    expected = plain.gather(slots, envs, 0.9, n_step)
    rebuilt = frames.gather(slots, envs, 0.9, n_step)
    for name in ("observations", "actions", "rewards", "terminated", "discounts"):
        np.testing.assert_array_equal(expected[name], rebuilt[name], err_msg=name)
    # A terminated transition's next observation is never used (no bootstrap); every other
    # one, truncated ones included, is exactly the environment's.
    used = ~expected["terminated"]
    np.testing.assert_array_equal(
        expected["next_observations"][used], rebuilt["next_observations"][used]
    )


@pytest.mark.parametrize("padding", ["reset", "zero"])
def test_stacks_n_step_returns_and_next_stacks_equal_the_plain_buffers_everywhere(padding):
    runner = VectorRunner(gym.make(f"rlx-test/StampedFrames-{padding}-v0"), 2, "sync", seed=3)
    buffers = plain, uniform, prioritized = new_buffers(60, 2)
    rng = np.random.default_rng(0)
    ends = {"terminated": 0, "truncated": 0, "n-step cut short": 0}
    # Before the ring is full, as it fills up, and after it wrapped several times.
    for steps in (5, 20, 10, 40, 3, 70):
        feed(runner, buffers, steps, rng)
        slots, envs = startable(prioritized)
        assert len(slots) == len(uniform) == len(prioritized)
        for n_step in (1, 3, 5):
            assert_same_batches(plain, uniform, slots, envs, n_step)
            assert_same_batches(plain, prioritized, slots, envs, n_step)
        done, terminated = (
            plain.arrays["done"][slots, envs],
            plain.arrays["terminated"][slots, envs],
        )
        ends["terminated"] += int(terminated.sum())
        ends["truncated"] += int((done & ~terminated).sum())
        discounts = plain.gather(slots, envs, 0.9, 3)["discounts"]
        ends["n-step cut short"] += int((discounts > np.float32(0.9**3 + 1e-6)).sum())
        # The tree's non-zero leaves are exactly the slots a sample can start from.
        leaves = np.flatnonzero(prioritized.priorities)
        np.testing.assert_array_equal(leaves, np.sort(slots * 2 + envs))
    assert min(ends.values()) > 0, ends  # the cases that could differ all came up
    # The uniform draws stay among those slots too, and reach all of them.
    drawn = set(zip(*uniform.sample_indices(20_000, np.random.default_rng(1)), strict=True))
    assert drawn == set(zip(*startable(uniform), strict=True))


def test_the_newest_transition_takes_the_frame_kept_aside_for_its_next_stack():
    runner = VectorRunner(gym.make("rlx-test/StampedFrames-reset-v0"), 1, "sync", seed=0)
    buffers = plain, frames, _ = new_buffers(30, 1)
    feed(runner, buffers, 7, np.random.default_rng(0))
    newest = np.array([(frames.positions[0] - 1) % frames.slots])
    assert not frames.arrays["done"][newest, 0].any(), "this seed's episode goes on"
    rebuilt = frames.gather(newest, np.zeros(1, np.int64), 0.9, 1)["next_observations"]
    np.testing.assert_array_equal(rebuilt, plain.arrays["next_observations"][newest, 0])


def test_priorities_drive_the_draws_and_closed_slots_are_never_drawn():
    runner = VectorRunner(gym.make("rlx-test/StampedFrames-reset-v0"), 2, "sync", seed=1)
    _, _, buffer = new_buffers(40, 2)
    feed(runner, [buffer], 70, np.random.default_rng(0))  # both rings full and wrapped
    slots, envs = startable(buffer)
    leaves = slots * 2 + envs
    assert len(leaves) == 2 * (20 - 3)  # each ring less its oldest stack - 1
    rng = np.random.default_rng(5)
    td_errors = rng.exponential(size=len(leaves)) * (rng.random(len(leaves)) < 0.7)
    buffer.update_priorities(leaves, td_errors)
    expected = np.zeros(40)
    expected[leaves] = (td_errors + 1e-3) ** 0.7
    np.testing.assert_allclose(buffer.priorities, expected, rtol=1e-12)
    draws = np.concatenate([buffer.draw(400, rng) for _ in range(100)])  # 40,000 draws
    assert set(draws) <= set(leaves)
    counts = np.bincount(draws, minlength=40)[leaves]
    share = expected[leaves] / expected.sum()
    chi_square = float((((counts - 40_000 * share) ** 2) / (40_000 * share)).sum())
    assert chi_square < 70.0, chi_square  # chi2(33) at 99.9%: 63.9; uniform would be >> 1000
    # The importance weights are those of the draw probabilities, and reach the batch.
    batch = buffer.sample(64, rng, 0.9, 3, beta=0.5)
    probabilities = expected[batch["indices"]] / expected.sum()
    weights = (len(buffer) * probabilities) ** -0.5
    np.testing.assert_allclose(batch["weights"], weights / weights.max(), rtol=1e-6)
    # A step closes the oldest slot needed for a stack, and the new transition gets the max.
    before = buffer.priorities
    feed(runner, [buffer], 1, np.random.default_rng(9))
    after = buffer.priorities
    changed = np.flatnonzero(after != before)
    assert after[changed].max() == pytest.approx(buffer.max_priority)
    assert set(np.flatnonzero(after == 0)) == set(range(40)) - set(
        (lambda s, e: s * 2 + e)(*startable(buffer))
    )


def test_a_checkpoint_round_trips_exactly_and_goes_on_alike():
    runner = VectorRunner(gym.make("rlx-test/StampedFrames-zero-v0"), 2, "sync", seed=2)
    _, _, buffer = new_buffers(50, 2)
    rng = np.random.default_rng(0)
    feed(runner, [buffer], 60, rng)
    batch = buffer.sample(16, rng, 0.9, 3, beta=0.4)
    buffer.update_priorities(batch["indices"], rng.normal(size=16))
    twin = new_buffers(50, 2)[2]
    twin.set_state(twin.checked_state(buffer.state("b"), "b"))
    np.testing.assert_array_equal(twin.tree.nodes, buffer.tree.nodes)
    assert twin.max_priority == buffer.max_priority
    # Both go on alike: the same steps, draws, batches and priority updates.
    for k in range(5):
        step_rng = np.random.default_rng(100 + k)
        for target in (buffer, twin):
            feed_runner = VectorRunner(
                gym.make("rlx-test/StampedFrames-zero-v0"), 2, "sync", seed=10 + k
            )
            feed(feed_runner, [target], 3, np.random.default_rng(k))
        a = buffer.sample(16, np.random.default_rng(k), 0.9, 3, beta=0.6)
        b = twin.sample(16, np.random.default_rng(k), 0.9, 3, beta=0.6)
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        errors = step_rng.normal(size=16)
        buffer.update_priorities(a["indices"], errors)
        twin.update_priorities(b["indices"], errors)
        np.testing.assert_array_equal(twin.tree.nodes, buffer.tree.nodes)


def hostile_edits(buffer: PrioritizedFrameReplayBuffer):
    """Edits of a saved state that no buffer of this layout could have written."""
    slots, envs = startable(buffer)
    closed = np.flatnonzero(
        ~buffer.startable_mask(buffer.counts, buffer.positions).reshape(-1)
        & buffer.stored_mask(buffer.counts).reshape(-1)
    )
    assert len(closed), "a full ring has closed slots"

    def set_priority(index, value):
        def edit(arrays):
            arrays["b/priorities"] = arrays["b/priorities"].copy()
            arrays["b/priorities"][index] = value

        return edit

    def replace(key, make):
        def edit(arrays):
            arrays[key] = make(arrays[key])

        return edit

    def remove(key):
        return lambda arrays: arrays.pop(key)

    return {
        "a priority on a slot no stack can start from": set_priority(closed[0], 0.5),
        "a zero priority on a startable slot": set_priority(slots[0] * 2 + envs[0], 0.0),
        "a NaN priority": set_priority(slots[1] * 2 + envs[1], np.nan),
        "a priority above the max": set_priority(slots[2] * 2 + envs[2], 1e9),
        "priorities one short": replace("b/priorities", lambda a: a[:-1]),
        "a negative max priority": replace("b/max_priority", lambda a: -a),
        "next frames of another size": replace("b/next_frames", lambda a: a[..., :3]),
        "next frames float32": replace("b/next_frames", lambda a: a.astype(np.float32)),
        "next frames missing": remove("b/next_frames"),
        "frames missing": remove("b/frames"),
    }


def test_hostile_saved_arrays_are_one_checkpoint_error_and_change_nothing():
    runner = VectorRunner(gym.make("rlx-test/StampedFrames-reset-v0"), 2, "sync", seed=4)
    _, _, buffer = new_buffers(40, 2)
    feed(runner, [buffer], 50, np.random.default_rng(0))
    saved = buffer.state("b")
    for name, edit in hostile_edits(buffer).items():
        arrays = dict(saved)
        edit(arrays)
        target = new_buffers(40, 2)[2]
        before = target.tree.nodes.copy()
        with pytest.raises(CheckpointError):
            target.load(arrays, "b")
        np.testing.assert_array_equal(target.tree.nodes, before, err_msg=name)
        assert len(target) == 0, name
    new_buffers(40, 2)[2].load(dict(saved), "b")  # the unedited state loads


def test_rainbow_on_frame_stacks_keeps_the_frame_buffer_and_resumes_exactly():
    settings = dict(
        learning_starts=32,
        batch_size=16,
        train_freq=8,
        gradient_steps=2,
        buffer_size=300,
    )
    # The contract, save/load and exact resume of training (the buffer's tree included).
    check_agent("rainbow", "rlx-test/StampedFrames-84-v0", iterations=6, **settings)
    agent = rlx.make("rainbow", "rlx-test/StampedFrames-84-v0", seed=0, **settings)
    assert isinstance(agent.buffer, PrioritizedFrameReplayBuffer)
    for _ in range(8):
        agent.step()
    assert len(set(agent.buffer.priorities[agent.buffer.priorities > 0])) > 2  # updated
