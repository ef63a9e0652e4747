"""rlx-bandits contextual agents: they learn, their posteriors are exact, they resume exactly."""

from __future__ import annotations

import os

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.spaces import Box, Discrete

import rlx
from rlx.errors import ConfigError, SpaceError
from rlx.testing import check_agent, same_state, whole_state
from rlx_bandits.linear import NormalInverseGammaRegressions

torch.set_num_threads(1)  # 2-core machines: oversubscribed BLAS threads are many times slower

LINEAR_ID = "rlx_test/LinearContextual-v0"
NEURAL_AGENTS = [
    "neural-greedy",
    "dropout",
    "neural-linear",
    "variational",
    "bootstrap",
    "param-noise",
]
CONTEXTUAL_AGENTS = ["linear-posterior", "lin-ucb", *NEURAL_AGENTS]


class LinearContextualBandit(gymnasium.Env):
    """Contexts ``x ~ N(0, I)``; arm ``a`` pays ``theta_a . x + N(0, noise^2)``; exact regret.

    The weights ``theta`` (one unit-norm row per arm) are fixed by ``problem_seed``, so every
    reset plays the same problem; ``reset(seed=...)`` only seeds the contexts and noise.
    Episodes end after ``horizon`` rounds; the round counter is part of :meth:`state_dict`
    (a TimeLimit wrapper's counter would not be), so resumed runs end episodes on time.
    """

    def __init__(
        self,
        context_dim: int = 6,
        n_arms: int = 4,
        noise: float = 0.1,
        problem_seed: int = 0,
        horizon: int = 100,
    ) -> None:
        weights = np.random.default_rng(problem_seed).standard_normal((n_arms, context_dim))
        self.theta = weights / np.linalg.norm(weights, axis=1, keepdims=True)
        self.noise = noise
        self.observation_space = Box(-np.inf, np.inf, (context_dim,), np.float64)
        self.action_space = Discrete(n_arms)
        self.context = np.zeros(context_dim)
        self.horizon = horizon
        self.rounds = 0

    def _draw(self) -> np.ndarray:
        self.context = self.np_random.standard_normal(self.theta.shape[1])
        return self.context.copy()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.rounds = 0
        return self._draw(), {}

    def step(self, action):
        means = self.theta @ self.context
        expected = float(means[action])
        reward = expected + self.noise * float(self.np_random.standard_normal())
        best = float(means.max())
        info = {"regret": best - expected, "optimal_reward": best, "expected_reward": expected}
        self.rounds += 1
        return self._draw(), reward, False, self.rounds >= self.horizon, info

    def state_dict(self) -> dict:
        return {"context": self.context.tolist(), "rounds": self.rounds}

    def load_state_dict(self, state: dict) -> None:
        self.context = np.asarray(state["context"], dtype=np.float64)
        self.rounds = state["rounds"]


gymnasium.register(LINEAR_ID, entry_point=LinearContextualBandit)


def cumulative_regret(name: str, rounds: int, seed: int = 0, **config) -> float:
    agent = rlx.make(name, LINEAR_ID, seed=seed, **config)
    for _ in range(rounds):
        agent.step()
    return agent.cumulative_regret


def uniform_regret(rounds: int, seed: int = 0, env_id: str = LINEAR_ID) -> float:
    """Cumulative regret of uniformly random arms on ``env_id`` over ``rounds`` rounds."""
    env = rlx.make_env(env_id)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    total = 0.0
    for _ in range(rounds):
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        total += info["regret"]
        if terminated or truncated:
            env.reset()
    return total


#: Small networks and a short training schedule, so that every neural test takes seconds.
SMALL_NETWORK = dict(hidden_sizes=(32,), training_freq=20, training_steps=40, batch_size=64)
#: Smaller still, for the contract checks: training happens every other round.
TINY_NETWORK = dict(
    hidden_sizes=(8,), training_freq=2, training_steps=2, batch_size=16, initial_pulls=1
)


def settings(name: str, network: dict) -> dict:
    return network if name in NEURAL_AGENTS else {}


