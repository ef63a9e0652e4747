"""rlx-envs: synthetic and UCI-data bandit environments for rlx, registered with gymnasium.

``import rlx_envs`` registers the environments of the plugin manifest (:mod:`rlx_envs.plugin`)
with gymnasium, so that ``gymnasium.make("rlx/Wheel-v0")`` (or, without importing rlx_envs
first, ``gymnasium.make("rlx_envs:rlx/Wheel-v0")``) works in any code. The import stays light
all the same, because the manifest imports this package and ``rlx list`` must not load NumPy:
the environment classes load on first use, and when gymnasium is not imported yet the
registration waits until gymnasium's own import finishes rather than importing it.
"""

from __future__ import annotations

import sys
from importlib.metadata import version as _installed_version
from typing import TYPE_CHECKING, Any

__version__ = _installed_version("rlx-envs")

__all__ = [
    "AdultBandit",
    "BanditEnv",
    "BernoulliMAB",
    "CensusBandit",
    "ClassificationBandit",
    "CovertypeBandit",
    "DataBandit",
    "DataFile",
    "DataSet",
    "GaussianMAB",
    "MagicBandit",
    "MushroomBandit",
    "StatlogBandit",
    "Table",
    "WheelBandit",
    "WineBandit",
]

_LAZY = {
    "BanditEnv": "rlx_envs.base",
    "BernoulliMAB": "rlx_envs.multi_armed",
    "GaussianMAB": "rlx_envs.multi_armed",
    "WheelBandit": "rlx_envs.wheel",
    "DataBandit": "rlx_envs.data",
    "ClassificationBandit": "rlx_envs.data",
    "Table": "rlx_envs.data",
    "DataFile": "rlx_envs.files",
    "DataSet": "rlx_envs.files",
    "AdultBandit": "rlx_envs.uci",
    "CensusBandit": "rlx_envs.uci",
    "CovertypeBandit": "rlx_envs.uci",
    "MagicBandit": "rlx_envs.uci",
    "MushroomBandit": "rlx_envs.uci",
    "StatlogBandit": "rlx_envs.uci",
    "WineBandit": "rlx_envs.uci",
}

if TYPE_CHECKING:
    from rlx_envs.base import BanditEnv
    from rlx_envs.data import ClassificationBandit, DataBandit, Table
    from rlx_envs.files import DataFile, DataSet
    from rlx_envs.multi_armed import BernoulliMAB, GaussianMAB
    from rlx_envs.uci import (
        AdultBandit,
        CensusBandit,
        CovertypeBandit,
        MagicBandit,
        MushroomBandit,
        StatlogBandit,
        WineBandit,
    )
    from rlx_envs.wheel import WheelBandit


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlx_envs' has no attribute {name!r}")


def _register_with_gymnasium() -> None:
    """Register the manifest's environments with gymnasium, each id it does not have yet."""
    from gymnasium.envs.registration import register, registry

    from rlx_envs.plugin import rlx_register_envs

    specs: list[Any] = []
    rlx_register_envs(register=specs.append)
    for spec in specs:
        if spec.id not in registry:
            register(
                spec.id,
                entry_point=spec.target,
                kwargs=dict(spec.kwargs),
                max_episode_steps=spec.max_episode_steps,
            )


class _RegisterAfterGymnasium:
    """A finder on ``sys.meta_path`` that finds nothing itself: when gymnasium is imported it
    removes itself and makes gymnasium's loader register our environments once the module
    has run (importing gymnasium here would cost ``import rlx_envs`` NumPy and 0.1 s)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "gymnasium":
            return None
        sys.meta_path.remove(self)
        from importlib.util import find_spec

        spec = find_spec(name)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run_module = loader.exec_module

        def exec_module(module: Any) -> None:
            del loader.exec_module  # back to the loader's own method
            run_module(module)
            try:
                _register_with_gymnasium()
            except Exception as exc:  # importing gymnasium must not fail because of rlx_envs
                import warnings

                warnings.warn(
                    f"rlx_envs could not register its environments with gymnasium: {exc!r}",
                    stacklevel=2,
                )

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if "gymnasium" in sys.modules:
    _register_with_gymnasium()
elif not any(isinstance(finder, _RegisterAfterGymnasium) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterGymnasium())
