"""Where training metrics go: ``metrics.csv`` in the run directory and TensorBoard."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any


class CsvLogger:
    """Appends one row per log event to a CSV file; a new metric name widens the header.

    On resume the file is cut back to the rows that existed when the checkpoint was taken,
    so a resumed run's file equals an uninterrupted run's.
    """

    def __init__(self, path: Path, keep_rows: int | None = None) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []
        self.columns: list[str] = []
        if keep_rows is not None and path.exists():
            from rlx.runs import read_metrics

            self.columns, rows = read_metrics(path)
            self.rows = rows[:keep_rows]
            self._rewrite()

    def log(self, row: dict[str, Any]) -> None:
        row = {key: _format(value) for key, value in row.items()}
        self.rows.append(row)
        new = [key for key in row if key not in self.columns]
        if new or not self.path.exists():
            self.columns += new
            self._rewrite()
        else:
            with open(self.path, "a", newline="") as f:
                csv.DictWriter(f, self.columns).writerow(row)

    def _rewrite(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, self.columns)
            writer.writeheader()
            writer.writerows(self.rows)
        tmp.replace(self.path)


def _format(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.6g}"
    return value


class TensorBoardLogger:
    """Writes scalars as TensorBoard events with the ``tensorboard`` package (no torch, no TF)."""

    def __init__(self, logdir: Path) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._writer = EventFileWriter(str(logdir))

    @staticmethod
    def available() -> bool:
        import importlib.util

        return importlib.util.find_spec("tensorboard") is not None

    def log(self, step: int, scalars: dict[str, float], wall_time: float) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = [
            Summary.Value(tag=tag, simple_value=float(value))
            for tag, value in scalars.items()
            if isinstance(value, (int, float))
        ]
        self._writer.add_event(Event(wall_time=wall_time, step=step, summary=Summary(value=values)))

    def close(self) -> None:
        self._writer.close()
