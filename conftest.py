"""What every test of this repository gets, whichever package it belongs to."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

try:  # property tests judged by what they find, never by how fast a loaded machine runs them
    from hypothesis import HealthCheck, settings

    settings.register_profile("rlx", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("rlx")
except ImportError:  # hypothesis is a test dependency; a package's tests may run without it
    pass


@pytest.fixture(autouse=True)
def sigint_as_in_a_terminal() -> Iterator[None]:
    """Ctrl-C as an interactive terminal delivers it, however pytest was started.

    A process started with SIGINT ignored (a background job of a script or of CI, ``trap ""
    INT``) keeps it ignored: Python installs no KeyboardInterrupt handler, and every child,
    ``rlx`` subprocesses included, inherits the ignored signal. The Ctrl-C tests would then
    test the launcher. During each test SIGINT raises KeyboardInterrupt, so that a process the
    test starts gets the default disposition; between tests it is ignored again.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    ):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
