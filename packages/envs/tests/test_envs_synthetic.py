"""Multi-armed and wheel bandits: gymnasium contract, exact regret, determinism, exact resume."""

from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest
from envs_helpers import play, random_actions

import rlx
from rlx.errors import ConfigError
from rlx.protocols import Bandit
from rlx.seeding import env_rng_state, restore_env_rng
from rlx.testing import check_env
from rlx_envs import BernoulliMAB, GaussianMAB, WheelBandit

SYNTHETIC = [
    ("rlx/BernoulliMAB-v0", {}),
    ("rlx/BernoulliMAB-v0", {"n_bandits": 3, "n_arms": 4}),
    ("rlx/GaussianMAB-v0", {}),
    ("rlx/GaussianMAB-v0", {"n_bandits": 2, "sigma": 0.5}),
    ("rlx/Wheel-v0", {}),
    ("rlx/Wheel-v0", {"delta": 0.5, "horizon": 50}),
]


@pytest.mark.parametrize("env_id, kwargs", SYNTHETIC)
def test_synthetic_bandits_pass_the_environment_checks(env_id, kwargs):
    env = rlx.make_env(env_id, **kwargs)
    check_env(env)
    assert isinstance(env.unwrapped, Bandit)


@pytest.mark.parametrize("env_id, kwargs", SYNTHETIC)
def test_a_restored_state_continues_exactly_mid_episode(env_id, kwargs):
    env = gymnasium.make(env_id, **kwargs)
    actions = random_actions(env.action_space.n, 140)
    play(env, actions[:60], reset_seed=3)
    # Through JSON, as a checkpoint stores them.
    state = json.loads(json.dumps(env.unwrapped.state_dict()))
    rng_state = json.loads(json.dumps(env_rng_state(env)))
    expected = play(env, actions[60:])

    wrapped = gymnasium.make(env_id, **kwargs)
    wrapped.reset(seed=99)  # gymnasium's wrappers refuse step() before a reset()
    restore_env_rng(wrapped, rng_state)
    wrapped.unwrapped.load_state_dict(state)
    assert play(wrapped, actions[60:]) == expected

    # state_dict() alone is enough: it holds the state of np_random too.
    bare = type(env.unwrapped)(**kwargs)
    bare.load_state_dict(state)
    assert play(bare, actions[60:]) == expected


def test_the_same_seed_gives_the_same_problem_and_rounds_and_another_seed_does_not():
    actions = random_actions(10, 200)
    first, second, other = BernoulliMAB(), BernoulliMAB(), BernoulliMAB()
    assert play(first, actions, reset_seed=5) == play(second, actions, reset_seed=5)
    np.testing.assert_array_equal(first.means, second.means)
    play(other, actions, reset_seed=6)
    assert not np.array_equal(first.means, other.means)


def test_means_are_kept_through_unseeded_resets_and_redrawn_by_a_seeded_one():
    env = GaussianMAB()
    env.reset(seed=1)
    means = env.means
    env.reset()
    np.testing.assert_array_equal(env.means, means)
    env.reset(seed=2)
    assert not np.array_equal(env.means, means)
    env.reset(seed=1)
    np.testing.assert_array_equal(env.means, means)


def test_contexts_do_not_depend_on_the_arms_pulled():
    for make in (lambda: BernoulliMAB(n_bandits=4), lambda: GaussianMAB(n_bandits=4), WheelBandit):
        one, two = make(), make()
        trace_one = play(one, random_actions(one.n_arms, 100, seed=1), reset_seed=0)
        trace_two = play(two, random_actions(two.n_arms, 100, seed=2), reset_seed=0)
        assert [step[0] for step in trace_one[1:]] == [step[0] for step in trace_two[1:]]


def test_bernoulli_regret_is_the_exact_gap_in_expected_reward():
    means = [0.1, 0.9, 0.5]
    env = BernoulliMAB(means=means)
    context, _ = env.reset(seed=0)
    np.testing.assert_array_equal(context, [1.0])
    for arm, mean in enumerate(means):
        assert env.optimal_reward() == 0.9
        _, reward, terminated, truncated, info = env.step(arm)
        assert reward in (0.0, 1.0) and terminated is False and truncated is False
        assert info == {"regret": 0.9 - mean, "optimal_reward": 0.9, "expected_reward": mean}
    assert env.step(1)[4]["regret"] == 0.0


def test_several_bandits_show_their_index_one_hot_and_have_their_own_best_arm():
    means = np.array([[0.2, 0.8], [0.7, 0.1], [0.5, 0.5]])
    env = BernoulliMAB(means=means)
    assert (env.n_bandits, env.n_arms, env.context_dim) == (3, 2, 3)
    context, _ = env.reset(seed=0)
    seen = set()
    for _ in range(300):
        bandit = int(np.argmax(context))
        assert context.sum() == 1.0
        seen.add(bandit)
        best = int(np.argmax(means[bandit]))
        context, _, _, _, info = env.step(best)
        assert info["regret"] == 0.0 and info["optimal_reward"] == means[bandit].max()
    assert seen == {0, 1, 2}


