"""Merging seed groups of one configuration into one group (``rlx merge G1 G2 ... --out OUT``).

A researcher who runs seeds 0-7 on one machine and 8-15 on another gets two groups; the
merge makes the group that one machine would have made: every seed's run directory copied,
``group.json`` with the union of the seeds and each source's batches kept (so that
``rlx run --resume OUT`` continues every seed as its own group would have), and
``summary.json`` with the aggregate over all the seeds (:func:`rlx.statistics.summarize`).

Each source is read with the checks ``rlx eval`` and ``--resume`` apply
(:func:`rlx.group_results.open_group`, :func:`rlx.recorded.check_record` unless the user
trusts the code), and nothing is written until every check has passed. The new group is built
in a hidden folder beside ``OUT`` and renamed onto it at the end, so a merge that fails or is
interrupted leaves no half group behind.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError, RlxError
from rlx.files import put_in_place, write_json_atomic, writing
from rlx.runs import GROUP_FILE, GROUP_MARKER, LOCK_FILE, PID_FILE, RunDirectory, is_group

SUMMARY_FILE = "summary.json"
#: group.json's fields that make the configuration: two groups merge only when these agree.
CONFIGURATION = (
    "agent", "env", "hyperparameters", "wrappers", "env_kwargs", "tuned", "init_from", "settings",
)  # fmt: skip
#: Trainer settings that change only what a run shows while it trains (the console, the
#: plot, TensorBoard's files), not what it learns or records: they may differ between sources
#: (a cluster's jobs run with --quiet); the merged group keeps the first source's.
PRESENTATION = frozenset({"progress", "verbose", "table_every", "plot", "tensorboard"})
#: group.json's fields that say how the seeds were batched: merged, not compared.
LAYOUT = ("seeds", "chunks", "jobs", "batched", "merged_from")
#: Files of a seed's directory that belong to the process that held it, not to the run.
PROCESS_FILES = frozenset({LOCK_FILE, PID_FILE})


@dataclass(frozen=True)
class MergeResult:
    """The merged group: where it is, its seeds, the sources' seeds, and summary.json."""

    path: Path
    seeds: tuple[int, ...]
    sources: tuple[tuple[Path, tuple[int, ...]], ...]
    summary: dict[str, Any]
    notices: tuple[str, ...] = ()

    def describe(self) -> str:
        """A few lines: what was merged, the aggregate of the final returns, where it is."""
        agent, env = self.summary["agent"], self.summary["env"]
        parts = ", ".join(f"{path} (seeds {seeds_text(seeds)})" for path, seeds in self.sources)
        lines = [f"merged {len(self.seeds)} seeds of {agent} on {env} from {parts}"]
        aggregate = self.summary.get("aggregate")
        if isinstance(aggregate, dict):
            shown = ", ".join(
                f"{name} {aggregate[name]['value']:.4g} "
                f"[{aggregate[name]['low']:.4g}, {aggregate[name]['high']:.4g}]"
                for name in ("iqm", "mean", "median")
            )
            lines.append(f"final return over {aggregate['n']} seeds (95% intervals): {shown}")
        lines.append(f"group directory: {self.path} ({SUMMARY_FILE})")
        return "\n".join(lines)


@dataclass
class _Source:
    path: Path
    record: dict[str, Any]
    seeds: list[int]
    runs: list[Path]
    #: Per seed: (relative path, is a directory) of everything its run directory holds.
    contents: dict[int, list[tuple[Path, bool]]]


def seeds_text(seeds: Sequence[int]) -> str:
    """``0-3,9``: the seeds as ``--seeds`` takes them, runs of consecutive seeds as ranges."""
    ordered, parts = sorted(seeds), []
    start = previous = ordered[0]
    for seed in [*ordered[1:], None]:
        if seed is not None and seed == previous + 1:
            previous = seed
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if seed is not None:
            start = previous = seed
    return ",".join(parts)


