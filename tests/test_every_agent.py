"""Every installed agent, built-in or third-party, keeps the contract of rlx.testing."""

from __future__ import annotations

import pytest

from rlx.discovery import Registry
from rlx.testing import check_agent

#: A small environment for each (observation, action) space pair an agent may declare.
ENVIRONMENTS = {
    ("Discrete", "Discrete"): "FrozenLake-v1",
    ("Box", "Discrete"): "CartPole-v1",
    ("Box", "Box"): "Pendulum-v1",
}
#: Families whose agents need a particular kind of environment.
FAMILY_ENVIRONMENTS = {"bandits": "rlx/BernoulliMAB-v0"}
#: Agents that need a particular kind of environment (masked actions: ``action_masks()``).
AGENT_ENVIRONMENTS = {"maskable-ppo": "rlx/MaskedPick-v0"}


def _cases() -> list[tuple[str, str]]:
    cases = []
    for name, spec in sorted(Registry.from_entry_points().agents.items()):
        if name in AGENT_ENVIRONMENTS:
            cases.append((name, AGENT_ENVIRONMENTS[name]))
            continue
        if spec.family in FAMILY_ENVIRONMENTS:
            cases.append((name, FAMILY_ENVIRONMENTS[spec.family]))
            continue
        for (observations, actions), env in ENVIRONMENTS.items():
            fits_obs = "Any" in spec.observation_spaces or observations in spec.observation_spaces
            fits_act = "Any" in spec.action_spaces or actions in spec.action_spaces
            if fits_obs and fits_act:
                cases.append((name, env))
                break
        else:
            cases.append((name, ""))
    return cases


@pytest.mark.parametrize("name, env", _cases())
def test_agent_keeps_the_contract(name, env):
    assert env, f"no test environment for {name}'s spaces; add one to ENVIRONMENTS"
    check_agent(name, env, seed=1)
