"""Jobs in worker processes on this machine (the default executor; no dependency).

The workers are spawned with SIGINT ignored (a terminal's Ctrl-C reaches the driver alone,
which decides what stopping means) and one BLAS thread each. They take jobs from one queue
until the driver closes the executor; a worker that dies with a job loses that job, reported
as ``("lost", why)``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
from collections.abc import Iterator
from typing import Any

from rlx.executors.base import Job, Placement

#: Environment variables that keep BLAS to one thread per worker (set unless the user did).
ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: At most this many events are read in one poll, so the driver's display stays live.
POLL_BATCH = 1000


def _worker_main(job: Job, worker: int, jobs: Any, events: Any, stop: Any) -> None:
    """A worker process: the jobs it takes, one after another, until the driver's sentinel;
    a job started after a stop request ends at once."""
    placement = Placement()
    while (taken := jobs.get()) is not None:
        number, payload = taken
        events.put((number, ("taken", worker)))
        error = None
        if not stop.is_set():

            def emit(message: Any, number: int = number) -> None:
                events.put((number, message))

            try:
                for _ in job(payload, emit, stop, placement):
                    pass
            except Exception as exc:  # the job's own errors are its messages; this is a bug
                error = f"{type(exc).__name__}: {exc}"
        events.put((number, ("ended", error)))


@contextlib.contextmanager
def starting_workers() -> Iterator[None]:
    """Workers inherit SIGINT ignored (Python then installs no KeyboardInterrupt handler, so
    they are safe from their first instruction) and one BLAS thread each."""
    added = {name: "1" for name in ONE_THREAD if name not in os.environ}
    os.environ.update(added)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        for name in added:
            os.environ.pop(name, None)


class LocalExecutor:
    """``workers`` spawned processes taking the submitted jobs in order."""

    shares_files = True

    def __init__(self, job: Job, workers: int) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self._jobs, self._events, self._stop = context.Queue(), context.Queue(), context.Event()
        self._processes = [
            context.Process(
                target=_worker_main, args=(job, w, self._jobs, self._events, self._stop)
            )
            for w in range(workers)
        ]
        self._submitted = 0
        self._open: set[int] = set()  # submitted, not ended
        self._held: dict[int, int] = {}  # worker -> the job it runs
        self._dead: set[int] = set()  # workers seen dead once with a job (their last words read)
        self._started = False

    def submit(self, payload: Any) -> int:
        """Queue one job; its id, which tags its events."""
        number = self._submitted
        self._submitted += 1
        self._open.add(number)
        self._jobs.put((number, payload))
        return number

    def _start(self) -> None:
        self._started = True
        with starting_workers():
            for process in self._processes:
                process.start()

    def slots(self) -> int:
        """How many jobs run at once."""
        return len(self._processes)

    def pending(self) -> int:
        """How many submitted jobs have not ended (nor been lost) yet."""
        return len(self._open)

    def poll(self, timeout: float) -> list[tuple[int, Any]]:
        """The events since the last call, waiting at most ``timeout`` seconds for one."""
        if not self._started:
            self._start()
        out: list[tuple[int, Any]] = []
        try:
            out.append(self._events.get(timeout=timeout))
            while len(out) < POLL_BATCH:
                out.append(self._events.get_nowait())
        except queue.Empty:
            pass
        events = []
        for number, message in out:
            if message[0] == "taken":
                self._held[message[1]] = number
                continue
            if message[0] == "ended":
                self._open.discard(number)
                self._held = {w: n for w, n in self._held.items() if n != number}
            events.append((number, message))
        if not out:  # a dead worker's last messages are all read now
            events += self._losses()
        return events

    def _losses(self) -> list[tuple[int, Any]]:
        lost = []
        for worker, process in enumerate(self._processes):
            if process.is_alive() or worker not in self._held:
                continue
            if worker not in self._dead:
                self._dead.add(worker)
                continue
            number = self._held.pop(worker)
            self._open.discard(number)
            lost.append(
                (number, ("lost", f"its worker process died (exit code {process.exitcode})"))
            )
        if self._open and not self._held and not any(p.is_alive() for p in self._processes):
            codes = ", ".join(sorted({str(p.exitcode) for p in self._processes}))
            for number in sorted(self._open):
                why = f"never started: the worker processes ended (exit codes {codes})"
                lost.append((number, ("lost", why)))
            self._open.clear()
        return lost

    def stop(self) -> None:
        """Ask every job to end soon; jobs not started yet end without running."""
        self._stop.set()

    def terminate(self) -> None:
        """End every job at once."""
        for process in self._processes:
            if process.is_alive():
                process.terminate()

    def close(self) -> None:
        """Release the workers (and Ray, when this executor connected to it)."""
        for _ in self._processes:
            self._jobs.put(None)
        self._jobs.cancel_join_thread()
        for process in self._processes:
            # one that never started (the start raised) has nothing to join; joining it
            # would hide the start's own error behind an AssertionError
            if process.pid is not None:
                process.join(timeout=10)
