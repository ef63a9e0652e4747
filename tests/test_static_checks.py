"""Static checks as tests, so that the README's test command (and CI) runs them: ruff on the
whole tree (lint, and the formatting of the Python files) and mypy on rlx-core
(``mypy.ini`` at the repository root)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _tool(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (scripts/setup.sh installs it)")
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_ruff_finds_nothing_in_the_tree():
    result = _tool("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_python_files_are_formatted():
    result = _tool("ruff", "format", "--check", "--extend-exclude", "*.md", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_passes_on_rlx_core():
    result = _tool("mypy", "packages/core/src")
    assert result.returncode == 0, result.stdout + result.stderr