# -- learning ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["linear-posterior", "lin-ucb"])
def test_linear_agents_have_a_fraction_of_uniform_regret_on_a_linear_problem(name):
    # Observed: 0.05 (linear-posterior) and 0.015 (lin-ucb) of uniform's regret.
    rounds = 1000
    assert cumulative_regret(name, rounds) < 0.15 * uniform_regret(rounds)


@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_neural_agents_learn_a_linear_problem_within_400_rounds(name):
    # Observed over seeds 0-2: 0.06 (variational) to 0.23 (neural-linear) of uniform's regret.
    rounds = 400
    assert cumulative_regret(name, rounds, **SMALL_NETWORK) < 0.3 * uniform_regret(rounds)


def test_linear_agents_learn_statlog():
    # Uniform picks the right class of 7 one time in 7: regret about 0.86 per round.
    # Observed: 0.18 (linear-posterior) and 0.12 (lin-ucb) of uniform's regret.
    files = pytest.importorskip("rlx_envs.files")
    if not files.shared_dirs() and not os.environ.get("RLX_UCI_DIR"):
        pytest.skip("the UCI copies (shared/data/uci beside the repository) are not here")
    rounds = 2000
    baseline = uniform_regret(rounds, env_id="rlx/Statlog-v0")
    for name in ("linear-posterior", "lin-ucb"):
        agent = rlx.make(name, "rlx/Statlog-v0", seed=0)
        for _ in range(rounds):
            agent.step()
        assert agent.cumulative_regret < 0.4 * baseline, name


@pytest.mark.parametrize("reset_lr, decayed_steps", [(False, 2 * 40 - 1), (True, 40 - 1)])
def test_learning_rate_decays_over_all_trainings_unless_reset(reset_lr, decayed_steps):
    agent = rlx.make("neural-greedy", LINEAR_ID, seed=0, reset_lr=reset_lr, **SMALL_NETWORK)
    for _ in range(40):  # two trainings of 40 steps
        agent.step()
    expected = 0.1 / (1 + 0.5 * decayed_steps)
    assert agent.optimizer.param_groups[0]["lr"] == pytest.approx(expected)


# -- exact posteriors ------------------------------------------------------------------------


