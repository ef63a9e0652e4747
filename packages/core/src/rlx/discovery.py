"""Discovery of installed plugins and the registry of agents, environments and loggers.

Each entry point in the ``rlx.plugins`` group names a manifest module of pluggy hook
implementations. Entry points are loaded one at a time, so that a plugin that fails to
import or whose ``register`` call raises is reported and every other plugin still works.

Problems of a plugin that loaded are reported too (:meth:`Registry.errors`, ``rlx plugins``):
a function that looks like a hook but is none (``rlx_register_agent``) or lacks
``@rlx.hookimpl``, a name two plugins claim, and an environment id that gymnasium or another
non-rlx library already registered. gymnasium's environment keeps such an id (rlx never
replaces an id in gymnasium's registry): the plugin's environment is unusable under it until
the plugin registers it under an id of its own, such as ``"my_namespace/Name-v0"``.

Environment variables:

- ``RLX_LOAD_PLUGINS=a,b``: load only these plugins (distribution or entry-point names).
- ``RLX_DISABLE_PLUGIN_AUTOLOAD=1``: load no plugin from entry points at all.
- ``RLX_STRICT_PLUGINS=1``: re-raise the first plugin error instead of reporting it.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import sys
import traceback
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from types import ModuleType
from typing import Any

import pluggy

from rlx import hookspecs
from rlx.errors import PluginError, RlxError, UnknownNameError, did_you_mean
from rlx.spec import AgentSpec, EnvSpec, LoggerSpec

ENTRY_POINT_GROUP = "rlx.plugins"


@dataclass
class PluginRecord:
    """One plugin as ``rlx plugins`` reports it."""

    name: str
    distribution: str
    version: str
    module: str
    loaded: bool = False
    error: str | None = None
    agents: list[str] = field(default_factory=list)
    envs: list[str] = field(default_factory=list)
    loggers: list[str] = field(default_factory=list)
    #: Functions of the manifest that rlx never calls: misspelled hooks, hooks without
    #: ``@rlx.hookimpl`` (see :meth:`Registry.problems` for every problem of the plugin).
    hook_problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Its fields as a dict, for the JSON output of ``rlx plugins``."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class ShadowedEnv:
    """A plugin environment whose id gymnasium or another non-rlx library registered first.

    The existing registration wins: rlx never replaces an id in gymnasium's registry, so
    ``gymnasium.make(id)`` and ``rlx.make_env(id)`` keep giving ``owner``'s environment.
    """

    spec: EnvSpec
    #: "gymnasium", or the module of the existing registration's entry point.
    owner: str

    def message(self) -> str:
        """What ``rlx plugins`` and the error for the shadowed id say: which environment wins, and
        that the plugin's needs an id of its own."""
        id_, distribution = self.spec.id, self.spec.distribution
        owner = "gymnasium itself" if self.owner == "gymnasium" else self.owner
        return (
            f"environment {id_!r} of {distribution} is shadowed: gymnasium already has an "
            f"environment {id_!r}, registered by {owner}, and gymnasium.make and rlx keep "
            f"making that one; {distribution}'s environment is unusable under this id until "
            "it is registered under an id of its own (such as 'my_namespace/Name-v0')"
        )


