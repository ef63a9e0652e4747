"""Seed groups side by side: ``rlx eval G1 G2 ...`` and ``rlx plot G1 G2 ...``.

Each group is named by its directory, as a researcher names the folder of an experiment
(``lake-q``, ``lake-sarsa``); two directories of the same name (``a/run`` and ``b/run``) are
told apart by their parent folders. A single run given among groups counts as a group of one
seed, as it does for :func:`rlx.plotting.plot_groups`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlx.group_results import SeedGroup, evaluate_group, open_group, run_as_group
from rlx.runs import is_group


def group_names(paths: Sequence[str | Path]) -> list[str]:
    """A short, distinct name per path: its directory name, with as many parent folders as
    it takes to tell it from the others (``a/run``, ``b/run``); the same directory given
    twice is numbered (``run``, ``run (2)``), so that every row and curve has its own label."""
    absolute = [Path(os.path.abspath(path)) for path in paths]
    parts = [path.parts[1:] if path.anchor else path.parts for path in absolute]
    depths = [1] * len(parts)

    def name(index: int) -> str:
        return "/".join(parts[index][-depths[index] :]) or str(absolute[index])

    while True:
        names = [name(index) for index in range(len(parts))]
        deeper = [
            index
            for index, shown in enumerate(names)
            if depths[index] < len(parts[index])
            and any(
                names[other] == shown and parts[other] != parts[index]
                for other in range(len(parts))
            )
        ]
        if not deeper:
            break
        for index in deeper:
            depths[index] += 1
    seen: dict[str, int] = {}
    distinct = []
    for shown in names:
        seen[shown] = seen.get(shown, 0) + 1
        distinct.append(shown if seen[shown] == 1 else f"{shown} ({seen[shown]})")
    return distinct


def open_groups(paths: Sequence[str | Path], partial: bool = False) -> list[SeedGroup]:
    """The groups at ``paths`` (:func:`rlx.group_results.open_group`, with ``partial`` as
    there), a run directory among them as a group of its one seed."""
    return [open_group(path, partial) if is_group(path) else run_as_group(path) for path in paths]


def compare_groups(
    groups: Sequence[SeedGroup],
    names: Sequence[str],
    episodes: int,
    seed: int | None = None,
    best: bool = False,
    trust_code: bool = False,
    device: str | None = None,
) -> dict[str, Any]:
    """Evaluate every group as ``rlx eval GROUP`` does (:func:`evaluate_group`); a JSON-ready
    document ``{"policy", "groups": [{"name", "group", "agent", "env", "seeds", "left_out",
    "aggregate"}, ...]}`` in the order given."""
    documents = [
        {"name": name, **evaluate_group(group, episodes, seed, best, trust_code, device)}
        for group, name in zip(groups, names, strict=True)
    ]
    for document in documents:
        del document["policy"]
    return {"policy": "best" if best else "latest", "groups": documents}


def interval_text(estimate: dict[str, float]) -> str:
    """``value [low, high]`` of one statistic of :func:`rlx.statistics.summarize`."""
    return f"{estimate['value']:.3f} [{estimate['low']:.3f}, {estimate['high']:.3f}]"