def merge_groups(
    sources: Sequence[str | Path], out: str | Path, trust_code: bool = False
) -> MergeResult:
    """Merge the seed groups at ``sources`` into a new group at ``out``.

    Refused with one :class:`ConfigError`, before anything is written, when ``out`` exists,
    fewer than two groups are given, a source is not a group (or fails ``rlx eval``'s checks:
    a seed directory that is a link or another run's, a missing seed), a seed directory holds
    a link or a special file, two sources' configurations differ (:data:`CONFIGURATION`,
    trainer settings but :data:`PRESENTATION`; the message names the field and both values),
    or two sources share a seed, or a source or one of its seeds is in use by another rlx
    process (its lock is held while the merge reads it). Without ``trust_code``, a source
    whose records name code (a ``module:Class`` agent, callback or logger) is refused as
    ``--resume`` refuses it.
    """
    out = Path(out)
    paths = [Path(source) for source in sources]
    _check_out(out, paths)
    if len(paths) < 2:
        raise ConfigError("merge needs two groups or more (a group alone is copied with cp -r)")
    seen: dict[Path, Path] = {}
    for path in paths:
        if path.resolve() in seen:
            earlier = seen[path.resolve()]
            again = f" (as {earlier} before)" if str(earlier) != str(path) else ""
            raise ConfigError(f"{path} is given twice{again}; each group is merged once")
        seen[path.resolve()] = path
    locks: list[RunDirectory] = []
    try:
        for path in paths:
            _check_is_group(path)
            _lock(path, locks)
        read = [_read_source(path, trust_code, locks) for path in paths]
        _check_same_configuration(read)
        _check_disjoint(read)
        return _write(read, out)
    finally:
        for lock in locks:
            lock.unlock()


def _lock(path: Path, locks: list[RunDirectory]) -> None:
    """Hold the lock of the group or seed directory ``path`` (added to ``locks``) while the
    merge reads it, so that no rlx process writes a checkpoint into it meanwhile; a folder
    that cannot be written (a read-only copy) has no such process and is read unlocked."""
    if not os.access(path, os.W_OK):
        return
    lock = RunDirectory(path)
    try:
        lock.lock()
    except RlxError as exc:
        raise ConfigError(f"cannot merge {path}: {exc}") from None
    locks.append(lock)


def _check_out(out: Path, sources: Sequence[Path]) -> None:
    if out.exists() or out.is_symlink():
        what = "is a symbolic link" if out.is_symlink() else "already exists"
        raise ConfigError(
            f"{out} {what}; merge makes a new group: pass an --out that does not exist"
        )
    target = Path(os.path.abspath(out))
    for source in sources:
        if target.is_relative_to(Path(os.path.abspath(source))):
            raise ConfigError(f"--out {out} lies inside the group {source}; put it elsewhere")


def _check_is_group(path: Path) -> None:
    from rlx.runs import group_marker_problem

    if not path.exists():
        raise ConfigError(f"{path} does not exist")
    if not path.is_dir():
        raise ConfigError(f"{path} is not a directory, let alone a seed group")
    if not is_group(path):
        problem = group_marker_problem(path)
        single = (path / "config.json").is_file() and not os.path.lexists(path / GROUP_MARKER)
        hint = "; it is a single run: merge takes seed groups (rlx run --seeds)" if single else ""
        raise ConfigError(f"{path} is not a seed group: {problem}{hint}")


def _read_source(path: Path, trust_code: bool, locks: list[RunDirectory]) -> _Source:
    """A source group, read through the checks of ``rlx eval`` and ``--resume``, each seed's
    directory locked (:func:`_lock`) before its files are listed."""
    from rlx.group_results import open_group
    from rlx.groups import GroupTrainer
    from rlx.recorded import check_record

    try:
        record = GroupTrainer.read_record(path)
        group = open_group(path)
        if not trust_code:
            check_record(record, str(path / GROUP_FILE))
            for run in group.runs:
                config_file = run / "config.json"
                if config_file.is_file():
                    check_record(_read_json(config_file), str(config_file))
    except RlxError as exc:
        raise ConfigError(f"cannot merge {path}: {exc}") from None
    for run in group.runs:
        _lock(run, locks)
    contents = {seed: _contents(run) for seed, run in zip(group.seeds, group.runs, strict=True)}
    return _Source(path, record, list(group.seeds), list(group.runs), contents)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is unreadable: {exc}") from None


