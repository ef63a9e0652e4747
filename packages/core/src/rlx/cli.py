"""The ``rlx`` command line: list, info, run, eval, plot, merge, tune and plugins.

Every user error is one message on stderr and exit code 2 (``--debug`` shows the
traceback). Listing imports no implementation and never torch.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from rlx.errors import RlxError

app = typer.Typer(
    name="rlx",
    help="Reinforcement learning, one installed family at a time.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        from rlx.distributions import installed_versions

        for distribution, version in installed_versions():
            typer.echo(f"{distribution} {version}")
        _warn_foreign_rlx()
        raise typer.Exit()


def _warn_foreign_rlx() -> None:
    """Name every other distribution that ships the ``rlx`` package or command (on stderr)."""
    from rlx.distributions import foreign_rlx

    for foreign in foreign_rlx():
        typer.echo(f"warning: {foreign.message()}", err=True)


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="Print the versions of rlx-core and of every installed rlx plugin.",
        ),
    ] = False,
) -> None:
    _state["debug"] = debug


def _complete_agents(incomplete: str) -> list[str]:
    from rlx.discovery import get_registry

    return [name for name in sorted(get_registry().agents) if name.startswith(incomplete)]


def _console(stderr: bool = False) -> Any:
    """A rich console; when piped (no terminal, no ``$COLUMNS``) tables get 200 columns, not 80,
    so ``rlx list | grep ...`` sees one line per agent."""
    import os
    import sys

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    piped = not stream.isatty() and "COLUMNS" not in os.environ
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=200 if piped else None)


def _report_plugin_errors() -> None:
    """One warning on stderr per plugin problem: a plugin that failed to load, a function it
    defines that rlx never calls (a misspelled hook), a name two plugins claim, an environment
    id that gymnasium (or another library) registered first."""
    from rlx.discovery import get_registry

    for line in get_registry().errors():
        typer.echo(f"warning: {line}", err=True)


#: What ``rlx list`` can list, and the other spellings it accepts.
_LISTINGS = {
    "agents": "agents",
    "agent": "agents",
    "envs": "envs",
    "env": "envs",
    "environments": "envs",
    "loggers": "loggers",
    "logger": "loggers",
}


def _complete_listings(incomplete: str) -> list[str]:
    return [what for what in ("agents", "envs", "loggers") if what.startswith(incomplete)]


@app.command("list")
def list_agents(
    what: Annotated[
        str,
        typer.Argument(
            help="agents (the default), envs or loggers.",
            metavar="[agents|envs|loggers]",
            autocompletion=_complete_listings,
            show_default=False,
        ),
    ] = "agents",
    family: Annotated[Optional[str], typer.Option(help="Show only this family.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List installed agents: name, family, distribution, version, summary and spaces.

    'rlx list envs' lists the environments of rlx plugins: id, distribution, version,
    spaces and summary. Any gymnasium id (CartPole-v1, ...) works as an environment too;
    'rlx info ENV_ID' describes one. 'rlx list loggers' lists the loggers (experiment
    trackers) that 'rlx run --logger' takes.
    """
    from rlx.discovery import get_registry

    if _listing(what, family) == "envs":
        _list_envs(as_json)
        return
    if _listing(what, family) == "loggers":
        _list_loggers(as_json)
        return
    registry = get_registry()
    specs = sorted(registry.agents.values(), key=lambda s: (s.family, s.name))
    if family is not None:
        from rlx.errors import UnknownNameError, did_you_mean

        families = registry.families()
        if family not in families:
            raise UnknownNameError(
                f"unknown family {family!r}.{did_you_mean(family, families)} "
                f"Installed families: {', '.join(families)}."
            )
        specs = [s for s in specs if s.family == family]
    if as_json:
        typer.echo(json.dumps([s.to_dict() for s in specs], indent=2))
    else:
        from rich.table import Table

        table = Table("name", "family", "distribution", "observations", "actions", "summary")
        for s in specs:
            table.add_row(
                s.name,
                s.family,
                f"{s.distribution} {s.version}",
                _kinds_text(s.observation_spaces),
                ", ".join(s.action_spaces),
                s.summary,
            )
        _console().print(table)
    _report_plugin_errors()


def _kinds_text(kinds: tuple[str, ...]) -> str:
    """Space kinds for a table cell: the deep families' long list in short (``--json`` and
    ``rlx info`` name every kind)."""
    from rlx.spec import ENCODED_OBSERVATIONS

    return "all but Text" if kinds == ENCODED_OBSERVATIONS else ", ".join(kinds)


def _listing(what: str, family: str | None) -> str:
    """``agents`` or ``envs``: what ``rlx list WHAT`` lists; anything else is a clear error."""
    from rlx.errors import ConfigError, UnknownNameError, did_you_mean

    listing = _LISTINGS.get(what.lower())
    if listing is None:
        from rlx.discovery import get_registry

        hint = did_you_mean(what, ["agents", "envs", "loggers"])
        if what in get_registry().families():
            hint = f" To list the {what} family: rlx list --family {what}."
        raise UnknownNameError(f"rlx list lists agents, envs or loggers, not {what!r}.{hint}")
    if listing != "agents" and family is not None:
        what = {"envs": "environments"}.get(listing, listing)
        raise ConfigError(
            f"--family selects agents; {what} have no family (rlx list {listing} lists them all)"
        )
    return listing


def _list_loggers(as_json: bool) -> None:
    """``rlx list loggers``: the loggers plugins register (none is imported)."""
    from rlx.discovery import get_registry

    specs = sorted(get_registry().loggers.values(), key=lambda s: (s.distribution, s.name))
    if as_json:
        typer.echo(json.dumps([s.to_dict() for s in specs], indent=2))
    else:
        from rich.markup import escape
        from rich.table import Table

        table = Table(
            "name",
            "distribution",
            "install",
            "summary",
            caption="rlx run --logger 'NAME,key=value,...'; metrics.csv (and TensorBoard "
            "events, when installed) are written anyway.",
        )
        for s in specs:
            install = f"pip install '{s.extra}'" if s.extra else "-"
            table.add_row(
                escape(s.name), f"{s.distribution} {s.version}", escape(install), escape(s.summary)
            )
        _console().print(table)
    _report_plugin_errors()


def _list_envs(as_json: bool) -> None:
    """``rlx list envs``: the environments of rlx plugins, from their manifests (none is built).

    An id that cannot be used is listed too, with its problem (``"problem"`` in JSON, null
    for the others): claimed by two plugins, or shadowed by an id that gymnasium registers
    itself (gymnasium's environment is what that id makes).
    """
    from rlx.discovery import get_registry

    registry = get_registry()
    specs = sorted(registry.envs.values(), key=lambda s: s.distribution)
    problems = registry.env_problems()
    if as_json:
        rows = [{**s.to_dict(), "problem": None} for s in specs]
        rows += [
            _unusable_env_row(registry, env_id, problem) for env_id, problem in problems.items()
        ]
        typer.echo(json.dumps(rows, indent=2))
    else:
        from rich.table import Table

        table = Table(
            "id",
            "distribution",
            "observations",
            "actions",
            "summary",
            caption="Any gymnasium id works too. 'rlx info ENV_ID' shows an environment's "
            "arguments, spaces and data.",
        )
        for s in specs:
            table.add_row(
                s.id,
                f"{s.distribution} {s.version}",
                s.observation_space or "-",
                s.action_space or "-",
                s.summary,
            )
        for row in (_unusable_env_row(registry, i, p) for i, p in problems.items()):
            table.add_row(
                row["id"],
                row["distribution"],
                row["observation_space"] or "-",
                row["action_space"] or "-",
                f"UNUSABLE, {row['shadowed_by']} registers this id too (see the warning)"
                if "shadowed_by" in row
                else f"UNUSABLE, {row['summary']} (see the warning)",
            )
        _console().print(table)
    _report_plugin_errors()


