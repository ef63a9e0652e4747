"""The NumPy building blocks of rlx-core: vector runner, normalisers, schedules, seeds, hooks."""

from __future__ import annotations

from typing import ClassVar

import gymnasium
import numpy as np
import pytest

from rlx import protocols
from rlx.errors import ConfigError
from rlx.normalization import ObservationNormalizer, RewardScaler, RunningMeanStd
from rlx.schedules import linear as linear_schedule
from rlx.seeding import derive
from rlx.vector import VectorRunner, make_vector_env

# -- the vector runner --------------------------------------------------------------------------


def _run(runner: VectorRunner, steps: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    trace = []
    for _ in range(steps):
        step = runner.step(rng.integers(2, size=runner.n_envs))
        trace.append(step)
    return trace


def test_the_reset_step_after_an_episode_end_is_not_a_transition():
    runner = VectorRunner(gymnasium.make("CartPole-v1"), 4, "sync", seed=0)
    trace = _run(runner, 200)
    done = np.array([s.done for s in trace])
    valid = np.array([s.valid for s in trace])
    assert done.any(), "random CartPole episodes end within 200 steps"
    # Exactly the steps right after an episode's end are invalid.
    np.testing.assert_array_equal(~valid[1:], done[:-1])
    assert valid[0].all()


def test_finished_episodes_count_only_valid_steps_and_are_handed_out_once():
    runner = VectorRunner(gymnasium.make("CartPole-v1"), 3, "sync", seed=1)
    trace = _run(runner, 150)
    returns, lengths = runner.pop_finished()
    assert len(returns) == sum(int(s.done.sum()) for s in trace)
    # CartPole pays 1 per step: each return equals its length, reset steps excluded.
    assert returns == [float(n) for n in lengths]
    assert runner.pop_finished() == ([], [])
    unfinished = runner.episode_lengths.sum()
    assert sum(lengths) + unfinished == sum(int(s.valid.sum()) for s in trace)


def test_a_truncated_step_returns_the_final_observation_to_bootstrap_from():
    env = gymnasium.make("CartPole-v1", max_episode_steps=5)
    runner = VectorRunner(env, 1, "sync", seed=0)
    steps = [runner.step(np.array([i % 2])) for i in range(6)]
    assert steps[4].truncated[0] and not steps[4].terminated[0]
    # The observation of the truncating step is the episode's last; the next step resets.
    assert not steps[5].valid[0]
    assert not np.array_equal(steps[4].next_observations, steps[5].next_observations)


def test_a_snapshot_resumes_the_environments_in_mid_episode_exactly():
    runner = VectorRunner(gymnasium.make("CartPole-v1"), 4, "sync", seed=2)
    _run(runner, 37)
    runner.pop_finished()  # an iteration hands its finished episodes out before a checkpoint
    arrays, meta = runner.state("runner")
    twin = VectorRunner(gymnasium.make("CartPole-v1"), 4, "sync", seed=99)
    twin.load(arrays, meta, "runner", seed=0)
    for a, b in zip(_run(runner, 60, seed=5), _run(twin, 60, seed=5), strict=True):
        np.testing.assert_array_equal(a.next_observations, b.next_observations)
        np.testing.assert_array_equal(a.valid, b.valid)
    assert runner.pop_finished() == twin.pop_finished()


def test_asynchronous_environments_restart_their_episodes_on_restore():
    runner = VectorRunner(gymnasium.make("CartPole-v1"), 2, "async", seed=0)
    try:
        _run(runner, 10)
        arrays, meta = runner.state("runner")
        assert meta["envs"] is None
        runner.load(arrays, meta, "runner", seed=3)
        assert not runner.autoreset.any() and not runner.episode_lengths.any()
    finally:
        runner.close()


def test_a_vector_environment_needs_a_spec():
    env = gymnasium.make("CartPole-v1").unwrapped
    env.spec = None
    with pytest.raises(ConfigError, match=r"env\.spec"):
        make_vector_env(env, 2, "sync")


# -- normalisers ----------------------------------------------------------------------------------


def test_running_statistics_equal_those_of_all_the_data():
    rng = np.random.default_rng(1)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)) for n in (1, 7, 50, 3)]
    stats = RunningMeanStd((4,))
    for batch in batches:
        stats.update(batch)
    everything = np.concatenate(batches)
    np.testing.assert_allclose(stats.mean, everything.mean(0), rtol=1e-4)
    np.testing.assert_allclose(stats.var, everything.var(0), rtol=1e-3)


