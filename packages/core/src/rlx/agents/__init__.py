"""Agents that ship with rlx-core, and what every agent class can inherit."""

from __future__ import annotations

import os
from pathlib import Path


class Saveable:
    """Gives an agent :meth:`save` (:meth:`rlx.protocols.Agent.save`): every family's base class
    inherits it, so that saving is written once, in :func:`rlx.save`."""

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write this agent's policy and run identity (spaces included) as a checkpoint
        directory at ``path`` that ``rlx.load(path)`` rebuilds (see :func:`rlx.save`)."""
        from rlx.api import save

        return save(self, path)  # type: ignore[arg-type]
