"""Fitness shaping chosen by name (``fitness_shaping``), or a user's function by import path."""

from __future__ import annotations

import json
import math
import textwrap

import numpy as np
import pytest

import rlx
from rlx.errors import ConfigError, UntrustedCodeError
from rlx.testing import check_agent
from rlx.trainer import Trainer
from rlx_es.core import (
    FITNESS_SHAPINGS,
    nes_utilities,
    rank_transformation,
    raw_fitness,
    shaping_function,
    z_scores,
)

SMALL = {"population_size": 8, "hidden_sizes": (8,), "block_size": 4}


def _centre_after(iterations: int = 3, name: str = "openai-es", **config) -> np.ndarray:
    agent = rlx.make(name, "CartPole-v1", seed=5, **SMALL, **config)
    for _ in range(iterations):
        agent.step()
    return agent.strategy.mean.copy()


# -- the shapings on known vectors --------------------------------------------------------------


def test_centered_ranks_are_the_ranks_scaled_to_plus_minus_a_half_as_before():
    assert FITNESS_SHAPINGS["centered_ranks"] is rank_transformation
    np.testing.assert_allclose(
        rank_transformation(np.array([3.0, 1.0, 2.0, 2.0])), [0.5, -0.5, -1 / 6, 1 / 6]
    )


def test_nes_utilities_follow_wierstra_et_al_sum_to_zero_and_rise_with_fitness():
    fitness = np.array([1.0, 4.0, 3.0, 2.0])  # ranks 4, 1, 2, 3 (1 = best)
    scores = [max(0.0, math.log(3) - math.log(k)) for k in (1, 2, 3, 4)]
    expected = [s / sum(scores) - 1 / 4 for s in scores]
    np.testing.assert_allclose(
        nes_utilities(fitness), [expected[3], expected[0], expected[1], expected[2]]
    )

    rng = np.random.default_rng(0)
    fitness = rng.normal(size=50)
    utilities = nes_utilities(fitness)
    assert abs(utilities.sum()) < 1e-12
    assert np.all(np.diff(utilities[np.argsort(fitness)]) >= 0)
    assert utilities.argmax() == fitness.argmax()
    assert (utilities > 0).sum() < 25  # only the better half is pulled towards


def test_z_scores_have_mean_zero_and_standard_deviation_one_and_zeros_for_equal_fitness():
    scores = z_scores(np.array([1.0, 2.0, 3.0, 10.0]))
    assert abs(scores.mean()) < 1e-12 and abs(scores.std() - 1) < 1e-12
    np.testing.assert_array_equal(z_scores(np.full(6, 7.0)), np.zeros(6))


def test_raw_fitness_is_a_copy_of_the_returns():
    fitness = np.array([5.0, -1.0])
    shaped = raw_fitness(fitness)
    np.testing.assert_array_equal(shaped, fitness)
    assert shaped is not fitness


def test_a_function_returning_the_wrong_shape_is_one_config_error():
    with pytest.raises(ConfigError, match="one weight per member"):
        shaping_function(lambda fitness: fitness[:2])(np.zeros(4))


# -- the agents -----------------------------------------------------------------------------


def test_the_default_run_is_the_centered_rank_run_bit_for_bit():
    default = _centre_after()
    np.testing.assert_array_equal(default, _centre_after(fitness_shaping="centered_ranks"))
    # the same function given by import path takes the user-function route
    np.testing.assert_array_equal(
        default, _centre_after(fitness_shaping="rlx_es.core:rank_transformation")
    )
    assert not np.array_equal(default, _centre_after(fitness_shaping="nes_utilities"))


def test_openai_es_with_nes_utilities_keeps_the_contract():
    check_agent(
        "openai-es", "CartPole-v1", seed=1, iterations=2, fitness_shaping="nes_utilities", **SMALL
    )


def test_novelty_agents_shape_novelty_and_return_alike_and_default_to_ranks():
    config = {"behaviour_source": "final_observation", "meta_population_size": 2}
    default = _centre_after(2, "nsr-es", **config)
    np.testing.assert_array_equal(
        default, _centre_after(2, "nsr-es", fitness_shaping="centered_ranks", **config)
    )
    assert not np.array_equal(
        default, _centre_after(2, "nsr-es", fitness_shaping="z_scores", **config)
    )


@pytest.fixture
def shapings_module(tmp_path, monkeypatch):
    """A module of the user's importable as ``rlx_es_test_shapings``."""
    (tmp_path / "rlx_es_test_shapings.py").write_text(
        textwrap.dedent(
            """
            import numpy as np

            calls = []

            def top_half(fitness):
                calls.append(fitness.shape)
                return (fitness >= np.median(fitness)).astype(np.float64) - 0.5
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import rlx_es_test_shapings

    rlx_es_test_shapings.calls.clear()
    return rlx_es_test_shapings


def test_a_users_shaping_trains_is_recorded_by_name_and_loads_only_when_trusted(
    shapings_module, tmp_path
):
    agent = rlx.make(
        "openai-es", "CartPole-v1", seed=0, fitness_shaping=shapings_module.top_half, **SMALL
    )
    target = "rlx_es_test_shapings:top_half"
    assert agent.config.fitness_shaping == target
    run = tmp_path / "run"
    Trainer(agent, steps=300, eval_every=0, eval_episodes=0, run_dir=run, progress=False).fit()
    assert shapings_module.calls and set(shapings_module.calls) == {(8,)}
    assert (
        json.loads((run / "config.json").read_text())["hyperparameters"]["fitness_shaping"]
        == target
    )

    with pytest.raises(UntrustedCodeError, match="sets fitness_shaping="):
        rlx.load(run)
    loaded = rlx.load(run, trust_code=True)
    assert loaded.config.fitness_shaping == target
    observation = np.zeros(4, np.float32)
    assert loaded.act(observation) == agent.act(observation)


def test_an_unknown_shaping_on_the_command_line_is_exit_2_with_a_suggestion(rlx_cli, tmp_path):
    code, _, err = rlx_cli(
        "run",
        "openai-es",
        "--env",
        "CartPole-v1",
        "--set",
        "fitness_shaping=z_score",
        "--steps",
        "100",
        "--out",
        str(tmp_path / "r"),
    )
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Did you mean: z_scores" in lines[0]
