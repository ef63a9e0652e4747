"""Errors that rlx reports to users as one clear message (exit code 2 on the command line)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RlxError(Exception):
    """Base class for every error caused by user input: the CLI prints it without a traceback."""

    exit_code = 2


class UnknownNameError(RlxError, KeyError):
    """An agent, environment or hyperparameter name that does not exist."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class ConfigError(RlxError, ValueError):
    """A hyperparameter or trainer setting with a wrong type or an out-of-range value."""


class SpaceError(RlxError, TypeError):
    """An environment whose observation or action space the agent cannot handle."""


class CheckpointError(RlxError):
    """A run directory or checkpoint that is missing, incomplete or corrupt."""


class EnvironmentNeededError(RlxError):
    """An agent loaded without its environment (``rlx.load(path, make_env=False)``) was asked
    to step it: building, training or evaluating it on ``agent.env`` needs the real one."""


class UntrustedCodeError(RlxError):
    """Saved files (a run directory, a checkpoint) name code to import, and the user has not
    said they trust them (``trust_code=True``, ``--trust-code``)."""


class PluginError(RlxError):
    """A plugin that failed to load or that conflicts with another plugin."""


class TrainingError(RlxError):
    """Training cannot go on (a loss became NaN, ...); raised before the bad update is applied.

    The trainer stops, writes nothing more and names the last good checkpoint.
    """


class NotBatchable(RlxError):
    """Seeds that an agent cannot train as one batched computation (their settings need
    something the batched update lacks); the message says what, and the seeds train one by
    one instead."""


def did_you_mean(name: str, candidates: Iterable[str], n: int = 3) -> str:
    """Return ' Did you mean: a, b?' for the closest candidates, or '' when none is close."""
    matches = difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.5)
    if not matches:
        lowered = name.lower()
        matches = [c for c in candidates if lowered in c.lower()][:n]
    return f" Did you mean: {', '.join(matches)}?" if matches else ""
