from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlx.discovery import set_registry


@pytest.fixture(autouse=True)
def fresh_registry():
    previous = set_registry(None)
    yield
    set_registry(previous)


def _without_rlx_variables() -> dict[str, str]:
    """The environment minus RLX_* settings, so that an outer RLX_LOAD_PLUGINS cannot leak in."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RLX_")}


@pytest.fixture
def rlx_subprocess():
    """Run the real ``rlx`` command in a subprocess; returns the CompletedProcess."""

    def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, **kwargs):
        return subprocess.run(
            [sys.executable, "-m", "rlx.cli", *args],
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            **kwargs,
        )

    return run
