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
import os
from collections.abc import Mapping
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
    #: Seeds of group.json left out because they have no checkpoint (``open_group(partial)``).
    left_out: tuple[int, ...] = ()

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


def open_group(path: str | Path, partial: bool = False) -> SeedGroup:
    """The group at ``path``; a missing marker, a bad group.json, a seed directory that is a
    link or another run's (:func:`check_seed_run`) or a missing one is a
    :class:`CheckpointError` naming what is wrong. With ``partial`` (``rlx eval``), seeds
    without a checkpoint are left out and named in :attr:`SeedGroup.left_out` instead."""
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
    runs = tuple(check_seed_runs(path, document))
    if partial:
        kept = [(seed, run) for seed, run in zip(seeds, runs, strict=True) if _has_checkpoint(run)]
        if not kept:
            raise CheckpointError(f"{path}: no seed of the group has a checkpoint yet")
        left_out = tuple(seed for seed in seeds if seed not in {k for k, _ in kept})
        return SeedGroup(
            path, document["agent"], document["env"], tuple(k for k, _ in kept),
            tuple(run for _, run in kept), left_out,
        )  # fmt: skip
    missing = [str(seed) for seed, run in zip(seeds, runs, strict=True) if not run.is_dir()]
    if missing:
        raise CheckpointError(
            f"{path} is missing the run directories of seed{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (seed-<k>/); rlx aggregates only complete groups"
        )
    return SeedGroup(path, document["agent"], document["env"], tuple(seeds), runs)


def _has_checkpoint(run: Path) -> bool:
    try:
        return run.is_dir() and RunDirectory(run).has_checkpoint()
    except CheckpointError:
        return False


def check_seed_run(group: Path, record: Mapping[str, Any], seed: int) -> Path:
    """The run directory of ``seed`` in ``group``, refused (a :class:`CheckpointError`) when it
    is a symbolic link, not a directory, or a run other than the one group.json makes for
    ``seed`` (another seed, agent, environment, environment arguments, wrappers or
    hyperparameters: a seed directory swapped or copied in). A missing directory, or one
    without config.json yet, is returned as it is: the caller decides what that means."""
    run = group / f"seed-{seed}"
    if run.is_symlink():
        raise CheckpointError(
            f"{run} is a symbolic link (to {os.readlink(run)}): rlx never follows a link out of "
            "a group, where resuming would write into another run; remove the link (the seed "
            "then trains again from scratch) or put the seed's own directory there"
        )
    if not run.exists():
        return run
    if not run.is_dir():
        raise CheckpointError(f"{run} is not a directory; remove it or put seed {seed}'s run there")
    config_file = run / "config.json"
    if config_file.is_symlink() or not config_file.exists():
        return run  # RunDirectory refuses the link, and says what a missing config.json means
    config = _read_json(config_file)
    problem = _disagreement(record, config, seed) if isinstance(config, dict) else "no table"
    if problem:
        raise CheckpointError(
            f"{config_file} is not seed {seed} of the group {group} ({problem}): a seed directory "
            "moved, swapped or copied in from another run; put the seed's own run there, or "
            "remove it to train the seed again"
        )
    return run


def check_seed_runs(group: Path, record: Mapping[str, Any]) -> list[Path]:
    """:func:`check_seed_run` for every seed of group.json, and the seeds' runs held to one
    another: all are made alike but for their seed (environment arguments, wrappers,
    hyperparameters), so a run copied in from elsewhere is told apart from its siblings."""
    runs = [check_seed_run(group, record, seed) for seed in record["seeds"]]
    first: tuple[Path, dict[str, Any]] | None = None
    for run in runs:
        config_file = run / "config.json"
        if config_file.is_symlink() or not config_file.is_file():
            continue
        config = _read_json(config_file)
        alike = {
            "env_kwargs": config.get("env_kwargs") or {},
            "wrappers": config.get("wrappers") or [],
            "hyperparameters": {
                k: v for k, v in (config.get("hyperparameters") or {}).items() if k != "device"
            },
        }
        if first is None:
            first = (run, alike)
            continue
        for key, value in alike.items():
            if value != first[1][key]:
                raise CheckpointError(
                    f"{config_file} records other {key} than {first[0] / 'config.json'}, though "
                    f"every seed of the group {group} is made alike: a seed directory copied in "
                    "from another run; put the seed's own run there, or remove it to train the "
                    "seed again"
                )
    return runs


