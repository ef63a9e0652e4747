"""pytest fixtures for plugin authors, loaded through the ``pytest11`` entry point."""

from __future__ import annotations

from collections.abc import Callable, Iterator

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


@pytest.fixture
def rlx_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run ``rlx ARGS`` in this process: ``code, out, err = rlx_cli("run", "my-agent", ...)``.

    The exit code is 0 when the command returns normally; stdout and stderr are captured.
    Output is laid out as when piped, whatever ``$COLUMNS`` says (pytest-xdist's workers set
    it to 80), so that tables are the same however the tests are launched.
    """
    import os

    from rlx.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        columns = os.environ.pop("COLUMNS", None)
        try:
            main(list(args))
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        finally:
            if columns is not None:
                os.environ["COLUMNS"] = columns
        out, err = capsys.readouterr()
        return code, out, err

    return run
