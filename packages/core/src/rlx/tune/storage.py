"""Where a study lives: an Optuna storage opened from what ``--storage`` gives, checked before
anything is written. Optuna is imported here, inside functions, never by ``import rlx``.

``--storage`` names Optuna's storages as Optuna does: a database URL (``sqlite:///PATH``,
``postgresql://USER@HOST/DB``, ...: :class:`optuna.storages.RDBStorage`), a journal file that
many machines append to over NFS (``journal:PATH``: :class:`optuna.storages.JournalStorage`
on a :class:`optuna.storages.journal.JournalFileBackend`), or Optuna's gRPC proxy in front of
any of them (``grpc://HOST:PORT``: :class:`optuna.storages.GrpcStorageProxy`, served by
:func:`optuna.storages.run_grpc_proxy_server`). Database storages record heartbeats, so a
trial whose worker died is failed and retried (:data:`RETRIES` times at most).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rlx.errors import ConfigError, RlxError
from rlx.files import open_lock

#: ``--storage journal:PATH``: Optuna's journal file at PATH (one file that every worker appends
#: to; on NFS for many machines).
JOURNAL = "journal:"
#: ``--storage grpc://HOST:PORT``: Optuna's gRPC storage proxy.
GRPC = "grpc://"
#: How long ``rlx tune`` waits for a gRPC proxy to answer before it says it cannot reach it.
GRPC_CONNECT_SECONDS = 10.0
#: How often a retried trial runs again after its worker died (each retry is a new trial).
RETRIES = 3


def _optuna() -> Any:
    """Optuna, or the install command when the extra is missing."""
    try:
        import optuna
    except ImportError:
        raise RlxError("rlx tune needs Optuna: pip install 'rlx-core[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # rlx tune prints its own lines
    return optuna


def redact(url: str) -> str:
    """A storage URL with its password hidden, for messages and files."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


@contextlib.contextmanager
def _creation_lock(url: str) -> Iterator[None]:
    """Hold an exclusive lock on ``<database>.lock`` beside an SQLite file while Optuna opens
    it: two processes that open a new database at once would both create its tables."""
    try:
        import fcntl

        from sqlalchemy.engine import make_url

        database = make_url(url).database if url.startswith("sqlite") else None
    except Exception:  # no fcntl (Windows) or a malformed URL: the storage itself says why
        database = None
    if not database or database == ":memory:":
        yield
        return
    try:
        handle = open_lock(f"{database}.lock")  # held until the storage is open
    except OSError:  # a directory that does not exist: the storage's own error says so
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def storage_kind(url: str) -> str:
    """``journal``, ``grpc`` or ``rdb`` (a database URL): which Optuna storage ``url`` names."""
    if url.startswith(JOURNAL):
        return "journal"
    if url.startswith(GRPC):
        return "grpc"
    return "rdb"


def journal_path(url: str) -> Path:
    """The file of a ``journal:PATH`` storage (``journal:///abs/path`` is read as the path)."""
    return Path(url[len(JOURNAL) :])


