"""The one way rlx writes a file: in the place, never through a link someone left there.

Run, group and study directories may hold what someone else put there (a downloaded run, a
shared study folder). Every file rlx writes is therefore made beside its place under a
hidden temporary name and renamed onto it: a crash leaves the old file or the new one, and a
symbolic link at the place is replaced by the file, never written through. An append (a
run's metrics.csv) opens the file without following a link. ``tests/test_write_paths.py``
fails for a write anywhere in rlx's packages that does not come through here.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def current_umask() -> int:
    """The process's file-creation mask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temporary_beside(path: str | os.PathLike[str], suffix: str = "") -> Path:
    """A new, empty hidden file in ``path``'s folder, with the permissions the umask gives,
    for a writer that wants a file name (ffmpeg, a streaming encoder); :func:`put_in_place`
    then renames it onto ``path``."""
    path = Path(path)
    descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        if hasattr(os, "fchmod"):  # mkstemp makes 0600 whatever the umask (not on Windows)
            os.fchmod(descriptor, 0o666 & ~current_umask())
    finally:
        os.close(descriptor)
    return Path(name)


def put_in_place(temporary: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Rename a finished :func:`temporary_beside` file onto ``path`` (a link there is
    replaced, not followed)."""
    os.replace(temporary, path)


@contextlib.contextmanager
def writing(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """``open(path, mode)`` for a whole new file (``"w"`` or ``"wb"``; ``kwargs`` as for
    :func:`open`): written under a temporary name, synced and renamed onto ``path`` when the
    block ends without an error; nothing changes at ``path`` otherwise."""
    if mode not in ("w", "wb"):
        raise ValueError(f"writing() makes a whole new file: mode 'w' or 'wb', not {mode!r}")
    temporary = temporary_beside(path)
    try:
        with open(temporary, mode, **kwargs) as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        put_in_place(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` (see :func:`writing`)."""
    with writing(path, "wb") as file:
        file.write(data)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` as UTF-8 (see :func:`writing`)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Write ``data`` to ``path`` as indented JSON with sorted keys (see :func:`writing`)."""
    write_bytes_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())


def open_to_append(path: str | os.PathLike[str], mode: str = "a", **kwargs: Any) -> IO[Any]:
    """``open(path, mode)`` (``"a"`` or ``"ab"``) of an existing file, refused (an
    ``OSError``) when ``path`` is a symbolic link: rlx never appends through a link planted
    in a run directory."""
    if mode not in ("a", "ab"):
        raise ValueError(f"open_to_append() appends: mode 'a' or 'ab', not {mode!r}")
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)  # not on Windows
    return os.fdopen(os.open(path, flags), mode, **kwargs)


def open_lock(path: str | os.PathLike[str]) -> IO[Any]:
    """A lock file at ``path`` (made empty when missing), opened to hold an ``flock`` on;
    refused (an ``OSError``) when ``path`` is a symbolic link. Nothing is written in it."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    return os.fdopen(os.open(path, flags, 0o666), "r+")


def inside(root: str | os.PathLike[str], relative: str) -> Path:
    """``root/relative`` for a relative POSIX path sent by another process (a remote worker),
    or ValueError when it would leave ``root`` (absolute, ``..``, an empty part)."""
    from pathlib import PurePosixPath

    parts = PurePosixPath(relative).parts
    if (
        not parts
        or PurePosixPath(relative).is_absolute()
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise ValueError(f"{relative!r} is not a path inside {root}")
    return Path(root).joinpath(*parts)


def write_inside(root: str | os.PathLike[str], relative: str, data: bytes) -> None:
    """Write ``data`` to ``root/relative`` (:func:`inside`), making the folders on the way;
    a link at ``root`` or at any folder on the way is refused (OSError), never followed."""
    path = inside(root, relative)
    folder = Path(root)
    for part in (None, *Path(relative).parts[:-1]):
        folder = folder if part is None else folder / part
        if folder.is_symlink():
            raise OSError(f"{folder} is a symbolic link: rlx writes through no link")
        folder.mkdir(exist_ok=True)
    write_bytes_atomic(path, data)


def remove_inside(root: str | os.PathLike[str], relative: str) -> None:
    """Remove the file (or link) ``root/relative`` if it is there, and the folders it leaves
    empty up to ``root``; a folder on the way that is a link is left alone."""
    path = inside(root, relative)
    if any(
        parent.is_symlink() for parent in path.parents if Path(root) in (parent, *parent.parents)
    ):
        return
    if path.is_symlink() or path.is_file():
        path.unlink()
    for parent in path.parents:
        if parent == Path(root) or Path(root) not in parent.parents:
            break
        try:
            parent.rmdir()
        except OSError:  # not empty
            break
