"""Finding, checking, downloading and reading the data files of the data bandits.

A data set is a folder name and the files that may hold it (for example the gzipped copy
and the original). :func:`locate` looks for them, in this order:

1. ``path=`` given by the user (that file only);
2. ``$RLX_UCI_DIR/<folder>/<file>``;
3. the download cache ``<cache>/<folder>/<file>``, where ``<cache>`` is ``$RLX_CACHE_DIR/uci``
   or ``~/.cache/rlx/uci``;
4. the shared offline copies ``<ancestor>/shared/data/uci/<folder>/<file>``, for every
   ancestor of the current directory and of this package (a CI checkout has ``shared/``
   next to the repository clone).

Every file found is checked against its known sha256 before it is read; ``sha256=``
replaces the known value (for a file whose checksum is not known, such as US Census 1990).
With ``download=True`` a file found nowhere is fetched from UCI into the cache: written to a
temporary file, checked, then moved into place with :func:`os.replace`, so a failed or
corrupt download leaves nothing behind.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from rlx.errors import RlxError
from rlx.files import open_to_append, put_in_place, temporary_beside
from rlx_envs._lzw import MAGIC as COMPRESS_MAGIC
from rlx_envs._lzw import unlzw

GZIP_MAGIC = b"\x1f\x8b"
UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"

#: Where ``download=True`` fetches each file (by file name); tests point entries at local files.
UCI_URLS: dict[str, str] = {
    "agaricus-lepiota.data": f"{UCI}/mushroom/agaricus-lepiota.data",
    "shuttle.trn.Z": f"{UCI}/statlog/shuttle/shuttle.trn.Z",
    "shuttle.tst": f"{UCI}/statlog/shuttle/shuttle.tst",
    "covtype.data.gz": f"{UCI}/covtype/covtype.data.gz",
    "adult.data": f"{UCI}/adult/adult.data",
    "adult.test": f"{UCI}/adult/adult.test",
    "USCensus1990.data.txt": f"{UCI}/census1990-mld/USCensus1990.data.txt",
    "magic04.data": f"{UCI}/magic/magic04.data",
    "wine.data": f"{UCI}/wine/wine.data",
}


class DataFileError(RlxError):
    """A data file that is missing, corrupt or could not be downloaded."""


class DataNotFoundError(DataFileError, FileNotFoundError):
    """No copy of a data set's file in any of the places searched."""


class ChecksumMismatchError(DataFileError, ValueError):
    """A data file whose sha256 is not the known one."""


class DownloadError(DataFileError, OSError):
    """``download=True`` could not fetch or check a file."""


@dataclass(frozen=True)
class DataFile:
    """One file that holds (one split of) a data set, and its known sha256.

    ``searched=False`` marks a file accepted only through an explicit ``path=`` (for example
    the 10,000-row Covertype sample, meant for tests).
    """

    name: str
    sha256: str
    split: str = "all"
    searched: bool = True


@dataclass(frozen=True)
class DataSet:
    """A data set: its display name, its folder under a data root, the files that hold it."""

    name: str
    folder: str
    files: tuple[DataFile, ...]

    @property
    def splits(self) -> tuple[str, ...]:
        """The names of the splits its files hold (``all``, or ``train`` and ``test``), in the order
        of :attr:`files`, each once."""
        return tuple(dict.fromkeys(f.split for f in self.files))

    def searched_files(self, split: str) -> tuple[DataFile, ...]:
        """The files of ``split`` that :func:`locate` searches the data roots for (those with
        ``searched``)."""
        return tuple(f for f in self.files if f.split == split and f.searched)


def cache_dir() -> Path:
    """Where ``download=True`` puts files: ``$RLX_CACHE_DIR/uci`` or ``~/.cache/rlx/uci``."""
    root = os.environ.get("RLX_CACHE_DIR")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "rlx") / "uci"


def shared_dirs() -> list[Path]:
    """Every ``<ancestor>/shared/data/uci`` folder above the current directory and this package."""
    found: list[Path] = []
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for ancestor in (start, *start.parents):
            candidate = ancestor / "shared" / "data" / "uci"
            if candidate.is_dir() and candidate not in found:
                found.append(candidate)
    return found


def data_roots() -> list[Path]:
    """The folders searched for data files, in order (see the module docstring)."""
    roots = []
    uci_dir = os.environ.get("RLX_UCI_DIR")
    if uci_dir:
        roots.append(Path(uci_dir).expanduser())
    roots.append(cache_dir())
    roots.extend(shared_dirs())
    return list(dict.fromkeys(roots))


def search_paths(dataset: DataSet, split: str) -> list[tuple[Path, DataFile]]:
    """Where :func:`locate` looks for ``split`` of ``dataset`` without ``path=``, in order."""
    return [
        (root / dataset.folder / file.name, file)
        for root in data_roots()
        for file in dataset.searched_files(split)
    ]


def data_status(dataset: DataSet, split: str | None = None) -> list[tuple[Path, bool]]:
    """Each file searched for (``split``, or every split in turn), in the order :func:`locate`
    searches, and whether it exists there (it is checked against its sha256 only when read)."""
    splits = dataset.splits if split is None else (split,)
    return [(path, path.is_file()) for s in splits for path, _ in search_paths(dataset, s)]


