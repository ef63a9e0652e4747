"""Where work runs: the one seam between what rlx trains and the engine that places it.

An executor runs *jobs*, each a generator function ``job(payload, emit, stop, placement)``
called on a worker: ``emit(message)`` sends a picklable message to the driver, ``stop`` (an
object with ``is_set()``) says the driver asked every job to end soon, ``placement`` says
where the job runs (:class:`Placement`), and each ``yield`` marks a point between two units
of work, where a remote executor sends what was emitted so far. The driver submits payloads,
then polls events ``(job id, message)`` until none is pending; the executor adds its own
``("ended", error)`` (``error`` None, or the text of a failure outside the job's hands) and
``("lost", why)``, for a job whose worker died, to retry from what the driver holds.

Two executors: :class:`rlx.executors.local.LocalExecutor`, worker processes on this machine
(the default, no dependency), and :class:`rlx.executors.ray.RayExecutor`, Ray tasks anywhere
in a cluster (``pip install 'rlx-core[ray]'``); :func:`executor_for` picks one by name. Ray is
imported only by the second, never by ``import rlx``.
"""

from __future__ import annotations

from typing import Any

from rlx.errors import ConfigError, did_you_mean
from rlx.executors.base import Executor, Flag, Job, Placement

__all__ = ["BACKENDS", "Executor", "Flag", "Job", "Placement", "check_backend", "executor_for"]

#: The executors, by the name ``--backend`` takes.
BACKENDS = ("local", "ray")


def check_backend(name: str) -> str:
    """``name`` when it is one of :data:`BACKENDS`, else one ConfigError that lists them."""
    if name not in BACKENDS:
        raise ConfigError(
            f"--backend {name!r} is not a backend.{did_you_mean(name, BACKENDS)} "
            f"Choose one of: {', '.join(BACKENDS)}"
        )
    return name


def check_share(value: Any, what: str, low: float) -> float:
    """A task's CPUs or GPUs: a number >= ``low`` (fractions allowed), else one ConfigError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= low:
        raise ConfigError(f"{what} must be a number >= {low:g} (fractions allowed), got {value!r}")
    if value != value or value == float("inf"):
        raise ConfigError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def executor_for(
    backend: str,
    job: Job,
    *,
    workers: int = 1,
    address: str | None = None,
    cpus_per_task: float = 1.0,
    gpus_per_task: float = 0.0,
) -> Executor:
    """The executor named ``backend`` running ``job``: ``workers`` local processes, or Ray
    tasks of ``cpus_per_task`` CPUs and ``gpus_per_task`` GPUs on the cluster at
    ``address`` (None: a Ray started on this machine for the call)."""
    check_backend(backend)
    if backend == "ray":
        from rlx.executors.ray import RayExecutor

        return RayExecutor(job, address, cpus_per_task, gpus_per_task)
    from rlx.executors.local import LocalExecutor

    return LocalExecutor(job, workers)
