"""Problems of plugins that load: environment ids that shadow gymnasium's (or another
library's), names two plugins claim, and functions that look like hooks but that rlx never
calls. Each is reported with its owners and what to do, by ``rlx list envs``,
``rlx plugins`` (human and JSON) and the warnings on stderr; ``RLX_STRICT_PLUGINS=1`` makes
each an error."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from collections.abc import Callable, Iterator

import gymnasium
import pytest

import rlx
from rlx import AgentSpec, EnvSpec, hookimpl
from rlx.discovery import Registry, register_plugin_envs
from rlx.errors import PluginError


def _env_plugin(name: str, *specs: EnvSpec) -> types.ModuleType:
    module = types.ModuleType(name)

    @hookimpl
    def rlx_register_envs(register: Callable[[EnvSpec], None]) -> None:
        for spec in specs:
            register(spec)

    module.rlx_register_envs = rlx_register_envs
    return module


def _env(env_id: str, target: str = "gymnasium.envs.toy_text:FrozenLakeEnv") -> EnvSpec:
    return EnvSpec(id=env_id, target=target, summary="a plugin's environment")


@pytest.fixture
def foreign_registration() -> Iterator[str]:
    """An id that another library (not rlx, not gymnasium) registers with gymnasium."""
    env_id = "otherlib/Corridor-v0"
    gymnasium.register(env_id, entry_point="otherlib.envs.corridor:CorridorEnv")
    yield env_id
    del gymnasium.registry[env_id]


# -- environment ids shadowed by gymnasium or another library ---------------------------------


def test_a_plugin_environment_with_a_gymnasium_id_is_reported_and_gymnasiums_stays(
    rlx_registry,
):
    rlx_registry.add_plugin(_env_plugin("shadow", _env("CartPole-v1")), "rlx-shadowing", "1.0")
    assert "CartPole-v1" not in rlx_registry.envs
    shadow = rlx_registry.shadowed["CartPole-v1"]
    assert shadow.owner == "gymnasium" and shadow.spec.distribution == "rlx-shadowing"
    message = shadow.message()
    assert "'CartPole-v1' of rlx-shadowing is shadowed: gymnasium already has an " in message
    assert "registered by gymnasium itself, and gymnasium.make and rlx keep making" in message
    assert "unusable under this id" in message and "an id of its own" in message
    assert message in rlx_registry.errors()
    register_plugin_envs()
    env = rlx.make_env("CartPole-v1")
    assert type(env.unwrapped).__name__ == "CartPoleEnv", "gymnasium's environment wins"


def test_an_id_another_library_registered_names_that_librarys_module(
    rlx_registry, foreign_registration
):
    rlx_registry.add_plugin(_env_plugin("shadow", _env(foreign_registration)), "rlx-shadowing")
    assert rlx_registry.shadowed[foreign_registration].owner == "otherlib.envs.corridor"
    assert "registered by otherlib.envs.corridor, and" in rlx_registry.errors()[0]


def test_an_id_registered_by_another_library_after_the_plugin_loaded_is_caught_on_make(
    rlx_registry,
):
    env_id = "otherlib/Late-v0"
    rlx_registry.add_plugin(_env_plugin("late", _env(env_id)), "rlx-late")
    assert env_id in rlx_registry.envs
    gymnasium.register(env_id, entry_point="otherlib.late:LateEnv")
    try:
        register_plugin_envs()
        assert rlx_registry.shadowed[env_id].owner == "otherlib.late"
        assert env_id not in rlx_registry.envs
        assert gymnasium.registry[env_id].entry_point == "otherlib.late:LateEnv"
    finally:
        del gymnasium.registry[env_id]


def test_shadowing_is_an_error_under_strict_plugins(rlx_registry, monkeypatch):
    monkeypatch.setenv("RLX_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="'CartPole-v1' of rlx-shadowing is shadowed"):
        rlx_registry.add_plugin(_env_plugin("shadow", _env("CartPole-v1")), "rlx-shadowing")


def test_a_plugins_own_registration_with_gymnasium_is_no_shadow(rlx_registry):
    import rlx_envs.plugin  # registers rlx_envs' environments with gymnasium on import

    assert "rlx/Wheel-v0" in gymnasium.registry
    rlx_registry.add_plugin(rlx_envs.plugin, "rlx-envs")
    assert rlx_registry.shadowed == {} and "rlx/Wheel-v0" in rlx_registry.envs


def test_gymnasiums_own_ids_are_known_without_importing_gymnasium(tmp_path):
    code = textwrap.dedent(
        """
        import sys, types
        from rlx import EnvSpec, hookimpl
        from rlx.discovery import Registry

        module = types.ModuleType("shadow")
        @hookimpl
        def rlx_register_envs(register):
            register(EnvSpec(id="MountainCar-v0", target="shadow.envs:Car"))
            register(EnvSpec(id="shadow/Car-v0", target="shadow.envs:Car"))
        module.rlx_register_envs = rlx_register_envs
        registry = Registry()
        registry.add_plugin(module, "rlx-shadowing")
        print(sorted(registry.shadowed), sorted(registry.envs), "gymnasium" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['MountainCar-v0']", "['shadow/Car-v0']", "False"]


def test_list_envs_shows_shadowed_and_doubly_claimed_ids(rlx_registry, rlx_cli, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    rlx_registry.add_plugin(_env_plugin("fine", _env("fine/Lake-v0")), "rlx-fine")
    rlx_registry.add_plugin(_env_plugin("shadow", _env("CartPole-v1")), "rlx-shadowing")
    rlx_registry.add_plugin(_env_plugin("one", _env("twice/Lake-v0")), "rlx-one")
    rlx_registry.add_plugin(_env_plugin("two", _env("twice/Lake-v0")), "rlx-two")

    code, out, err = rlx_cli("list", "envs", "--json")
    assert code == 0
    rows = {row["id"]: row for row in json.loads(out)}
    assert rows["fine/Lake-v0"]["problem"] is None
    shadowed = rows["CartPole-v1"]
    assert shadowed["distribution"] == "rlx-shadowing" and shadowed["shadowed_by"] == "gymnasium"
    assert "unusable under this id" in shadowed["problem"]
    assert rows["twice/Lake-v0"]["distribution"] == "rlx-one, rlx-two"
    assert "registered by both rlx-one and rlx-two" in rows["twice/Lake-v0"]["problem"]
    assert "warning: environment 'CartPole-v1' of rlx-shadowing is shadowed" in err

    code, out, err = rlx_cli("list", "envs")
    assert code == 0
    [line] = [line for line in out.splitlines() if " CartPole-v1 " in line]
    assert "rlx-shadowing" in line and "UNUSABLE, gymnasium registers this id too" in line
    [line] = [line for line in out.splitlines() if " twice/Lake-v0 " in line]
    assert "UNUSABLE, registered by rlx-one and rlx-two" in line
    assert "warning: 'twice/Lake-v0' is registered by both rlx-one and rlx-two" in err
    assert "warning: environment 'CartPole-v1' of rlx-shadowing is shadowed" in err


def test_plugins_shows_each_plugins_problems(rlx_registry, rlx_cli, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    rlx_registry.add_plugin(_env_plugin("fine", _env("fine/Lake-v0")), "rlx-fine")
    rlx_registry.add_plugin(_env_plugin("shadow", _env("CartPole-v1")), "rlx-shadowing")
    rlx_registry.add_plugin(_env_plugin("one", _env("twice/Lake-v0")), "rlx-one")
    rlx_registry.add_plugin(_env_plugin("two", _env("twice/Lake-v0")), "rlx-two")

    code, out, _ = rlx_cli("plugins", "--json")
    assert code == 0
    plugins = {row["distribution"]: row for row in json.loads(out)}
    assert plugins["rlx-fine"]["problems"] == []
    [problem] = plugins["rlx-shadowing"]["problems"]
    assert "gymnasium already has an environment 'CartPole-v1'" in problem
    for name in ("rlx-one", "rlx-two"):
        assert plugins[name]["problems"] == [
            "'twice/Lake-v0' is registered by both rlx-one and rlx-two; "
            "uninstall one of these distributions to use it"
        ]

    code, out, err = rlx_cli("plugins")
    assert code == 0
    [line] = [line for line in out.splitlines() if " rlx-shadowing " in line]
    assert "loaded, 1 problem (see below)" in line
    assert err.count("registered by both rlx-one and rlx-two") == 1
    assert "warning: environment 'CartPole-v1' of rlx-shadowing is shadowed" in err


# -- functions that look like hooks but that rlx never calls ----------------------------------


def _agent_spec() -> AgentSpec:
    return AgentSpec(
        name="typo-agent", target="rlx.agents.random:RandomAgent", family="t", summary="s"
    )


def _misspelled_plugin() -> types.ModuleType:
    module = types.ModuleType("typo_plugin")

    @hookimpl
    def rlx_register_agent(register):
        register(_agent_spec())

    module.rlx_register_agent = rlx_register_agent
    return module


def test_a_misspelled_hook_is_the_plugins_problem_with_the_hook_it_meant(rlx_registry):
    record = rlx_registry.add_plugin(_misspelled_plugin(), "rlx-typo")
    assert record.loaded and record.agents == []
    assert record.hook_problems == [
        "plugin 'typo_plugin' (rlx-typo) defines rlx_register_agent, which is not an rlx hook. "
        "Did you mean: rlx_register_agents?"
    ]
    assert record.hook_problems[0] in rlx_registry.errors()
    assert rlx_registry.problems(record) == record.hook_problems


@pytest.mark.parametrize(
    "name, marked, expected",
    [
        ("rlx_register_agents", False, "without @rlx.hookimpl, so rlx never calls it"),
        ("rlx_setup", False, "defines rlx_setup, which is not an rlx hook. The hooks are: "),
        ("register_envs", False, "defines register_envs, which is not an rlx hook. Did you mean"),
        ("prepare", True, "defines prepare, which is not an rlx hook. The hooks are"),
    ],
)
def test_functions_rlx_would_never_call_are_reported(rlx_registry, name, marked, expected):
    module = types.ModuleType("odd_plugin")

    def function(register):
        register(_agent_spec())

    function.__module__ = module.__name__  # defined by the manifest itself
    setattr(module, name, hookimpl(function) if marked else function)
    record = rlx_registry.add_plugin(module, "rlx-odd")
    assert len(record.hook_problems) == 1 and expected in record.hook_problems[0]


def test_helpers_a_manifest_imports_are_no_problem(rlx_registry):
    module = _env_plugin("helpers", _env("helpers/Lake-v0"))
    module.register_plugin_envs = register_plugin_envs  # imported, far from any hook name
    module.register_agents = lambda register: None  # near a hook name, but not its own
    module._rlx_private = lambda: None
    module.RLX_PLUGIN_API = 1
    assert rlx_registry.add_plugin(module, "rlx-helpers").hook_problems == []


def test_a_misspelled_hook_is_an_error_under_strict_plugins(rlx_registry, monkeypatch):
    monkeypatch.setenv("RLX_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="defines rlx_register_agent, which is not an rlx hook"):
        rlx_registry.add_plugin(_misspelled_plugin(), "rlx-typo")


def test_plugins_shows_a_misspelled_hook(rlx_registry, rlx_cli):
    rlx_registry.add_plugin(_misspelled_plugin(), "rlx-typo")
    code, out, _ = rlx_cli("plugins", "--json")
    [row] = json.loads(out)
    assert code == 0 and "hook_problems" not in row
    assert row["problems"] and "Did you mean: rlx_register_agents" in row["problems"][0]
    code, out, err = rlx_cli("plugins")
    assert "loaded, 1 problem" in out
    assert "warning: plugin 'typo_plugin' (rlx-typo) defines rlx_register_agent" in err
    code, _, err = rlx_cli("list")
    assert code == 0 and "defines rlx_register_agent, which is not an rlx hook" in err


def test_the_installed_plugins_have_no_problems():
    registry = Registry.from_entry_points()
    assert registry.errors() == []
    assert all(registry.problems(p) == [] for p in registry.plugins)
