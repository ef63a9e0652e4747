"""The last generation's parameters (estorch's ``population_parameters``), kept out of
checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.checkpoint import load_checkpoint


@pytest.mark.parametrize(
    ("name", "settings"),
    [
        ("openai-es", {}),
        ("cma-es", {}),
        ("cem", {}),
        ("nsr-es", {"meta_population_size": 2}),
    ],
)
def test_they_are_the_members_the_generation_evaluated(name, settings):
    agent = rlx.make(name, "CartPole-v1", seed=3, population_size=8, hidden_sizes=[4], **settings)
    assert agent.population_parameters() is None  # no generation yet
    iteration = agent.step()
    parameters = agent.population_parameters()
    assert parameters.shape == (8, agent.policy.n_params)
    assert parameters.dtype == np.float64
    assert len(np.unique(parameters, axis=0)) == 8
    # The first generation's best member is the agent's best so far: one of these rows.
    best = int(np.argmax(iteration.episode_returns))
    np.testing.assert_array_equal(parameters[best], agent.best_parameters)
    agent.close()
    if name == "nsr-es":
        return  # a novelty agent draws its centre first; the replay below is OpenAI-ES's order
    # Evaluating them again, with the block seeds the generation drew, plays the same episodes.
    replay = rlx.make(name, "CartPole-v1", seed=3, population_size=8, hidden_sizes=[4], **settings)
    replay.rng.integers(2**31)  # the population's noise seed, drawn before the block seeds
    episodes = replay.evaluate_population(agent.last_population)
    assert list(episodes.returns) == iteration.episode_returns
    replay.close()


def test_they_follow_the_generations_and_are_not_saved(tmp_path):
    agent = rlx.make("openai-es", "CartPole-v1", seed=0, population_size=6, hidden_sizes=[4])
    agent.step()
    first = agent.population_parameters()
    centre = agent.strategy.mean.copy()
    agent.step()
    second = agent.population_parameters()
    assert not np.array_equal(first, second)
    # Mirrored noise: the members of a generation average to the centre they were drawn around.
    np.testing.assert_allclose(second.mean(axis=0), centre, atol=1e-12)
    trainer = rlx.Trainer(
        agent, run_dir=tmp_path / "run", iterations=3, eval_episodes=0, verbose=False
    )
    trainer.fit()
    checkpoint = load_checkpoint(tmp_path / "run" / "final", resume=True)
    saved = [*checkpoint.policy.arrays.values(), *checkpoint.resume.arrays.values()]
    assert not any(np.ndim(a) == 2 and a.shape[0] == 6 for a in saved)
    resumed = rlx.load(tmp_path / "run")
    assert resumed.population_parameters() is None  # not saved: none until the next generation
    resumed.step()
    assert resumed.population_parameters().shape == (6, agent.policy.n_params)
