"""rlx-bandits, multi-armed agents: they learn, keep the rlx contract and refuse bad input."""

from __future__ import annotations

import csv
import functools
import math

import numpy as np
import pytest

import rlx
from rlx.errors import CheckpointError, ConfigError, SpaceError
from rlx.testing import check_agent, same_state, transfer_state, whole_state
from rlx_bandits.multi_armed import beta_quantile, student_t_upper_quantile

pytest.importorskip("rlx_envs", reason="the bandits run on rlx-envs' rlx/BernoulliMAB-v0")

AGENTS = [
    "epsilon-greedy",
    "ucb1",
    "bayesian-ucb",
    "gradient-bandit",
    "thompson",
    "fixed",
    "uniform",
]
#: 10 arms with means U[0, 1] drawn from the seed of the first reset (the agent's seed).
BERNOULLI_ID = "rlx/BernoulliMAB-v0"
SEEDS = range(10)
ROUNDS = 10_000
CONTEXT = np.ones(1)


def cumulative_regret(name: str, seed: int, **config) -> float:
    """The regret of ``name`` after ``ROUNDS`` rounds of the bandit that ``seed`` draws."""
    agent = rlx.make(name, BERNOULLI_ID, seed=seed, **config)
    for _ in range(ROUNDS):
        agent.step()
    return agent.cumulative_regret


def label(name: str, config: dict) -> str:
    """A test id: the agent and its settings, as on the command line."""
    settings = ",".join(f"{key}={value}" for key, value in config.items())
    return f"{name}({settings})" if config else name


@functools.cache
def uniform_regret(seed: int) -> float:
    return cumulative_regret("uniform", seed)


# -- learning ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name, fraction", [("ucb1", 0.15), ("thompson", 0.05)])
def test_regret_is_a_small_fraction_of_uniform_random_on_every_seed(name, fraction, seed):
    # Same seed, so the same arm means for both agents. Measured worst cases over the ten
    # seeds: UCB1 11.1%, Thompson sampling 2.3% of uniform random's regret.
    assert cumulative_regret(name, seed) < fraction * uniform_regret(seed)


#: Thresholds every tested seed meets, as fractions of uniform random's regret; measured
#: worst cases: 22.8% (epsilon-greedy, which explores a tenth of the rounds for ever and
#: may settle on a near-best arm; 12% on average), 5.6%, 3.1%, 2.8% on ten seeds; 1.3%,
#: 2.6% on the three seeds of the slower Bayes-UCB.
LEARNERS = [
    ("epsilon-greedy", {}, 0.25, SEEDS),
    ("gradient-bandit", {}, 0.07, SEEDS),
    ("thompson", {"likelihood": "gaussian", "noise_std": None}, 0.05, SEEDS),
    ("thompson", {"likelihood": "gaussian", "noise_std": 0.5}, 0.05, SEEDS),
    ("bayesian-ucb", {}, 0.03, SEEDS[:3]),
    ("bayesian-ucb", {"likelihood": "gaussian", "noise_std": 0.5}, 0.05, SEEDS[:3]),
]


@pytest.mark.parametrize(
    "name, config, fraction, seed",
    [
        pytest.param(name, config, fraction, seed, id=f"{label(name, config)}-{seed}")
        for name, config, fraction, seeds in LEARNERS
        for seed in seeds
    ],
)
def test_learner_beats_uniform_random_clearly(name, config, fraction, seed):
    assert cumulative_regret(name, seed, **config) < fraction * uniform_regret(seed)


def test_each_bandit_of_several_is_learned_from_its_one_hot_context(play):
    means = [[0.9, 0.1, 0.1], [0.1, 0.1, 0.9]]
    agent = rlx.make("ucb1", BERNOULLI_ID, seed=0, env_kwargs={"means": means})
    play(agent, 2000)
    assert agent.act(np.array([1.0, 0.0])) == 0
    assert agent.act(np.array([0.0, 1.0])) == 2


def test_ucb1_pulls_each_arm_once_first_then_the_largest_upper_bound():
    agent = rlx.make("ucb1", BERNOULLI_ID, seed=0)
    first = []
    for arm in range(10):
        first.append(agent.select(CONTEXT))
        agent.update(CONTEXT, arm, 1.0 if arm == 3 else 0.0)
    assert first == list(range(10))
    # Equal counts: the bound is largest for the largest mean.
    assert agent.select(CONTEXT) == 3


def test_gradient_bandit_update_follows_sutton_and_barto_2_12():
    agent = rlx.make("gradient-bandit", BERNOULLI_ID, seed=0, step_size=0.5)
    agent.update(CONTEXT, 0, 1.0)  # the first reward is its own baseline: no change
    assert agent.preferences[0] == [0.0] * 10
    agent.update(CONTEXT, 1, 0.0)  # baseline 1, pi = 0.1 everywhere, alpha (R - Rbar) = -0.5
    expected = [0.05] * 10
    expected[1] = 0.05 - 0.5
    assert agent.preferences[0] == pytest.approx(expected)
    assert sum(agent.preferences[0]) == pytest.approx(0.0)


