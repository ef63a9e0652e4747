"""What a study gives its user: ``trials.csv``, ``best.toml``, ``tuned.toml``, Optuna's
plots and the tables ``rlx tune`` prints, all read from the study."""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlx.errors import ConfigError
from rlx.files import write_text_atomic, writing
from rlx.tune.settings import Settings, _jsonable
from rlx.tune.space import SKIP_REASONS, Space, _dimension_from_json, _encode, _show
from rlx.tune.storage import redact
from rlx.tune.study import _counts, _done, shown


def _print_space(console: Any, settings: Settings, space: Space, done: int) -> None:
    from rich.table import Table

    verb = f"continuing from {done} finished trials" if done else "new"
    console.print(
        f"study {settings.study_name!r} in {redact(settings.storage)}, {verb}: "
        f"{settings.trials} trials of {settings.steps:,} steps, "
        + (
            f"evaluated every {settings.eval_every:,} steps on {settings.eval_episodes} episodes; "
            if settings.eval_episodes
            else "not evaluated; "
        )
        + f"{settings.direction.replace('ize', 'ising')} {settings.metric}"
        + (f" (the IQM over {settings.seeds} seeds per trial)" if settings.seeds > 1 else ""),
        markup=False,
    )
    table = Table("hyperparameter", "searched over", "from", title="search space")
    for d in space.dimensions:
        table.add_row(d.name, d.text(), d.source)
    console.print(table)
    for reason, names in space.skipped.items():
        console.print(f"not searched ({SKIP_REASONS[reason]}): {', '.join(names)}", markup=False)
    if space.skipped:
        console.print(
            "a --space file searches any of them: name = {low = .., high = ..} or [choices]",
            markup=False,
        )
    if not space.searched:
        console.print(
            "nothing to search: every trial runs the same settings; give ranges in --space",
            markup=False,
        )


def _best(study: Any) -> Any:
    import optuna

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        return None
    best = min if study.direction == optuna.study.StudyDirection.MINIMIZE else max
    return best(complete, key=lambda t: t.value)


def _last_intermediate(trial: Any) -> float | None:
    values = trial.intermediate_values
    return values[max(values)] if values else None


def where_it_ran(trial: Any) -> str:
    """The folder of a trial's run as the outputs name it: ``host:folder`` when it ran on
    another machine, the folder alone when it ran on this one and is still there, and nothing
    otherwise (a folder that does not exist where it is named is never named)."""
    import socket

    folder = trial.user_attrs.get("run_dir")
    if not folder or trial.state.name == "WAITING":  # a queued retry: its run has not begun
        return ""
    host = trial.user_attrs.get("host")
    if host and host != socket.gethostname():
        return f"{host}:{folder}"
    return str(folder) if Path(folder).is_dir() else ""


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    raise ConfigError(f"cannot write {value!r} to TOML")


def best_config(study: Any, settings: Settings, space: Space) -> str | None:
    """The best trial as a TOML config that ``rlx run --config`` accepts (the trial's seed,
    hyperparameters and budget: it reruns the trial); None before any trial completed."""
    best = _best(study)
    if best is None:
        return None
    params = {d.name: d.value for d in space.dimensions if d.kind == "fixed"}
    for d in space.dimensions:
        if d.name in best.params:
            choice = best.params[d.name]
            if d.kind == "choice":
                choice = d.choices[[_encode(c) for c in d.choices].index(choice)]
            params[d.name] = choice
    lines = [
        f"# rlx tune: trial {best.number}, the best of "
        f"{_done(study)} finished trials of study {settings.study_name!r}",
        f"# ({settings.metric} = {best.value:.6g}). Rerun it: rlx run --config best.toml",
        *([f"# its run: {where_it_ran(best)}"] if where_it_ran(best) else []),
        *(
            [
                f"# {settings.metric}: the IQM over the trial's {settings.seeds} seeds; seed: "
                "the first of them, seed-0"
            ]
            if settings.seeds > 1
            else []
        ),
        f"agent = {_toml_value(settings.agent)}",
        f"env = {_toml_value(settings.env)}",
        f"seed = {best.user_attrs.get('seed', settings.seed)}",
        "tuned = false  # the trial started from the agent's defaults, not its tuned settings",
        "",
        "[hyperparameters]",
        *(f"{name} = {_toml_value(_jsonable(value))}" for name, value in params.items()),
        "",
        "[trainer]",
        f"steps = {settings.steps}",
        f"eval_every = {settings.eval_every}",
        f"eval_episodes = {settings.eval_episodes}",
        *(
            ["", "[env_kwargs]"]
            + [
                f"{json.dumps(k)} = {_toml_value(_jsonable(v))}"
                for k, v in settings.env_kwargs.items()
            ]
            if settings.env_kwargs
            else []
        ),
    ]
    return "\n".join(lines) + "\n"


