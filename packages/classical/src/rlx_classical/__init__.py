"""rlx-classical: tabular Q-learning, SARSA, SARSA(lambda) and Dyna-Q for rlx.

Install it and the agents appear in ``rlx list``; build one with
``rlx.make("q-learning", "Taxi-v4")``. Importing this package is light: the agent modules
load on first use.
"""

from __future__ import annotations

from importlib.metadata import version as _installed_version
from typing import TYPE_CHECKING, Any

__version__ = _installed_version("rlx-classical")

__all__ = ["DynaQ", "QLearning", "Sarsa", "SarsaLambda"]

_LAZY = {
    "DynaQ": "rlx_classical.dyna_q",
    "QLearning": "rlx_classical.q_learning",
    "Sarsa": "rlx_classical.sarsa",
    "SarsaLambda": "rlx_classical.sarsa_lambda",
}

if TYPE_CHECKING:
    from rlx_classical.dyna_q import DynaQ
    from rlx_classical.q_learning import QLearning
    from rlx_classical.sarsa import Sarsa
    from rlx_classical.sarsa_lambda import SarsaLambda


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlx_classical' has no attribute {name!r}")
