"""Tests of the mini-dqn plugin: the ones every rlx plugin should have, and one that it learns.

They need the distribution installed (``pip install -e .``): the first test checks that rlx
finds it through its entry point; the others build the agent from the manifest alone, in the
``rlx_registry`` fixture that rlx-core provides, so that other installed plugins cannot
interfere with them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import rlx
from rlx.errors import ConfigError, SpaceError
from rlx.testing import check_agent
from rlx_minidqn import plugin

#: A random policy scores about 22 on CartPole-v1, the best possible 500.
THRESHOLD = 150.0
#: Environment steps for the learning test: seeds 0 to 7 all reach a greedy mean return
#: above 200 within them (seed 0: 231), in some 10 to 25 s on one thread.
BUDGET = 15_000
#: Settings under which three iterations of check_agent fill minibatches, update the network
#: and copy it into the target: the checkpoint then holds every part of the state.
EARLY_LEARNING = {
    "n_envs": 2,
    "learning_starts": 16,
    "batch_size": 8,
    "train_freq": 8,
    "gradient_steps": 2,
    "target_update_interval": 3,
}
AGENT_SOURCE = Path(__file__).parents[1] / "src" / "rlx_minidqn" / "agent.py"


@pytest.fixture
def registry(rlx_registry):
    """A registry holding only this plugin, as rlx would load it from the entry point."""
    rlx_registry.add_plugin(plugin, "rlx-minidqn", "0.1.0")
    return rlx_registry


@pytest.fixture(autouse=True)
def one_torch_thread():
    """One torch thread, as the agent's default sets it, whatever a test changes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_installed_distribution_registers_the_agent_through_its_entry_point():
    spec = rlx.registry.agent("mini-dqn")
    assert (spec.distribution, spec.version, spec.family) == ("rlx-minidqn", "0.1.0", "example")
    assert spec.paper.startswith("Mnih et al. (2015)")


def test_manifest_describes_the_agent_without_importing_it_or_torch():
    code = (
        "import sys, rlx_minidqn.plugin; "
        "sys.exit(any(m in sys.modules for m in ('rlx_minidqn.agent', 'torch', 'gymnasium')))"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_agent_is_built_from_rlx_core_alone():
    tree = ast.parse(AGENT_SOURCE.read_text())
    imported = {
        alias.name if isinstance(node, ast.Import) else node.module
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    rlx_modules = {name for name in imported if name and name.startswith("rlx")}
    assert all(name == "rlx" or name.startswith("rlx.") for name in rlx_modules), rlx_modules
    assert {"rlx.replay", "rlx.vector", "rlx.nn.layers", "rlx.schedules"} <= rlx_modules


def test_agent_keeps_the_rlx_agent_contract(registry):
    check_agent("mini-dqn", "CartPole-v1")


def test_agent_keeps_the_contract_while_learning(registry):
    check_agent("mini-dqn", "CartPole-v1", **EARLY_LEARNING)


def test_agent_refuses_continuous_actions(registry):
    with pytest.raises(SpaceError, match="Discrete"):
        rlx.make("mini-dqn", "Pendulum-v1")


def test_a_minibatch_larger_than_the_replay_memory_is_refused(registry):
    with pytest.raises(ConfigError, match="batch_size = 64 is larger than buffer_size = 32"):
        rlx.make("mini-dqn", "CartPole-v1", buffer_size=32)


def test_epsilon_decays_linearly_to_its_final_value(registry):
    agent = rlx.make("mini-dqn", "CartPole-v1", exploration_steps=100, exploration_final=0.1)
    assert agent.epsilon == 1.0
    agent.env_steps = 50
    assert agent.epsilon == pytest.approx(0.55)
    agent.env_steps = 1_000
    assert agent.epsilon == pytest.approx(0.1)


def test_the_target_network_copies_the_q_network_every_c_updates(registry):
    settings = {**EARLY_LEARNING, "gradient_steps": 1, "target_update_interval": 3}
    agent = rlx.make("mini-dqn", "CartPole-v1", seed=0, **settings)

    def target_is_q_network() -> bool:
        pairs = zip(agent.q_network.parameters(), agent.target_network.parameters(), strict=True)
        return all(torch.equal(q, target) for q, target in pairs)

    while agent.updates < 2:
        agent.step()
    assert agent.updates == 2 and not target_is_q_network()
    agent.step()
    assert agent.updates == 3 and target_is_q_network()


def test_learns_cartpole_with_a_fixed_seed(registry):
    agent = rlx.make("mini-dqn", "CartPole-v1", seed=0)
    rlx.Trainer(agent, steps=BUDGET, eval_every=0, progress=False, tensorboard=False).fit()
    result = rlx.evaluate(agent, rlx.make_env("CartPole-v1"), episodes=10, seed=0)
    assert result.mean_return >= THRESHOLD
