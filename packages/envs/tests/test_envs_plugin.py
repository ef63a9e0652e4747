"""rlx-envs registers its environments through the rlx plugin manifest, lightly."""

from __future__ import annotations

import subprocess
import sys

import pytest

import rlx
from rlx.discovery import Registry, set_registry
from rlx.spec import load_target
from rlx_envs.plugin import ENVS

IDS = [env_id for env_id, _, _ in ENVS]


@pytest.fixture(autouse=True)
def fresh_registry():
    previous = set_registry(None)
    yield
    set_registry(previous)


def test_every_environment_of_the_brief_is_registered_by_rlx_envs():
    assert IDS == [
        "rlx/BernoulliMAB-v0",
        "rlx/GaussianMAB-v0",
        "rlx/Wheel-v0",
        "rlx/Mushroom-v0",
        "rlx/Statlog-v0",
        "rlx/Covertype-v0",
        "rlx/Adult-v0",
        "rlx/Census-v0",
        "rlx/Magic-v0",
        "rlx/Wine-v0",
        "rlx/BitFlipping-v0",
        "rlx/PointGoal-v0",
        "rlx/LightOrDark-v0",
        "rlx/CartPoleNoVel-v1",
        "rlx/MaskedPick-v0",
    ]
    specs = Registry.from_entry_points().envs
    for env_id in IDS:
        assert specs[env_id].distribution == "rlx-envs"
    # The bandits truncate themselves; the episodic tasks have time limits.
    assert {env_id: specs[env_id].max_episode_steps for env_id in IDS[10:]} == {
        "rlx/BitFlipping-v0": 15,
        "rlx/PointGoal-v0": 50,
        "rlx/LightOrDark-v0": 1,
        "rlx/CartPoleNoVel-v1": 500,
        "rlx/MaskedPick-v0": 20,
    }
    assert all(specs[env_id].max_episode_steps is None for env_id in IDS[:10])


@pytest.mark.parametrize("env_id, target, summary", ENVS)
def test_every_target_imports_to_an_environment_class(env_id, target, summary):
    import gymnasium

    assert issubclass(load_target(target, env_id), gymnasium.Env) and summary


def test_the_manifest_imports_no_numpy_and_no_torch():
    code = (
        "import sys, rlx_envs, rlx_envs.plugin; "
        "print(sorted(m for m in ('numpy', 'gymnasium', 'torch') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_make_env_builds_a_registered_bandit():
    env = rlx.make_env("rlx/BernoulliMAB-v0", n_arms=3)
    assert env.action_space.n == 3
    assert type(env.unwrapped).__name__ == "BernoulliMAB"
