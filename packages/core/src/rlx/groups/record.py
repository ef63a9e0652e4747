"""A group's records on disk: group.json read and checked (its batches included), what a
resume finds in each seed's directory, and summary.json's earlier entries."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlx.errors import CheckpointError, ConfigError
from rlx.groups.seeds import check_jobs, check_seeds
from rlx.groups.worker import batches_seeds
from rlx.runs import GROUP_FILE, is_group

SUMMARY_FILE = "summary.json"


def _new_task(
    record: Mapping[str, Any],
    seed: int,
    directory: Path,
    settings: Mapping[str, Any],
    trust_code: bool,
) -> dict[str, Any]:
    return {
        "seed": seed,
        "mode": "new",
        "run": {
            "agent": record["agent"],
            "env": record["env"],
            "seed": seed,
            "hyperparameters": dict(record.get("hyperparameters") or {}),
            "settings": dict(settings),
            "wrappers": list(record.get("wrappers") or ()),
            "env_kwargs": dict(record.get("env_kwargs") or {}),
            "init_from": record.get("init_from"),
            "trust_code": trust_code,
            "tuned": bool(record.get("tuned", False)),
            "out": str(directory),
        },
    }


def _check_new_group(path: Path) -> None:
    from rlx.runs import RunDirectory

    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        hint = f"; continue that group with --resume {path}" if is_group(path) else ""
        raise CheckpointError(f"{path} already exists and is not empty; pass another --out{hint}")
    RunDirectory.check_new(path)  # a file in its place, a parent that is not writable


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path} is unreadable: {exc}") from exc


def _read_group(group: Path) -> dict[str, Any]:
    """group.json of the group at ``group``, checked."""
    if not is_group(group):
        from rlx.runs import group_marker_problem

        raise CheckpointError(f"{group} is not a seed group: {group_marker_problem(group)}")
    record = _read_json(group / GROUP_FILE)
    if not isinstance(record, dict):
        raise CheckpointError(f"{group / GROUP_FILE} is not a JSON object")
    for key, kind in (("agent", str), ("env", str), ("seeds", list), ("settings", dict)):
        if not isinstance(record.get(key), kind):
            raise CheckpointError(
                f"{group / GROUP_FILE}: {key} is missing or not a {kind.__name__}"
            )
    try:
        check_seeds(record["seeds"])
    except ConfigError as exc:
        raise CheckpointError(f"{group / GROUP_FILE}: {exc}") from None
    for key in ("hyperparameters", "env_kwargs"):
        if not isinstance(record.get(key) or {}, dict):
            raise CheckpointError(f"{group / GROUP_FILE}: {key} must be a JSON object")
    wrappers = record.get("wrappers") or []
    if not isinstance(wrappers, list) or not all(
        isinstance(entry, dict) and isinstance(entry.get("name"), str) for entry in wrappers
    ):
        raise CheckpointError(f"{group / GROUP_FILE}: wrappers must be a list of tables")
    if not isinstance(record.get("init_from"), (str, type(None))):
        raise CheckpointError(f"{group / GROUP_FILE}: init_from must be a path or null")
    if not isinstance(record.get("tuned", False), bool):
        raise CheckpointError(f"{group / GROUP_FILE}: tuned must be true or false")
    _check_layout(record, group / GROUP_FILE)
    return record


def _check_layout(record: Mapping[str, Any], source: Path) -> None:
    """group.json's batches (``chunks``, ``jobs``, ``batched``), when recorded: each seed of
    the group in at most one batch, a whole number of workers."""
    if "chunks" not in record:
        return
    chunks, seeds, seen = record["chunks"], set(record["seeds"]), set()
    if not isinstance(chunks, list) or not all(isinstance(c, list) for c in chunks):
        raise CheckpointError(f"{source}: chunks must be a list of lists of seeds")
    for seed in (seed for chunk in chunks for seed in chunk):
        if seed not in seeds or seed in seen or isinstance(seed, bool):
            raise CheckpointError(
                f"{source}: chunks names seed {seed!r} twice or outside the group's seeds"
            )
        seen.add(seed)
    jobs = record.get("jobs")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise CheckpointError(f"{source}: jobs must be a whole number >= 1, got {jobs!r}")
    if not isinstance(record.get("batched", True), bool):
        raise CheckpointError(f"{source}: batched must be true or false")


def _check_trusted(record: dict[str, Any], group: Path, given: Iterable[str] = ()) -> None:
    """Refuse, without ``trust_code``, a group.json that would import code, make an
    unregistered environment or send data outside the group when its seeds are built from it
    (:func:`rlx.recorded.check_record`: only registered names load by default, as for any run)."""
    from rlx.recorded import check_record

    check_record(record, str(group / GROUP_FILE), given)


def _layout_on_resume(
    record: Mapping[str, Any], jobs: int | None, batched: bool, tasks: Sequence[dict[str, Any]]
) -> tuple[list[list[int]] | None, int, list[str]]:
    """The batches a resumed group trains its seeds in, its number of workers and notices.

    Without ``--jobs`` (or with the recorded one) the seeds are batched as group.json records,
    so that the group ends as an uninterrupted one; another ``--jobs`` batches them anew, and
    a notice says the result will differ. A batch whose seeds' newest checkpoints are at
    different steps (the group was killed between them) cannot resume exactly: a notice says
    that too."""
    recorded, recorded_jobs = record.get("chunks"), record.get("jobs")
    recorded_batched = record.get("batched", True)
    notices: list[str] = []
    if recorded is None or not isinstance(recorded_jobs, int):  # written before rlx recorded it
        return None, check_jobs(jobs, len(tasks)), notices
    batches = batches_seeds(record["agent"]) and (batched or recorded_batched)
    if (jobs is None or jobs == recorded_jobs) and batched == recorded_batched:
        layout: list[list[int]] | None = recorded
        workers = max(1, min(recorded_jobs, len(tasks)))  # fewer seeds left than recorded
    else:
        layout, workers = None, check_jobs(jobs, len(tasks))
        if batches:
            given = f"--jobs {jobs}" if jobs is not None else "--no-batched"
            notices.append(
                f"{given} batches the seeds otherwise than the group was started with "
                f"(--jobs {recorded_jobs}{'' if recorded_batched else ', --no-batched'}): "
                "a seed's rounding depends on the seeds batched with it, so the result will "
                "differ from an uninterrupted group's"
            )
    if batches:
        steps = {
            task["seed"]: _newest_iteration(Path(task["path"])) for task in tasks if "path" in task
        }
        for chunk in recorded:
            reached = {steps[seed] for seed in chunk if seed in steps}
            if len(reached) > 1:
                shown = ", ".join(f"{n:,}" for n in sorted(reached))
                notices.append(
                    f"seeds {', '.join(map(str, chunk))} train as one batch, but their newest "
                    f"checkpoints are at different iterations ({shown}): "
                    "the group stopped between them, so these seeds will not equal an "
                    "uninterrupted group's"
                )
    return layout, workers, notices


def _newest_iteration(directory: Path) -> int:
    """The iterations of a run's newest checkpoint (0 when it has none): the seeds of one
    batch step together, so theirs are equal unless the group stopped between checkpoints."""
    from rlx.checkpoint import STATE_FILE
    from rlx.runs import RunDirectory

    try:
        run = RunDirectory(directory)
        if not run.has_resumable():
            return 0
        return int(_read_json(run.latest_checkpoint() / STATE_FILE)["trainer"]["iterations"])
    except (CheckpointError, KeyError, TypeError, ValueError):
        return -1


def _read_summary(group: Path) -> list[dict[str, Any]]:
    """The per-seed entries of an earlier summary.json (none when it is missing or odd)."""
    try:
        summary = json.loads((group / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    runs = summary.get("runs") if isinstance(summary, dict) else None
    if not isinstance(runs, list):
        return []
    return [e for e in runs if isinstance(e, dict) and isinstance(e.get("seed"), int)]


def _final_state(directory: Path) -> dict[str, Any] | None:
    """The trainer state of the run's final/ checkpoint when it is the newest, else None."""
    from rlx.checkpoint import STATE_FILE
    from rlx.runs import RunDirectory

    run = RunDirectory(directory)
    try:
        if not run.has_resumable() or run.latest_checkpoint().name != "final":
            return None
    except CheckpointError:
        return None
    document = _read_json(run.final / STATE_FILE)
    state = document.get("trainer") if isinstance(document, dict) else None
    return state if isinstance(state, dict) else None


