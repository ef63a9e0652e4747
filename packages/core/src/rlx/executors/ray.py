"""Jobs as Ray tasks anywhere in a cluster (``pip install 'rlx-core[ray]'``).

Each job is one streaming Ray task: what it emits comes back to the driver as the task's
yields (a batch of messages at a time), so no filesystem is shared; the driver alone writes
results. A task whose worker or node is lost is reported ``("lost", why)`` and not retried by
Ray, which would start it from scratch: the driver resubmits it from what it holds (a seed
group: each seed's newest checkpoint). Ray is imported here only, when an executor is made.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

from rlx.errors import RlxError
from rlx.executors.base import Job, Placement

#: Seconds between two batches of messages a task sends (and its last, when it ends).
FLUSH_EVERY = 0.25
#: Seconds a task trusts its last look at the driver's stop flag.
STOP_EVERY = 0.5


def check_ray_address(address: str, timeout: float = 3.0) -> None:
    """Fail fast with an :class:`RlxError` when nothing listens at a Ray address ``host:port``."""
    import socket

    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise RlxError(
            f"Ray address {address!r} is not host:port (for example 127.0.0.1:6379, or "
            "ray://host:10001); use address=auto for the cluster started on this machine, or "
            "leave address empty to start a local Ray instance"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise RlxError(
            f"cannot reach a Ray cluster at {address} ({exc}). Start one there with "
            "`ray start --head`, fix the address, or leave address empty to start Ray locally"
        ) from None


def _local_cluster_address(address: str) -> str | None:
    """The ``host:port`` of the cluster ``ray start`` runs on this machine, as ``ray.init``
    finds it for ``auto`` (``""``: only the one ``ray start`` recorded), or None: start one.
    Looked up here so that :func:`check_ray_address` fails in seconds where ``ray.init``
    would wait minutes on a stale record."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # another Ray version: ray.init looks it up
        return address or None
    try:
        return canonicalize_bootstrap_address(address or None)
    except ConnectionError:
        raise RlxError(
            "address=auto found no running Ray cluster: none was started with `ray start` on "
            "this machine and RAY_ADDRESS is not set. Start one with `ray start --head` (and "
            "`ray start --address=HEAD:6379` on the other machines), set RAY_ADDRESS, give "
            "address=HOST:6379 or ray://HOST:10001, or leave address empty to start Ray "
            "on this machine"
        ) from None


def connect_ray(address: str | None) -> None:
    """Connect this process to Ray as ``ray.init(address)`` would, with one clear message
    instead of a long wait when no cluster answers.

    ``address``: ``auto`` joins the cluster of ``RAY_ADDRESS`` or of ``ray start`` on this
    machine, and requires one; empty does the same when there is one and otherwise starts
    Ray here; ``host:port`` is a cluster's head; ``ray://host:port`` goes through Ray
    Client. A process that already called ``ray.init`` keeps its connection.
    """
    import ray

    if ray.is_initialized():
        return
    address = address or ""
    target: str | None = address
    origin = ""
    if address in ("", "auto") and os.environ.get("RAY_ADDRESS"):
        target, origin = os.environ["RAY_ADDRESS"], "RAY_ADDRESS: fix or unset it"
    elif address in ("", "auto"):
        target = _local_cluster_address(address)
        origin = "the cluster `ray start` recorded on this machine: `ray stop` forgets it"
    options: dict[str, Any] = {"log_to_driver": False}
    if target and target.startswith("ray://"):
        try:
            import grpc  # noqa: F401
        except ImportError:
            raise RlxError(
                f"address={target} connects through Ray Client, which needs grpcio: "
                "pip install 'ray[client]'"
            ) from None
    else:
        options["include_dashboard"] = False
    if target and target != "auto":
        try:
            check_ray_address(target)
        except RlxError as exc:
            if not origin:
                raise
            raise RlxError(f"{exc} (the address came from {origin})") from None
    try:
        ray.init(address=target, **options)
    except ConnectionError as exc:
        cause = exc.__cause__
        why = f" ({_first_line(cause)})" if cause is not None else ""
        raise RlxError(
            f"Ray could not join the cluster at {target}{why}: is it the head's address, and does "
            "this machine run the cluster's Ray version (and token, where the cluster uses one)?"
        ) from None


def lost_worker_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors for a task whose actor, worker process or node is gone."""
    exceptions = ray.exceptions
    names = (
        "RayActorError",  # ActorDiedError, ActorUnavailableError
        "WorkerCrashedError",
        "NodeDiedError",
        "ObjectLostError",
        "ActorUnschedulableError",
    )
    return tuple(getattr(exceptions, name) for name in names if hasattr(exceptions, name))


class _StopFlag:
    """A Ray actor holding the driver's stop request (no CPU of its own)."""

    def __init__(self) -> None:
        self.value = False

    def set(self) -> None:
        self.value = True

    def is_set(self) -> bool:
        return self.value


class _RemoteFlag:
    """The stop flag as a task sees it: the actor asked at most every :data:`STOP_EVERY` s."""

    def __init__(self, actor: Any) -> None:
        self.actor, self._seen, self._next = actor, False, 0.0

    def is_set(self) -> bool:
        now = time.monotonic()
        if not self._seen and now >= self._next:
            import ray

            self._next = now + STOP_EVERY
            try:
                self._seen = bool(ray.get(self.actor.is_set.remote(), timeout=10))
            except Exception:  # not now (Ray ends the tasks of a driver that is gone)
                pass
        return self._seen


