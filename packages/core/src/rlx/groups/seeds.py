"""The seeds of a group: ``--seeds`` parsed and checked, the group's default folder, and
each seed's run directory in it."""

from __future__ import annotations

import collections
import os
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError

#: More seeds than this in one ``--seeds`` is surely a typo (``0-100000``).
MAX_SEEDS = 10_000


def parse_seeds(text: str) -> list[int]:
    """``"0-15"``, ``"0,3,7"`` or ``"0-3,9"`` as the list of seeds, in the order given.

    Ranges include both ends. An empty, negative, reversed, duplicate or malformed entry is
    one :class:`~rlx.errors.ConfigError`.
    """
    from rlx.seeding import MAX_SEED

    example = "give seeds as a range A-B, a list 0,3,7 or both (0-3,9)"
    seeds: list[int] = []
    for token in text.split(","):
        match = re.fullmatch(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", token)
        if match is None:
            shown = token.strip()
            what = "an empty entry" if not shown else f"{shown!r} is not a seed or a range"
            raise ConfigError(f"--seeds {text!r}: {what}; {example}")
        first, last = int(match[1]), int(match[2] if match[2] is not None else match[1])
        if last < first:
            raise ConfigError(f"--seeds {text!r}: the range {token.strip()} goes down; {example}")
        if last > MAX_SEED:
            raise ConfigError(f"--seeds {text!r}: seeds must lie in [0, {MAX_SEED}]")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise ConfigError(f"--seeds {text!r}: more than {MAX_SEEDS} seeds")
        seeds += range(first, last + 1)
    return check_seeds(seeds, f"--seeds {text!r}")


def check_seeds(seeds: Iterable[Any], what: str = "seeds") -> list[int]:
    """``seeds`` as a list of distinct valid seeds, or one ConfigError."""
    from rlx.seeding import check_seed

    listed = list(seeds)
    if not listed:
        raise ConfigError(f"{what}: no seeds given")
    if len(listed) > MAX_SEEDS:
        raise ConfigError(f"{what}: more than {MAX_SEEDS} seeds")
    checked = [check_seed(seed, f"{what}: a seed") for seed in listed]
    repeated = sorted(seed for seed, count in collections.Counter(checked).items() if count > 1)
    if repeated:
        raise ConfigError(f"{what}: seed {repeated[0]} is given twice; each seed runs once")
    return checked


def check_jobs(jobs: Any, seeds: int) -> int:
    """The number of worker processes: ``jobs``, or one per core; at most one per seed."""
    if jobs is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        return max(1, min(cores or os.cpu_count() or 1, seeds))
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= seeds:
        raise ConfigError(
            f"--jobs must be an integer from 1 to the number of seeds ({seeds}), got {jobs!r}"
        )
    return jobs


def default_group_path(root: str | Path, agent: str, env_id: str, seeds: Sequence[int]) -> Path:
    """``ROOT/<agent>-<env>-seeds<first>-<last>-<UTC time>``, unsafe characters replaced."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{agent}-{env_id}-seeds{seeds[0]}-{seeds[-1]}-{stamp}")
    path, suffix = Path(root) / name, 1
    while path.exists():
        suffix += 1
        path = Path(root) / f"{name}-{suffix}"
    return path


def seed_dir(group: Path, seed: int) -> Path:
    """The run directory of ``seed`` in the group at ``group``: ``<group>/seed-<seed>``."""
    return group / f"seed-{seed}"
