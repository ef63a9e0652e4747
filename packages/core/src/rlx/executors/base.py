"""What every executor and every job share: where a job runs (:class:`Placement`), the
driver's stop flag as a job sees it, the job's signature and the :class:`Executor` protocol
(:mod:`rlx.executors` says how they fit together)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Placement:
    """Where a job runs: ``remote`` when its files are not the driver's (another machine, or a
    Ray worker that must send them back), and the CPUs and GPUs it was given (fractions
    allowed; 0 GPUs: the CPU)."""

    remote: bool = False
    cpus: float = 1.0
    gpus: float = 0.0


class Flag(Protocol):
    """The driver's stop request as a job sees it."""

    def is_set(self) -> bool:
        """Whether the driver asked every job to end soon."""
        ...


Job = Callable[[Any, Callable[[Any], None], Flag, Placement], Iterator[None]]


class Executor(Protocol):
    """What the drivers (seed groups, tune trials) need of an engine."""

    #: Whether the jobs' files stay on the driver's machine (False: they are sent back).
    shares_files: bool

    def submit(self, payload: Any) -> int:
        """Queue one job; its id, which tags its events."""
        ...

    def poll(self, timeout: float) -> list[tuple[int, Any]]:
        """The events since the last call, waiting at most ``timeout`` seconds for one."""
        ...

    def slots(self) -> int:
        """How many jobs run at once (worker processes, or the tasks the cluster can place)."""
        ...

    def pending(self) -> int:
        """How many submitted jobs have not ended (nor been lost) yet."""
        ...

    def stop(self) -> None:
        """Ask every job to end soon (their ``stop.is_set()`` turns true); jobs not started
        yet end without running."""
        ...

    def terminate(self) -> None:
        """End every job at once."""
        ...

    def close(self) -> None:
        """Release the workers (and Ray, when this executor connected to it)."""
        ...
