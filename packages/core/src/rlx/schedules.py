"""Schedules of a hyperparameter over training (exploration rates, learning rates, clip ranges)."""

from __future__ import annotations


def linear(step: float, start: float, end: float, duration: float | None) -> float:
    """``start`` at step 0, moving linearly to ``end`` at step ``duration``, then ``end``.

    ``duration=None`` (a schedule whose length is not known) keeps ``start`` throughout;
    ``duration=0`` is ``end`` from the first step.
    """
    if duration is None:
        return start
    if step >= duration:
        return end
    return end + (start - end) * (1.0 - step / duration)
