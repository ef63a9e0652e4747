"""rlx: a reinforcement-learning toolkit of separately installed algorithm families.

``import rlx`` is light: it loads no plugin, no gymnasium and never torch until used.
"""

from __future__ import annotations

from importlib.metadata import version as _installed_version
from typing import TYPE_CHECKING, Any

from rlx.hookspecs import hookimpl
from rlx.spec import AgentSpec, EnvSpec, LoggerSpec

#: The installed version; pyproject.toml is the one place the number is written.
__version__ = _installed_version("rlx-core")

__all__ = [
    "AgentSpec",
    "EnvSpec",
    "LoggerSpec",
    "Trainer",
    "TrainerConfig",
    "evaluate",
    "hookimpl",
    "hyperparameter",
    "load",
    "make",
    "make_env",
    "registry",
    "save",
]

_LAZY = {
    "make": ("rlx.api", "make"),
    "make_env": ("rlx.api", "make_env"),
    "load": ("rlx.api", "load"),
    "save": ("rlx.api", "save"),
    "Trainer": ("rlx.trainer", "Trainer"),
    "TrainerConfig": ("rlx.trainer", "TrainerConfig"),
    "evaluate": ("rlx.evaluation", "evaluate"),
    "hyperparameter": ("rlx.config", "hyperparameter"),
}

if TYPE_CHECKING:
    from rlx.api import load, make, make_env, save
    from rlx.config import hyperparameter
    from rlx.discovery import Registry
    from rlx.evaluation import evaluate
    from rlx.trainer import Trainer, TrainerConfig

    registry: Registry


def __getattr__(name: str) -> Any:
    if name == "registry":
        from rlx.discovery import get_registry

        return get_registry()
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'rlx' has no attribute {name!r}")
