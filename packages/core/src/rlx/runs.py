"""Run directories: what ``rlx run`` writes; what ``--resume``, ``rlx eval`` and ``rlx.load`` read.

Layout::

    RUN_DIR/
      config.json          agent, environment, seed, hyperparameters, trainer settings, versions
      metrics.csv          one row per log event and per evaluation
      tensorboard/         TensorBoard events (when tensorboard is installed)
      checkpoints/<steps>/ periodic checkpoints (the newest few are kept)
      best/                the agent at its best evaluation
      final/               the agent when the run stopped
      .rlx-run             the marker that makes the folder an rlx run
      .lock                locked by the process training in it
      .lock.pid            that process's id, for the message a second process gets

rlx recognises a run only by its marker, removes only the entries it wrote (:data:`WRITTEN`)
and never writes through a symbolic link (:meth:`RunDirectory.check_links`).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import functools
import json
import os
import platform
import re
import shutil
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from rlx.checkpoint import STATE_FILE, tidy
from rlx.errors import CheckpointError
from rlx.files import write_bytes_atomic, write_json_atomic

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.csv"
LOCK_FILE = ".lock"
#: The holder's process id, beside the lock file: some lock implementations truncate the lock
#: file when a second process opens it, so the id would be gone before it could be read.
PID_FILE = ".lock.pid"
#: The file that makes a directory an rlx run: rlx writes it first when it creates a run, and
#: recognises a run (one it may start again from scratch) only by it, never by config.json.
MARKER_FILE = ".rlx-run"
PLOT_FILE = "learning_curve.png"
#: The marker that makes a folder a seed group (:mod:`rlx.groups`), and the group's record.
GROUP_MARKER = ".rlx-group"
GROUP_FILE = "group.json"
#: The entries rlx writes in a run directory, and the only ones it ever removes.
WRITTEN = (
    MARKER_FILE,
    LOCK_FILE,
    PID_FILE,
    CONFIG_FILE,
    METRICS_FILE,
    PLOT_FILE,
    "tensorboard",
    "checkpoints",
    "best",
    "final",
    "videos",
)
#: What a run that stopped before its first checkpoint may have written; removed before it
#: starts again from scratch.
STALE = (METRICS_FILE, PLOT_FILE, "tensorboard", "checkpoints", "best", "final", "videos")


class RunDirectory:
    """Paths and bookkeeping of one run directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock: Any = None
        #: Folders above the run that :meth:`create` made (removed with a run that never started).
        self.made_parents: list[Path] = []
        #: Whether :meth:`create` made the run directory itself.
        self.made_dir = False
        #: The entries of :data:`WRITTEN` that were here before :meth:`create` (kept by
        #: :meth:`remove_unstarted`), and config.json's text then (put back by it).
        self._kept: set[str] = set(WRITTEN)
        self._previous_config: bytes | None = None

    config_file = property(
        lambda self: self.path / CONFIG_FILE,
        doc="``config.json``: the run's identity, trainer settings and versions.",
    )
    metrics_file = property(
        lambda self: self.path / METRICS_FILE,
        doc="``metrics.csv``: one row per log event and per evaluation.",
    )
    marker_file = property(
        lambda self: self.path / MARKER_FILE,
        doc="``.rlx-run``: the marker that makes the folder an rlx run.",
    )
    plot_file = property(
        lambda self: self.path / PLOT_FILE,
        doc="``learning_curve.png``: the run's learning curve.",
    )
    checkpoints = property(
        lambda self: self.path / "checkpoints",
        doc="``checkpoints/``: the periodic checkpoints, one folder each.",
    )
    best = property(
        lambda self: self.path / "best", doc="``best/``: the agent at its best evaluation."
    )
    final = property(
        lambda self: self.path / "final", doc="``final/``: the agent when the run stopped."
    )
    tensorboard = property(
        lambda self: self.path / "tensorboard",
        doc="``tensorboard/``: the TensorBoard logger's events.",
    )
    videos = property(
        lambda self: self.path / "videos", doc="``videos/``: the video callback's recordings."
    )

    @classmethod
    def check_new(cls, path: str | Path) -> str:
        """Check that a new run can be written at ``path``, writing nothing.

        Returns a notice when ``path`` is an rlx run (it holds rlx's marker file) that stopped
        before its first resumable checkpoint: it will be started again there. An existing
        directory with anything else in it, or a path that cannot be a directory, is a
        :class:`CheckpointError`.
        """
        run = cls(path)
        for parent in [run.path, *run.path.parents]:
            if parent.exists():
                if not parent.is_dir():
                    raise CheckpointError(
                        f"cannot create run directory {run.path}: {parent} is a file"
                    )
                if parent != run.path and not os.access(parent, os.W_OK | os.X_OK):
                    raise CheckpointError(
                        f"cannot create run directory {run.path}: {parent} is not writable"
                    )
                break
        if not run.path.exists() or not any(run.path.iterdir()):
            return ""
        if run.is_run() and not run.has_resumable():
            run.check_links()
            return (
                f"{run.path} holds a run that stopped before its first checkpoint; "
                "starting it again from scratch in the same directory"
            )
        raise CheckpointError(
            f"{run.path} already exists and is not empty; pass another --out"
            + (
                f", or continue that run with --resume {run.path}"
                if run.is_run() or run.has_resumable()
                else ""
            )
        )

    def is_run(self) -> bool:
        """Whether rlx created this directory as a run (its marker file is here)."""
        return self.marker_file.is_file() and not self.marker_file.is_symlink()

    def check_links(self) -> None:
        """Refuse a run directory in which a path that rlx writes is a symbolic link.

        A run directory made elsewhere could point ``metrics.csv``, ``checkpoints/`` or the
        lock file anywhere; rlx never writes through a link, so it stops before writing.
        """
        suspects = [self.path / name for name in WRITTEN]
        for folder in (self.checkpoints, self.videos, self.tensorboard):
            if folder.is_dir() and not folder.is_symlink():
                suspects += list(folder.iterdir())
        links = [path for path in suspects if path.is_symlink()]
        if links:
            shown = ", ".join(str(path.relative_to(self.path)) for path in links[:3])
            raise CheckpointError(
                f"{self.path} holds symbolic links where rlx writes ({shown}); rlx never writes "
                "through a link, which could lead outside the run directory. Remove the links "
                "(or copy the run's real files into a new directory) and try again"
            )

    def create(self, config: dict[str, Any]) -> None:
        """Write a new run here (after :meth:`check_new`): the marker and config.json.

        What a run that never reached its first checkpoint left here (in a directory that
        rlx marked as its run) is removed first; nothing else in the directory is touched.
        """
        try:
            self.made_parents = [p for p in self.path.parents if not p.exists()][::-1]
            self.made_dir = not self.path.exists()
            self.path.mkdir(parents=True, exist_ok=True)
            self.check_links()
            self._kept = {name for name in WRITTEN if os.path.lexists(self.path / name)}
            self.lock()
            marked = self.is_run()
            if marked:
                for name in STALE:
                    stale = self.path / name
                    if stale.is_dir() and not stale.is_symlink():
                        shutil.rmtree(stale)
                    elif os.path.lexists(stale):
                        stale.unlink()
                self._kept -= set(STALE)
            else:
                write_json_atomic(self.marker_file, {"format": "rlx-run", "version": 1})
            self.write_config(config)
        except OSError as exc:
            raise CheckpointError(f"cannot create run directory {self.path}: {exc}") from exc

    def remove_unstarted(self) -> None:
        """Undo :meth:`create` for a run that stopped before its first checkpoint: remove what
        this process wrote (never a file it did not write), put config.json back as it was,
        and remove the run directory and the folders above it if this process made them and
        they are empty. A run that cannot start leaves nothing behind, and loses nothing."""
        self.unlock()
        for name in WRITTEN:
            entry = self.path / name
            if name in self._kept or not os.path.lexists(entry):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        self.restore_config()
        if not self.made_dir:
            return
        for folder in [self.path, *reversed(self.made_parents)]:
            try:
                folder.rmdir()  # only while empty
            except OSError:
                break

    def has_checkpoint(self) -> bool:
        """Whether any checkpoint (periodic, final or best) was written."""
        return self.has_resumable() or (self.best / STATE_FILE).is_file()

    def has_resumable(self) -> bool:
        """Whether a checkpoint that a run can continue from (periodic or final) was written;
        ``best/`` alone (a run killed after its first evaluation) is not one."""
        return bool(self.saved_checkpoints()) or (self.final / STATE_FILE).is_file()

    def lock(self) -> None:
        """Take the run directory for this process until :meth:`unlock` (or exit).

        A second process that trains in the same directory would interleave metrics.csv and
        checkpoints: it gets a :class:`CheckpointError` naming the holder's process id. Every
        writer takes the lock first, so this is also where links are refused
        (:meth:`check_links`) and a read-only directory is one message. The lock is
        ``filelock``'s (``flock`` on Unix, ``msvcrt.locking`` on Windows), released by the
        operating system when the process dies.
        """
        from filelock import FileLock, Timeout

        if self._lock is not None:
            return
        self.check_links()
        path = self.path / LOCK_FILE
        # thread_local=False: the lock belongs to the process, whichever thread unlocks it.
        lock = FileLock(path, thread_local=False)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise CheckpointError(
                f"{self.path} is in use by another rlx process (pid {self._holder()}); wait for "
                "it to finish or stop it first"
            ) from None
        except OSError as exc:
            raise self._unwritable(path, exc) from exc
        try:  # a rename, never a write through a link planted at the pid file's name
            write_bytes_atomic(self.path / PID_FILE, str(os.getpid()).encode())
        except OSError as exc:
            lock.release()
            raise self._unwritable(self.path / PID_FILE, exc) from exc
        self._lock = lock

    def _holder(self) -> str:
        """The process id that the lock's holder wrote, or ``unknown`` (not written yet)."""
        try:
            return (self.path / PID_FILE).read_text(encoding="ascii").strip() or "unknown"
        except (OSError, UnicodeDecodeError):
            return "unknown"

    def _unwritable(self, path: Path, exc: OSError) -> CheckpointError:
        return CheckpointError(
            f"cannot write in run directory {self.path}: {path.name}: "
            f"{exc.strerror or exc}" + _read_only_hint(exc)
        )

    def unlock(self) -> None:
        """Release the lock that :meth:`lock` took (and remove the holder's process id), if this
        process holds it."""
        if self._lock is not None:
            with contextlib.suppress(OSError):  # removed while held: never another's pid
                (self.path / PID_FILE).unlink(missing_ok=True)
            self._lock.release()
            self._lock = None

    def tidy(self) -> list[str]:
        """Remove unfinished checkpoints and put back any that a crash left renamed aside."""
        return tidy(self.path) + tidy(self.checkpoints)

    @classmethod
    def open(cls, path: str | Path) -> RunDirectory:
        """An existing run directory; a missing or unreadable one is a clear error."""
        run = cls(path)
        if run.path.exists() and not run.path.is_dir():
            raise CheckpointError(
                f"{run.path} is a file, not a run directory; give the run's directory (the "
                f"folder holding {CONFIG_FILE})"
            )
        if not run.path.is_dir():
            raise CheckpointError(f"run directory {run.path} does not exist")
        if not run.config_file.is_file():
            problem = group_marker_problem(run.path)
            if problem is not None and os.path.lexists(run.path / GROUP_MARKER):
                raise CheckpointError(f"{run.path} looks like a seed group, but {problem}")
            raise CheckpointError(
                f"{run.path} is not an rlx run directory: {CONFIG_FILE} is missing"
            )
        run.read_config()
        return run

    def read_config(self) -> dict[str, Any]:
        """The run's ``config.json``, checked to be a JSON object with ``agent``, ``env``, ``seed``
        and ``hyperparameters``; a :class:`CheckpointError` otherwise."""
        try:
            config = json.loads(self.config_file.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"{self.config_file} is unreadable: {exc}") from exc
        if not isinstance(config, dict):
            raise CheckpointError(f"{self.config_file} is not a JSON object")
        missing = [key for key in ("agent", "env", "seed", "hyperparameters") if key not in config]
        if missing:
            raise CheckpointError(f"{self.config_file} is incomplete: missing {', '.join(missing)}")
        return config

    def read_identity(self, config: dict[str, Any] | None = None) -> Any:
        """The run's :class:`~rlx.protocols.RunIdentity` as ``config.json`` (or ``config``, what
        :meth:`read_config` returned) records it."""
        from rlx.protocols import RunIdentity

        config = self.read_config() if config is None else config
        for key, kind in (("agent", str), ("env", str), ("seed", int)):
            if not isinstance(config[key], kind) or isinstance(config[key], bool):
                raise CheckpointError(
                    f"{self.config_file}: {key} must be a {kind.__name__}, got {config[key]!r}"
                )
        for key in ("hyperparameters", "env_kwargs"):
            if not isinstance(config.get(key) or {}, dict):
                raise CheckpointError(f"{self.config_file}: {key} must be a JSON object")
        return RunIdentity.from_json(config)

    def write_config(self, config: dict[str, Any]) -> None:
        """Write config.json; the first call keeps the text it replaces for
        :meth:`restore_config`."""
        if self._previous_config is None and self.config_file.is_file():
            self._previous_config = self.config_file.read_bytes()
        write_json_atomic(self.config_file, config)

    def restore_config(self) -> None:
        """Put config.json back as it was before this process's first :meth:`write_config`
        (a run that failed before its first checkpoint changes nothing)."""
        if self._previous_config is not None:
            with contextlib.suppress(OSError):
                write_bytes_atomic(self.config_file, self._previous_config)

    def checkpoint_path(self, env_steps: int) -> Path:
        """Where the periodic checkpoint at ``env_steps`` goes: ``checkpoints/<env_steps>``,
        zero-padded to 12 digits so that names sort by steps."""
        return self.checkpoints / f"{env_steps:012d}"

    def saved_checkpoints(self) -> list[Path]:
        """Periodic checkpoints, oldest first (temporary directories are ignored)."""
        if not self.checkpoints.is_dir():
            return []
        return sorted(p for p in self.checkpoints.iterdir() if p.is_dir() and p.name.isdigit())

    def prune_checkpoints(self, keep: int) -> None:
        """Remove all but the newest ``keep`` periodic checkpoints (``keep`` 0 or less keeps them
        all)."""
        for old in self.saved_checkpoints()[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)

    def latest_checkpoint(self) -> Path:
        """The checkpoint with the most environment steps (``final`` or a periodic one)."""
        candidates = [
            p for p in [*self.saved_checkpoints(), self.final] if (p / STATE_FILE).is_file()
        ]
        if not candidates:
            raise CheckpointError(f"run directory {self.path} holds no checkpoint to load")
        return max(candidates, key=_checkpoint_steps)