def grpc_address(url: str) -> tuple[str, int]:
    """The host and port of a ``grpc://HOST:PORT`` storage, or a ConfigError."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or port is None or parts.path not in ("", "/"):
        raise ConfigError(
            f"--storage {url}: a gRPC storage proxy is grpc://HOST:PORT (the address "
            "optuna.storages.run_grpc_proxy_server listens on), e.g. grpc://10.0.0.5:13000"
        )
    return host, port


def normal_storage(url: str) -> str:
    """``url`` as every worker opens it: a journal file by its absolute path, so that worker
    processes and a continued study find the same file whatever their working folder."""
    if storage_kind(url) == "journal":
        return JOURNAL + str(journal_path(url).expanduser().absolute())
    return url


def check_storage(url: str) -> None:
    """Refuse what no worker can share: an in-memory SQLite storage (it dies with the
    process, so no worker process shares it and no later ``rlx tune`` continues its study), a
    journal file that is a link, a folder or in no folder, and a malformed gRPC address. A
    plain path is neither a URL nor a journal: say how to write either."""
    kind = storage_kind(url)
    if kind == "grpc":
        grpc_address(url)
        return
    if kind == "journal":
        path = journal_path(url)
        if not str(path).strip():
            raise ConfigError("--storage journal: needs a file, journal:PATH (journal:study.log)")
        if path.is_symlink():
            raise ConfigError(
                f"--storage {url}: {path} is a symbolic link, which rlx never writes through; "
                "give the file itself"
            )
        if path.is_dir():
            raise ConfigError(f"--storage {url}: {path} is a folder; give a file in it")
        if not path.expanduser().absolute().parent.is_dir():
            raise ConfigError(
                f"--storage {url}: the folder {path.parent} does not exist; create it (on a "
                "file system every worker mounts, such as NFS, for many machines)"
            )
        return
    if "://" not in url:
        raise ConfigError(
            f"--storage {url} is not a storage URL: give journal:{url} for Optuna's journal "
            f"file, sqlite:///{url} for an SQLite database, postgresql://USER@HOST/DB, or "
            "grpc://HOST:PORT for Optuna's gRPC proxy"
        )
    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
    except Exception:  # a malformed URL: open_storage says why
        return
    if parsed.get_backend_name() != "sqlite":
        return
    database = parsed.database or ""
    if database in ("", ":memory:") or "memory" in (
        parsed.query.get("mode"),
        database.partition("file::")[2].partition(":")[0],
    ):
        raise ConfigError(
            f"--storage {url} is an in-memory database: it lives only as long as one "
            "process, so worker processes cannot share it and the study cannot be resumed; "
            "drop --storage (the study goes to OUT/study.db) or give a file "
            "(sqlite:///path/study.db)"
        )


def open_storage(url: str, heartbeat: int | None = None) -> Any:
    """An Optuna storage for ``url`` (a database URL, ``journal:PATH`` or ``grpc://HOST:PORT``);
    an unreachable, malformed or driverless one is a ConfigError. SQLite waits up to a minute
    for a lock, so that worker processes share it. With ``heartbeat`` (seconds), a database
    storage records each running trial's heartbeat, and a trial silent for twice that long is
    failed and run again as a new trial (Optuna's retry callback, :data:`RETRIES` times)."""
    optuna = _optuna()
    kind = storage_kind(url)
    if kind == "journal":
        return _open_journal(optuna, url)
    if kind == "grpc":
        return _open_grpc(optuna, url)
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    beats: dict[str, Any] = {}
    if heartbeat is not None:
        beats = {
            "heartbeat_interval": heartbeat,
            "grace_period": 2 * heartbeat,
            "heartbeat_stale_trial_callback": retry_callback(optuna),
        }
    try:
        with _creation_lock(url), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs, **beats)
    except ImportError:  # Optuna's own message for a missing driver says only that
        raise ConfigError(
            f"storage {redact(url)}: the database driver for it is not installed (pip install "
            "psycopg2-binary for postgresql://, pymysql for mysql+pymysql://)"
        ) from None
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        reason = lines[0].rstrip(".") if lines else type(exc).__name__
        raise ConfigError(
            f"cannot open the study storage {redact(url)}: {reason}. Give a reachable Optuna "
            "storage URL (sqlite:///path/study.db, postgresql://user@host/db, ...)"
        ) from None


def retry_callback(optuna: Any) -> Any:
    """Optuna's callback that queues a failed trial again as a new one, :data:`RETRIES` times."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=RETRIES)


def _open_journal(optuna: Any, url: str) -> Any:
    """Optuna's journal storage on the file of ``journal:PATH`` (created when missing)."""
    check_storage(url)
    path = journal_path(url).expanduser().absolute()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            backend = optuna.storages.journal.JournalFileBackend(str(path))
            return optuna.storages.JournalStorage(backend)
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        reason = lines[0].rstrip(".") if lines else type(exc).__name__
        raise ConfigError(f"cannot open the journal file {path}: {reason}") from None


def _open_grpc(optuna: Any, url: str) -> Any:
    """A client of Optuna's gRPC storage proxy at ``grpc://HOST:PORT``, once it answers."""
    host, port = grpc_address(url)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            proxy = optuna.storages.GrpcStorageProxy(host=host, port=port)
        proxy.wait_server_ready(timeout=GRPC_CONNECT_SECONDS)
    except ImportError:
        raise ConfigError(
            f"--storage {url}: Optuna's gRPC proxy needs grpcio and protobuf (pip install "
            "grpcio protobuf)"
        ) from None
    except ConnectionError:
        raise ConfigError(
            f"cannot reach the gRPC storage proxy at {host}:{port} within "
            f"{GRPC_CONNECT_SECONDS:g} s; start it there (optuna.storages.run_grpc_proxy_server"
            "(storage, host=..., port=...)) or give another --storage"
        ) from None
    return proxy


def _storage_key(url: str) -> str:
    """A storage URL as it compares: an SQLite database by its absolute path, so that
    ``sqlite:///study.db`` and ``sqlite:////path/to/study.db`` are the same storage."""
    if url.startswith("sqlite"):
        try:
            from sqlalchemy.engine import make_url

            database = make_url(url).database
        except Exception:  # a malformed URL: compared as written
            database = None
        if database and database != ":memory:":
            return f"sqlite:{Path(database).resolve()}"
    if storage_kind(url) == "journal":
        return JOURNAL + str(journal_path(url).expanduser().resolve())
    return redact(url)
