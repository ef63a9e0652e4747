"""Checkpoints: arrays in safetensors, everything else in JSON; no pickle, atomic writes.

A checkpoint is a directory::

    policy.safetensors   the policy part of the agent's state (what acting needs)
    resume.safetensors   what exact resume needs on top (absent from policy-only checkpoints)
    state.json           format tag and version, both parts' JSON and checksums, the run's
                         identity, the trainer's counters, and a checksum of all of it

It is written into a temporary sibling directory and renamed into place, so a crash or a
Ctrl-C never leaves a half-written checkpoint behind, and loading one never runs code.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx.errors import CheckpointError
from rlx.files import current_umask, write_bytes_atomic
from rlx.files import write_json_atomic as write_json_atomic  # its old home
from rlx.protocols import AgentState

FORMAT = "rlx-checkpoint"
#: 2: the policy and resume parts in two files (rlx-core 0.1.0); 1 had one arrays file.
FORMAT_VERSION = 2
POLICY_FILE = "policy.safetensors"
RESUME_FILE = "resume.safetensors"
STATE_FILE = "state.json"
PARTS = {"policy": POLICY_FILE, "resume": RESUME_FILE}
#: Markers in the names of a checkpoint being written, and of one renamed aside meanwhile.
TMP_MARK = ".tmp-"
ASIDE_MARK = ".old-"


@dataclass
class Checkpoint:
    """What :func:`load_checkpoint` read: the two parts (``resume`` None in a policy-only
    checkpoint) and the whole JSON document."""

    policy: AgentState
    resume: AgentState | None
    document: dict[str, Any]


def save_checkpoint(
    path: str | os.PathLike[str],
    policy: AgentState,
    resume: AgentState | None = None,
    **extra: Any,
) -> Path:
    """Write the policy (and the resume part, if given) and JSON-ready ``extra`` entries to
    the directory ``path`` atomically."""
    from safetensors.numpy import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}{TMP_MARK}", dir=path.parent))
    os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes 0700 whatever the umask
    try:
        document: dict[str, Any] = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "written_by": f"rlx-core {_core_version()}",
        }
        for part, state in (("policy", policy), ("resume", resume)):
            if state is None:
                continue
            arrays = {  # ascontiguousarray alone would turn 0-d arrays into shape (1,)
                key: np.ascontiguousarray(value).reshape(np.shape(value))
                for key, value in state.arrays.items()
            }
            save_file(arrays, str(tmp / PARTS[part]))
            document[part] = {"sha256": _sha256(tmp / PARTS[part]), "meta": state.meta}
        document = {**document, **extra}
        _write_json(tmp / STATE_FILE, {**document, "checksum": json_checksum(document)})
        for file in tmp.iterdir():  # safetensors writes 0600 whatever the umask
            os.chmod(file, 0o666 & ~current_umask())
        _swap_into_place(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


@functools.lru_cache(maxsize=1)
def _core_version() -> str:
    """rlx-core's installed version (looked up once: the lookup scans the installed packages)."""
    from importlib.metadata import version

    return version("rlx-core")


def load_checkpoint(path: str | os.PathLike[str], resume: bool = True) -> Checkpoint:
    """Read a checkpoint directory (the resume part too unless ``resume=False``).

    A missing, truncated, altered or old-format checkpoint raises :class:`CheckpointError`.
    """
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint at {path}: the directory does not exist")
    document = read_document(path)
    policy = _load_part(path, document, "policy")
    resume_state = _load_part(path, document, "resume") if resume and "resume" in document else None
    return Checkpoint(policy, resume_state, document)


def read_document(path: Path) -> dict[str, Any]:
    """The checked ``state.json`` of the checkpoint at ``path``."""
    state_file = path / STATE_FILE
    if not state_file.is_file():
        raise CheckpointError(f"checkpoint {path} is incomplete: {STATE_FILE} is missing")
    try:
        document = json.loads(state_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"checkpoint {path} is corrupt: {STATE_FILE} is not valid JSON ({exc})"
        ) from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is not an rlx checkpoint ({STATE_FILE} has no rlx format tag)"
        )
    version = document.get("format_version", 0)
    if version != FORMAT_VERSION:
        newer = isinstance(version, int) and version > FORMAT_VERSION
        raise CheckpointError(
            f"checkpoint {path} has format version {version}, "
            + (
                f"newer than this rlx-core reads ({FORMAT_VERSION}); upgrade rlx-core"
                if newer
                else f"written before rlx-core 0.1.0 split policy and resume state; this rlx-core "
                f"reads version {FORMAT_VERSION} only. Train the run again (or load it with the "
                "rlx-core that wrote it)"
            )
        )
    checksum = document.pop("checksum", None)
    if checksum != json_checksum(document):
        raise CheckpointError(
            f"checkpoint {path} is corrupt or was edited: {STATE_FILE} does not match its checksum"
        )
    if not isinstance(document.get("policy"), dict):
        raise CheckpointError(f"checkpoint {path} is incomplete: {STATE_FILE} has no policy")
    return document


def _load_part(path: Path, document: dict[str, Any], part: str) -> AgentState:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    file = path / PARTS[part]
    if not file.is_file():
        raise CheckpointError(f"checkpoint {path} is incomplete: {file.name} is missing")
    entry = document[part]
    if not isinstance(entry, dict) or _sha256(file) != entry.get("sha256"):
        raise CheckpointError(
            f"checkpoint {path} is corrupt: {file.name} does not match its checksum"
        )
    try:
        arrays = load_file(str(file))
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path} is corrupt: {exc}") from exc
    return AgentState(arrays=arrays, meta=entry.get("meta", {}))


def is_number(value: Any) -> bool:
    """Whether a JSON value read back is a finite number (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_count(value: Any) -> bool:
    """Whether a JSON value read back is a non-negative integer (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _write_json(path: Path, data: Any) -> None:
    write_bytes_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())


def json_checksum(document: dict[str, Any]) -> str:
    """SHA-256 of a JSON document in canonical form (as it reads back: string keys, sorted)."""
    canonical = json.dumps(json.loads(json.dumps(document)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tidy(directory: Path) -> list[str]:
    """Clean what an interrupted write left in ``directory``; return what it did.

    A checkpoint being written lives in ``.NAME.tmp-*`` until it is renamed into place:
    a leftover one is incomplete and removed. A checkpoint being replaced is renamed to
    ``.NAME.old-*`` for a moment: if ``NAME`` is then missing, the old copy is put back;
    otherwise it is removed.
    """
    done: list[str] = []
    if not directory.is_dir():
        return done
    for entry in sorted(directory.iterdir()):
        name = entry.name
        if not name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue  # a link is not rlx's: rlx never writes through one
        if TMP_MARK in name:
            shutil.rmtree(entry, ignore_errors=True)
            done.append(f"removed the unfinished checkpoint {entry}")
        elif ASIDE_MARK in name:
            original = directory / name[1:].split(ASIDE_MARK)[0]
            if original.exists():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                os.replace(entry, original)
                done.append(f"restored {original} from {entry.name}")
    return done


def _swap_into_place(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` to ``path``, replacing an existing directory without a window of loss."""
    if not path.exists():
        os.replace(tmp, path)
        return
    old = path.with_name(f".{path.name}{ASIDE_MARK}{os.getpid()}")
    os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)
