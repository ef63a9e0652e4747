"""CMA-ES as in Hansen (2016): recombination weights, active covariance update, IPOP restarts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlx.testing import check_agent
from rlx_es.cma_es import CMAES, default_population_size, recombination_weights


def test_weights_follow_the_tutorial_formulas_on_a_hand_computed_small_case():
    # n = 2, lambda = 4 + floor(3 ln 2) = 6: w'_i = ln(3.5) - ln i.
    assert default_population_size(2) == 6
    weights, mu_eff, c_1, c_mu = recombination_weights(2, 6)
    raw = [1.252763, 0.559616, 0.154151, -0.133531, -0.356675, -0.538997]
    # mu_eff = (sum w'+)^2 / sum w'+^2 = 1.966530^2 / 1.906348
    assert mu_eff == pytest.approx(2.028611, rel=1e-5)
    assert c_1 == pytest.approx(2 / (3.3**2 + 2.028611), rel=1e-5)  # 0.154815
    assert c_mu == pytest.approx(
        2 * (0.25 + 2.028611 + 1 / 2.028611 - 2) / (16 + 2.028611), rel=1e-5
    )
    # mu_eff^- = 1.029203^2 / 0.435566 = 2.431916; alpha_mu^- = 2.8088,
    # alpha_mueff^- = 1 + 2 * 2.431916 / 4.028611 = 2.207325, alpha_posdef^- = 4.4373.
    negative_sum = 2.207325
    expected = [r / 1.966530 for r in raw[:3]] + [negative_sum * r / 1.029203 for r in raw[3:]]
    np.testing.assert_allclose(weights, expected, rtol=1e-5)
    assert weights[weights > 0].sum() == pytest.approx(1.0)
    assert weights[weights < 0].sum() == pytest.approx(-negative_sum, rel=1e-5)
    assert np.all(np.diff(weights) < 0)


@pytest.mark.parametrize("n", [5, 30, 100])
def test_negative_weights_sum_to_the_smallest_of_the_three_bounds(n):
    lam = default_population_size(n)
    weights, mu_eff, c_1, c_mu = recombination_weights(n, lam)
    raw = math.log((lam + 1) / 2) - np.log(np.arange(1, lam + 1))
    negative = raw[raw < 0]
    mu_eff_minus = negative.sum() ** 2 / (negative**2).sum()
    bound = min(1 + c_1 / c_mu, 1 + 2 * mu_eff_minus / (mu_eff + 2), (1 - c_1 - c_mu) / (n * c_mu))
    assert weights[weights > 0].sum() == pytest.approx(1.0)
    assert weights[weights < 0].sum() == pytest.approx(-bound)
    passive, _, _, _ = recombination_weights(n, lam, active=False)
    assert passive[passive < 0].size == 0
    np.testing.assert_allclose(passive[: lam // 2], weights[: lam // 2])


def _evaluations_to_target(strategy: CMAES, f, target: float, budget: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    evaluations = 0
    while evaluations < budget:
        population = strategy.ask(int(rng.integers(2**31)))
        values = f(population.parameters())
        strategy.tell(population, -values)
        evaluations += population.size
        if values.min() < target:
            return evaluations
    return budget + 1


def test_active_cma_reaches_the_target_on_an_ellipsoid_in_fewer_evaluations():
    n = 10
    scales = 10.0 ** (6.0 * np.arange(n) / (n - 1))

    def ellipsoid(x):
        return (x**2 * scales).sum(axis=1)

    counts = {
        active: _evaluations_to_target(
            CMAES(np.ones(n), sigma=1.0, active=active), ellipsoid, 1e-8, 20000, seed=3
        )
        for active in (True, False)
    }
    assert counts[True] <= 20000
    assert counts[True] < counts[False]


def test_separable_active_cma_still_solves_the_sphere():
    strategy = CMAES(np.full(30, 3.0), sigma=1.0, separable=True)
    count = _evaluations_to_target(strategy, lambda x: (x**2).sum(axis=1), 1e-8, 40000, seed=0)
    assert count <= 40000


def test_ipop_restarts_double_the_population_and_stop_after_the_asked_number():
    strategy = CMAES(np.full(4, 2.0), sigma=1.0, restarts=2)
    start = strategy.population_size
    sizes = []
    rng = np.random.default_rng(0)
    for _ in range(3000):
        population = strategy.ask(int(rng.integers(2**31)))
        strategy.tell(population, -(population.parameters() ** 2).sum(axis=1))
        sizes.append(strategy.population_size)
    assert sorted(set(sizes)) == [start, 2 * start, 4 * start]  # sphere converges: TolFun/TolX
    assert strategy.restarts_done == 2
    assert CMAES(np.zeros(4), 1.0).restarts == 0


def test_a_restarted_strategy_resumes_exactly_from_its_state():
    def run(strategy, generations, rng):
        for _ in range(generations):
            population = strategy.ask(int(rng.integers(2**31)))
            strategy.tell(population, -(population.parameters() ** 2).sum(axis=1))

    rng = np.random.default_rng(1)
    first = CMAES(np.full(4, 2.0), sigma=1.0, restarts=3)
    run(first, 400, rng)
    assert first.restarts_done >= 1
    arrays, meta = first.state()
    second = CMAES(np.full(4, 2.0), sigma=1.0, restarts=3)
    second.load_state(arrays, meta)
    state = rng.bit_generator.state
    run(first, 50, rng)
    rng.bit_generator.state = state
    run(second, 50, rng)
    np.testing.assert_array_equal(first.mean, second.mean)
    assert first.population_size == second.population_size
    assert first.sigma == second.sigma


@pytest.mark.parametrize("options", [{}, {"separable": True}, {"active": False}])
def test_cma_es_agent_keeps_the_contract(options):
    check_agent(
        "cma-es",
        "Pendulum-v1",
        seed=2,
        iterations=2,
        population_size=8,
        hidden_sizes=(8,),
        block_size=4,
        **options,
    )