def _disagreement(record: Mapping[str, Any], config: Mapping[str, Any], seed: int) -> str:
    """What in a seed's config.json differs from what group.json makes for ``seed``, or ""."""
    import dataclasses

    from rlx.config import _coerce, _field_types
    from rlx.discovery import agent_spec
    from rlx.errors import RlxError
    from rlx.wrappers import normalize

    if config.get("seed") != seed:
        return f"it records seed {config.get('seed')!r}"
    for key in ("agent", "env"):
        if config.get(key) != record.get(key):
            return f"it records {key} {config.get(key)!r}, group.json {record.get(key)!r}"
    # what group.json gives (tuned settings may add to it, so the seed's may hold more)
    env_kwargs = config.get("env_kwargs") or {}
    for key, value in dict(record.get("env_kwargs") or {}).items():
        if not isinstance(env_kwargs, dict) or env_kwargs.get(key) != value:
            return f"it records env_kwargs {env_kwargs!r}, group.json {key}={value!r}"
    try:
        wrappers = normalize(config.get("wrappers") or ())
        missing = any(w not in wrappers for w in normalize(record.get("wrappers") or ()))
    except RlxError:
        missing = True
    if missing:
        return f"it records the wrappers {config.get('wrappers')!r}"
    saved = config.get("hyperparameters") or {}
    given = record.get("hyperparameters") or {}
    if ":" in str(record["agent"]):
        return ""  # a module:Class agent is not imported to read its settings
    try:
        config_cls = agent_spec(str(record["agent"])).load().Config
        hints = _field_types(config_cls)
        fields = {field.name for field in dataclasses.fields(config_cls)}
    except (RlxError, ImportError, TypeError):
        return ""  # an agent that cannot be loaded here: its run says why when it is used
    for key, value in given.items():
        if key == "device" or key not in fields:
            continue  # --device moves a run; an unknown key is refused when it is built
        try:
            wanted = json.loads(json.dumps(_coerce(key, value, hints[key]), default=str))
        except (RlxError, TypeError, ValueError):
            continue
        if saved.get(key) != wanted:
            return f"it records {key}={saved.get(key)!r}, group.json {value!r}"
    return ""


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
    resume) the later one counts. The final evaluation of a step budget that is not a
    multiple of ``eval_every`` is placed at the budget (the seeds line up there too), and one
    before the first multiple (a run that evaluates only at the end) keeps its step.
    """
    run = RunDirectory.open(run_path)
    if not run.metrics_file.is_file():
        raise CheckpointError(f"{run.path} has no {run.metrics_file.name} to plot")
    trainer = run.read_config().get("trainer")
    every = trainer.get("eval_every") if isinstance(trainer, dict) else None
    every = every if isinstance(every, int) and not isinstance(every, bool) and every > 0 else 1
    budget = trainer.get("steps") if isinstance(trainer, dict) else None
    budget = budget if isinstance(budget, int) and not isinstance(budget, bool) else None
    _, rows = read_metrics(run.metrics_file)
    returns: dict[int, float] = {}
    for row in rows:
        if row.get(EVAL_COLUMN):
            try:
                step, value = int(row["env_steps"]), float(row[EVAL_COLUMN])
            except (KeyError, ValueError) as exc:
                raise CheckpointError(f"{run.metrics_file} has a malformed row: {exc}") from exc
            due = step // every * every
            if budget is not None and step >= budget:
                due = max(due, budget)
            returns[due if due > 0 else step] = value
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
        "left_out": list(group.left_out),
        "aggregate": summarize([entry["mean_return"] for entry in per_seed]),
    }
