"""``import rlx_envs`` registers its environments with gymnasium, in any order of imports,
and ``gymnasium.make("rlx_envs:ID")`` imports it; the manifest still loads no NumPy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rlx_envs.plugin import ENVS

ENV_ID = "rlx/BernoulliMAB-v0"
MAKE = f"env = gymnasium.make({ENV_ID!r}, n_arms=3); print(type(env.unwrapped).__name__)"


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    "imports",
    [
        "import gymnasium, rlx_envs",
        "import rlx_envs, gymnasium",  # registered once gymnasium's import finishes
        "import rlx_envs.plugin\nimport gymnasium",  # as rlx's discovery imports it
    ],
)
def test_importing_rlx_envs_registers_its_environments_with_gymnasium(imports):
    assert _python(f"{imports}\n{MAKE}") == "BernoulliMAB"


def test_gymnasium_imports_rlx_envs_from_the_id():
    code = (
        "import gymnasium, sys\n"
        f"env = gymnasium.make('rlx_envs:{ENV_ID}', n_arms=3)\n"
        "print(type(env.unwrapped).__name__, 'rlx_envs' in sys.modules)"
    )
    assert _python(code) == "BernoulliMAB True"


def test_module_syntax_works_when_rlx_envs_was_imported_before_gymnasium():
    code = (
        "import rlx_envs, gymnasium\n"
        f"env = gymnasium.make('rlx_envs:{ENV_ID}', n_arms=3)\n"
        "print(type(env.unwrapped).__name__)"
    )
    assert _python(code) == "BernoulliMAB"


def test_every_environment_of_the_manifest_is_registered_and_nothing_heavy_is_imported():
    code = (
        "import json, sys, rlx_envs\n"
        "print(sorted(m for m in ('numpy', 'gymnasium', 'torch') if m in sys.modules))\n"
        "import gymnasium\n"
        "print(json.dumps(sorted(i for i in gymnasium.registry if i.startswith('rlx/'))))\n"
        "print({gymnasium.registry[i].entry_point for i in gymnasium.registry "
        "if i.startswith('rlx/')} <= set(sys.argv[1:]))"
    )
    targets = [target for _, target, _ in ENVS]
    done = subprocess.run(
        [sys.executable, "-c", code, *targets], capture_output=True, text=True, check=True
    )
    nothing_heavy, ids, same_targets = done.stdout.strip().splitlines()
    assert nothing_heavy == "[]", "import rlx_envs imports no NumPy, gymnasium nor torch"
    assert set(json.loads(ids)) >= {env_id for env_id, _, _ in ENVS}
    assert same_targets == "True"
