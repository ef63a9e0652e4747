"""Memory the process may use, and a check that refuses a size before it is allocated.

Every family estimates, where it builds an agent, the bytes its settings make it allocate
(environments, rollout and replay buffers, populations, tables, networks) and calls
:func:`check_allocation` first: a size that cannot fit is one :class:`~rlx.errors.ConfigError`
(what was asked, about how much memory it needs, how much there is, what to lower) before
anything is allocated or written, instead of a process that grows until the kernel kills it.

Estimates are Python integers (no overflow, whatever the settings) and err on the high side;
the check keeps :data:`HEADROOM` of what is available for everything the estimate leaves out.
NumPy and the standard library only: ``import rlx`` never imports torch.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError

try:
    import resource
except ImportError:  # not on Windows: no rlimits there
    resource = None  # type: ignore[assignment]

#: Fraction of the available memory an agent's estimated allocations may take; the rest is
#: left for what estimates leave out (the interpreter, torch, temporaries) and for others.
HEADROOM = 0.9

#: Bytes assumed per environment of a vector environment when there are few of them (a
#: conservative round number: classic-control copies take 5 KB, Taxi 0.8 MB).
ENV_BYTES = 1 << 20
#: Fewest environments for which one copy is measured instead of assuming ENV_BYTES each.
MEASURE_ENVS_ABOVE = 256
#: Least bytes assumed per environment after a measurement (which sees only Python and
#: NumPy allocations, not a simulator's own).
MIN_ENV_BYTES = 64 << 10
#: Bytes of one async worker process (an interpreter with NumPy and gymnasium loaded).
WORKER_PROCESS_BYTES = 64 << 20

_UNLIMITED = 1 << 60  # cgroup and rlimit values at or above this mean "no limit"


def format_bytes(nbytes: float) -> str:
    """``nbytes`` in the largest binary unit that keeps it at least 1: ``"7.1 GiB"``."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            break
        value /= 1024
    if unit == "PiB" and value >= 10_000:
        return f"{value:.3g} PiB"
    return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    try:
        return int(text)
    except ValueError:
        return None  # "max": no limit


def _meminfo() -> dict[str, int]:
    """``/proc/meminfo`` in bytes (Linux), or empty."""
    values: dict[str, int] = {}
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return values
    for line in lines:
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            values[key] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return values


def _process_sizes() -> dict[str, int]:
    """This process's ``VmSize`` (address space) and ``VmData`` in bytes, where Linux says."""
    sizes: dict[str, int] = {}
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return sizes
    for line in lines:
        key, _, rest = line.partition(":")
        if key in ("VmSize", "VmData"):
            sizes[key] = int(rest.split()[0]) * 1024
    return sizes


