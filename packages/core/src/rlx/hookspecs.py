"""The pluggy hooks an rlx plugin implements.

A plugin is a module named by an entry point in the ``rlx.plugins`` group. It implements
any of the hooks with ``@rlx.hookimpl`` and calls ``register`` once per agent,
environment or logger. Every hook must stay cheap: no torch, no import of the
implementations (nor of the libraries they need, such as mlflow or wandb).

A manifest function that rlx would never call is reported as the plugin's problem by
``rlx plugins`` (an error under ``RLX_STRICT_PLUGINS=1``): an ``rlx_*`` name that is no hook
below (``rlx_register_agent``), a near miss of one, or a hook without ``@rlx.hookimpl``.
Environment ids are best namespaced (``"my_namespace/Name-v0"``): an id that gymnasium or
another library registered first keeps its environment, and the plugin's is reported as
shadowed.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

from rlx.spec import AgentSpec, EnvSpec, LoggerSpec

PROJECT = "rlx"
#: Version of the plugin interface. A plugin module may set ``RLX_PLUGIN_API``; one that
#: asks for a newer interface than this core provides is skipped and reported.
PLUGIN_API_VERSION = 1

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def rlx_register_agents(register: Callable[[AgentSpec], None]) -> None:
    """Call ``register(AgentSpec(...))`` for every agent the plugin provides."""


@hookspec
def rlx_register_envs(register: Callable[[EnvSpec], None]) -> None:
    """Call ``register(EnvSpec(...))`` for every environment the plugin provides."""


@hookspec
def rlx_register_loggers(register: Callable[[LoggerSpec], None]) -> None:
    """Call ``register(LoggerSpec(...))`` for every logger (experiment tracker) the plugin
    provides; ``rlx run --logger NAME`` then uses it (see :mod:`rlx.loggers`)."""
