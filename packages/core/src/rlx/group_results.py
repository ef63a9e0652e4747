"""Reading a seed group's results for ``rlx eval`` and ``rlx plot``.

A group directory (written by the group runner) holds one complete run per seed::

    GROUP/
      .rlx-group     {"format": "rlx-group", "version": 1}: the marker that makes it a group
      group.json     {"agent", "env", "seeds": [...], ...}
      seed-<k>/      an ordinary run directory for each seed k of group.json
      summary.json   written by the group runner when every seed has finished

The layout is :mod:`rlx.groups`'s, which writes it. Only reading happens here; a group with
a seed directory missing is refused as a whole (one message naming the missing seeds), since
an aggregate over the seeds that happen to be there would silently drop the runs that failed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlx.errors import CheckpointError
from rlx.runs import GROUP_FILE, GROUP_MARKER, RunDirectory, is_group, read_metrics

EVAL_COLUMN = "eval/return_mean"

if TYPE_CHECKING:
    from rlx.statistics import Curve


@dataclass(frozen=True)
class SeedGroup:
    """A group's identity and its seeds' run directories (``runs[i]`` holds ``seeds[i]``)."""

    path: Path
    agent: str
    env: str
    seeds: tuple[int, ...]
    runs: tuple[Path, ...]

    @property
    def label(self) -> str:
        """``<agent> on <env> (<n> seeds)``, for titles and tables."""
        count = len(self.seeds)
        return f"{self.agent} on {self.env} ({count} seed{'s' if count != 1 else ''})"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is unreadable: {exc}") from exc


def open_group(path: str | Path) -> SeedGroup:
    """The group at ``path``; a missing marker, a bad group.json or a missing seed directory is
    a :class:`CheckpointError` naming what is wrong."""
    path = Path(path)
    if not is_group(path):
        raise CheckpointError(f"{path} is not an rlx seed group: {GROUP_MARKER} is missing")
    marker = _read_json(path / GROUP_MARKER)
    if not isinstance(marker, dict) or marker.get("format") != "rlx-group":
        raise CheckpointError(f"{path / GROUP_MARKER} is not an rlx group marker")
    if marker.get("version") != 1:
        raise CheckpointError(
            f"{path} is a group of format version {marker.get('version')!r}; this rlx reads "
            "version 1 (upgrade rlx-core)"
        )
    document = _read_json(path / GROUP_FILE)
    seeds = document.get("seeds") if isinstance(document, dict) else None
    if (
        not isinstance(document, dict)
        or not isinstance(document.get("agent"), str)
        or not isinstance(document.get("env"), str)
        or not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(seed, int) and not isinstance(seed, bool) for seed in seeds)
    ):
        raise CheckpointError(
            f"{path / GROUP_FILE} is incomplete: it needs agent, env and a list of integer seeds"
        )
    runs = tuple(path / f"seed-{seed}" for seed in seeds)
    missing = [str(seed) for seed, run in zip(seeds, runs, strict=True) if not run.is_dir()]
    if missing:
        raise CheckpointError(
            f"{path} is missing the run directories of seed{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (seed-<k>/); rlx aggregates only complete groups"
        )
    return SeedGroup(path, document["agent"], document["env"], tuple(seeds), runs)


def run_as_group(path: str | Path) -> SeedGroup:
    """A single run directory as a group of one seed (for plotting it beside groups)."""
    run = RunDirectory(path)
    if run.path.is_dir() and not run.config_file.is_file():
        raise CheckpointError(
            f"{run.path} is neither an rlx run directory nor a seed group "
            f"(it has no config.json and no {GROUP_MARKER})"
        )
    run = RunDirectory.open(path)
    config = run.read_config()
    return SeedGroup(
        run.path, str(config["agent"]), str(config["env"]), (int(config["seed"]),), (run.path,)
    )


def evaluation_curve(run_path: Path) -> tuple[list[int], list[float]]:
    """A run's evaluation returns against environment steps, from its metrics.csv, each step
    snapped to the evaluation schedule so that the seeds of a group line up.

    The trainer evaluates at the end of the first iteration that reaches a multiple of
    ``eval_every``, so each seed evaluates a few steps past it (one episode, for tabular
    agents), never at the same step as another seed. An evaluation at step ``s`` is placed at
    the multiple it was due at, ``s // eval_every * eval_every``; of two evaluations due at
    the same multiple (a final evaluation soon after a periodic one, or one repeated after a
    resume) the later one counts. A run that evaluates only at the end keeps its steps.
    """
    run = RunDirectory.open(run_path)
    if not run.metrics_file.is_file():
        raise CheckpointError(f"{run.path} has no {run.metrics_file.name} to plot")
    trainer = run.read_config().get("trainer")
    every = trainer.get("eval_every") if isinstance(trainer, dict) else None
    every = every if isinstance(every, int) and not isinstance(every, bool) and every > 0 else 1
    _, rows = read_metrics(run.metrics_file)
    returns: dict[int, float] = {}
    for row in rows:
        if row.get(EVAL_COLUMN):
            try:
                step, value = int(row["env_steps"]), float(row[EVAL_COLUMN])
            except (KeyError, ValueError) as exc:
                raise CheckpointError(f"{run.metrics_file} has a malformed row: {exc}") from exc
            returns[step // every * every] = value
    return list(returns), list(returns.values())


def group_curve(group: SeedGroup, statistic: str = "iqm") -> Curve:
    """``statistic`` over the group's seeds of the evaluation return at each scheduled
    evaluation step (:func:`evaluation_curve`), with its 95% bootstrap interval."""
    from rlx.statistics import curve

    series = [evaluation_curve(run) for run in group.runs]
    if not any(steps for steps, _ in series):
        raise CheckpointError(f"{group.path} holds no evaluation returns yet")
    return curve([steps for steps, _ in series], [values for _, values in series], statistic)


def evaluate_group(
    group: SeedGroup,
    episodes: int,
    seed: int | None = None,
    best: bool = False,
    trust_code: bool = False,
    device: str | None = None,
) -> dict[str, Any]:
    """Evaluate every seed's policy as ``rlx eval`` evaluates one run; a JSON-ready document.

    Each seed's episodes follow the single-run rule: the run's own seed, or ``seed`` for all.
    ``aggregate`` is :func:`rlx.statistics.summarize` of the seeds' mean returns.
    """
    from rlx.api import evaluation_env, identity_of, load
    from rlx.evaluation import evaluate
    from rlx.statistics import summarize

    per_seed = []
    for group_seed, run_path in zip(group.seeds, group.runs, strict=True):
        path = run_path / "best" if best else run_path
        if best and not path.is_dir():
            raise CheckpointError(f"{run_path} has no best policy (it was never evaluated)")
        agent = load(path, resume=False, trust_code=trust_code, device=device)
        identity = identity_of(agent)
        eval_seed = identity.seed if seed is None else seed
        result = evaluate(agent, evaluation_env(agent), episodes, seed=eval_seed, progress=True)
        per_seed.append(
            {
                "seed": group_seed,
                "run_dir": str(run_path),
                "eval_seed": eval_seed,
                **result.to_dict(),
            }
        )
    return {
        "group": str(group.path),
        "agent": group.agent,
        "env": group.env,
        "policy": "best" if best else "latest",
        "seeds": per_seed,
        "aggregate": summarize([entry["mean_return"] for entry in per_seed]),
    }
