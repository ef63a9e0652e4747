"""Evolution strategies on Discrete and Dict observations: their evaluators encode them."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.testing import check_agent


@pytest.mark.parametrize("env", ["FrozenLake-v1", "rlx/BitFlipping-v0"])
def test_es_agents_on_encoded_observations_resume_exactly(env):
    check_agent("openai-es", env, hidden_sizes=(8,), population_size=8)


def test_es_acts_on_one_observation_or_a_batch_of_them():
    agent = rlx.make("cem", "Taxi-v4", hidden_sizes=(8,), population_size=8)
    assert agent.policy.obs_dim == 500  # one-hot states
    single = agent.act(42)
    assert isinstance(single, int) and list(agent.act(np.array([42, 7]))) == [
        single,
        agent.act(7),
    ]
