"""pytest fixtures for plugin authors, loaded through the ``pytest11`` entry point."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rlx.discovery import Registry, set_registry


@pytest.fixture
def rlx_registry() -> Iterator[Registry]:
    """An empty registry for the test; add plugins with ``registry.add_plugin(module, "dist")``.

    ``rlx.make`` and the CLI see only what the test adds; the previous registry returns afterwards.
    """
    registry = Registry()
    previous = set_registry(registry)
    try:
        yield registry
    finally:
        set_registry(previous)