def random_observations(n: int, dim: int, n_arms: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    contexts = rng.standard_normal((n, dim))
    arms = rng.integers(n_arms, size=n)
    rewards = contexts.sum(axis=1) * (arms + 1) + rng.standard_normal(n)
    return contexts, arms, rewards


def batch_posterior(features, rewards, lambda_prior, a0, b0):
    """The normal-inverse-gamma posterior of one arm, computed from all its data at once."""
    precision = lambda_prior * np.eye(features.shape[1]) + features.T @ features
    covariance = np.linalg.inv(precision)
    mean = covariance @ features.T @ rewards
    a = a0 + len(rewards) / 2
    b = b0 + (rewards @ rewards - mean @ precision @ mean) / 2
    return precision, covariance, mean, a, b


def test_incremental_posterior_equals_the_batch_posterior_after_3000_updates():
    contexts, arms, rewards = random_observations(3000, dim=6, n_arms=3)
    env = LinearContextualBandit(context_dim=6, n_arms=3)
    config = dict(lambda_prior=0.5, a0=3.0, b0=2.0)
    agent = rlx.make("linear-posterior", env, seed=0, **config)
    for context, arm, reward in zip(contexts, arms, rewards, strict=True):
        agent.update(context, int(arm), float(reward))
    posterior = agent.posterior
    features = np.hstack([contexts, np.ones((len(contexts), 1))])  # the intercept
    for arm in range(3):
        rows = arms == arm
        precision, covariance, mean, a, b = batch_posterior(features[rows], rewards[rows], **config)
        np.testing.assert_allclose(posterior.precision[arm], precision, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(posterior.covariance[arm], covariance, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(posterior.mean[arm], mean, rtol=1e-8, atol=1e-8)
        assert posterior.a[arm] == a
        assert posterior.b[arm] == pytest.approx(b, rel=1e-8)
        assert posterior.counts[arm] == rows.sum()


class ShapeEcho:
    """A stand-in generator whose gamma "draws" are their shapes and whose normals are 1, so
    a test sees at which shape each of the posterior's pre-drawn gammas was drawn."""

    def standard_gamma(self, shape, size=None, out=None):
        result = np.broadcast_to(np.asarray(shape, dtype=float), size)
        if out is None:
            return result.copy()
        out[...] = result
        return out

    def standard_normal(self, size=None, out=None):
        if out is None:
            return np.ones(size)
        out[...] = 1.0
        return out


@pytest.mark.parametrize("redraw", [True, False])
def test_posterior_draws_made_ahead_always_have_the_current_noise_shapes(redraw):
    # Gammas are drawn DRAW_BLOCK rounds ahead; an update redraws the pulled arm's unused ones
    # at its new shape (given the generator) or discards the block (without it).
    posterior = NormalInverseGammaRegressions(3, 4, lambda_prior=0.5, a0=2.0, b0=3.0)
    echo = ShapeEcho()
    contexts, arms, rewards = random_observations(200, dim=4, n_arms=2)
    for context, arm, reward in zip(contexts, arms, rewards, strict=True):
        values = posterior.sample_values(context, echo)
        used = posterior.gammas[:, posterior.draw_index[0] - 1]
        np.testing.assert_array_equal(used, posterior.a)  # arm 2 is never pulled
        spread = np.sqrt(posterior.b / posterior.a * posterior.quadratic_forms(context))
        np.testing.assert_allclose(values, posterior.mean @ context + spread, rtol=1e-12)
        posterior.update(int(arm), context, float(reward), echo if redraw else None)
    assert posterior.a[0] > 40


def test_lin_ucb_ridge_estimates_equal_the_batch_solution():
    contexts, arms, rewards = random_observations(2000, dim=5, n_arms=2, seed=1)
    agent = rlx.make("lin-ucb", LinearContextualBandit(context_dim=5, n_arms=2), seed=0)
    for context, arm, reward in zip(contexts, arms, rewards, strict=True):
        agent.update(context, int(arm), float(reward))
    features = np.hstack([contexts, np.ones((len(contexts), 1))])
    for arm in range(2):
        x, y = features[arms == arm], rewards[arms == arm]
        design = np.eye(6) + x.T @ x
        np.testing.assert_allclose(
            agent.regressions.covariance[arm], np.linalg.inv(design), atol=1e-8
        )
        np.testing.assert_allclose(
            agent.regressions.mean[arm], np.linalg.solve(design, x.T @ y), atol=1e-8
        )


def test_lin_ucb_estimated_noise_is_each_arms_ridge_residual_variance():
    contexts, arms, rewards = random_observations(500, dim=5, n_arms=3, seed=2)
    env = LinearContextualBandit(context_dim=5, n_arms=3)
    agent = rlx.make("lin-ucb", env, seed=0, noise="estimated")
    fresh = agent.noise_variances()
    np.testing.assert_array_equal(fresh, np.ones(3))  # the unit pseudo-observation alone
    for context, arm, reward in zip(contexts, arms, rewards, strict=True):
        agent.update(context, int(arm), float(reward))
    features = np.hstack([contexts, np.ones((len(contexts), 1))])
    for arm in range(3):
        x, y = features[arms == arm], rewards[arms == arm]
        theta = np.linalg.solve(np.eye(6) + x.T @ x, x.T @ y)
        residual = np.sum((y - x @ theta) ** 2) + theta @ theta  # squares plus the penalty
        expected = (1 + residual) / (1 + len(y))
        assert agent.noise_variances()[arm] == pytest.approx(expected, rel=1e-8)


def test_lin_ucb_with_estimated_noise_learns_mushroom_rewards_of_5_and_minus_35():
    # Li et al.'s unit width suits rewards in [0, 1]; on Mushroom it stops eating after a few
    # poisonous mushrooms. Observed after 2,000 rounds, seed 0: 0.52 (unit) and 0.07
    # (estimated) of uniform's regret.
    files = pytest.importorskip("rlx_envs.files")
    if not files.shared_dirs() and not os.environ.get("RLX_UCI_DIR"):
        pytest.skip("the UCI copies (shared/data/uci beside the repository) are not here")
    rounds = 2000
    baseline = uniform_regret(rounds, env_id="rlx/Mushroom-v0")
    regret = {}
    for noise in ("unit", "estimated"):
        agent = rlx.make("lin-ucb", "rlx/Mushroom-v0", seed=0, noise=noise)
        for _ in range(rounds):
            agent.step()
        regret[noise] = agent.cumulative_regret / baseline
    assert regret["estimated"] < 0.15 < 0.4 < regret["unit"], regret


def test_neural_linear_posterior_between_retrainings_equals_a_refit_on_the_same_features():
    agent = rlx.make("neural-linear", LINEAR_ID, seed=0, **{**SMALL_NETWORK, "training_freq": 50})
    for _ in range(130):  # retrained at rounds 50 and 100, then 30 incremental updates
        agent.step()
    contexts, actions, _ = agent.data.tensors()
    rewards = agent.data.rewards[: agent.data.size]
    # The features the agent regressed on: all 100 rounds at once at the retraining, then one
    # context at a time (float32 batches of different sizes may round differently).
    features = np.vstack(
        [agent.representation(contexts[:100])]
        + [agent.representation(contexts[i : i + 1]) for i in range(100, 130)]
    )
    for arm in range(agent.n_arms):
        rows = actions.numpy() == arm
        _, covariance, mean, _, b = batch_posterior(
            features[rows], rewards[rows], lambda_prior=0.25, a0=6.0, b0=6.0
        )
        np.testing.assert_allclose(agent.posterior.covariance[arm], covariance, atol=1e-8)
        np.testing.assert_allclose(agent.posterior.mean[arm], mean, atol=1e-8)
        assert agent.posterior.b[arm] == pytest.approx(b, rel=1e-8)


# -- the agent contract ------------------------------------------------------------------------


@pytest.mark.parametrize("name", CONTEXTUAL_AGENTS)
def test_contextual_agent_keeps_the_rlx_contract(name):
    check_agent(name, LINEAR_ID, **settings(name, TINY_NETWORK))


def test_lin_ucb_with_estimated_noise_keeps_the_rlx_contract():
    check_agent("lin-ucb", LINEAR_ID, noise="estimated")


@pytest.mark.parametrize("name", CONTEXTUAL_AGENTS)
def test_contextual_agent_resumes_exactly_across_episode_ends_and_trainings(name):
    # 60 rounds: an episode ends at round 100 of the uninterrupted 120-round run.
    check_agent(name, LINEAR_ID, iterations=60, **settings(name, TINY_NETWORK))


@pytest.mark.parametrize("name", CONTEXTUAL_AGENTS)
def test_greedy_arm_draws_no_random_numbers(name):
    agent = rlx.make(name, LINEAR_ID, seed=0, **settings(name, TINY_NETWORK))
    for _ in range(10):
        agent.step()
    before = whole_state(agent)
    context = np.ones(6)
    arms = {agent.act(context) for _ in range(5)}
    assert len(arms) == 1
    assert same_state(before, whole_state(agent))


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["linear-posterior", "neural-linear"])
@pytest.mark.parametrize("key, value", [("lambda_prior", 0.0), ("a0", -1.0), ("b0", 0)])
def test_prior_parameter_out_of_range_is_a_config_error_naming_the_range(name, key, value):
    with pytest.raises(ConfigError, match=rf"{key} must be in \(0, inf\], got"):
        rlx.make(name, LINEAR_ID, **{key: value})


def test_empty_or_non_positive_hidden_sizes_are_config_errors():
    for sizes in ((), (8, 0)):
        with pytest.raises(ConfigError, match="hidden_sizes must be one or more positive"):
            rlx.make("neural-greedy", LINEAR_ID, hidden_sizes=sizes)


@pytest.mark.parametrize("name", CONTEXTUAL_AGENTS)
def test_context_of_the_wrong_shape_is_a_value_error_naming_the_size(name):
    agent = rlx.make(name, LINEAR_ID, seed=0, **settings(name, TINY_NETWORK))
    for _ in range(5):
        agent.step()
    wrong = np.zeros(5)
    with pytest.raises(SpaceError, match=r"shape \(6,\) or a batch of shape \(n, 6\).*\(5,\)"):
        agent.act(wrong)
    with pytest.raises(ValueError, match="contexts of 6 features"):
        agent.select(wrong)
    with pytest.raises(ValueError, match="contexts of 6 features"):
        agent.update(wrong, 0, 1.0)
