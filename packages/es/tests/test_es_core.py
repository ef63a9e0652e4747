"""The optimiser cores and utilities, on plain functions: no environment involved."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_es.cem import CEM
from rlx_es.cma_es import CMAES
from rlx_es.core import Population, novelty, optimize, rank_transformation, rastrigin, sphere
from rlx_es.openai_es import OpenAIES
from rlx_es.policy import VirtualBatchNorm


def test_rank_transformation_is_centered_and_ignores_monotone_changes():
    values = np.array([3.0, -10.0, 1000.0, 0.5])
    ranks = rank_transformation(values)
    np.testing.assert_allclose(ranks, [1 / 6, -0.5, 0.5, -1 / 6])
    np.testing.assert_array_equal(rank_transformation(np.exp(values / 100)), ranks)
    assert ranks.sum() == pytest.approx(0.0)


def test_mirrored_members_come_in_opposite_pairs_and_any_subset_is_rebuilt_exactly():
    population = Population(np.arange(5.0), sigma=0.1, seed=7, size=6, mirrored=True)
    members = population.parameters()
    np.testing.assert_allclose(members[0] - population.centre, population.centre - members[1])
    np.testing.assert_array_equal(population.parameters(np.array([3, 4])), members[[3, 4]])
    assert not np.allclose(members[0], members[2])


def test_novelty_is_the_mean_distance_to_the_k_nearest_archive_points():
    archive = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0], [10.0, 10.0]])
    assert novelty(np.array([[0.0, 0.0]]), archive, k=3) == pytest.approx((0 + 3 + 4) / 3)
    assert novelty(np.array([[0.0, 0.0]]), archive[:1], k=5) == pytest.approx(0.0)


def test_cma_es_reaches_1e_8_on_the_10_dimensional_sphere():
    result = optimize(CMAES(np.full(10, 3.0), sigma=1.0), sphere, 1000, minimize=True, target=1e-8)
    assert result.best_fitness < 1e-8
    assert result.generations < 400
    assert sphere(result.best_parameters[None])[0] == pytest.approx(result.best_fitness)


def test_separable_cma_es_reaches_1e_8_on_the_sphere():
    result = optimize(
        CMAES(np.full(30, 3.0), sigma=1.0, separable=True), sphere, 2000, minimize=True, target=1e-8
    )
    assert result.best_fitness < 1e-8


def test_cma_es_adapts_its_covariance_to_an_ill_conditioned_ellipsoid():
    scales = 10.0 ** np.linspace(0, 3, 8)

    def ellipsoid(x):
        return ((x * scales) ** 2).sum(axis=1)

    strategy = CMAES(np.ones(8), sigma=0.5)
    result = optimize(strategy, ellipsoid, 2000, minimize=True, target=1e-10)
    assert result.best_fitness < 1e-10
    assert strategy.D.max() / strategy.D.min() > 100  # learned axis ratio ~ condition 10^3


def test_openai_es_and_cem_minimise_the_sphere_through_the_objective_api():
    es = optimize(
        OpenAIES(np.full(20, 2.0), 50, sigma=0.1, learning_rate=0.05, weight_decay=0.0),
        sphere,
        300,
        minimize=True,
    )
    cem = optimize(CEM(np.full(20, 2.0), 50, initial_std=1.0), sphere, 100, minimize=True)
    assert sphere(np.full((1, 20), 2.0))[0] == 80.0
    assert es.best_fitness < 0.5
    assert cem.best_fitness < 1e-2


def test_cma_es_beats_random_search_on_rastrigin():
    result = optimize(CMAES(np.full(10, 3.0), sigma=2.0), rastrigin, 300, minimize=True)
    rng = np.random.default_rng(0)
    random_best = rastrigin(rng.uniform(-5, 5, size=(300 * 10, 10))).min()
    assert result.best_fitness < random_best / 2


def test_openai_es_refuses_an_odd_mirrored_population():
    with pytest.raises(ValueError, match="even for mirrored"):
        OpenAIES(np.zeros(3), 5)


def test_virtual_batch_norm_uses_the_reference_batch_statistics():
    reference = np.array([[0.0, 10.0], [2.0, 10.0]])
    norm = VirtualBatchNorm(reference)
    np.testing.assert_allclose(norm(np.array([[1.0, 10.0], [3.0, 10.0]])), [[0, 0], [2, 0]])
