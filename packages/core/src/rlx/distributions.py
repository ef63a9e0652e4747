"""The installed rlx distributions, and the foreign ones that would break them.

rlx-core owns the import package ``rlx`` and the ``rlx`` command. Another distribution that
ships either of them (``rlx-workbench`` on the public index does) overwrites rlx-core's files
when installed beside it, and both stop working without an error that names the cause;
:func:`foreign_rlx` finds such distributions from their installed metadata, so that
``rlx --version`` and ``rlx plugins`` can name them. Nothing here imports a plugin.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import PurePosixPath

CORE_DISTRIBUTION = "rlx-core"
PLUGIN_GROUP = "rlx.plugins"


def canonical_name(name: str) -> str:
    """A distribution name as the packaging specifications compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_versions() -> list[tuple[str, str]]:
    """``(distribution, version)`` of rlx-core, then of every distribution that declares an
    ``rlx.plugins`` entry point (families and third-party plugins), by name; found from the
    installed metadata alone."""
    core = canonical_name(CORE_DISTRIBUTION)
    found: dict[str, tuple[str, str]] = {}
    for entry_point in metadata.entry_points(group=PLUGIN_GROUP):
        dist = entry_point.dist
        if dist is None:
            continue
        key = canonical_name(dist.name)
        if key != core:
            found.setdefault(key, (dist.name, dist.version))
    try:
        rows = [(CORE_DISTRIBUTION, metadata.version(CORE_DISTRIBUTION))]
    except metadata.PackageNotFoundError:
        rows = [(CORE_DISTRIBUTION, "not installed")]
    return rows + [found[key] for key in sorted(found)]


@dataclass(frozen=True)
class ForeignRlx:
    """A distribution other than rlx-core that ships the ``rlx`` import package or command."""

    distribution: str
    version: str
    #: What it ships of rlx-core's: ``"the import package rlx"``, ``"the rlx command"``.
    ships: tuple[str, ...]

    def message(self) -> str:
        """The warning the ``rlx`` command prints for it: the two distributions overwrite each
        other's files, and the commands that uninstall it and repair rlx-core."""
        return (
            f"{self.distribution} {self.version} also installs {' and '.join(self.ships)}, which "
            f"belong to {CORE_DISTRIBUTION}: the two overwrite each other's files and neither "
            f"works reliably. Uninstall it (pip uninstall {self.distribution}), then reinstall "
            f"{CORE_DISTRIBUTION} (pip install --force-reinstall --no-deps {CORE_DISTRIBUTION}) "
            "to restore the files it replaced"
        )


def foreign_rlx() -> list[ForeignRlx]:
    """Every installed distribution other than rlx-core whose RECORD lists Python files of
    the ``rlx`` package (``rlx/__init__.py``, ...) or that declares an ``rlx`` console script."""
    core = canonical_name(CORE_DISTRIBUTION)
    commands = {
        canonical_name(entry_point.dist.name)
        for entry_point in metadata.entry_points(group="console_scripts", name="rlx")
        if entry_point.dist is not None
    }
    found: dict[str, ForeignRlx] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        key = canonical_name(name)
        if not name or key == core or key in found:
            continue
        ships = []
        if _ships_rlx_package(dist):
            ships.append("the import package rlx")
        if key in commands:
            ships.append("the rlx command")
        if ships:
            found[key] = ForeignRlx(name, dist.version, tuple(ships))
    return [found[key] for key in sorted(found)]


def _ships_rlx_package(dist: metadata.Distribution) -> bool:
    # Most RECORDs never mention rlx/: a substring test spares parsing the large ones (torch's).
    # The RECORD is read as text: the importlib_metadata backport, once some library imports
    # it, lists in ``files`` only what exists on disk, and a broken install may not.
    record = dist.read_text("RECORD")
    if record is None:
        paths = [str(file) for file in dist.files or []]
    elif "rlx/" not in record:
        return False
    else:
        paths = [row[0] for row in csv.reader(record.splitlines()) if row]
    return any(PurePosixPath(path).parts[:1] == ("rlx",) and path.endswith(".py") for path in paths)