def test_gradient_bandit_without_baseline_moves_towards_any_positive_reward():
    agent = rlx.make("gradient-bandit", BERNOULLI_ID, seed=0, step_size=0.5, baseline=False)
    agent.update(CONTEXT, 0, 1.0)
    assert agent.preferences[0][0] == pytest.approx(0.5 * 0.9)
    assert agent.greedy(CONTEXT) == 0


def test_thompson_posterior_counts_successes_and_failures():
    agent = rlx.make("thompson", BERNOULLI_ID, seed=0, prior_alpha=2.0, prior_beta=3.0)
    for reward in (1.0, 1.0, 0.0):
        agent.update(CONTEXT, 4, reward)
    assert agent.posterior.alpha[0][4] == 4.0 and agent.posterior.beta[0][4] == 4.0
    assert agent.greedy(CONTEXT) == 4  # posterior mean 0.5 beats the prior's 0.4


def test_fixed_probabilities_are_the_pull_frequencies():
    probabilities = (0.7, 0.3) + (0.0,) * 8
    agent = rlx.make("fixed", BERNOULLI_ID, seed=0, probabilities=probabilities)
    pulls = np.bincount([agent.select(CONTEXT) for _ in range(5000)], minlength=10)
    assert pulls[2:].sum() == 0
    assert abs(pulls[0] / 5000 - 0.7) < 0.03
    assert agent.greedy(CONTEXT) == 0


def test_uniform_pulls_every_arm_about_equally_often():
    agent = rlx.make("uniform", BERNOULLI_ID, seed=0)
    pulls = np.bincount([agent.select(CONTEXT) for _ in range(10_000)], minlength=10)
    assert pulls.min() > 850 and pulls.max() < 1150


# -- quantiles without SciPy ----------------------------------------------------------------------


@pytest.mark.parametrize("tail", [0.5, 0.1, 1e-3, 1e-5, 1e-9])
def test_beta_quantile_matches_closed_forms(tail):
    # Beta(a, 1): P(X < x) = x^a; Beta(1, b): P(X > x) = (1 - x)^b.
    assert beta_quantile(3.0, 1.0, tail) == pytest.approx((1 - tail) ** (1 / 3), rel=1e-12)
    assert beta_quantile(3.0, 1.0, tail, upper=False) == pytest.approx(tail ** (1 / 3), rel=1e-10)
    assert beta_quantile(1.0, 40.0, tail) == pytest.approx(
        -math.expm1(math.log(tail) / 40), rel=1e-9
    )
    assert beta_quantile(7.5, 7.5, 0.5) == pytest.approx(0.5, rel=1e-12)


@pytest.mark.parametrize("tail", [0.3, 1e-2, 1e-4])
def test_student_t_quantile_matches_closed_forms(tail):
    # nu = 1 is Cauchy; nu = 2 has P(T > s) = (1 - s / sqrt(2 + s^2)) / 2.
    cauchy, _ = student_t_upper_quantile(1.0, tail)
    assert cauchy == pytest.approx(math.tan(math.pi * (0.5 - tail)), rel=1e-9)
    p = 1 - tail
    two, _ = student_t_upper_quantile(2.0, tail)
    assert two == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-9)
    below, _ = student_t_upper_quantile(5.0, 1 - tail)
    assert below == pytest.approx(-student_t_upper_quantile(5.0, tail)[0], rel=1e-9)


def test_beta_and_t_quantiles_match_scipy_from_any_start():
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(0)
    for a, b, tail, start in zip(
        np.exp(rng.uniform(-1, 9, 200)),
        np.exp(rng.uniform(-1, 9, 200)),
        np.exp(rng.uniform(-12, -0.1, 200)),
        rng.uniform(0, 1, 200),
        strict=True,
    ):
        expected = special.betaincinv(a, b, 1 - tail)
        assert beta_quantile(a, b, tail, start=start) == pytest.approx(expected, rel=1e-9)
        expected = special.betaincinv(a, b, tail)
        assert beta_quantile(a, b, tail, False, start) == pytest.approx(expected, rel=1e-9)
        nu = 2 * a
        assert student_t_upper_quantile(nu, tail, start)[0] == pytest.approx(
            special.stdtrit(nu, 1 - tail), rel=1e-8
        )


# -- the rlx contract ----------------------------------------------------------------------------


VARIANTS = [(name, {}) for name in AGENTS] + [
    ("epsilon-greedy", {"epsilon_end": 0.01, "epsilon_decay_rounds": 10}),
    ("bayesian-ucb", {"likelihood": "gaussian", "noise_std": None, "c": 1.0}),
    ("bayesian-ucb", {"likelihood": "gaussian"}),
    ("thompson", {"likelihood": "gaussian", "noise_std": None}),
    ("thompson", {"likelihood": "gaussian"}),
    ("gradient-bandit", {"baseline": False, "temperature": 0.5}),
    ("fixed", {"probabilities": (0.5, 0.5) + (0.0,) * 8}),
]


