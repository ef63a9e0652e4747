from __future__ import annotations

import types
from importlib import metadata

import pytest

import rlx
from rlx import AgentSpec, EnvSpec, hookimpl
from rlx.discovery import Registry, get_registry
from rlx.errors import PluginError, UnknownNameError


def _plugin(
    name: str, *specs: AgentSpec, api: int | None = None, fail: bool = False
) -> types.ModuleType:
    module = types.ModuleType(name)

    @hookimpl
    def rlx_register_agents(register):
        for spec in specs:
            register(spec)
        if fail:
            raise RuntimeError("register blew up")

    module.rlx_register_agents = rlx_register_agents
    if api is not None:
        module.RLX_PLUGIN_API = api
    return module


def _spec(name: str, target: str = "rlx.agents.random:RandomAgent") -> AgentSpec:
    return AgentSpec(name=name, target=target, family="test", summary="a test agent")


def test_builtin_random_agent_comes_from_the_core_entry_point():
    spec = get_registry().agent("random")
    assert spec.distribution == "rlx-core"
    assert spec.version == rlx.__version__
    assert [p.distribution for p in get_registry().plugins if p.loaded].count("rlx-core") == 1


def test_specs_are_stamped_with_the_registering_distribution():
    registry = Registry()
    registry.add_plugin(_plugin("m", _spec("a")), "dist-a", "1.2.3")
    assert registry.agent("a").distribution == "dist-a"
    assert registry.agent("a").version == "1.2.3"


def test_a_plugin_whose_register_raises_is_reported_and_the_others_work():
    registry = Registry()
    registry.add_plugin(_plugin("good", _spec("good")), "dist-good")
    record = registry.add_plugin(_plugin("bad", _spec("half"), fail=True), "dist-bad")
    assert not record.loaded and "register blew up" in record.error
    assert "half" not in registry.agents, "a failing plugin registers nothing"
    assert registry.agent("good").name == "good"
    assert any("dist-bad" in line for line in registry.errors())


def test_a_plugin_that_fails_to_import_is_reported_and_the_others_work(monkeypatch):
    real = metadata.entry_points(group="rlx.plugins")
    broken = metadata.EntryPoint(name="broken", value="rlx_no_such_module", group="rlx.plugins")
    monkeypatch.setattr(metadata, "entry_points", lambda group: [*real, broken])
    registry = Registry.from_entry_points()
    record = next(p for p in registry.plugins if p.name == "broken")
    assert not record.loaded and "ModuleNotFoundError" in record.error
    assert "random" in registry.agents


def test_strict_mode_reraises_plugin_errors(monkeypatch):
    monkeypatch.setenv("RLX_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="register blew up"):
        Registry().add_plugin(_plugin("bad", fail=True), "dist-bad")


def test_a_name_claimed_twice_is_an_error_naming_both_distributions():
    registry = Registry()
    registry.add_plugin(_plugin("one", _spec("ppo")), "rlx-onpolicy")
    registry.add_plugin(_plugin("two", _spec("ppo")), "someone-elses-ppo")
    assert "ppo" not in registry.agents
    with pytest.raises(PluginError) as info:
        registry.agent("ppo")
    assert "rlx-onpolicy" in str(info.value) and "someone-elses-ppo" in str(info.value)
    assert any("registered by both" in line for line in registry.errors())


def test_a_plugin_needing_a_newer_api_is_skipped_and_reported():
    registry = Registry()
    record = registry.add_plugin(_plugin("future", _spec("future"), api=99), "dist-future")
    assert not record.loaded and "upgrade rlx-core" in record.error
    assert "future" not in registry.agents


def test_register_rejects_objects_that_are_not_specs():
    module = types.ModuleType("wrong")

    @hookimpl
    def rlx_register_agents(register):
        register({"name": "x"})

    module.rlx_register_agents = rlx_register_agents
    record = Registry().add_plugin(module, "dist-wrong")
    assert "expects an AgentSpec" in record.error


def test_bad_target_strings_are_refused_at_registration():
    with pytest.raises(PluginError, match="module:Attribute"):
        _spec("x", target="no_colon_here")


def test_unknown_agent_suggests_close_names():
    with pytest.raises(UnknownNameError, match="Did you mean: random"):
        get_registry().agent("randm")


def test_load_plugins_variable_selects_what_loads(monkeypatch):
    monkeypatch.setenv("RLX_LOAD_PLUGINS", "nothing-by-that-name")
    assert Registry.from_entry_points().agents == {}
    monkeypatch.setenv("RLX_LOAD_PLUGINS", "rlx-core")
    assert set(Registry.from_entry_points().agents) == {"random"}


def test_autoload_can_be_disabled(monkeypatch):
    monkeypatch.setenv("RLX_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert Registry.from_entry_points().plugins == []


def test_listing_imports_no_implementation():
    registry = Registry()
    registry.add_plugin(
        _plugin("lazy", _spec("lazy", "rlx_not_imported_until_make:Agent")), "dist-lazy"
    )
    assert registry.agent("lazy").target == "rlx_not_imported_until_make:Agent"
    with pytest.raises(PluginError, match="cannot import"):
        registry.agent("lazy").load()


def test_plugin_environments_are_registered_with_gymnasium_on_first_use(rlx_registry):
    module = types.ModuleType("envs")

    @hookimpl
    def rlx_register_envs(register):
        register(
            EnvSpec(
                id="rlxtest/Corridor-v0",
                target="gymnasium.envs.toy_text:FrozenLakeEnv",
                kwargs={"map_name": "4x4"},
                max_episode_steps=50,
            )
        )

    module.rlx_register_envs = rlx_register_envs
    rlx_registry.add_plugin(module, "dist-envs")
    env = rlx.make_env("rlxtest/Corridor-v0")
    assert env.spec.max_episode_steps == 50
    assert env.observation_space.n == 16