def locate(
    dataset: DataSet,
    split: str,
    path: str | os.PathLike[str] | None = None,
    sha256: str | None = None,
    download: bool = False,
) -> Path:
    """The checked file holding ``split`` of ``dataset``; raises a :class:`DataFileError`."""
    if path is not None:
        explicit = Path(path).expanduser()
        if not explicit.is_file():
            raise DataNotFoundError(
                f"{dataset.name}: path={str(path)!r} is not a file. "
                f"Pass the path of {_names(dataset.files)}, or leave path out to search "
                f"{', '.join(str(root) for root in data_roots())}."
            )
        verify(explicit, dataset, dataset.files, sha256)
        return explicit

    candidates = dataset.searched_files(split)
    searched = []
    for candidate, file in search_paths(dataset, split):
        searched.append(candidate)
        if candidate.is_file():
            verify(candidate, dataset, (file,), sha256)
            return candidate
    if download:
        return fetch(dataset, split, sha256)
    downloadable = [f.name for f in candidates if f.name in UCI_URLS]
    how_to_download = (
        f"pass download=True to fetch {downloadable[0]} from {UCI_URLS[downloadable[0]]} "
        f"into {cache_dir() / dataset.folder}"
        if downloadable
        else "download it yourself"
    )
    uci_dir_note = "" if os.environ.get("RLX_UCI_DIR") else " (RLX_UCI_DIR is not set)"
    raise DataNotFoundError(
        f"{dataset.name} data not found: none of these files exists{uci_dir_note}:\n"
        + "".join(f"  {p}\n" for p in searched)
        + f"Put one of them there (or set RLX_UCI_DIR to a folder holding "
        f"{dataset.folder}/{candidates[0].name}), pass path=... to the environment, "
        f"or {how_to_download}."
    )


def verify(
    path: Path, dataset: DataSet, files: tuple[DataFile, ...], sha256: str | None = None
) -> None:
    """Raise :class:`ChecksumMismatchError` unless ``path`` has an accepted sha256.

    Accepted: ``sha256`` when given, else the known checksum of any of ``files``.
    """
    accepted = {sha256.lower()} if sha256 else {f.sha256 for f in files}
    actual = file_sha256(path)
    if actual in accepted:
        return
    if sha256:
        expected = f"the sha256={sha256!r} you passed"
    else:
        expected = "the known " + " or ".join(f"{f.name} sha256 {f.sha256}" for f in files)
    raise ChecksumMismatchError(
        f"{dataset.name}: {path} has sha256 {actual}, not {expected}. The file is corrupt or "
        f"a different version: replace it with the original (download=True fetches it into "
        f"{cache_dir() / dataset.folder}), or, if you trust it, pass sha256={actual!r} to the "
        f"environment."
    )


_checked: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """The sha256 of a file, remembered while its size and modification time stay the same."""
    status = path.stat()
    key = (str(path.resolve()), status.st_size, status.st_mtime_ns)
    if key not in _checked:
        with path.open("rb") as stream:
            _checked[key] = hashlib.file_digest(stream, "sha256").hexdigest()
    return _checked[key]


def fetch(dataset: DataSet, split: str, sha256: str | None = None) -> Path:
    """Download the first downloadable file of ``split`` into the cache, check it, then move it."""
    files = [f for f in dataset.searched_files(split) if f.name in UCI_URLS]
    if not files:
        raise DownloadError(f"{dataset.name}: no download address is known for split {split!r}")
    file = files[0]
    url = UCI_URLS[file.name]
    target = cache_dir() / dataset.folder / file.name
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_beside(target, suffix=".part")
    try:
        with (
            open_to_append(temporary, "ab") as out,
            urllib.request.urlopen(url, timeout=60) as response,
        ):
            while chunk := response.read(1 << 20):
                out.write(chunk)
        verify(temporary, dataset, (file,), sha256)
        put_in_place(temporary, target)
    except ChecksumMismatchError as exc:
        raise DownloadError(
            f"{dataset.name}: the file downloaded from {url} is wrong: {exc}"
        ) from exc
    except (OSError, ValueError) as exc:  # URLError is an OSError; ValueError: a bad address
        raise DownloadError(
            f"{dataset.name}: could not download {url}: {exc}. Download it yourself and put it "
            f"at {target}, or pass path=... to the environment."
        ) from exc
    finally:
        Path(temporary).unlink(missing_ok=True)  # gone already when os.replace succeeded
    return target


def read_bytes(path: Path) -> bytes:
    """The contents of a data file, decompressed when it is gzip or UNIX compress (``.Z``)."""
    data = path.read_bytes()
    if data.startswith(GZIP_MAGIC):
        return gzip.decompress(data)
    if data.startswith(COMPRESS_MAGIC):
        return unlzw(data)
    return data


@contextmanager
def open_text(path: Path) -> Iterator[TextIO]:
    """A data file as a text stream (gzip is decompressed while reading, ``.Z`` in memory)."""
    with path.open("rb") as stream:
        magic = stream.read(2)
    if magic == GZIP_MAGIC:
        with gzip.open(path, "rt", encoding="latin-1") as text:
            yield text
    elif magic == COMPRESS_MAGIC:
        yield io.StringIO(read_bytes(path).decode("latin-1"), newline=None)
    else:
        with path.open("r", encoding="latin-1") as text:
            yield text


def _names(files: tuple[DataFile, ...]) -> str:
    return " or ".join(f.name for f in files)
