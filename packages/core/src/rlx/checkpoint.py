"""Checkpoints: arrays in safetensors, everything else in JSON; no pickle, atomic writes.

A checkpoint is a directory holding ``arrays.safetensors`` and ``state.json``. It is
written into a temporary sibling directory and renamed into place, so a crash or a
Ctrl-C never leaves a half-written checkpoint behind, and loading one never runs code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from rlx.errors import CheckpointError
from rlx.protocols import AgentState

FORMAT = "rlx-checkpoint"
FORMAT_VERSION = 1
ARRAYS_FILE = "arrays.safetensors"
STATE_FILE = "state.json"


def save_checkpoint(path: str | os.PathLike[str], state: AgentState, **extra: Any) -> Path:
    """Write ``state`` (and JSON-ready ``extra`` entries) to the directory ``path`` atomically."""
    from safetensors.numpy import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        arrays = {  # ascontiguousarray alone would turn 0-d arrays into shape (1,)
            key: np.ascontiguousarray(value).reshape(np.shape(value))
            for key, value in state.arrays.items()
        }
        save_file(arrays, str(tmp / ARRAYS_FILE))
        document = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "arrays_sha256": _sha256(tmp / ARRAYS_FILE),
            "meta": state.meta,
            **extra,
        }
        _write_json(tmp / STATE_FILE, document)
        _swap_into_place(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def load_checkpoint(path: str | os.PathLike[str]) -> tuple[AgentState, dict[str, Any]]:
    """Read a checkpoint directory; returns the agent state and the whole JSON document.

    A missing, truncated or altered checkpoint raises :class:`CheckpointError`.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint at {path}: the directory does not exist")
    state_file, arrays_file = path / STATE_FILE, path / ARRAYS_FILE
    for file in (state_file, arrays_file):
        if not file.is_file():
            raise CheckpointError(f"checkpoint {path} is incomplete: {file.name} is missing")
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
    if document.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path} has format version {document['format_version']}, newer than this "
            f"rlx-core reads ({FORMAT_VERSION}); upgrade rlx-core"
        )
    if _sha256(arrays_file) != document.get("arrays_sha256"):
        raise CheckpointError(
            f"checkpoint {path} is corrupt: {ARRAYS_FILE} does not match its checksum"
        )
    try:
        arrays = load_file(str(arrays_file))
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path} is corrupt: {exc}") from exc
    return AgentState(arrays=arrays, meta=document.get("meta", {})), document


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON to ``path`` through a temporary file and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        _write_json(Path(tmp), data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_json(path: Path, data: Any) -> None:
    with open(path, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _swap_into_place(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` to ``path``, replacing an existing directory without a window of loss."""
    if not path.exists():
        os.replace(tmp, path)
        return
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    os.replace(path, old)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)