def _run_remote(job: Job, payload: Any, flag: Any, placement: Placement) -> Iterator[list[Any]]:
    """A Ray task: ``job`` run to its end, what it emits sent back in batches."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides what a Ctrl-C means
    threads = str(max(1, int(placement.cpus)))
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = threads
    import sys

    if "torch" in sys.modules:  # a reused worker: torch read the variables already
        sys.modules["torch"].set_num_threads(int(threads))
    outbox: list[Any] = []
    last = time.monotonic()
    for _ in job(payload, outbox.append, _RemoteFlag(flag), placement):
        if outbox and time.monotonic() - last >= FLUSH_EVERY:
            yield list(outbox)
            outbox.clear()
            last = time.monotonic()
    yield outbox


class RayExecutor:
    """Jobs as Ray tasks of ``cpus`` CPUs and ``gpus`` GPUs on the cluster at ``address``
    (None or "": the one ``ray start`` runs on this machine, else a Ray started here)."""

    shares_files = False

    def __init__(self, job: Job, address: str | None, cpus: float = 1.0, gpus: float = 0.0) -> None:
        try:
            import ray
        except ImportError:
            raise RlxError(
                "--backend ray needs Ray: pip install 'rlx-core[ray]' (on every machine of "
                "the cluster)"
            ) from None
        self.ray = ray
        self._connected_here = not ray.is_initialized()
        connect_ray(address)
        self.lost_errors = lost_worker_errors(ray)
        self.placement = Placement(remote=True, cpus=cpus, gpus=gpus)
        self._job = job
        self._task = ray.remote(_run_remote).options(
            num_cpus=cpus, num_gpus=gpus, num_returns="streaming", max_retries=0
        )
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # on the driver's node: the flag lives as long as the driver, not as another node
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        self._flag = ray.remote(_StopFlag).options(num_cpus=0, scheduling_strategy=here).remote()
        self._running: dict[Any, int] = {}  # generator -> job id
        self._submitted = 0
        cluster = ray.cluster_resources()
        if cluster.get("CPU", 0) < cpus or cluster.get("GPU", 0) < gpus:
            self.close()
            raise RlxError(
                f"each task asks for {cpus:g} CPUs and {gpus:g} GPUs, but the Ray cluster has "
                f"{cluster.get('CPU', 0):g} CPUs and {cluster.get('GPU', 0):g} GPUs in all; "
                "lower --cpus-per-task / --gpus-per-task or add nodes"
            )

    def submit(self, payload: Any) -> int:
        """Queue one job; its id, which tags its events."""
        number = self._submitted
        self._submitted += 1
        generator = self._task.remote(self._job, payload, self._flag, self.placement)
        self._running[generator] = number
        return number

    def slots(self) -> int:
        """How many jobs run at once."""
        cluster = self.ray.cluster_resources()
        cpus = cluster.get("CPU", 0) / self.placement.cpus if self.placement.cpus else 1e9
        gpus = cluster.get("GPU", 0) / self.placement.gpus if self.placement.gpus else 1e9
        return max(1, int(min(cpus, gpus)))

    def pending(self) -> int:
        """How many submitted jobs have not ended (nor been lost) yet."""
        return len(self._running)

    def poll(self, timeout: float) -> list[tuple[int, Any]]:
        """The events since the last call, waiting at most ``timeout`` seconds for one."""
        if not self._running:
            return []
        ready, _ = self.ray.wait(list(self._running), num_returns=1, timeout=timeout)
        events: list[tuple[int, Any]] = []
        for generator in ready:
            number = self._running[generator]
            try:
                messages = self.ray.get(next(generator))
            except StopIteration:
                del self._running[generator]
                events.append((number, ("ended", None)))
                continue
            except self.lost_errors as exc:
                del self._running[generator]
                events.append((number, ("lost", _first_line(exc))))
                continue
            except self.ray.exceptions.TaskCancelledError:
                del self._running[generator]
                events.append((number, ("ended", "stopped at once")))
                continue
            except self.ray.exceptions.RayTaskError as exc:
                del self._running[generator]
                cause = exc.as_instanceof_cause()
                events.append((number, ("ended", f"{type(cause).__name__}: {_first_line(cause)}")))
                continue
            events += [(number, message) for message in messages]
        return events

    def stop(self) -> None:
        """Ask every job to end soon; jobs not started yet end without running."""
        self._flag.set.remote()

    def terminate(self) -> None:
        """End every job at once."""
        for generator in self._running:
            try:
                self.ray.cancel(generator, force=True)
            except Exception:  # already ended
                pass

    def close(self) -> None:
        """Release the workers (and Ray, when this executor connected to it)."""
        try:
            self.ray.kill(self._flag)
        except Exception:
            pass
        if self._connected_here:
            self.ray.shutdown()


def _first_line(error: BaseException) -> str:
    """The gist of a Ray error: its last line's first sentence (Ray adds pages of advice)."""
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    return lines[-1].strip().split(". ")[0].rstrip(".")