def _unusable_env_row(registry: Any, env_id: str, problem: str) -> dict[str, Any]:
    """The ``rlx list envs`` row of a plugin environment id that cannot be used."""
    shadow = registry.shadowed.get(env_id)
    if shadow is not None:
        return {**shadow.spec.to_dict(), "shadowed_by": shadow.owner, "problem": problem}
    owners = registry.conflicts.get(env_id, [])
    return {
        "id": env_id,
        "distribution": ", ".join(owners),
        "version": "",
        "summary": f"registered by {' and '.join(owners)}",
        "observation_space": "",
        "action_space": "",
        "target": "",
        "problem": problem,
    }


def _complete_names(incomplete: str) -> list[str]:
    from rlx.discovery import get_registry

    registry = get_registry()
    names = sorted({*registry.agents, *registry.envs})
    return [name for name in names if name.startswith(incomplete)]


@app.command()
def info(
    name: Annotated[
        str,
        typer.Argument(
            help="Agent name, or environment id (rlx list envs; any gymnasium id).",
            metavar="AGENT|ENV_ID",
            autocompletion=_complete_names,
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show an agent and every hyperparameter with its type, default and meaning.

    For an environment id: its keyword arguments with their defaults, its observation and
    action spaces, and the data files it looks for (in order) and whether each is present.
    """
    from rlx.api import agent_spec
    from rlx.config import describe
    from rlx.discovery import get_registry

    registry = get_registry()
    if ":" not in name and name not in registry.agents and name not in registry.conflicts:
        _env_info(name, as_json)
        return
    spec = agent_spec(name)
    agent_cls = spec.load()
    rows = describe(agent_cls.Config)
    doc = inspect.getdoc(agent_cls) or ""
    preset = dict(getattr(agent_cls.Config, "preset", None) or {})
    tuned = _tuned_entries(agent=spec.name)
    if as_json:
        document = {
            **spec.to_dict(),
            "doc": doc,
            "preset": preset,
            "hyperparameters": rows,
            "tuned_settings": [{"env": e.env, **e.to_dict()} for e in tuned],
        }
        typer.echo(json.dumps(document, indent=2, default=str))
        return
    from rich.table import Table

    console = _console()
    console.print(f"[bold]{spec.name}[/bold] ({spec.family}, {spec.distribution} {spec.version})")
    console.print(spec.summary)
    if spec.paper:
        console.print(f"paper: {spec.paper}", markup=False)
    if doc:
        console.print(f"\n{doc}\n")
    console.print(
        f"observation spaces: {', '.join(spec.observation_spaces)}; "
        f"action spaces: {', '.join(spec.action_spaces)}"
    )
    if preset:
        settings = ", ".join(f"{key}={value!r}" for key, value in preset.items())
        console.print(f"preset: {settings}")
    table = Table("hyperparameter", "type", "default", "range", "meaning")
    for row in rows:
        table.add_row(
            row["name"], row["type"], repr(row["default"]), row.get("range", ""), row["help"]
        )
    console.print(table if rows else "no hyperparameters")
    if tuned:
        console.print(
            f"tuned settings (rlx run uses them; --untuned does not) on {len(tuned)} "
            f"environment(s): {', '.join(e.env for e in tuned)}",
            markup=False,
        )


def _tuned_entries(agent: str | None = None, env: str | None = None) -> list[Any]:
    """The installed tuned settings of ``agent`` or on ``env`` (none when a family's file is
    unreadable: ``rlx info`` still shows the rest)."""
    from rlx.errors import ConfigError
    from rlx.tuned import entries

    try:
        return entries(agent, env)
    except ConfigError:
        return []


def _env_info(env_id: str, as_json: bool) -> None:
    """``rlx info ENV_ID``: describe an environment of an rlx plugin or of gymnasium."""
    document = _describe_env(env_id)
    tuned = _tuned_entries(env=env_id)
    document["tuned_agents"] = [entry.agent for entry in tuned]
    if as_json:
        typer.echo(json.dumps(document, indent=2, default=str))
        return
    from rich.markup import escape
    from rich.table import Table

    console = _console()
    source = document["distribution"]
    if document["version"]:
        source = f"{source} {document['version']}"
    console.print(f"[bold]{escape(env_id)}[/bold] (environment, {escape(source)})")
    if document["summary"]:
        console.print(escape(document["summary"]))
    steps = document["max_episode_steps"]
    console.print(
        f"entry point: {escape(document['entry_point'])}; "
        f"max_episode_steps: {'none' if steps is None else steps}"
    )
    for role in ("observation", "action"):
        space = document[f"{role}_space"]
        if not document["spaces_built"]:
            space = f"{space} (declared by the plugin; not built)" if space else "unknown"
        console.print(f"{role} space: {escape(space)}")
    if document["note"]:
        console.print(escape(document["note"]))
    arguments = document["keyword_arguments"]
    if arguments:
        table = Table("keyword argument", "type", "default")
        for row in arguments:
            default = "(required)" if row["required"] else repr(row["default"])
            table.add_row(row["name"], row["type"], default)
        console.print(table)
    elif arguments is not None:
        console.print("no keyword arguments")
    if document["data"] is not None:
        table = Table(
            "data file",
            "present",
            title="data files, in the order they are searched (the first one present is read)",
        )
        for row in document["data"]:
            table.add_row(escape(row["path"]), "yes" if row["exists"] else "no")
        console.print(table)
    if tuned:
        agents = ", ".join(entry.agent for entry in tuned)
        console.print(
            f"agents with tuned settings here (rlx run uses them): {agents}", markup=False
        )


def _describe_env(env_id: str) -> dict[str, Any]:
    """Everything ``rlx info ENV_ID`` shows, as JSON values; builds the environment (then closes
    it) to show its real spaces, and falls back on the spaces its plugin declares."""
    import warnings

    import gymnasium

    from rlx.api import make_env, space_kind
    from rlx.discovery import get_registry, registered_env

    if not registered_env(env_id):
        _unknown_agent_or_env(env_id)
    registry = get_registry()
    spec = gymnasium.spec(env_id)
    plugin = registry.envs.get(env_id)
    entry_point = spec.entry_point
    if not isinstance(entry_point, str):
        entry_point = f"{entry_point.__module__}:{getattr(entry_point, '__qualname__', '?')}"
    distribution, version = (
        (plugin.distribution, plugin.version) if plugin else _distribution_of(entry_point)
    )
    document: dict[str, Any] = {
        "kind": "environment",
        "id": env_id,
        "distribution": distribution,
        "version": version,
        "summary": plugin.summary if plugin else "",
        "entry_point": entry_point,
        "max_episode_steps": spec.max_episode_steps,
        "observation_space": plugin.observation_space if plugin else "",
        "action_space": plugin.action_space if plugin else "",
        "observation_space_kind": None,
        "action_space_kind": None,
        "spaces_built": False,
        "note": None,
        "keyword_arguments": None,
        "data": None,
    }
    notes = []
    try:
        from gymnasium.envs.registration import load_env_creator

        creator: Any = spec.entry_point
        if isinstance(creator, str):
            creator = load_env_creator(creator)
    except Exception as exc:  # a missing optional dependency, a broken plugin
        creator = None
        notes.append(f"cannot import {entry_point}: {_first_line(exc)}")
    if creator is not None:
        document["keyword_arguments"] = _keyword_arguments(creator, dict(spec.kwargs))
        if not document["summary"]:
            document["summary"] = _first_sentence(inspect.getdoc(creator) or "")
        data_status = getattr(creator, "data_status", None)
        if callable(data_status):
            document["data"] = [
                {"path": str(path), "exists": bool(exists)} for path, exists in data_status()
            ]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                env = make_env(env_id)
        except Exception as exc:  # missing data or dependency: show what the plugin declares
            notes.append(f"not built: {_first_line(exc)}")
        else:
            try:
                for role in ("observation", "action"):
                    space = getattr(env, f"{role}_space")
                    document[f"{role}_space"] = _space_text(space)
                    document[f"{role}_space_kind"] = space_kind(space)
                document["spaces_built"] = True
            finally:
                env.close()
    document["note"] = "; ".join(notes) or None
    return document


def _unknown_agent_or_env(name: str) -> None:
    """Raise the error for a name that is neither an agent nor an environment id."""
    import gymnasium

    from rlx.discovery import get_registry
    from rlx.errors import UnknownNameError, did_you_mean

    try:
        gymnasium.spec(name)
    except (gymnasium.error.DeprecatedEnv, gymnasium.error.VersionNotFound) as exc:
        raise UnknownNameError(f"unknown agent or environment {name!r}: {exc}") from None
    except gymnasium.error.Error:
        pass
    known = [*get_registry().agents, *gymnasium.registry]
    raise UnknownNameError(
        f"unknown agent or environment {name!r}.{did_you_mean(name, known)} 'rlx list' shows "
        "the agents, 'rlx list envs' the environments of rlx plugins; any gymnasium id works too."
    )


def _keyword_arguments(creator: Any, registered: dict[str, Any]) -> list[dict[str, Any]]:
    """The keyword arguments of an environment's entry point with their defaults (those
    registered with the id replace the signature's), following ``**kwargs`` up the classes."""
    if inspect.isclass(creator):
        functions = [
            vars(cls)["__init__"]
            for cls in creator.__mro__
            if cls is not object and "__init__" in vars(cls)
        ]
    else:
        functions = [creator]
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for function in functions:
        try:
            parameters = list(inspect.signature(function).parameters.values())
        except (TypeError, ValueError):
            break
        if inspect.isclass(creator):
            parameters = parameters[1:]  # self
        for parameter in parameters:
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            if parameter.name in seen:
                continue
            seen.add(parameter.name)
            annotation = parameter.annotation
            if annotation is inspect.Parameter.empty:
                annotation = ""
            elif not isinstance(annotation, str):
                annotation = inspect.formatannotation(annotation)
            required = parameter.default is inspect.Parameter.empty
            default = None if required else parameter.default
            if parameter.name in registered:
                required, default = False, registered[parameter.name]
            rows.append(
                {
                    "name": parameter.name,
                    "type": annotation,
                    "default": default,
                    "required": required,
                }
            )
        if not any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters):
            break
    for name, value in registered.items():
        if name not in seen:
            rows.append({"name": name, "type": "", "default": value, "required": False})
    return rows


def _space_text(space: Any) -> str:
    """A gymnasium space in one line; a Box whose bounds differ per dimension gives their range."""
    import numpy as np
    from gymnasium import spaces

    if isinstance(space, spaces.Box) and space.low.size:
        low, high = space.low, space.high
        if not (np.all(low == low.flat[0]) and np.all(high == high.flat[0])):
            return (
                f"Box(shape {space.shape}, {space.dtype}, bounds per dimension: "
                f"low {low.min():.4g}..{low.max():.4g}, high {high.min():.4g}..{high.max():.4g})"
            )
    text = " ".join(str(space).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _distribution_of(entry_point: str) -> tuple[str, str]:
    """The installed distribution (and its version) that provides ``module:attribute``."""
    from importlib import metadata

    top = entry_point.partition(":")[0].partition(".")[0]
    names = metadata.packages_distributions().get(top, [])
    if not names:
        return "unknown", ""
    try:
        return names[0], metadata.version(names[0])
    except metadata.PackageNotFoundError:
        return names[0], ""


def _first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph of prose (headings skipped)."""
    import re

    for paragraph in doc.split("\n\n"):
        text = " ".join(line.strip() for line in paragraph.splitlines()).strip()
        if text and not text.startswith("#"):
            text = re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", text)  # [a link](url) -> a link
            sentence = text.split(". ")[0].rstrip(".") + "."
            return sentence if len(sentence) <= 200 else sentence[:197] + "..."
    return ""


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _has_device_setting(name: str) -> bool:
    """Whether agent ``name`` has a ``device`` hyperparameter (the torch agents); True when
    it cannot be told here (an unknown name is reported where the agent is made)."""
    import dataclasses

    from rlx.api import agent_spec

    try:
        fields = dataclasses.fields(agent_spec(name).load().Config)
    except Exception:
        return True
    return any(field.name == "device" for field in fields)


def _read_config_file(path: Path) -> dict[str, Any]:
    import tomllib

    from rlx.errors import ConfigError

    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path} is unreadable: {exc}") from exc
    allowed = {
        "agent",
        "env",
        "seed",
        "hyperparameters",
        "trainer",
        "env_kwargs",
        "wrappers",
        "init_from",
        "tuned",
    }
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(
            f"config file {path}: unknown key {unknown[0]!r}; top-level keys are "
            f"{', '.join(sorted(allowed))} (hyperparameters go in a [hyperparameters] table)"
        )
    for table in ("hyperparameters", "trainer", "env_kwargs"):
        if not isinstance(data.get(table, {}), dict):
            raise ConfigError(f"config file {path}: {table} must be a table")
    for key, value in data.get("env_kwargs", {}).items():
        if not _finite(value):
            raise ConfigError(
                f"config file {path}: env_kwargs {key} = {value!r}: numbers must be finite "
                "(no nan or inf), as with --set; give a finite number"
            )
    if not isinstance(data.get("wrappers", []), list):
        raise ConfigError(
            f"config file {path}: wrappers must be an array of tables ([[wrappers]] with name, "
            "kwargs and training_only)"
        )
    for key in ("agent", "env", "init_from"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"config file {path}: {key} must be a string, got {data[key]!r}")
    if not isinstance(data.get("tuned", True), bool):
        raise ConfigError(
            f"config file {path}: tuned must be true or false (false: start from the agent's "
            f"defaults, as --untuned), got {data['tuned']!r}"
        )
    if "seed" in data:
        from rlx.seeding import check_seed

        check_seed(data["seed"], f"config file {path}: seed")
    return data


def _parse_env_kwargs(items: list[str]) -> dict[str, Any]:
    """``--env-kwargs key=value`` items as keyword arguments: each value read as JSON when it
    parses (numbers, booleans, quoted strings, lists), else kept as the string it is."""
    import json

    from rlx.errors import ConfigError

    result: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ConfigError(
                f"--env-kwargs expects key=value with a Python identifier as the key "
                f"(is_slippery=false, map_name='\"4x4\"'), got {item!r}"
            )
        try:
            result[key] = json.loads(value)
        except json.JSONDecodeError:
            result[key] = value
        if not _finite(result[key]):
            raise ConfigError(
                f"--env-kwargs {item!r}: numbers must be finite (no NaN or infinity), as "
                "with --set; give a finite number"
            )
    return result


def _finite(value: Any) -> bool:
    """Whether every number in a value read from JSON is finite."""
    import math

    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    return True


@app.command()
def run(
    name: Annotated[
        Optional[str],
        typer.Argument(help="Agent name or module:Class.", autocompletion=_complete_agents),
    ] = None,
    env: Annotated[
        Optional[str], typer.Option("--env", "-e", help="Gymnasium environment id.")
    ] = None,
    steps: Annotated[Optional[int], typer.Option(help="Budget in environment steps.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed for every RNG (default 0).")] = None,
    seeds: Annotated[
        Optional[str],
        typer.Option(
            help="Train one run per seed, e.g. 0-15, 0,3,7 or 0-3,9, into a group directory "
            "OUT/seed-<k>/ with OUT/summary.json (default runs/<name>-<env>-seeds<first>-<last>-"
            "...); --resume OUT continues every seed, and --seeds with --resume OUT adds seeds "
            "to the group.",
        ),
    ] = None,
    jobs: Annotated[
        Optional[int],
        typer.Option(
            help="With --seeds: worker processes training seeds side by side (default: one "
            "per core, at most one per seed)."
        ),
    ] = None,
    batched: Annotated[
        bool,
        typer.Option(
            help="With --seeds: each worker trains its share of the seeds as one batched "
            "computation where the agent can (VPG, A2C, PPO, the DQNs, DDPG, TD3, SAC); "
            "--no-batched: one seed at a time.",
        ),
    ] = True,
    backend: Annotated[
        str,
        typer.Option(
            help="With --seeds: where the seeds train: local (worker processes on this "
            "machine) or ray (Ray tasks on a cluster, which send each seed's files back here: "
            "pip install 'rlx-core[ray]').",
        ),
    ] = "local",
    address: Annotated[
        Optional[str],
        typer.Option(
            help="With --backend ray: the cluster's head, HOST:6379 or ray://HOST:10001 "
            "(default: the cluster `ray start` runs on this machine, else Ray started here).",
        ),
    ] = None,
    cpus_per_task: Annotated[
        float,
        typer.Option(help="With --backend ray: CPUs of each task (fractions allowed)."),
    ] = 1.0,
    gpus_per_task: Annotated[
        float,
        typer.Option(
            help="With --backend ray: GPUs of each task (fractions allowed; more than 0 "
            "trains on cuda)."
        ),
    ] = 0.0,
    chunk_size: Annotated[
        Optional[int],
        typer.Option(
            help="With --seeds: seeds a worker or Ray task trains together (one batch where "
            "the agent batches seeds; default: the seeds shared out among the workers, at "
            "most 16 a Ray task). Recorded in group.json: --resume keeps the batches.",
        ),
    ] = None,
    untuned: Annotated[
        bool,
        typer.Option(
            "--untuned",
            help="Start from the agent's defaults, not its tuned settings on this environment "
            "('rlx info AGENT' lists them; --set/--config values go on top of either).",
        ),
    ] = False,
    set_: Annotated[
        Optional[list[str]],
        typer.Option("--set", "-s", help="Hyperparameter key=value (repeatable)."),
    ] = None,
    config: Annotated[
        Optional[Path],
        typer.Option(
            help="TOML file: agent, env, seed, init_from, tuned (false: as --untuned), "
            "[hyperparameters], [trainer], [env_kwargs], [[wrappers]] (name, kwargs, "
            "training_only)."
        ),
    ] = None,
    out: Annotated[
        Optional[Path],
        typer.Option(help="Run directory to create (default runs/<name>-<env>-...)."),
    ] = None,
    resume: Annotated[
        Optional[Path], typer.Option(help="Continue the run in this directory.")
    ] = None,
    init_from: Annotated[
        Optional[Path],
        typer.Option(
            "--init-from",
            help="Start a new run from the policy of another run (a run directory, or a "
            "checkpoint directory such as RUN_DIR/best) of the same agent and spaces; the new "
            "run keeps its own seed, optimisers and buffers, and its config.json records "
            "where it started.",
        ),
    ] = None,
    iterations: Annotated[
        Optional[int], typer.Option(help="Budget in learning iterations.")
    ] = None,
    time_limit: Annotated[Optional[float], typer.Option(help="Budget in seconds.")] = None,
    eval_every: Annotated[
        Optional[int], typer.Option(help="Environment steps between evaluations.")
    ] = None,
    eval_episodes: Annotated[Optional[int], typer.Option(help="Episodes per evaluation.")] = None,
    video_every: Annotated[
        Optional[int],
        typer.Option(
            help="Record one greedy evaluation episode every N environment steps as "
            "RUN_DIR/videos/step-<steps>-return-<R>.mp4 (.gif without ffmpeg); off by default. "
            'Needs pip install "rlx-core[video]".'
        ),
    ] = None,
    video_tiles: Annotated[
        Optional[int],
        typer.Option(
            help="With --video-every: each video shows N greedy episodes side by side, "
            "copies of the environment tiled into one frame (default 1).",
        ),
    ] = None,
    checkpoint_every: Annotated[
        Optional[int], typer.Option(help="Environment steps between checkpoints.")
    ] = None,
    target_return: Annotated[
        Optional[float], typer.Option(help="Stop when the evaluation return reaches this.")
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
    trust_code: Annotated[
        bool,
        typer.Option(
            "--trust-code",
            help="With --resume or --init-from: let the saved run import the module:attr "
            "code it names.",
        ),
    ] = False,
    device: Annotated[
        Optional[str],
        typer.Option(
            help="Torch device (cpu, cuda, auto): the device hyperparameter of a new run, or "
            "where a resumed run goes on."
        ),
    ] = None,
    wrapper: Annotated[
        Optional[list[str]],
        typer.Option(
            "--wrapper",
            "-w",
            help="Environment wrapper 'Name,key=value,...' applied in order (repeatable): a "
            "preset such as atari, a gymnasium.wrappers class, or package.module:Class.",
        ),
    ] = None,
    training_wrapper: Annotated[
        Optional[list[str]],
        typer.Option(
            "--training-wrapper",
            help="Like --wrapper, for training environments only (evaluations leave it out).",
        ),
    ] = None,
    env_kwargs: Annotated[
        Optional[list[str]],
        typer.Option(
            "--env-kwargs",
            help="Keyword argument of the environment, key=value (repeatable), the value read "
            "as JSON (false, 0.5, '\"4x4\"', [1, 2]) or else as a string; goes over the "
            "config file's [env_kwargs] and is recorded with the run, so eval and --resume "
            "make the same environment.",
        ),
    ] = None,
    logger: Annotated[
        Optional[list[str]],
        typer.Option(
            "--logger",
            "-l",
            help="Also log to this tracker, 'name,key=value,...' (repeatable), e.g. "
            "'mlflow,tracking_uri=sqlite:///mlflow.db' or 'wandb,mode=offline'; "
            "'rlx list loggers' shows them. metrics.csv (and TensorBoard events, when "
            "installed) are written anyway. "
            "With --resume: replaces the loggers the run was started with.",
        ),
    ] = None,
    table_every: Annotated[
        Optional[int],
        typer.Option(
            help="Print every current metric as a two-column table every N environment steps "
            "(with the first metrics row at or after each multiple); off by default.",
        ),
    ] = None,
    info_keyword: Annotated[
        Optional[list[str]],
        typer.Option(
            "--info-keyword",
            help="Log this key of the final info of every training episode (repeatable), the "
            "mean over the episodes since the last row as train/info/KEY; train/success_rate is "
            "logged anyway where the environment reports is_success.",
        ),
    ] = None,
    callback: Annotated[
        Optional[list[str]],
        typer.Option(
            "--callback",
            help="Add a callback, 'name,key=value,...' (repeatable): stop-at-return, "
            "stop-on-plateau, checkpoint-every, evaluate-on, or package.module:Class (a subclass "
            "of rlx.callbacks.Callback). Recorded in config.json; --resume builds it again (a "
            "module:Class only with --trust-code). With --resume: replaces the run's callbacks.",
        ),
    ] = None,
) -> None:
    """Train an agent, show progress, and print the run directory and final evaluation."""
    from rlx.callbacks import normalize as normalize_callbacks
    from rlx.config import parse_assignments
    from rlx.errors import ConfigError
    from rlx.loggers import normalize as normalize_loggers
    from rlx.trainer import Trainer, new_run
    from rlx.wrappers import normalize, parse

    given = {
        "steps": steps,
        "iterations": iterations,
        "time_limit": time_limit,
        "eval_every": eval_every,
        "eval_episodes": eval_episodes,
        "video_every": video_every,
        "video_tiles": video_tiles,
        "checkpoint_every": checkpoint_every,
        "target_return": target_return,
        "progress": None if progress else False,
        "loggers": normalize_loggers(logger) if logger else None,
        "callbacks": normalize_callbacks(callback) if callback else None,
        "info_keywords": tuple(info_keyword) if info_keyword else None,
        "table_every": table_every,
    }
    trainer_overrides: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    assignments = parse_assignments(set_ or [])
    env_assignments = _parse_env_kwargs(env_kwargs or [])
    console = _console(stderr=True)
    _report_plugin_errors()
    if resume is not None and init_from is not None:
        raise ConfigError(
            "--init-from starts a new run from another run's policy, --resume continues a run; "
            "give one of them"
        )
    if seed is not None and seeds is not None:
        raise ConfigError("give --seed for one run or --seeds for a group of runs, not both")
    from rlx.groups import GroupTrainer, is_group, new_group

    group: GroupTrainer | None = None
    if jobs is not None and seeds is None and (resume is None or not is_group(resume)):
        raise ConfigError("--jobs applies to a group of seeds (--seeds, or --resume GROUP)")
    if not batched and seeds is None and (resume is None or not is_group(resume)):
        raise ConfigError("--no-batched applies to a group of seeds (--seeds, or --resume GROUP)")
    placement: dict[str, Any] = {
        "backend": backend,
        "address": address,
        "cpus_per_task": cpus_per_task,
        "gpus_per_task": gpus_per_task,
        "chunk_size": chunk_size,
    }
    in_group = seeds is not None or (resume is not None and is_group(resume))
    if not in_group and (backend != "local" or address is not None or chunk_size is not None):
        raise ConfigError(
            "--backend, --address and --chunk-size apply to a group of seeds (--seeds, or "
            "--resume GROUP)"
        )
    if backend != "ray" and (address is not None or cpus_per_task != 1.0 or gpus_per_task):
        raise ConfigError("--address, --cpus-per-task and --gpus-per-task apply to --backend ray")
    if resume is not None:
        if seeds is not None and not is_group(resume):
            raise ConfigError(
                f"--seeds with --resume adds seeds to a group, and {resume} is a single run"
            )
        if (
            assignments
            or config is not None
            or seed is not None
            or wrapper
            or training_wrapper
            or env_kwargs
            or untuned
        ):
            raise ConfigError(
                "--resume continues a run with its saved hyperparameters, seed, wrappers and "
                "environment arguments; drop --set/--config/--seed/--wrapper/"
                "--env-kwargs/--untuned, or start a new run"
            )
        from rlx.runs import RunDirectory

        saved = (
            GroupTrainer.read_record(resume)
            if is_group(resume)
            else RunDirectory.open(resume).read_config()
        )
        for given_name, key in ((name, "agent"), (env, "env")):
            if given_name is not None and given_name != saved[key]:
                raise ConfigError(f"{resume} is a run of {key} {saved[key]!r}, not {given_name!r}")
        if is_group(resume):
            group = GroupTrainer.resume(
                resume,
                jobs=jobs,
                batched=batched,
                add_seeds=seeds,
                **placement,
                console=console,
                trust_code=trust_code,
                device=device,
                **trainer_overrides,
            )
        else:
            trainer = Trainer.resume(
                resume, console=console, trust_code=trust_code, device=device, **trainer_overrides
            )
    else:
        file = _read_config_file(config) if config is not None else {}
        if init_from is None and "init_from" in file:
            init_from = Path(file["init_from"])  # relative to the working directory
        if trust_code and init_from is None:
            raise ConfigError(
                "--trust-code applies to --resume and --init-from (a new run imports what you "
                "name on the command line anyway)"
            )
        name = name or file.get("agent")
        env = env or file.get("env")
        untuned = untuned or file.get("tuned") is False
        if not name or not env:
            raise ConfigError("give an agent name and --env (or agent and env in --config)")
        hyperparameters = {**file.get("hyperparameters", {}), **assignments}
        if device is not None:
            if "device" in assignments and assignments["device"] != device:
                raise ConfigError(
                    f"--device {device} and --set device={assignments['device']} disagree"
                )
            if _has_device_setting(name):
                hyperparameters["device"] = device
            elif device != "cpu":  # as rlx eval and --resume say it
                raise ConfigError(
                    f"{name} has no device setting (it runs on the CPU); drop --device {device}"
                )
        settings = {**file.get("trainer", {}), **trainer_overrides}
        normalizers: dict[str, Any] = {
            "loggers": normalize_loggers,
            "callbacks": normalize_callbacks,
        }
        for key, normalized in normalizers.items():
            if key in trainer_overrides and key in file.get("trainer", {}):  # flags add to it
                settings[key] = (*normalized(file["trainer"][key]), *trainer_overrides[key])
        # one seed: a run; --seeds: a group of them, each seed's run made the same way
        which: dict[str, Any] = (
            {"seed": seed if seed is not None else file.get("seed", 0)}
            if seeds is None
            else {"seeds": seeds, "jobs": jobs, "batched": batched, **placement}
        )
        started = (new_run if seeds is None else new_group)(
            name,
            env,
            **which,
            hyperparameters=hyperparameters,
            settings=settings,
            wrappers=[
                *normalize(file.get("wrappers", [])),
                *(parse(text) for text in wrapper or []),
                *(parse(text, training_only=True) for text in training_wrapper or []),
            ],
            env_kwargs={**file.get("env_kwargs", {}), **env_assignments},
            init_from=init_from,
            trust_code=trust_code,
            out=out,
            console=console,
            tuned=not untuned,
        )
        if not untuned:  # said once the run is made: bad input stays one message
            from rlx.tuned import describe, find

            entry = find(name, env)
            if entry is not None:
                console.print(describe(entry, hyperparameters), markup=False, highlight=False)
        if isinstance(started, GroupTrainer):
            group = started
        else:
            trainer = started
    if group is not None:
        _fit_group(group, console)
        return
    assert trainer.run is not None
    console.print(f"run directory: {trainer.run.path}")
    result = trainer.fit()
    _print_result(result)
    if result.stop_reason == "interrupted":
        console.print(
            f"interrupted: checkpoint saved at {trainer.run.final}; "
            f"continue with: rlx run --resume {trainer.run.path}"
        )
        raise typer.Exit(130)


def _fit_group(group: Any, console: Any) -> None:
    """``rlx run --seeds``: train the group, print where it is and how it ended."""
    from rlx.errors import TrainingError

    console.print(f"group directory: {group.path} (seeds {', '.join(map(str, group.seeds))})")
    result = group.fit()
    _console().print(result.describe(), markup=False, highlight=False)
    if result.interrupted:
        console.print(f"interrupted; continue with: rlx run --resume {result.path}")
        raise typer.Exit(130)
    if result.crashed:
        console.print(f"error: {result.failure_text()}", markup=False)
        raise typer.Exit(1)
    if result.failed:
        raise TrainingError(result.failure_text())


def _print_result(result: Any) -> None:
    out = _console()
    out.print(
        f"stopped ({result.stop_reason}) after {result.env_steps:,} environment steps, "
        f"{result.episodes:,} episodes, {result.elapsed:.1f} s"
    )
    if result.final_eval is not None:
        e = result.final_eval
        out.print(
            f"final evaluation: mean return {e.mean_return:.3f} ± {e.std_return:.3f} "
            f"over {e.episodes} episodes"
        )
        best = result.best_return
        if best is not None and best > e.mean_return and result.run_dir is not None:
            # an agent that fell back after its best evaluation (DQN can): its best is kept
            out.print(
                f"best evaluation: mean return {best:.3f}, kept in {result.run_dir / 'best'}; "
                f"play it with: rlx eval {result.run_dir} --best",
                markup=False,
                highlight=False,
            )
    if result.metrics:
        shown = ", ".join(f"{key} {value:,.4g}" for key, value in sorted(result.metrics.items()))
        out.print(f"last metrics: {shown}")
    out.print(f"run directory: {result.run_dir}")


@app.command("eval")
def eval_(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            help="Run, checkpoint or seed-group directory; several groups (or runs) compare.",
            show_default=False,
        ),
    ],
    episodes: Annotated[int, typer.Option(min=1, help="Evaluation episodes.")] = 10,
    seed: Annotated[
        Optional[int], typer.Option(help="Seed of the evaluation episodes (default: the run's).")
    ] = None,
    max_episode_steps: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            help="Cut every episode short after this many steps (reported truncated); default: "
            "only on an environment without a time limit, after 27,000 steps.",
        ),
    ] = None,
    best: Annotated[
        bool, typer.Option("--best", help="Evaluate the best policy instead of the latest.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    trust_code: Annotated[
        bool,
        typer.Option(
            "--trust-code", help="Let the run directory import the module:attr code it names."
        ),
    ] = False,
    device: Annotated[
        Optional[str],
        typer.Option(help="Torch device to evaluate on (default: the run's own)."),
    ] = None,
    video: Annotated[
        Optional[Path],
        typer.Option(
            help="Also write the evaluation episodes, all of them one after the other, into "
            "one video: FILE.mp4 or FILE.gif; a name with {return} in it, replaced by the mean "
            "return; or a directory, which gets AGENT-ENV-return-R.mp4. The file's metadata "
            "comment holds, as JSON, every episode's return and length. An episode of L steps "
            'gives L+1 frames. Needs pip install "rlx-core[video]".'
        ),
    ] = None,
    video_tiled: Annotated[
        bool,
        typer.Option(
            "--video-tiled",
            help="With --video: play the episodes side by side, copies of the environment "
            "tiled into one frame (a near-square grid; rounds of at most 16), not one after "
            "the other.",
        ),
    ] = False,
) -> None:
    """Evaluate a saved policy greedily on fresh episodes.

    A seed group: every seed's policy, each as one run would be, and the IQM, mean and median
    of their mean returns with 95% bootstrap intervals (a group missing a seed is refused).
    Several groups (a run among them counts as a group of one seed): one row per group, named
    by its directory.
    """
    import rlx
    from rlx.api import evaluation_env, identity_of
    from rlx.evaluation import evaluate
    from rlx.group_results import evaluate_group, is_group, open_group

    if len(run_dirs) > 1:
        if video is not None or max_episode_steps is not None:
            raise RlxError(
                "--video and --max-episode-steps apply to one run: pass a seed's directory, "
                "GROUP/seed-<k>"
            )
        _compare_groups(run_dirs, episodes, seed, best, as_json, trust_code, device)
        return
    run_dir = run_dirs[0]
    if is_group(run_dir):
        if video is not None or max_episode_steps is not None:
            raise RlxError(
                "--video and --max-episode-steps apply to one run: pass a seed's directory, "
                "GROUP/seed-<k>"
            )
        group = open_group(run_dir, partial=True)
        if group.left_out:
            _console(stderr=True).print(
                f"notice: seed{'s' if len(group.left_out) > 1 else ''} "
                f"{', '.join(map(str, group.left_out))} of {run_dir} "
                f"{'have' if len(group.left_out) > 1 else 'has'} no checkpoint yet and "
                f"{'are' if len(group.left_out) > 1 else 'is'} left out; "
                f"rlx run --resume {run_dir} trains them",
                markup=False,
            )
        document = evaluate_group(group, episodes, seed, best, trust_code, device)
        if as_json:
            typer.echo(json.dumps(document))
            return
        from rich.table import Table

        table = Table(title=f"{document['agent']} on {document['env']} ({document['policy']})")
        for column in ("seed", "mean return", "std", "episodes", "mean length"):
            table.add_column(column, justify="right")
        for entry in document["seeds"]:
            table.add_row(
                str(entry["seed"]),
                f"{entry['mean_return']:.3f}",
                f"{entry['std_return']:.3f}",
                str(entry["episodes"]),
                f"{entry['mean_length']:.1f}",
            )
        _console().print(table)
        aggregate = document["aggregate"]
        _console().print(
            ", ".join(
                f"{name} {aggregate[key]['value']:.3f} "
                f"[{aggregate[key]['low']:.3f}, {aggregate[key]['high']:.3f}]"
                for key, name in (("iqm", "IQM"), ("mean", "mean"), ("median", "median"))
            )
            + f" (95% bootstrap intervals over {aggregate['n']} seeds)",
            markup=False,
        )
        return
    path = run_dir / "best" if best else run_dir
    if best and not path.is_dir():
        from rlx.errors import CheckpointError

        raise CheckpointError(f"{run_dir} has no best policy (it was never evaluated)")
    if video_tiled and video is None:
        raise RlxError("--video-tiled applies to --video FILE")
    if video is not None:
        from rlx.video import check_target

        check_target(video)  # a bad suffix or place, or a missing extra, fails before any work
    agent = rlx.load(path, resume=False, trust_code=trust_code, device=device)
    identity = identity_of(agent)
    eval_seed = identity.seed if seed is None else seed
    recording = None
    if video is None:
        result = evaluate(
            agent,
            evaluation_env(agent),
            episodes,
            seed=eval_seed,
            max_episode_steps=max_episode_steps,
            progress=True,
        )
    else:
        from rlx.video import MAX_TILES, record_episodes, video_env

        env = video_env(agent, copies=min(episodes, MAX_TILES) if video_tiled else 1)
        try:
            recording = record_episodes(
                agent,
                env,
                video,
                episodes,
                seed=eval_seed,
                max_episode_steps=max_episode_steps,
                progress=True,
            )
        finally:
            env.close()
        result = recording.result
    if as_json:
        document = {"agent": identity.agent, "env": identity.env, **result.to_dict()}
        if recording is not None:
            document["video"] = str(recording.path)
        typer.echo(json.dumps(document))
    else:
        _console().print(
            f"{identity.agent} on {identity.env}: mean return {result.mean_return:.3f} "
            f"± {result.std_return:.3f} over {result.episodes} episodes "
            f"(mean length {result.mean_length:.1f}"
            + (f"; {sum(result.truncated)} truncated" if any(result.truncated) else "")
            + ")"
        )
        if recording is not None:
            width, height = recording.size
            _console().print(
                f"video: {recording.path} ({recording.frames} frames, {width}x{height}, "
                f"{recording.fps:g} fps)",
                markup=False,
            )


def _compare_groups(
    paths: list[Path],
    episodes: int,
    seed: int | None,
    best: bool,
    as_json: bool,
    trust_code: bool,
    device: str | None,
) -> None:
    """``rlx eval G1 G2 ...``: every group evaluated as ``rlx eval G`` would, one row each."""
    from rlx.group_compare import compare_groups, group_names, interval_text, open_groups

    groups = open_groups(paths, partial=True)  # every group checked before any evaluates
    names = group_names(paths)
    for group, name in zip(groups, names, strict=True):
        if group.left_out:
            count = len(group.left_out)
            _console(stderr=True).print(
                f"notice: {name}: seed{'s' if count > 1 else ''} "
                f"{', '.join(map(str, group.left_out))} "
                f"{'have' if count > 1 else 'has'} no checkpoint yet and "
                f"{'are' if count > 1 else 'is'} left out; "
                f"rlx run --resume {group.path} trains them",
                markup=False,
            )
    document = compare_groups(groups, names, episodes, seed, best, trust_code, device)
    if as_json:
        typer.echo(json.dumps(document))
        return
    from rich.table import Table

    table = Table(
        title=f"evaluation return of the {document['policy']} policies "
        "(95% bootstrap intervals over seeds)"
    )
    for column in ("group", "agent", "env", "seeds", "IQM", "mean", "median"):
        table.add_column(column, justify="left" if column in ("group", "agent", "env") else "right")
    for entry in document["groups"]:
        aggregate = entry["aggregate"]
        table.add_row(
            entry["name"],
            entry["agent"],
            entry["env"],
            str(aggregate["n"]),
            *(interval_text(aggregate[key]) for key in ("iqm", "mean", "median")),
        )
    _console().print(table)


@app.command()
def plot(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Run directory, or one or more seed groups (or runs).")
    ],
    out: Annotated[
        Optional[Path],
        typer.Option(help="PNG file (default RUN_DIR/learning_curve.png; needed for several)."),
    ] = None,
    statistic: Annotated[
        str, typer.Option(help="Over a group's seeds: iqm, mean or median.")
    ] = "iqm",
    x: Annotated[
        str,
        typer.Option(
            "--x", help="One run's x-axis: steps (environment steps) or episodes (finished)."
        ),
    ] = "steps",
) -> None:
    """Draw learning curves as a PNG.

    One run: its training and evaluation returns against environment steps (--x episodes:
    against the training episodes finished). Seed groups (a
    run among them counts as a group of one seed): one curve per group, the statistic over
    its seeds of the evaluation return with a 95% bootstrap band.
    """
    from rlx.group_results import is_group
    from rlx.plotting import check_x, plot_groups, plot_run
    from rlx.statistics import STATISTICS

    if statistic not in STATISTICS:
        raise RlxError(f"unknown --statistic {statistic!r}; choose one of {', '.join(STATISTICS)}")
    check_x(x)
    if len(run_dirs) == 1 and not is_group(run_dirs[0]):
        typer.echo(str(plot_run(run_dirs[0], out, x)))
        return
    if x != "steps":
        raise RlxError(
            f"--x {x} draws one run: the seeds of a group finish different numbers of episodes "
            "by the same step, so groups are drawn against environment steps"
        )
    typer.echo(str(plot_groups(run_dirs, out, statistic)))


@app.command()
def merge(
    groups: Annotated[
        list[Path],
        typer.Argument(
            help="Seed groups of one configuration, with distinct seeds (two or more).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path, typer.Option(help="The new group's directory (must not exist).", show_default=False)
    ],
    trust_code: Annotated[
        bool,
        typer.Option(
            "--trust-code", help="Let the groups' records name module:attr code (as --resume)."
        ),
    ] = False,
) -> None:
    """Merge seed groups run apart (on other machines) into one new group.

    The groups must share their configuration (agent, env, hyperparameters, wrappers,
    env_kwargs, tuned settings, trainer settings and budgets) and no seed. Every seed's run is
    copied; OUT's summary.json aggregates all the seeds, and rlx run --resume OUT continues
    them as their own groups would have.
    """
    from rlx.group_merge import merge_groups

    result = merge_groups(groups, out, trust_code=trust_code)
    for notice in result.notices:
        _console(stderr=True).print(f"notice: {notice}", markup=False)
    _console().print(result.describe(), markup=False, highlight=False)


# --- rlx tune (the logic lives in rlx.tune) -------------------------------------------------


@app.command()
def tune(
    name: Annotated[
        str,
        typer.Argument(help="Agent name.", metavar="AGENT", autocompletion=_complete_agents),
    ],
    env: Annotated[str, typer.Option("--env", "-e", help="Gymnasium environment id.")],
    trials: Annotated[
        int,
        typer.Option(
            help="Finished (complete or pruned) trials the study should hold in total; a "
            "continued study runs only the missing ones."
        ),
    ] = 20,
    storage: Annotated[
        Optional[str],
        typer.Option(
            help="Optuna storage shared by processes or machines: a database URL "
            "(sqlite:///PATH, postgresql://USER@HOST/DB), journal:PATH (Optuna's journal "
            "file, e.g. on NFS) or grpc://HOST:PORT (Optuna's gRPC proxy); default "
            "sqlite:///OUT/study.db."
        ),
    ] = None,
    workers: Annotated[
        Optional[int],
        typer.Option(
            help="Trials run at once: worker processes (default 1), or with --backend ray Ray "
            "tasks (default: one per CPU of the cluster)."
        ),
    ] = None,
    steps: Annotated[
        Optional[int], typer.Option(help="Budget of every trial in environment steps.")
    ] = None,
    metric: Annotated[
        str,
        typer.Option(
            help="A trial's value: eval_return (the final evaluation's mean return), "
            "best_eval_return, mean_eval_return (mean over the evaluations: learning fast), "
            "or a metric the agent logs, at the end of the run (cumulative_regret)."
        ),
    ] = "eval_return",
    direction: Annotated[
        str,
        typer.Option(
            help="maximize or minimize the metric (minimize a bandit's cumulative_regret)."
        ),
    ] = "maximize",
    space: Annotated[
        Optional[Path],
        typer.Option(
            help="TOML file narrowing or fixing the declared search space: name = {low, high, "
            "log, step}, name = [choices], name = value; default_space = false searches only "
            "the file's."
        ),
    ] = None,
    out: Annotated[
        Optional[Path],
        typer.Option(help="Output directory (default tunes/<agent>-<env>-...)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the study; trial seeds derive from it.")] = 0,
    eval_every: Annotated[
        Optional[int],
        typer.Option(help="Environment steps between evaluations (default steps/10)."),
    ] = None,
    eval_episodes: Annotated[Optional[int], typer.Option(help="Episodes per evaluation.")] = None,
    study_name: Annotated[
        Optional[str], typer.Option(help="Study name in the storage (default AGENT-ENV).")
    ] = None,
    prune: Annotated[
        bool, typer.Option(help="Stop unpromising trials early (the --pruner).")
    ] = True,
    sampler: Annotated[
        str,
        typer.Option(
            help="Optuna's sampler: tpe (told that trials run in parallel where they do), "
            "random, cmaes (needs cmaes) or qmc."
        ),
    ] = "tpe",
    pruner: Annotated[
        str,
        typer.Option(help="Optuna's pruner: median, hyperband, successive-halving or none."),
    ] = "median",
    heartbeat: Annotated[
        int,
        typer.Option(
            help="Seconds between a running trial's heartbeats on a database storage; a trial "
            "whose worker died is failed after twice as long and run again.",
            metavar="SECONDS",
        ),
    ] = 60,
    backend: Annotated[
        str,
        typer.Option(
            help="Where the trials run: local (this process, or --workers processes) or ray "
            "(Ray tasks, --workers at once; this process asks Optuna and writes OUT)."
        ),
    ] = "local",
    address: Annotated[
        Optional[str],
        typer.Option(
            help="With --backend ray: the cluster (HOST:6379, auto, ray://HOST:10001); "
            "default: Ray started on this machine."
        ),
    ] = None,
    logger: Annotated[
        Optional[list[str]],
        typer.Option(
            "--logger",
            help="Experiment tracker of every trial's run, 'NAME,key=value,...' (repeatable; "
            "'rlx list loggers').",
        ),
    ] = None,
    seeds: Annotated[
        str,
        typer.Option(
            help="Seeds every trial is scored over: K runs in OUT/trials/<number>/seed-<k>, "
            "trained as one batched computation where the agent can; the trial's value is "
            "the IQM of theirs (needs rlx-core[stats]).",
            metavar="K",
        ),
    ] = "1",
    batched: Annotated[
        bool,
        typer.Option(
            help="With --seeds: train a trial's seeds as one batched computation where the "
            "agent can; --no-batched trains them one after another, and a trial may be pruned "
            "between two of them.",
        ),
    ] = True,
    env_kwargs: Annotated[
        Optional[list[str]],
        typer.Option(
            "--env-kwargs",
            help="KEY=VALUE (repeatable): a keyword argument of the environment in every "
            "trial (the value read as JSON, else a string), written to best.toml.",
            metavar="KEY=VALUE",
        ),
    ] = None,
) -> None:
    """Tune an agent's hyperparameters with Optuna over the space its declarations give.

    Each trial is an rlx run in OUT/trials/<number> (with --seeds K, K runs). OUT gets
    best.toml (for rlx run --config), trials.csv and Optuna's plots. Ctrl-C stops; the same
    command continues.
    """
    from rlx.tune import parse_trial_seeds
    from rlx.tune import tune as tune_study

    seeds_per_trial = parse_trial_seeds(seeds)
    env_assignments = _parse_env_kwargs(env_kwargs or [])
    _report_plugin_errors()
    console = _console(stderr=True)
    result = tune_study(
        name,
        env,
        trials=trials,
        storage=storage,
        workers=workers,
        steps=steps,
        metric=metric,
        direction=direction,
        space=space,
        out=out,
        seed=seed,
        eval_every=eval_every,
        eval_episodes=eval_episodes,
        study_name=study_name,
        prune=prune,
        sampler=sampler,
        pruner=pruner,
        heartbeat=heartbeat,
        backend=backend,
        address=address,
        loggers=tuple(logger or ()),
        console=console,
        seeds=seeds_per_trial,
        batched=batched,
        env_kwargs=env_assignments,
    )
    if result.best_value is not None:
        _console().print(
            f"best: trial {result.best_trial}, {metric} {result.best_value:.6g}; "
            f"rlx run --config {result.files['best']}",
            markup=False,
        )
    if result.interrupted:
        again = f"rlx tune {name} --env {env} --trials {trials} --out {result.out}"
        if storage is not None:
            again += f" --storage '{storage}'"
        if seeds_per_trial > 1:
            again += f" --seeds {seeds_per_trial}" + ("" if batched else " --no-batched")
        if sampler != "tpe":
            again += f" --sampler {sampler}"
        if pruner != "median":
            again += f" --pruner {pruner}"
        if backend != "local":
            again += f" --backend {backend}" + (f" --address {address}" if address else "")
        console.print(f"interrupted; continue the study with: {again}", markup=False)
        raise typer.Exit(130)


# --- end of rlx tune ---------------------------------------------------------------------


@app.command()
def plugins(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Show installed rlx plugins, their versions, whether each loaded, the agents,
    environments and loggers each registers, and each one's problems: misspelled hooks,
    names another plugin claims too, environment ids that gymnasium registers itself."""
    from rlx.discovery import get_registry

    registry = get_registry()
    if as_json:
        rows = []
        for p in registry.plugins:
            row = p.to_dict()
            del row["hook_problems"]  # part of "problems"
            rows.append({**row, "problems": registry.problems(p)})
        typer.echo(json.dumps(rows, indent=2))
        _warn_foreign_rlx()
        return
    from rich.table import Table

    table = Table(
        "distribution", "version", "module", "status", "agents", "environments", "loggers"
    )
    for p in registry.plugins:
        count = len(registry.problems(p))
        status = "loaded" if p.loaded else f"failed: {p.error}"
        if p.loaded and count:
            status = f"loaded, {count} problem{'s' * (count > 1)} (see below)"
        table.add_row(
            p.distribution,
            p.version,
            p.module,
            status,
            ", ".join(p.agents),
            ", ".join(p.envs),
            ", ".join(p.loggers),
        )
    _console().print(table)
    # A name two plugins claim is a problem of both: one warning.
    for line in dict.fromkeys(line for p in registry.plugins for line in registry.problems(p)):
        typer.echo(f"warning: {line}", err=True)
    _warn_foreign_rlx()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: a user error becomes one message on stderr and exit code 2."""
    _state["debug"] = False
    try:
        app(args=argv, prog_name="rlx")
    except RlxError as exc:
        if _state["debug"]:
            raise
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except MemoryError as exc:
        if _state["debug"]:
            raise
        typer.echo(
            f"error: not enough memory ({exc or 'MemoryError'}); lower the sizes in the settings "
            "(n_envs, n_steps, population_size, batch or buffer sizes)",
            err=True,
        )
        sys.exit(2)


if __name__ == "__main__":
    main()