def _budget_spent(state: dict[str, Any], directory: Path, overrides: Mapping[str, Any]) -> bool:
    """Whether the run stopped on its own (not interrupted) with a budget used up under its
    settings with ``overrides``: :meth:`rlx.trainer.Trainer.resume` would refuse it."""
    from rlx.config import build_config
    from rlx.runs import RunDirectory
    from rlx.trainer import TrainerConfig

    if state.get("stop_reason") == "interrupted":
        return False
    saved = RunDirectory(directory).read_config().get("trainer") or {}
    config = build_config(TrainerConfig, {**saved, **overrides})
    counts = {key: state.get(key) for key in ("env_steps", "iterations", "elapsed")}
    if not all(isinstance(value, (int, float)) for value in counts.values()):
        return False
    return (
        (config.steps is not None and counts["env_steps"] >= config.steps)
        or (config.iterations is not None and counts["iterations"] >= config.iterations)
        or (config.time_limit is not None and counts["elapsed"] >= config.time_limit)
    )


def _entry_from_state(seed: int, directory: Path, state: dict[str, Any]) -> dict[str, Any]:
    """A summary entry of a finished seed that no earlier summary.json records."""
    best = state.get("best_return")
    return {
        "seed": seed,
        "run_dir": str(directory),
        "stop_reason": state.get("stop_reason"),
        "env_steps": state.get("env_steps"),
        "final_return": None,
        "best_return": best if isinstance(best, (int, float)) else None,
    }