def best_entry(study: Any, settings: Settings, space: Space) -> str | None:
    """The best trial as an entry of a family's tuned-settings file (:mod:`rlx.tuned`): its
    hyperparameters and budget under ``[agent."env"]``, its study and value as the source;
    None before any trial completed."""
    best = _best(study)
    config = best_config(study, settings, space)
    if best is None or config is None:
        return None
    import tomllib

    params = tomllib.loads(config)["hyperparameters"]
    over = f" (the IQM over {settings.seeds} seeds)" if settings.seeds > 1 else ""
    source = (
        f"rlx tune, study {settings.study_name!r}, trial {best.number}: {settings.metric} "
        f"{best.value:.6g}{over} in {settings.steps:,} steps"
    )
    table = f"[{json.dumps(settings.agent)}.{json.dumps(settings.env)}]"
    lines = [
        "# The best trial as tuned settings (rlx.tuned): paste it into a family's tuned.toml.",
        table,
        f"source = {_toml_value(source)}",
        f"trainer = {{ steps = {settings.steps} }}",
        *(
            [f"env_kwargs = {_toml_value(_jsonable(settings.env_kwargs))}"]
            if settings.env_kwargs
            else []
        ),
        "",
        f"[{json.dumps(settings.agent)}.{json.dumps(settings.env)}.hyperparameters]",
        *(f"{name} = {_toml_value(value)}" for name, value in params.items()),
    ]
    return "\n".join(lines) + "\n"


def write_outputs(
    study: Any, out: Path, settings: Settings, console: Any, space: Space | None = None
) -> tuple[dict[str, Path], list[str]]:
    """``trials.csv``, ``best.toml``, the optimisation-history and parameter-importance plots
    in ``out``, and the table of trials on the console. Returns the files and notes.

    With several seeds per trial, the metric's column holds the IQM over the seeds,
    ``<metric>_seed_<k>`` columns each seed's value (empty for a seed a pruned trial did not
    reach) and ``seed`` the seeds, separated by spaces."""
    if space is None:
        recorded = study.user_attrs.get("rlx", {}).get("space", [])
        space = Space(settings.agent, [_dimension_from_json(d) for d in recorded])
    files: dict[str, Path] = {}
    notes: list[str] = []
    trials = shown(study)
    names = sorted({name for t in trials for name in t.params})
    per_seed = [f"{settings.metric}_seed_{k}" for k in range(settings.seeds)]
    if settings.seeds == 1:
        per_seed = []

    def seed_columns(trial: Any) -> list[Any]:
        if not per_seed:
            return [trial.user_attrs.get("seed", "")]
        values = list(trial.user_attrs.get("seed_values", []))
        values += [""] * (len(per_seed) - len(values))
        return [*values, " ".join(map(str, trial.user_attrs.get("seeds", [])))]

    files["trials"] = out / "trials.csv"
    with writing(files["trials"], "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "number",
                "state",
                settings.metric,
                *per_seed,
                "seed",
                "env_steps",
                "seconds",
                "run_dir",
                *names,
                "error",
            ]
        )
        for t in trials:
            value = t.value if t.value is not None else _last_intermediate(t)
            writer.writerow(
                [
                    t.number,
                    t.state.name.lower(),
                    "" if value is None else value,
                    *seed_columns(t),
                    t.user_attrs.get("env_steps", ""),
                    round(t.duration.total_seconds(), 3) if t.duration else "",
                    where_it_ran(t),
                ]
                + [t.params.get(name, "") for name in names]
                + [t.user_attrs.get("error", "")]
            )
    text = best_config(study, settings, space)
    if text is not None:
        files["best"] = out / "best.toml"
        write_text_atomic(files["best"], text)
        files["tuned"] = out / "tuned.toml"
        write_text_atomic(files["tuned"], best_entry(study, settings, space) or "")
    else:
        notes.append("no trial completed yet, so there is no best.toml")
    plots, plot_notes = _plots(study, out)
    files.update(plots)
    notes += plot_notes
    _print_trials(console, study, settings)
    for note in notes:
        console.print(f"note: {note}", markup=False)
    for key, path in files.items():
        console.print(f"{key}: {path}", markup=False)
    return files, notes


