"""Where a study lives: an Optuna storage opened from the URL ``--storage`` gives, checked
before anything is written. Optuna is imported here, inside functions, never by ``import rlx``."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError, RlxError
from rlx.files import open_lock


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


def check_storage(url: str) -> None:
    """Refuse an in-memory SQLite storage: it dies with the process, so no worker process
    shares it and no later ``rlx tune`` continues its study."""
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


def open_storage(url: str) -> Any:
    """An Optuna storage for ``url``; an unreachable, malformed or driverless one is a
    ConfigError. SQLite waits up to a minute for a lock, so that worker processes share it."""
    optuna = _optuna()
    engine_kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    try:
        with _creation_lock(url), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
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
    return redact(url)
