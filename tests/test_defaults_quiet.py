"""Defaults never warn about themselves: every installed agent, built with its defaults on an
environment that fits it and trained for one iteration, raises no warning from rlx's code.

A warning is for a combination the user chose (SAC's ``learning_starts`` below its
``batch_size`` warned on ``rlx run sac`` with nothing set). Warnings of other libraries
(gymnasium, torch) are not rlx's to fix here and are left out by the file they come from.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
from test_every_agent import _cases

import rlx
from rlx.protocols import Closes


def _rlx_folders() -> list[Path]:
    """The folders of the imported rlx packages: rlx-core and every plugin (``rlx_*``)."""
    return [
        Path(module.__file__).parent
        for name, module in list(sys.modules.items())
        if (name == "rlx" or (name.startswith("rlx_") and "." not in name))
        and getattr(module, "__file__", None)
    ]


def _from_rlx(warning: warnings.WarningMessage) -> bool:
    path = Path(warning.filename)
    return any(path.is_relative_to(folder) for folder in _rlx_folders())


@pytest.mark.parametrize("name, env", _cases())
def test_an_agent_with_its_defaults_raises_no_warning_of_rlx(name, env):
    assert env, f"no test environment for {name}'s spaces; add one to test_every_agent"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent = rlx.make(name, env, seed=0)
        try:
            agent.step()
        finally:
            if isinstance(agent, Closes):
                agent.close()
    ours = [f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}" for w in caught]
    ours = [text for text, w in zip(ours, caught, strict=True) if _from_rlx(w)]
    assert not ours, "\n".join(ours)