def last_good(run: RunDirectory | None) -> str:
    """Where the last good state of a stopped run is."""
    if run is None:
        return "The run was not recorded (no run directory), so nothing was saved."
    checkpoints = run.saved_checkpoints()
    if not checkpoints:
        return "No checkpoint had been written yet; nothing was saved."
    return f"The run stopped; its last good checkpoint is {checkpoints[-1]}."


def _read_only_hint(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (
            " (the directory is read-only; copy the run somewhere writable to continue it, "
            "or evaluate it where it is with rlx eval)"
        )
    return ""


def is_group(path: str | Path) -> bool:
    """Whether ``path`` is a seed group (its :data:`GROUP_MARKER` file is there, not a link)."""
    marker = Path(path) / GROUP_MARKER
    return marker.is_file() and not marker.is_symlink()


def group_marker_problem(path: str | Path) -> str | None:
    """Why ``path`` is not a seed group, for messages (None when :func:`is_group`)."""
    marker = Path(path) / GROUP_MARKER
    if marker.is_symlink():
        return (
            f"its {GROUP_MARKER} marker is a symbolic link, which rlx never follows; replace "
            "it by a regular file (a copy of what it points to) if you trust this group"
        )
    if marker.is_dir():
        return (
            f"its {GROUP_MARKER} marker is a directory, not the file rlx writes; remove it, "
            "or put back the group's marker file"
        )
    if marker.exists() and not marker.is_file():
        return f"its {GROUP_MARKER} marker is not a regular file; put back the group's marker file"
    if not marker.exists():
        return f"its {GROUP_MARKER} file is missing"
    return None


def read_metrics(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """The columns and rows of a metrics.csv; an unreadable file is a CheckpointError."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = [dict(row) for row in reader]
            return list(reader.fieldnames or []), rows
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CheckpointError(f"{path} is unreadable ({exc}); it is not rlx's metrics.csv") from exc


def _checkpoint_steps(path: Path) -> tuple[int, int]:
    try:
        document = json.loads((path / STATE_FILE).read_text())
        steps = int(document["trainer"]["env_steps"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"checkpoint {path} is corrupt: {exc}") from exc
    return steps, path.name == "final"


def default_run_path(root: str | Path, agent: str, env_id: str, seed: int) -> Path:
    """``ROOT/<agent>-<env>-s<seed>-<UTC time>``, with characters unsafe in paths replaced."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{agent}-{env_id}-s{seed}-{stamp}")
    path = Path(root) / name
    suffix = 1
    while path.exists():
        suffix += 1
        path = Path(root) / f"{name}-{suffix}"
    return path


def package_versions() -> dict[str, str]:
    """Versions of Python, the libraries a run depends on and every installed rlx distribution
    (read once per process: scanning every installed distribution takes about 0.1 s)."""
    return dict(_package_versions())


@functools.lru_cache(maxsize=1)
def _package_versions() -> tuple[tuple[str, str], ...]:
    versions = {"python": platform.python_version()}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.startswith("rlx") or name in ("numpy", "gymnasium", "torch"):
            versions[name] = dist.version
    return tuple(sorted(versions.items()))
