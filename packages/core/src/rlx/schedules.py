"""Schedules of a hyperparameter over training (exploration rates, learning rates, clip ranges)."""

from __future__ import annotations

from typing import Any

import numpy as np


def linear(step: Any, start: float, end: float, duration: float | None) -> Any:
    """``start`` at step 0, moving linearly to ``end`` at step ``duration``, then ``end``.

    ``duration=None`` (a schedule whose length is not known) keeps ``start`` throughout;
    ``duration=0`` is ``end`` from the first step.
    """
    if duration is None:
        return start
    if isinstance(step, np.ndarray):  # one step count per seed of a seed batch
        done = np.clip(step / duration, 0.0, 1.0) if duration > 0 else np.ones(step.shape)
        return end + (start - end) * (1.0 - done)
    if step >= duration:
        return end
    return end + (start - end) * (1.0 - step / duration)