class Registry:
    """Agents, environments and loggers contributed by plugins, keyed by name."""

    def __init__(self) -> None:
        self.agents: dict[str, AgentSpec] = {}
        self.envs: dict[str, EnvSpec] = {}
        self.loggers: dict[str, LoggerSpec] = {}
        self.plugins: list[PluginRecord] = []
        #: Names claimed by more than one distribution: unusable until one is uninstalled.
        self.conflicts: dict[str, list[str]] = {}
        #: Plugin environment ids that gymnasium or another non-rlx library registered first.
        self.shadowed: dict[str, ShadowedEnv] = {}
        self._manager = pluggy.PluginManager(hookspecs.PROJECT)
        self._manager.add_hookspecs(hookspecs)

    @classmethod
    def from_entry_points(cls) -> Registry:
        """Build a registry from the installed ``rlx.plugins`` entry points."""
        registry = cls()
        selected = _selected_plugins()
        seen: set[tuple[str, str]] = set()
        for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = entry_point.dist
            dist_name = dist.name if dist is not None else "unknown"
            key = (dist_name, entry_point.value)
            if key in seen:  # the same distribution found twice on sys.path
                continue
            seen.add(key)
            if selected is not None and not {dist_name, entry_point.name} & selected:
                continue
            version = dist.version if dist is not None else "unknown"
            record = PluginRecord(entry_point.name, dist_name, version, entry_point.value)
            try:
                module = entry_point.load()
            except Exception as exc:
                registry._fail(record, exc)
                continue
            registry._register_module(module, record)
        return registry

    def add_plugin(self, module: ModuleType, distribution: str, version: str = "0") -> PluginRecord:
        """Register a manifest module directly (tests and not-installed plugins)."""
        record = PluginRecord(module.__name__, distribution, version, module.__name__)
        self._register_module(module, record)
        return record

    def _register_module(self, module: ModuleType, record: PluginRecord) -> None:
        self.plugins.append(record)
        wanted = getattr(module, "RLX_PLUGIN_API", hookspecs.PLUGIN_API_VERSION)
        if not isinstance(wanted, int) or wanted > hookspecs.PLUGIN_API_VERSION:
            self._fail(
                record,
                PluginError(
                    f"needs rlx plugin API {wanted}, this rlx-core provides "
                    f"{hookspecs.PLUGIN_API_VERSION}; upgrade rlx-core"
                ),
            )
            return
        record.hook_problems = _hook_problems(module, record)
        if record.hook_problems and _strict():
            raise PluginError(record.hook_problems[0])
        agents: list[AgentSpec] = []
        envs: list[EnvSpec] = []
        loggers: list[LoggerSpec] = []
        try:
            self._manager.register(module, name=f"{record.distribution}:{record.module}")
            for impl in self._manager.hook.rlx_register_agents.get_hookimpls():
                if impl.plugin is module:
                    impl.function(register=lambda spec: agents.append(_as(spec, AgentSpec)))
            for impl in self._manager.hook.rlx_register_envs.get_hookimpls():
                if impl.plugin is module:
                    impl.function(register=lambda spec: envs.append(_as(spec, EnvSpec)))
            for impl in self._manager.hook.rlx_register_loggers.get_hookimpls():
                if impl.plugin is module:
                    impl.function(register=lambda spec: loggers.append(_as(spec, LoggerSpec)))
        except Exception as exc:
            if self._manager.is_registered(module):
                self._manager.unregister(module)
            self._fail(record, exc)
            return
        record.loaded = True
        for spec in agents:
            spec = spec.stamped(record.distribution, record.version)
            self._claim(self.agents, spec.name, spec, spec.distribution)
            record.agents.append(spec.name)
        for env in envs:
            env = env.stamped(record.distribution, record.version)
            record.envs.append(env.id)
            owner = _foreign_owner(env)
            if owner is not None:
                self._shadow(env, owner)
            else:
                self._claim(self.envs, env.id, env, env.distribution)
        for logger in loggers:
            logger = logger.stamped(record.distribution, record.version)
            self._claim(self.loggers, logger.name, logger, logger.distribution)
            record.loggers.append(logger.name)

    def _claim(self, table: dict[str, Any], name: str, spec: Any, distribution: str) -> None:
        if name in self.conflicts:
            self.conflicts[name].append(distribution)
        elif name in table:
            self.conflicts[name] = [table.pop(name).distribution, distribution]
            if _strict():
                raise PluginError(self._conflict_message(name))
        else:
            table[name] = spec

    def _shadow(self, env: EnvSpec, owner: str) -> None:
        """Record that ``owner``'s registration with gymnasium shadows the plugin's ``env``."""
        self.envs.pop(env.id, None)
        self.shadowed[env.id] = ShadowedEnv(env, owner)
        if _strict():
            raise PluginError(self.shadowed[env.id].message())

    def _fail(self, record: PluginRecord, exc: BaseException) -> None:
        if record not in self.plugins:
            self.plugins.append(record)
        record.loaded = False
        record.error = f"{type(exc).__name__}: {exc}"
        if _strict():
            raise PluginError(
                f"plugin {record.name!r} from {record.distribution} failed to load: "
                f"{record.error}\n" + "".join(traceback.format_exception(exc))
            ) from exc

    def _conflict_message(self, name: str) -> str:
        owners = " and ".join(self.conflicts[name])
        return (
            f"{name!r} is registered by both {owners}; "
            "uninstall one of these distributions to use it"
        )

    def errors(self) -> list[str]:
        """One line per failed plugin, per function a plugin defines that rlx never calls, per
        name claimed twice and per environment id shadowed by a non-rlx registration."""
        lines = [
            f"plugin {p.name!r} ({p.distribution} {p.version}) failed to load: {p.error}"
            for p in self.plugins
            if p.error
        ]
        lines += [problem for p in self.plugins for problem in p.hook_problems]
        lines += [self._conflict_message(name) for name in self.conflicts]
        lines += [shadow.message() for shadow in self.shadowed.values()]
        return lines

    def problems(self, record: PluginRecord) -> list[str]:
        """What is wrong with one plugin that loaded: hooks rlx never calls, names it shares
        with another plugin, environment ids that a non-rlx registration shadows."""
        lines = list(record.hook_problems)
        lines += [
            self._conflict_message(name)
            for name, owners in self.conflicts.items()
            if record.distribution in owners
        ]
        lines += [
            shadow.message()
            for shadow in self.shadowed.values()
            if shadow.spec.distribution == record.distribution
        ]
        return lines

    def env_problems(self) -> dict[str, str]:
        """Plugin environment ids that cannot be used, each with the reason: claimed by two
        plugins, or shadowed by gymnasium's (or another library's) registration."""
        problems = {shadow.spec.id: shadow.message() for shadow in self.shadowed.values()}
        for name, owners in self.conflicts.items():
            if any(name in p.envs for p in self.plugins if p.distribution in owners):
                problems[name] = self._conflict_message(name)
        return problems

    def agent(self, name: str) -> AgentSpec:
        """Return the spec of ``name``, or raise an error with a did-you-mean."""
        if name in self.agents:
            return self.agents[name]
        if name in self.conflicts:
            raise PluginError(self._conflict_message(name))
        known = sorted(self.agents)
        hint = did_you_mean(name, known)
        listing = f" Known agents: {', '.join(known)}." if not hint else ""
        raise UnknownNameError(
            f"unknown agent {name!r}.{hint}{listing} Run 'rlx list' to see every installed agent."
        )

    def logger(self, name: str) -> LoggerSpec:
        """Return the spec of the logger ``name``, or raise an error with a did-you-mean."""
        if name in self.loggers:
            return self.loggers[name]
        if name in self.conflicts:
            raise PluginError(self._conflict_message(name))
        known = sorted(self.loggers)
        raise UnknownNameError(
            f"unknown logger {name!r}.{did_you_mean(name, known)} Known loggers: "
            f"{', '.join(known) or 'none'} ('rlx plugins' shows which plugin provides each)."
        )

    def families(self) -> list[str]:
        """The families of the registered agents, sorted, each once."""
        return sorted({spec.family for spec in self.agents.values()})