def _cgroup_room() -> int | None:
    """Bytes this process's cgroup may still take: its limit minus its usage, counting its
    inactive file cache as free (the kernel reclaims it first); None without a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2
            base = Path("/sys/fs/cgroup") / path.lstrip("/")
            limit, usage = base / "memory.max", base / "memory.current"
            stat, cache_key = base / "memory.stat", "inactive_file"
        elif "memory" in controllers.split(","):  # cgroup v1, seen from inside its namespace
            base = Path("/sys/fs/cgroup/memory")
            limit, usage = base / "memory.limit_in_bytes", base / "memory.usage_in_bytes"
            stat, cache_key = base / "memory.stat", "total_inactive_file"
        else:
            continue
        limit_bytes, used = _read_int(limit), _read_int(usage)
        if limit_bytes is None or used is None or limit_bytes >= _UNLIMITED:
            continue
        cache = 0
        try:
            for entry in stat.read_text().splitlines():
                key, _, value = entry.partition(" ")
                if key == cache_key:
                    cache = int(value)
        except (OSError, ValueError):
            pass
        return max(0, limit_bytes - used + cache)
    return None


def available_memory() -> int | None:
    """Bytes a new allocation of this process can take, or None where nothing says.

    The system's ``MemAvailable`` (free memory plus what the kernel can reclaim), bounded by
    the process's address-space and data limits (``RLIMIT_AS``, ``RLIMIT_DATA``, less what
    it already uses) and by its cgroup's ``memory.max``; ``os.sysconf``'s free pages where
    there is no ``/proc/meminfo``.
    """
    candidates: list[int] = []
    meminfo = _meminfo()
    if "MemAvailable" in meminfo:
        candidates.append(meminfo["MemAvailable"])
    else:
        try:
            candidates.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            pass
    sizes = _process_sizes()
    for limit_name, used_name in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        if resource is None or not hasattr(resource, limit_name):
            continue
        soft, _ = resource.getrlimit(getattr(resource, limit_name))
        if soft != resource.RLIM_INFINITY and soft < _UNLIMITED:
            candidates.append(max(0, soft - sizes.get(used_name, 0)))
    room = _cgroup_room()
    if room is not None:
        candidates.append(room)
    return min(candidates) if candidates else None


#: How many runs share the machine's memory at once (seeds of a group training side by side,
#: ``--jobs``): each may take this fraction of what is available (:func:`shared_by`).
_SHARERS = 1


@contextlib.contextmanager
def shared_by(runs: int) -> Iterator[None]:
    """Within the block, :func:`check_allocation` gives each allocation 1/``runs`` of the
    available memory: ``runs`` processes (a seed group's workers) allocate at once."""
    global _SHARERS
    previous, _SHARERS = _SHARERS, max(1, int(runs))
    try:
        yield
    finally:
        _SHARERS = previous


def check_allocation(what: str, nbytes: int, hint: str) -> None:
    """Raise :class:`~rlx.errors.ConfigError` when ``what`` would need more than
    :data:`HEADROOM` of :func:`available_memory`; do nothing where the memory is unknown.

    ``what`` says what was asked (``"ppo's rollout of 256 steps of 100,000,000
    environments"``), ``nbytes`` is the estimate (any non-negative integer: a size from the
    command line may exceed every machine), ``hint`` says what to do (``"lower n_envs"``).
    """
    nbytes = int(nbytes)
    if nbytes < 0:
        raise ValueError(f"a memory estimate cannot be negative, got {nbytes}")
    available = available_memory()
    if available is None or nbytes <= HEADROOM * available / _SHARERS:
        return
    if _SHARERS > 1:
        raise ConfigError(
            f"{what} would need about {format_bytes(nbytes)} of memory in each of the "
            f"{_SHARERS} seeds that train at once, but {format_bytes(available)} are available "
            f"to them all; {hint}, or lower --jobs"
        )
    raise ConfigError(
        f"{what} would need about {format_bytes(nbytes)} of memory, but "
        f"{format_bytes(available)} are available to this process; {hint}"
    )


def check_allocations(parts: Mapping[str, tuple[int, str]]) -> None:
    """:func:`check_allocation` of several things built together: ``parts`` maps what each
    is (``"100,000,000 environments (n_envs)"``) to its bytes and what lowers it
    (``"lower n_envs"``). The message names the parts, largest first, and gives the hint of
    the largest."""
    ordered = sorted(parts.items(), key=lambda item: -item[1][0])
    named = [f"{name} ({format_bytes(nbytes)})" for name, (nbytes, _) in ordered if nbytes > 0]
    if not named:
        return
    what = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
    check_allocation(what, sum(nbytes for nbytes, _ in parts.values()), ordered[0][1][1])


def array_nbytes(shape: Iterable[int], itemsize: int) -> int:
    """Bytes of an array of ``shape`` with ``itemsize``-byte items, as a Python integer (NumPy's
    own products overflow silently at 2**63)."""
    return math.prod(int(n) for n in shape) * int(itemsize)


def space_nbytes(space: Any) -> int:
    """Bytes of one observation or action of a gymnasium space (8 for a Discrete one; the sum
    of the parts of a Dict or Tuple space)."""
    spaces = getattr(space, "spaces", None)
    if isinstance(spaces, Mapping):
        return sum(space_nbytes(part) for part in spaces.values())
    if isinstance(spaces, (tuple, list)):
        return sum(space_nbytes(part) for part in spaces)
    shape = getattr(space, "shape", None) or ()
    dtype = getattr(space, "dtype", None)
    itemsize = getattr(dtype, "itemsize", 8) if dtype is not None else 8
    return array_nbytes(shape, max(int(itemsize), 1))


def mlp_nbytes(sizes: Iterable[int], batch: int = 0, copies: int = 4, itemsize: int = 4) -> int:
    """Bytes of an MLP of layer widths ``sizes`` (input, hidden..., output): its parameters
    ``copies`` times (weights, gradients, an optimiser's two moments by default) and the
    activations of a ``batch`` of rows, forward and backward (``copies=0``: the activations
    alone)."""
    widths = [int(n) for n in sizes]
    parameters = sum((a + 1) * b for a, b in itertools.pairwise(widths))
    activations = 2 * int(batch) * sum(widths)
    return (copies * parameters + activations) * itemsize


def _resident_bytes() -> int:
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def _measured_env_bytes(env: Any) -> int:
    """Bytes that making and resetting one more copy of ``env`` (from its spec) took: what
    Python and NumPy allocated, or the growth of the resident set where a simulator's own
    allocations make it a megabyte or more; :data:`ENV_BYTES` when no copy can be made."""
    import tracemalloc
    import warnings

    import gymnasium

    spec = getattr(env, "spec", None)
    if spec is None:
        return ENV_BYTES
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    copy = None
    try:
        before, resident = tracemalloc.get_traced_memory()[0], _resident_bytes()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            copy = gymnasium.make(spec)
            copy.reset(seed=0)
        traced = tracemalloc.get_traced_memory()[0] - before
        grown = _resident_bytes() - resident
        # Below a megabyte the resident set grows by the allocator's arenas, not by the copy.
        return max(traced, grown if grown >= ENV_BYTES else 0)
    except Exception:  # the vector environment reports its own errors when it is built
        return ENV_BYTES
    finally:
        if copy is not None:
            copy.close()
        if started:
            tracemalloc.stop()


def environments_nbytes(env: Any, n_envs: int, vectorization: str = "sync") -> int:
    """An estimate of the bytes of ``n_envs`` copies of ``env`` stepped as a vector
    environment: one worker process each (``async``), or one copy in this process each,
    plus a few observations per environment in the runner's arrays.

    Up to :data:`MEASURE_ENVS_ABOVE` copies are assumed to take :data:`ENV_BYTES` each;
    beyond, one copy is made and measured (twice what it allocated, at least
    :data:`MIN_ENV_BYTES`), so that thousands of small copies are allowed and millions of
    any are refused.
    """
    n_envs = int(n_envs)
    observations = 4 * space_nbytes(env.observation_space)
    if vectorization == "async":
        per_env = WORKER_PROCESS_BYTES
    elif n_envs <= MEASURE_ENVS_ABOVE:
        per_env = ENV_BYTES
    else:
        per_env = max(MIN_ENV_BYTES, 2 * _measured_env_bytes(env))
    return n_envs * (per_env + observations)
