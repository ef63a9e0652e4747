from __future__ import annotations

from pathlib import Path

import pytest

from rlx_envs import files


@pytest.fixture(autouse=True)
def isolated_data_dirs(tmp_path_factory, monkeypatch):
    """No test reads or writes the user's real cache or RLX_UCI_DIR."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path_factory.mktemp("rlx-cache")))
    monkeypatch.delenv("RLX_UCI_DIR", raising=False)


@pytest.fixture
def shared() -> Path:
    """The shared UCI copies, found as the loaders find them; the test is skipped without them."""
    found = files.shared_dirs()
    if not found:
        pytest.skip(
            "no shared/data/uci folder above the current directory or the rlx_envs package, "
            "so the UCI copies are not available here"
        )
    return found[0]


@pytest.fixture
def no_shared(monkeypatch):
    """Hide the shared copies, so that only RLX_UCI_DIR and the cache are searched."""
    monkeypatch.setattr(files, "shared_dirs", lambda: [])