def _hook_names() -> list[str]:
    marker = f"{hookspecs.PROJECT}_spec"
    return sorted(name for name, value in vars(hookspecs).items() if hasattr(value, marker))


def _hook_problems(module: Any, record: PluginRecord) -> list[str]:
    """The functions of a manifest that rlx would silently never call: ``rlx_*`` names (and
    near misses) that are no hook, and hooks defined without ``@rlx.hookimpl``."""
    hooks = _hook_names()
    marker = f"{hookspecs.PROJECT}_impl"
    plugin = f"plugin {record.name!r} ({record.distribution})"
    problems = []
    for name in sorted(dir(module)):
        value = getattr(module, name, None)
        if name.startswith("_") or not (inspect.isfunction(value) or inspect.ismethod(value)):
            continue
        marked = isinstance(getattr(value, marker, None), dict)
        if name in hooks:
            if not marked:
                problems.append(
                    f"{plugin} defines {name} without @rlx.hookimpl, so rlx never calls it; "
                    "decorate it with @rlx.hookimpl"
                )
        elif (
            name.startswith("rlx_")
            or marked
            or (  # a near miss such as register_agents, when the manifest defines it
                getattr(value, "__module__", None) == getattr(module, "__name__", None)
                and difflib.get_close_matches(name, hooks, n=1, cutoff=0.85)
            )
        ):
            hint = did_you_mean(name, hooks, n=1) or f" The hooks are: {', '.join(hooks)}."
            problems.append(f"{plugin} defines {name}, which is not an rlx hook.{hint}")
    return problems