def test_observation_normaliser_standardises_clips_and_evaluation_does_not_update():
    normalizer = ObservationNormalizer((2,), clip=3.0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        normalizer(rng.normal([10.0, -5.0], [2.0, 0.5], size=(16, 2)), update=True)
    before = normalizer.stats.count
    scaled = normalizer(np.array([[10.0, -5.0], [1e6, -1e6]]), update=False)
    assert normalizer.stats.count == before
    np.testing.assert_allclose(scaled[0], 0.0, atol=0.1)
    np.testing.assert_array_equal(scaled[1], [3.0, -3.0])


def test_reward_scaler_divides_by_the_spread_of_the_discounted_return():
    scaler = RewardScaler(n_envs=1, gamma=0.0, clip=100.0)
    rewards = np.random.default_rng(0).normal(0.0, 5.0, size=2000)
    scaled = np.array([scaler(np.array([r]), np.array([False]))[0] for r in rewards])
    # gamma=0: the "return" is the reward itself, so late rewards come out near unit scale.
    assert 0.8 < scaled[1000:].std() < 1.2


# -- schedules and seeds --------------------------------------------------------------------


def test_a_linear_schedule_moves_from_start_to_end_then_stays():
    assert linear_schedule(0, 1.0, 0.1, 1000) == 1.0
    assert linear_schedule(500, 1.0, 0.1, 1000) == pytest.approx(0.55)
    assert linear_schedule(1000, 1.0, 0.1, 1000) == 0.1
    assert linear_schedule(10**9, 1.0, 0.1, 1000) == 0.1
    assert linear_schedule(0, 1.0, 0.1, 0) == 0.1  # no decay at all: the end from the start
    assert linear_schedule(500, 3e-4, 0.0, None) == 3e-4  # unknown length: constant


def test_derived_seeds_differ_by_purpose_index_and_run_and_repeat_exactly():
    seeds = {
        derive(seed, purpose, *ids)
        for seed in range(20)
        for purpose in ("particle", "evaluation")
        for ids in ((), (0,), (1,), (0, 1), (1, 0))
    }
    assert len(seeds) == 20 * 2 * 5
    assert derive(3, "particle", 2) == derive(3, "particle", 2)
    assert all(0 <= s < 2**63 for s in seeds)
    # The arithmetic this replaces collided across runs: seed 0's particle 1 was seed 10007's 0.
    assert derive(0, "particle", 1) != derive(10_007, "particle", 0)


# -- declared hooks -----------------------------------------------------------------------


def test_the_optional_hooks_are_declared_protocols_with_their_signatures():
    class Hooked:
        trainer_defaults: ClassVar[dict[str, int]] = {"eval_every": 5}

        def seed_evaluation(self, seed: int) -> None: ...

        def set_training_budget(self, steps: int | None) -> None: ...

        def close(self) -> None: ...

    hooked, bare = Hooked(), object()
    for hook in (
        protocols.SeedsEvaluation,
        protocols.TakesTrainingBudget,
        protocols.SuggestsTrainerDefaults,
        protocols.Closes,
    ):
        assert isinstance(hooked, hook) and not isinstance(bare, hook)
    assert "steps" in protocols.TakesTrainingBudget.set_training_budget.__annotations__


def test_a_closed_runner_reopens_where_it_was():
    closed = VectorRunner(gymnasium.make("CartPole-v1"), 2, "sync", seed=4)
    kept = VectorRunner(gymnasium.make("CartPole-v1"), 2, "sync", seed=4)
    _run(closed, 15)
    _run(kept, 15)
    closed.close()
    for a, b in zip(_run(closed, 40, seed=2), _run(kept, 40, seed=2), strict=True):
        np.testing.assert_array_equal(a.next_observations, b.next_observations)
    assert closed.pop_finished() == kept.pop_finished()


def test_observations_are_c_ordered_whatever_the_vector_environment_returns():
    # gymnasium's CartPoleVectorEnv (vectorization "auto") returns Fortran-ordered arrays; a
    # checkpoint gives the runner's observations back in C order, and a matrix product may
    # round the two layouts differently, so the runner hands out one layout (exact resume).
    runner = VectorRunner(gymnasium.make("CartPole-v1"), 3, "auto", seed=0)
    raw, _ = runner.envs.reset(seed=0)
    assert not raw.flags["C_CONTIGUOUS"], "the premise: this vector environment is Fortran-ordered"
    runner = VectorRunner(gymnasium.make("CartPole-v1"), 3, "auto", seed=0)
    assert runner.observations.flags["C_CONTIGUOUS"]
    step = runner.step(np.zeros(3, dtype=np.int64))
    assert (
        step.next_observations.flags["C_CONTIGUOUS"] and runner.observations.flags["C_CONTIGUOUS"]
    )
