from __future__ import annotations

import pytest

from rlx.discovery import set_registry


@pytest.fixture(autouse=True)
def fresh_registry():
    """Each test discovers plugins anew, so environment-variable changes take effect."""
    previous = set_registry(None)
    yield
    set_registry(previous)