def _foreign_owner(env: EnvSpec) -> str | None:
    """Who registered ``env.id`` with gymnasium other than the plugin itself: "gymnasium" or
    the module of the existing entry point; None when nobody did.

    While gymnasium is not imported (``rlx list`` never imports it), only gymnasium's own ids
    are known, read from its registration module; ``register_plugin_envs`` checks again
    against the live registry when environments are made.
    """
    gymnasium = sys.modules.get("gymnasium")
    registry = getattr(gymnasium, "registry", None)
    if registry is None:
        return "gymnasium" if env.id in _gymnasium_own_ids() else None
    existing = registry.get(env.id)
    if existing is None:
        return None
    entry_point = existing.entry_point
    if not isinstance(entry_point, str):
        module = getattr(entry_point, "__module__", "") or ""
        entry_point = f"{module}:{getattr(entry_point, '__qualname__', '')}"
    if entry_point == env.target:  # the plugin's own registration (rlx_envs registers on import)
        return None
    module = entry_point.partition(":")[0]
    return "gymnasium" if module.split(".")[0] == "gymnasium" else module or "unknown"


@cache
def _gymnasium_own_ids() -> frozenset[str]:
    """The ids gymnasium registers on import, read from its source (about 1 ms): importing
    gymnasium, and NumPy with it, would add about 0.1 s to ``rlx list``."""
    from importlib.util import find_spec
    from pathlib import Path

    try:
        spec = find_spec("gymnasium")
        if spec is None or spec.origin is None:
            return frozenset()
        source = (Path(spec.origin).parent / "envs" / "__init__.py").read_text(encoding="utf-8")
    except (ImportError, OSError, ValueError):
        return frozenset()
    return frozenset(re.findall(r"""\bid\s*=\s*["']([^"']+)["']""", source))


def _as(spec: Any, kind: type) -> Any:
    if not isinstance(spec, kind):
        raise PluginError(f"register() expects an {kind.__name__}, got {type(spec).__name__}")
    return spec


def _strict() -> bool:
    return os.environ.get("RLX_STRICT_PLUGINS", "") not in ("", "0")


def _selected_plugins() -> set[str] | None:
    names = os.environ.get("RLX_LOAD_PLUGINS")
    if names is not None:
        return {n.strip() for n in names.split(",") if n.strip()}
    if os.environ.get("RLX_DISABLE_PLUGIN_AUTOLOAD", "") not in ("", "0"):
        return set()
    return None


_registry: Registry | None = None


def get_registry() -> Registry:
    """The process-wide registry, built from entry points on first use."""
    global _registry
    if _registry is None:
        _registry = Registry.from_entry_points()
    return _registry


def set_registry(registry: Registry | None) -> Registry | None:
    """Replace the process-wide registry (``None`` rebuilds it on next use); returns the old one."""
    global _registry
    previous, _registry = _registry, registry
    return previous


# -- lookups of registered names (loading checks them before it imports anything) --------------


def agent_spec(name: str) -> AgentSpec:
    """The registered spec of ``name``, or a spec for a ``"module:Class"`` target."""
    if ":" in name:
        return AgentSpec(
            name=name, target=name, family="external", summary="not installed as a plugin"
        )
    return get_registry().agent(name)


def register_atari(env_id: str) -> None:
    """Register the Arcade Learning Environment's games with gymnasium when ``env_id`` is one
    (``ALE/Breakout-v5``): ale-py does so on import, which gymnasium 1 no longer does."""
    import gymnasium

    if not env_id.startswith("ALE/") or env_id in gymnasium.registry:
        return
    try:
        import ale_py
    except ImportError:
        raise RlxError(
            f"environment {env_id!r} is an Atari game: install ale-py "
            "(pip install 'rlx-envs[atari]')"
        ) from None
    gymnasium.register_envs(ale_py)


def registered_env(env_id: str) -> bool:
    """Whether ``env_id`` is an environment id that gymnasium or an rlx plugin registered."""
    import gymnasium

    register_atari(env_id)
    register_plugin_envs()
    return env_id in gymnasium.registry


def register_plugin_envs() -> None:
    """Register the environments of rlx plugins with gymnasium (once each).

    An id that gymnasium or another library registered first keeps its environment: the
    plugin's is recorded in :attr:`Registry.shadowed` and reported (an error under
    ``RLX_STRICT_PLUGINS=1``), never registered over it.
    """
    import gymnasium

    registry = get_registry()
    for env_id, spec in list(registry.envs.items()):
        owner = _foreign_owner(spec)
        if owner is not None:
            registry._shadow(spec, owner)
        elif env_id not in gymnasium.registry:
            gymnasium.register(
                env_id,
                entry_point=spec.target,
                max_episode_steps=spec.max_episode_steps,
                kwargs=dict(spec.kwargs),
            )