def _plots(study: Any, out: Path) -> tuple[dict[str, Path], list[str]]:
    """Optuna's optimisation history and parameter importances as PNG files."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        return {}, ["no plots: they need matplotlib (pip install 'rlx-core[tune]')"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna
    from optuna.visualization import matplotlib as plots

    files: dict[str, Path] = {}
    notes: list[str] = []
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    drawings: list[tuple[str, str, Callable[[], Any]]] = [
        ("history", "optimization_history.png", lambda: plots.plot_optimization_history(study))
    ]
    varied = {
        name
        for name in {n for t in complete for n in t.params}
        if len({_key(t, name) for t in complete}) > 1
    }
    if len(complete) >= 2 and varied:
        drawings.append(
            ("importances", "param_importances.png", lambda: plots.plot_param_importances(study))
        )
    else:
        notes.append(
            "no parameter importances: they need at least 2 complete trials with varying "
            "hyperparameters"
        )
    if not complete:
        return {}, ["no plots yet: no trial completed", *notes[1:]]
    for key, name, draw in drawings:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                axes = draw()
            figure = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
            figure.tight_layout()
            with writing(out / name, "wb") as image:
                figure.savefig(image, format="png", dpi=100)
            plt.close(figure)
            files[key] = out / name
        except Exception as exc:  # a plot is a convenience: never lose the study over one
            notes.append(f"no {name}: {type(exc).__name__}: {exc}".splitlines()[0])
    return files, notes


def _key(trial: Any, name: str) -> str:
    return json.dumps(trial.params.get(name), default=str)


def _print_trials(console: Any, study: Any, settings: Settings, limit: int = 20) -> None:
    """The trials, best first (the first ``limit`` of them), and how many ended how."""
    from rich.table import Table

    trials = shown(study)

    sign = -1.0 if settings.direction == "maximize" else 1.0

    def order(t: Any) -> tuple[int, float]:
        value = t.value if t.value is not None else _last_intermediate(t)
        rank = {"COMPLETE": 0, "PRUNED": 1}.get(t.state.name, 2)
        return rank, sign * value if value is not None else math.inf

    trials.sort(key=order)
    counts = ", ".join(f"{n} {state}" for state, n in sorted(_counts(study).items()))
    table = Table(
        "trial",
        "state",
        settings.metric,
        "steps",
        "hyperparameters",
        title=f"trials of {settings.study_name!r}: {counts}",
    )
    for t in trials[:limit]:
        value = t.value if t.value is not None else _last_intermediate(t)
        table.add_row(
            str(t.number),
            t.state.name.lower(),
            f"{value:.4g}" if value is not None else "-",
            f"{t.user_attrs.get('env_steps', 0):,}",
            ", ".join(f"{key}={_show(v)}" for key, v in t.params.items()),
        )
    if len(trials) > limit:
        table.caption = f"the best {limit} of {len(trials)}; all of them are in trials.csv"
    console.print(table)