def _contents(run: Path) -> list[tuple[Path, bool]]:
    """Every entry of the run directory ``run`` (relative path, whether a directory), parents
    first; a symbolic link or a special file anywhere in it is refused, since a copy would
    carry a way out of the group (or block on a pipe)."""
    found: list[tuple[Path, bool]] = []
    pending = [Path()]
    while pending:
        folder = pending.pop(0)
        with os.scandir(run / folder) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        for entry in entries:
            relative = folder / entry.name
            if entry.is_symlink():
                raise ConfigError(
                    f"{run / relative} is a symbolic link (to {os.readlink(entry.path)}); "
                    "merge never copies a link, which could lead out of the group: put the "
                    "file itself there, or remove it"
                )
            if entry.is_dir(follow_symlinks=False):
                found.append((relative, True))
                pending.append(relative)
            elif entry.is_file(follow_symlinks=False):
                if folder != Path() or entry.name not in PROCESS_FILES:
                    found.append((relative, False))
            else:
                raise ConfigError(f"{run / relative} is not a regular file or a directory")
    return found


def _configuration(record: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of group.json that must agree for two groups to merge."""
    configuration = {key: record.get(key) for key in CONFIGURATION}
    configuration["hyperparameters"] = dict(record.get("hyperparameters") or {})
    configuration["wrappers"] = list(record.get("wrappers") or [])
    configuration["env_kwargs"] = dict(record.get("env_kwargs") or {})
    configuration["tuned"] = bool(record.get("tuned", False))
    configuration["settings"] = {
        key: value
        for key, value in (record.get("settings") or {}).items()
        if key not in PRESENTATION
    }
    return configuration


def _made(run: Path) -> dict[str, Any]:
    """What a seed's config.json resolves its configuration to (as
    :func:`rlx.group_results.check_seed_runs` compares siblings), or {} before it has one."""
    config_file = run / "config.json"
    if not config_file.is_file():
        return {}
    config = _read_json(config_file)
    if not isinstance(config, dict):
        return {}
    return {
        "env_kwargs": config.get("env_kwargs") or {},
        "wrappers": config.get("wrappers") or [],
        "hyperparameters": {
            k: v for k, v in (config.get("hyperparameters") or {}).items() if k != "device"
        },
    }


def _difference(first: Any, second: Any, where: str) -> tuple[str, Any, Any] | None:
    """The first field (dotted) at which ``first`` and ``second`` differ, with both values."""
    if isinstance(first, dict) and isinstance(second, dict):
        for key in sorted(set(first) | set(second), key=str):
            if first.get(key, _MISSING) != second.get(key, _MISSING):
                return _difference(
                    first.get(key, _MISSING), second.get(key, _MISSING), f"{where}.{key}"
                )
        return None
    return None if first == second else (where, first, second)


class _Missing:
    def __repr__(self) -> str:
        return "(not set)"


_MISSING = _Missing()


def _check_same_configuration(sources: Sequence[_Source]) -> None:
    """Refuse sources whose configurations differ, naming the field and both values."""
    first = sources[0]
    reference = _configuration(first.record)
    made = next((m for m in map(_made, first.runs) if m), {})
    for source in sources[1:]:
        found = _difference(reference, _configuration(source.record), "")
        what = "group.json"
        if found is None and made:
            other = next((m for m in map(_made, source.runs) if m), {})
            found = _difference(made, other, "") if other else None
            what = "seeds' config.json"
        if found is None:
            continue
        field, mine, theirs = found
        field = field.lstrip(".")
        hint = ""
        if field in ("settings.steps", "settings.iterations", "settings.time_limit"):
            option = "--" + field.split(".")[1].replace("_", "-")
            hint = (
                "; the seeds of one group share their budget: continue the shorter group to "
                f"the same one first (rlx run --resume GROUP {option} N)"
            )
        raise ConfigError(
            f"cannot merge groups of different configurations: {first.path}'s {what} records "
            f"{field} = {mine!r}, {source.path}'s {theirs!r}{hint}"
        )


def _check_disjoint(sources: Sequence[_Source]) -> None:
    owner: dict[int, Path] = {}
    for source in sources:
        shared = sorted(seed for seed in source.seeds if seed in owner)
        if shared:
            raise ConfigError(
                f"cannot merge groups that share seeds: seed{'s' if len(shared) > 1 else ''} "
                f"{seeds_text(shared)} of {source.path} {'are' if len(shared) > 1 else 'is'} "
                f"also in {owner[shared[0]]}; a seed is one run, so it belongs to one group"
            )
        owner.update((seed, source.path) for seed in source.seeds)


def _layout(sources: Sequence[_Source]) -> tuple[dict[str, Any], list[str]]:
    """group.json's batches for the merged group: each source's ``chunks`` kept (a batch's
    rounding depends on which seeds share it), the most workers any source recorded."""
    chunks: list[list[int]] = []
    notices = []
    for source in sources:
        recorded = source.record.get("chunks")
        if isinstance(recorded, list):
            chunks += [list(chunk) for chunk in recorded if chunk]
        else:
            chunks += [[seed] for seed in source.seeds]
            notices.append(
                f"{source.path} records no batches (an older rlx wrote it): a resume trains "
                "its seeds one by one"
            )
        listed = {seed for chunk in chunks for seed in chunk}
        chunks += [[seed] for seed in source.seeds if seed not in listed]
    jobs = [s.record["jobs"] for s in sources if isinstance(s.record.get("jobs"), int)]
    batched = any(source.record.get("batched", True) is not False for source in sources)
    return {"chunks": chunks, "jobs": max(jobs or [1]), "batched": batched}, notices


def _summary_entries(source: _Source, out: Path) -> dict[int, dict[str, Any]]:
    """summary.json's entry of each seed of ``source``, its run_dir in ``out``: the source's
    own entry when it describes the seed's run as it is, else what the run's files say."""
    try:
        summary = json.loads((source.path / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        summary = {}
    runs = summary.get("runs") if isinstance(summary, dict) else None
    recorded = {
        entry["seed"]: entry
        for entry in (runs if isinstance(runs, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("seed"), int)
    }
    entries = {}
    for seed, run in zip(source.seeds, source.runs, strict=True):
        state = _final_state(run)
        entry = recorded.get(seed)
        stale = entry is None or (
            state is not None and entry.get("env_steps") != state["env_steps"]
        )
        entries[seed] = (
            _entry_from_run(seed, run, state) if stale else _clean_entry(seed, entry or {})
        )
        entries[seed]["run_dir"] = str(out / f"seed-{seed}")
    return entries


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else None


def _clean_entry(seed: int, entry: Mapping[str, Any]) -> dict[str, Any]:
    """A source's summary entry with each field of the type rlx writes (else None)."""
    cleaned: dict[str, Any] = {
        "seed": seed,
        "stop_reason": entry.get("stop_reason")
        if isinstance(entry.get("stop_reason"), str)
        else None,
        "env_steps": entry.get("env_steps")
        if _number(entry.get("env_steps")) is not None
        else None,
        "final_return": _number(entry.get("final_return")),
        "best_return": _number(entry.get("best_return")),
    }
    if isinstance(entry.get("error"), str):
        cleaned["error"] = entry["error"]
    return cleaned