def test_rewards_have_the_expected_means():
    bernoulli = BernoulliMAB(means=[0.3])
    gaussian = GaussianMAB(means=[2.0], sigma=0.5)
    bernoulli.reset(seed=0)
    gaussian.reset(seed=0)
    n = 4000
    bernoulli_rewards = [bernoulli.pull(0) for _ in range(n)]
    gaussian_rewards = np.array([gaussian.pull(0) for _ in range(n)])
    assert abs(np.mean(bernoulli_rewards) - 0.3) < 4 * np.sqrt(0.3 * 0.7 / n)
    assert abs(gaussian_rewards.mean() - 2.0) < 4 * 0.5 / np.sqrt(n)
    assert abs(gaussian_rewards.std() - 0.5) < 0.05


def test_drawn_means_follow_the_documented_distributions():
    bernoulli, gaussian = BernoulliMAB(n_arms=1000), GaussianMAB(n_arms=1000)
    bernoulli.reset(seed=0)
    gaussian.reset(seed=0)
    assert bernoulli.means.shape == (1, 1000)
    assert 0.0 <= bernoulli.means.min() and bernoulli.means.max() <= 1.0
    assert abs(bernoulli.means.mean() - 0.5) < 0.05
    assert abs(gaussian.means.mean()) < 0.15 and abs(gaussian.means.std() - 1.0) < 0.1


def test_episodes_are_truncated_after_the_horizon():
    env = rlx.make_env("rlx/GaussianMAB-v0", horizon=5)
    env.reset(seed=0)
    flags = [env.step(0)[3] for _ in range(5)]
    assert flags == [False, False, False, False, True]


def _best_wheel_arm(context, delta):
    x, y = float(context[0]), float(context[1])
    if np.hypot(x, y) <= delta:
        return 0
    return {(True, True): 1, (True, False): 2, (False, True): 3, (False, False): 4}[(x > 0, y > 0)]


@pytest.mark.parametrize("delta", [0.0, 0.5, 0.95, 1.0])
def test_wheel_regret_follows_the_paper(delta):
    env = WheelBandit(delta=delta)
    context, _ = env.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(400):
        best = _best_wheel_arm(context, delta)
        arm = int(rng.integers(5))
        expected = np.full(5, 1.0)
        expected[0] = 1.2
        if best != 0:
            expected[best] = 50.0
        np.testing.assert_array_equal(env.expected_rewards(), expected)
        context, reward, _, _, info = env.step(arm)
        assert info["optimal_reward"] == expected[best]
        assert info["expected_reward"] == expected[arm]
        assert info["regret"] == expected[best] - expected[arm] >= 0
        assert abs(reward - expected[arm]) < 0.01 * 6


def test_wheel_contexts_are_uniform_in_the_unit_disk():
    env = WheelBandit()
    context, _ = env.reset(seed=0)
    contexts = [context] + [env.step(0)[0] for _ in range(3999)]
    radii = np.hypot(*np.array(contexts, dtype=np.float64).T)
    assert radii.max() <= 1.0 + 1e-6
    assert abs(np.mean(radii > 0.5) - 0.75) < 0.03  # the area outside radius 0.5
    assert WheelBandit().horizon == 2000


@pytest.mark.parametrize("bad", [10, -1, 2.0, "1", [1]])
def test_an_action_outside_the_arms_names_the_valid_range(bad):
    env = BernoulliMAB()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"0\.\.9"):
        env.step(bad)


def test_numpy_integer_actions_are_arms():
    env = gymnasium.make("rlx/Wheel-v0")
    env.reset(seed=0)
    env.step(np.int64(4))
    env.step(env.action_space.sample())


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: BernoulliMAB(means=[0.5, 1.5]), r"\[0, 1\]"),
        (lambda: BernoulliMAB(n_arms=3, means=[0.5, 0.5]), "n_arms=3"),
        (lambda: GaussianMAB(n_bandits=2, means=[[0.0, 1.0]] * 3), "n_bandits=2"),
        (lambda: GaussianMAB(sigma=-1.0), "sigma"),
        (lambda: BernoulliMAB(n_arms=0), "n_arms"),
        (lambda: GaussianMAB(horizon=0), "horizon"),
        (lambda: WheelBandit(delta=1.5), "delta"),
    ],
)
def test_inconsistent_or_invalid_settings_raise_a_config_error(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_step_before_reset_asks_for_a_reset():
    with pytest.raises(gymnasium.error.ResetNeeded):
        GaussianMAB().step(0)
