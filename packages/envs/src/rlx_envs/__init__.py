"""rlx-envs: synthetic and UCI-data bandit environments for rlx, registered with gymnasium.

``import rlx_envs`` is light: the environment classes load on first use, so that the
plugin manifest (:mod:`rlx_envs.plugin`) imports no NumPy code.
"""

from __future__ import annotations

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