def _final_state(run: Path) -> dict[str, Any] | None:
    """The trainer counters of the run's final/ checkpoint, when it has one."""
    from rlx.checkpoint import STATE_FILE

    try:
        document = json.loads((run / "final" / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    state = document.get("trainer") if isinstance(document, dict) else None
    if not isinstance(state, dict) or _number(state.get("env_steps")) is None:
        return None
    return state


def _entry_from_run(seed: int, run: Path, state: dict[str, Any] | None) -> dict[str, Any]:
    """A summary entry from the seed's final/ checkpoint and metrics.csv, for a seed that its
    source's summary.json does not describe (a group killed, a seed resumed on its own): the
    final return is the evaluation metrics.csv logged at the final step."""
    if state is None:
        return {"seed": seed, "stop_reason": "not finished", "env_steps": None,
                "final_return": None, "best_return": None}  # fmt: skip
    final = None
    if state.get("stop_reason") != "interrupted":
        final = _evaluation_at(run, int(state["env_steps"]))
    return {
        "seed": seed,
        "stop_reason": state.get("stop_reason")
        if isinstance(state.get("stop_reason"), str)
        else None,
        "env_steps": int(state["env_steps"]),
        "final_return": final,
        "best_return": _number(state.get("best_return")),
    }


def _evaluation_at(run: Path, step: int) -> float | None:
    from rlx.group_results import EVAL_COLUMN
    from rlx.runs import read_metrics

    try:
        _, rows = read_metrics(run / "metrics.csv")
    except RlxError:
        return None
    found = None
    for row in rows:
        try:
            if row.get(EVAL_COLUMN) and int(row["env_steps"]) == step:
                found = _number(float(row[EVAL_COLUMN]))
        except (KeyError, ValueError):
            continue
    return found


def _write(sources: Sequence[_Source], out: Path) -> MergeResult:
    """Build the merged group in a hidden folder beside ``out`` (marker first, the seeds,
    group.json, summary.json), check it as ``rlx eval`` would, and rename it onto ``out``."""
    from rlx.group_results import open_group
    from rlx.statistics import summarize

    layout, notices = _layout(sources)
    seeds = sorted(seed for source in sources for seed in source.seeds)
    record = {key: value for key, value in sources[0].record.items() if key not in LAYOUT}
    record.update(
        seeds=seeds,
        **layout,
        merged_from=[{"group": str(s.path.resolve()), "seeds": s.seeds} for s in sources],
    )
    entries: dict[int, dict[str, Any]] = {}
    for source in sources:
        entries.update(_summary_entries(source, out))
    runs = [entries[seed] for seed in seeds]
    summary: dict[str, Any] = {"agent": record["agent"], "env": record["env"], "runs": runs}
    finals = [entry["final_return"] for entry in runs if entry["final_return"] is not None]
    if finals:
        try:
            summary["aggregate"] = dict(summarize(finals))
        except RlxError:  # without scipy: no intervals, as a group run without it
            pass
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        building = out.parent / f".{out.name}.merging-{secrets.token_hex(4)}"
        building.mkdir()
    except OSError as exc:
        raise ConfigError(
            f"cannot create the group directory {out}: {exc.strerror or exc}"
        ) from exc
    try:
        write_json_atomic(building / GROUP_MARKER, {"format": "rlx-group", "version": 1})
        for source in sources:
            for seed, run in zip(source.seeds, source.runs, strict=True):
                _copy_run(run, building / f"seed-{seed}", source.contents[seed])
        write_json_atomic(building / GROUP_FILE, record)
        write_json_atomic(building / SUMMARY_FILE, summary)
        open_group(building)  # the merged seeds are alike, as every group's must be
        if out.exists() or out.is_symlink():
            raise ConfigError(
                f"{out} appeared while the groups were merged; nothing was written there"
            )
        put_in_place(building, out)
    except OSError as exc:
        shutil.rmtree(building, ignore_errors=True)
        raise ConfigError(f"cannot write the merged group {out}: {exc.strerror or exc}") from exc
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return MergeResult(
        out,
        tuple(seeds),
        tuple((source.path, tuple(source.seeds)) for source in sources),
        summary,
        tuple(notices),
    )


def _copy_run(run: Path, target: Path, contents: Sequence[tuple[Path, bool]]) -> None:
    """Copy the run directory ``run`` to ``target``, entry by entry as :func:`_contents`
    listed it (no link among them), each file through :func:`rlx.files.writing`."""
    target.mkdir()
    for relative, is_directory in contents:
        if is_directory:
            (target / relative).mkdir()
            continue
        source = run / relative
        if source.is_symlink():  # put there after the scan
            raise ConfigError(f"{source} became a symbolic link while the groups were merged")
        with open(source, "rb") as reader, writing(target / relative, "wb") as writer:
            shutil.copyfileobj(reader, writer, 1 << 20)
