"""Tests of the hill-climbing plugin: the ones every rlx plugin should have, and one that it learns.

They need the distribution installed (``pip install -e .``): the first test checks that
rlx finds it through its entry point; the others build the agent from the manifest alone,
in the ``rlx_registry`` fixture that rlx-core provides, so other installed plugins cannot
interfere with them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import rlx
from rlx.errors import ConfigError, SpaceError
from rlx.testing import check_agent
from rlx_hillclimb import plugin

#: CartPole-v1 counts as solved at a mean return of 195; a random policy scores about 22.
SOLVED = 195.0
#: Environment steps in which seed 0 solves CartPole-v1 (it gets there after about 15,000).
BUDGET = 20_000


@pytest.fixture
def registry(rlx_registry):
    """A registry holding only this plugin, as rlx would load it from the entry point."""
    rlx_registry.add_plugin(plugin, "rlx-hillclimb", "0.1.0")
    return rlx_registry


def test_installed_distribution_registers_the_agent_through_its_entry_point():
    spec = rlx.registry.agent("hill-climbing")
    assert (spec.distribution, spec.version, spec.family) == ("rlx-hillclimb", "0.1.0", "example")


def test_manifest_describes_the_agent_without_importing_it():
    code = (
        "import sys, rlx_hillclimb.plugin; "
        "sys.exit('rlx_hillclimb.agent' in sys.modules or 'gymnasium' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_spec_declares_box_observations_and_discrete_actions(registry):
    spec = registry.agent("hill-climbing")
    assert spec.target == "rlx_hillclimb.agent:HillClimbingAgent"
    assert (spec.observation_spaces, spec.action_spaces) == (("Box",), ("Discrete",))


def test_agent_keeps_the_rlx_agent_contract(registry):
    check_agent("hill-climbing", "CartPole-v1")


def test_agent_refuses_continuous_actions(registry):
    with pytest.raises(SpaceError, match="Discrete"):
        rlx.make("hill-climbing", "Pendulum-v1")


def test_noise_bounds_must_contain_the_initial_noise(registry):
    with pytest.raises(ConfigError, match="noise_min <= noise_scale <= noise_max"):
        rlx.make("hill-climbing", "CartPole-v1", noise_scale=3.0, noise_max=2.0)


def test_noise_shrinks_after_an_improvement_and_stays_within_bounds(registry):
    agent = rlx.make("hill-climbing", "CartPole-v1", noise_scale=0.1, noise_min=0.01, noise_max=0.4)
    first = agent.step()
    assert first.metrics["accepted"] == 1.0  # anything beats the initial best of -inf
    assert agent.noise_scale == pytest.approx(0.05)
    for _ in range(20):
        agent.step()
        assert 0.01 <= agent.noise_scale <= 0.4


def test_solves_cartpole_with_a_fixed_seed(registry):
    agent = rlx.make("hill-climbing", "CartPole-v1", seed=0)
    rlx.Trainer(agent, steps=BUDGET, eval_every=0, progress=False, tensorboard=False).fit()
    result = rlx.evaluate(agent, rlx.make_env("CartPole-v1"), episodes=20, seed=0)
    assert result.mean_return >= SOLVED