@pytest.mark.parametrize(
    "name, config", [pytest.param(name, cfg, id=label(name, cfg)) for name, cfg in VARIANTS]
)
def test_agent_keeps_the_contract(name, config):
    check_agent(name, BERNOULLI_ID, iterations=20, **config)


@pytest.mark.parametrize("name", AGENTS)
def test_several_bandits_resume_exactly_across_episodes(name, play):
    settings = {"seed": 0, "env_kwargs": {"n_bandits": 3, "horizon": 50}}
    agent = rlx.make(name, BERNOULLI_ID, **settings)
    play(agent, 120)
    resumed = rlx.make(name, BERNOULLI_ID, **settings)
    transfer_state(agent, resumed)
    play(agent, 30)
    play(resumed, 30)
    assert same_state(whole_state(agent), whole_state(resumed))


def test_agent_draws_other_random_numbers_than_its_environment():
    # Both are seeded from the same seed; equal streams would tie rewards to arm choices.
    agent = rlx.make("uniform", BERNOULLI_ID, seed=0)
    agent.step()  # one number each: the arm, and the reward
    assert agent.rng.random(5).tolist() != agent.env.unwrapped.np_random.random(5).tolist()


def test_trainer_records_cumulative_regret_and_draws_the_learning_curve(tmp_path):
    agent = rlx.make("ucb1", BERNOULLI_ID, seed=0)
    rlx.Trainer(agent, steps=2000, run_dir=tmp_path / "run", progress=False).fit()
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    regret = [
        float(row["agent/cumulative_regret"]) for row in rows if row["agent/cumulative_regret"]
    ]
    assert len(regret) >= 20 and regret == sorted(regret) and regret[-1] > 0
    assert (tmp_path / "run" / "learning_curve.png").stat().st_size > 0


# -- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, config, message",
    [
        ("thompson", {"prior_alpha": 0.0}, r"prior_alpha must be in \(0, inf\], got 0"),
        ("bayesian-ucb", {"prior_beta": -1}, r"prior_beta must be in \(0, inf\], got -1"),
        ("thompson", {"prior_count": 0}, r"prior_count must be in \(0, inf\]"),
        ("thompson", {"noise_std": -1.0}, r"noise_std must be in \(0, inf\]"),
        ("thompson", {"likelihood": "bernouli"}, r"bernoulli, gaussian.*Did you mean: bernoulli"),
        ("fixed", {"probabilities": (0.5, 0.2) + (0.0,) * 8}, r"must sum to 1, .*\(sum 0.7\)"),
        ("fixed", {"probabilities": (1.5, -0.5) + (0.0,) * 8}, r"must each be in \[0, 1\]"),
        ("fixed", {"probabilities": (0.5, 0.5)}, r"2 entries, but the environment has 10 arms"),
        ("epsilon-greedy", {"epsilon": 1.5}, r"epsilon must be in \[0, 1\]"),
        ("epsilon-greedy", {"epsilon": 0.1, "epsilon_end": 0.5}, r"epsilon_end \(0.5\) must be"),
        ("gradient-bandit", {"temperature": 0}, r"temperature must be in \(0, inf\]"),
        ("ucb1", {"c": -1}, r"c must be in \[0, inf\]"),
    ],
)
def test_bad_hyperparameters_are_refused_with_the_valid_range(name, config, message):
    with pytest.raises(ConfigError, match=message):
        rlx.make(name, BERNOULLI_ID, **config)


@pytest.mark.parametrize("name", AGENTS)
def test_a_context_of_the_wrong_shape_is_refused(name):
    agent = rlx.make(name, BERNOULLI_ID, seed=0)
    with pytest.raises(
        SpaceError, match=r"shape \(1,\) or a batch of shape \(n, 1\).*got shape \(3,\)"
    ):
        agent.act(np.zeros(3))


def test_bernoulli_likelihood_refuses_rewards_outside_0_1():
    agent = rlx.make("thompson", BERNOULLI_ID, seed=0)
    with pytest.raises(ValueError, match=r"rewards in \[0, 1\], got 2.0; use likelihood=gaussian"):
        agent.update(CONTEXT, 0, 2.0)


def test_a_checkpoint_of_another_bandit_size_is_refused():
    agent = rlx.make("ucb1", BERNOULLI_ID, seed=0)
    agent.step()
    other = rlx.make("ucb1", BERNOULLI_ID, seed=0, env_kwargs={"n_arms": 5})
    with pytest.raises(CheckpointError, match=r"'counts' table \(shape \(1, 10\)\).*\(1, 5\)"):
        other.load_policy_state(agent.policy_state())
