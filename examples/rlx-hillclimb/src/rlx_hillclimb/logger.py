"""A logger plugin: every metrics row as one JSON object a line, in ``RUN_DIR/metrics.jsonl``.

It shows the three methods of :class:`rlx.loggers.Logger`; JSON lines are what ``jq`` and
most log shippers read without a schema.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlx.loggers import RunInfo


class JsonLinesLogger:
    """Appends ``{"step": ..., <metric>: ...}`` per row; ``finish`` adds a line with how the
    run ended. ``file`` is the file name inside the run directory."""

    def __init__(self, file: str = "metrics.jsonl") -> None:
        # Options only: the trainer builds loggers before it writes anything.
        if not file or Path(file).name != file:
            raise ValueError(f"file must be a plain file name, got {file!r}")
        self.file = file
        self._path: Path | None = None

    def start(self, run: RunInfo) -> None:
        """Log to ``RUN_DIR/<file>``, emptied for a new run and appended to when the run resumes;
        a run without a directory logs nothing."""
        if run.run_dir is not None:
            self._path = run.run_dir / self.file
            if run.resumed is None:
                self._path.write_text("")

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        """Append one line ``{"step": step, ...row}``, NaN and infinities as null."""
        if self._path is not None:
            values = {key: _plain(value) for key, value in row.items()}
            self._write({"step": step, **values})

    def finish(self, result: Any) -> None:
        """Append ``{"event": "end", "stop_reason": ...}`` (``error`` when the run failed and
        ``result`` is None)."""
        if self._path is not None:
            ended = {"event": "end", "stop_reason": getattr(result, "stop_reason", "error")}
            self._write(ended)

    def _write(self, document: dict[str, Any]) -> None:
        assert self._path is not None
        with open(self._path, "a") as f:
            f.write(json.dumps(document) + "\n")


def _plain(value: Any) -> Any:
    """JSON has no NaN or infinity: those become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
