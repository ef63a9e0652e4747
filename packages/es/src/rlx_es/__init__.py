"""rlx-es: evolution strategies for rlx, with the whole population evaluated as one batch.

The optimiser cores work on any objective over flat parameter vectors (ask/tell, or
:func:`optimize`); the agents (``openai-es``, ``ns-es``, ``nsr-es``, ``nsra-es``, ``cem``,
``cma-es``, ``ars``) wrap them for gymnasium environments, or for a user's policy module and
``rollout(policy)`` class (:mod:`rlx_es.rollouts`); ``nop`` is the fixed policy they are
compared with (garage's NOP). Importing this package imports no torch:
the names below load on first use.
"""

from __future__ import annotations

import importlib
from importlib.metadata import version as _installed_version
from typing import Any

__version__ = _installed_version("rlx-es")

_LAZY = {
    "Population": "rlx_es.core",
    "optimize": "rlx_es.core",
    "rank_transformation": "rlx_es.core",
    "novelty": "rlx_es.core",
    "sphere": "rlx_es.core",
    "rastrigin": "rlx_es.core",
    "OpenAIES": "rlx_es.openai_es",
    "OpenAIESAgent": "rlx_es.openai_es",
    "CEM": "rlx_es.cem",
    "CEMAgent": "rlx_es.cem",
    "CMAES": "rlx_es.cma_es",
    "CMAESAgent": "rlx_es.cma_es",
    "NSES": "rlx_es.novelty",
    "NSRES": "rlx_es.novelty",
    "NSRAES": "rlx_es.novelty",
    "VirtualBatchNorm": "rlx_es.policy",
    "PopulationPolicy": "rlx_es.policy",
    "BehaviourWrapper": "rlx_es.envs",
    "DeceptiveMaze": "rlx_es.envs",
    "NOPAgent": "rlx_es.nop",
    "ARS": "rlx_es.ars",
    "ARSAgent": "rlx_es.ars",
    "RolloutEnv": "rlx_es.rollouts",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlx_es' has no attribute {name!r}")
