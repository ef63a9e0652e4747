"""The ``rlx`` command line: list, info, run, eval and plugins.

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
        from rlx import __version__

        typer.echo(f"rlx-core {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
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
    from rlx.discovery import get_registry

    for line in get_registry().errors():
        typer.echo(f"warning: {line}", err=True)


@app.command("list")
def list_agents(
    family: Annotated[Optional[str], typer.Option(help="Show only this family.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List installed agents: name, family, distribution, version, summary and spaces."""
    from rlx.discovery import get_registry

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
                ", ".join(s.observation_spaces),
                ", ".join(s.action_spaces),
                s.summary,
            )
        _console().print(table)
    _report_plugin_errors()


@app.command()
def info(
    name: Annotated[str, typer.Argument(help="Agent name.", autocompletion=_complete_agents)],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show an agent and every hyperparameter with its type, default and meaning."""
    from rlx.api import agent_spec
    from rlx.config import describe

    spec = agent_spec(name)
    agent_cls = spec.load()
    rows = describe(agent_cls.Config)
    doc = inspect.getdoc(agent_cls) or ""
    preset = dict(getattr(agent_cls.Config, "preset", None) or {})
    if as_json:
        document = {**spec.to_dict(), "doc": doc, "preset": preset, "hyperparameters": rows}
        typer.echo(json.dumps(document, indent=2, default=str))
        return
    from rich.table import Table

    console = _console()
    console.print(f"[bold]{spec.name}[/bold] ({spec.family}, {spec.distribution} {spec.version})")
    console.print(spec.summary)
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


def _read_config_file(path: Path) -> dict[str, Any]:
    import tomllib

    from rlx.errors import ConfigError

    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path} is unreadable: {exc}") from exc
    allowed = {"agent", "env", "seed", "hyperparameters", "trainer", "env_kwargs"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(
            f"config file {path}: unknown key {unknown[0]!r}; top-level keys are "
            f"{', '.join(sorted(allowed))} (hyperparameters go in a [hyperparameters] table)"
        )
    for table in ("hyperparameters", "trainer", "env_kwargs"):
        if not isinstance(data.get(table, {}), dict):
            raise ConfigError(f"config file {path}: {table} must be a table")
    for key in ("agent", "env"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"config file {path}: {key} must be a string, got {data[key]!r}")
    if "seed" in data:
        from rlx.seeding import check_seed

        check_seed(data["seed"], f"config file {path}: seed")
    return data


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
    set_: Annotated[
        Optional[list[str]],
        typer.Option("--set", "-s", help="Hyperparameter key=value (repeatable)."),
    ] = None,
    config: Annotated[
        Optional[Path],
        typer.Option(help="TOML file: agent, env, seed, [hyperparameters], [trainer]."),
    ] = None,
    out: Annotated[
        Optional[Path],
        typer.Option(help="Run directory to create (default runs/<name>-<env>-...)."),
    ] = None,
    resume: Annotated[
        Optional[Path], typer.Option(help="Continue the run in this directory.")
    ] = None,
    iterations: Annotated[
        Optional[int], typer.Option(help="Budget in learning iterations.")
    ] = None,
    time_limit: Annotated[Optional[float], typer.Option(help="Budget in seconds.")] = None,
    eval_every: Annotated[
        Optional[int], typer.Option(help="Environment steps between evaluations.")
    ] = None,
    eval_episodes: Annotated[Optional[int], typer.Option(help="Episodes per evaluation.")] = None,
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
            help="With --resume: let the run directory import the module:attr code it names.",
        ),
    ] = False,
    device: Annotated[
        Optional[str],
        typer.Option(
            help="Torch device (cpu, cuda, auto): the device hyperparameter of a new run, or "
            "where a resumed run goes on."
        ),
    ] = None,
) -> None:
    """Train an agent, show progress, and print the run directory and final evaluation."""
    from rlx.config import build_config, parse_assignments
    from rlx.errors import ConfigError

    trainer_overrides = {
        key: value
        for key, value in {
            "steps": steps,
            "iterations": iterations,
            "time_limit": time_limit,
            "eval_every": eval_every,
            "eval_episodes": eval_episodes,
            "checkpoint_every": checkpoint_every,
            "target_return": target_return,
        }.items()
        if value is not None
    }
    if not progress:
        trainer_overrides["progress"] = False
    assignments = parse_assignments(set_ or [])
    console = _console(stderr=True)
    _report_plugin_errors()

    from rlx.trainer import Trainer, TrainerConfig, trainer_defaults

    if trust_code and resume is None:
        raise ConfigError(
            "--trust-code applies to --resume (a new run imports what you name on the "
            "command line anyway)"
        )
    if resume is not None:
        if assignments or config is not None or seed is not None:
            raise ConfigError(
                "--resume continues a run with its saved hyperparameters and seed; "
                "drop --set/--config/--seed, or start a new run"
            )
        from rlx.runs import RunDirectory

        saved = RunDirectory.open(resume).read_config()
        for given, key in ((name, "agent"), (env, "env")):
            if given is not None and given != saved[key]:
                raise ConfigError(f"{resume} is a run of {key} {saved[key]!r}, not {given!r}")
        trainer = Trainer.resume(
            resume, console=console, trust_code=trust_code, device=device, **trainer_overrides
        )
    else:
        from rlx.api import make
        from rlx.runs import default_run_path

        file = _read_config_file(config) if config is not None else {}
        name = name or file.get("agent")
        env = env or file.get("env")
        if not name or not env:
            raise ConfigError("give an agent name and --env (or agent and env in --config)")
        seed = seed if seed is not None else file.get("seed", 0)
        hyperparameters = {**file.get("hyperparameters", {}), **assignments}
        if device is not None:
            if "device" in assignments and assignments["device"] != device:
                raise ConfigError(
                    f"--device {device} and --set device={assignments['device']} disagree"
                )
            hyperparameters["device"] = device
        trainer_settings = {**file.get("trainer", {}), **trainer_overrides}
        build_config(TrainerConfig, trainer_settings)  # refuse bad settings before any work
        agent = make(name, env, seed=seed, env_kwargs=file.get("env_kwargs"), **hyperparameters)
        trainer_config = build_config(
            TrainerConfig, {**trainer_defaults(agent), **trainer_settings}
        )
        run_dir = out if out is not None else default_run_path("runs", name, env, seed)
        trainer = Trainer(agent, trainer_config, run_dir=run_dir, console=console)
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
    if result.metrics:
        shown = ", ".join(f"{key} {value:,.4g}" for key, value in sorted(result.metrics.items()))
        out.print(f"last metrics: {shown}")
    out.print(f"run directory: {result.run_dir}")


@app.command("eval")
def eval_(
    run_dir: Annotated[Path, typer.Argument(help="Run or checkpoint directory.")],
    episodes: Annotated[int, typer.Option(min=1, help="Evaluation episodes.")] = 10,
    seed: Annotated[
        Optional[int], typer.Option(help="Seed of the evaluation episodes (default: the run's).")
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
) -> None:
    """Evaluate a saved policy greedily on fresh episodes."""
    import rlx
    from rlx.evaluation import evaluate
    from rlx.trainer import copy_env

    path = run_dir / "best" if best else run_dir
    if best and not path.is_dir():
        from rlx.errors import CheckpointError

        raise CheckpointError(f"{run_dir} has no best policy (it was never evaluated)")
    agent = rlx.load(path, resume=False, trust_code=trust_code, device=device)
    identity = agent.identity
    result = evaluate(
        agent, copy_env(agent.env), episodes, seed=identity.seed if seed is None else seed
    )
    if as_json:
        typer.echo(json.dumps({"agent": identity.agent, "env": identity.env, **result.to_dict()}))
    else:
        _console().print(
            f"{identity.agent} on {identity.env}: mean return {result.mean_return:.3f} "
            f"± {result.std_return:.3f} over {result.episodes} episodes "
            f"(mean length {result.mean_length:.1f})"
        )


@app.command()
def plot(
    run_dir: Annotated[Path, typer.Argument(help="Run directory.")],
    out: Annotated[
        Optional[Path], typer.Option(help="PNG file (default RUN_DIR/learning_curve.png).")
    ] = None,
) -> None:
    """Draw the run's training and evaluation returns against environment steps as a PNG."""
    from rlx.plotting import plot_run

    typer.echo(str(plot_run(run_dir, out)))


@app.command()
def plugins(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Show installed rlx plugins, their versions, and whether each loaded."""
    from rlx.discovery import get_registry

    registry = get_registry()
    if as_json:
        typer.echo(json.dumps([p.to_dict() for p in registry.plugins], indent=2))
        return
    from rich.table import Table

    table = Table("distribution", "version", "module", "status", "agents", "environments")
    for p in registry.plugins:
        status = "loaded" if p.loaded else f"failed: {p.error}"
        table.add_row(
            p.distribution, p.version, p.module, status, ", ".join(p.agents), ", ".join(p.envs)
        )
    _console().print(table)
    for line in registry.errors():
        if "registered by both" in line:
            typer.echo(f"warning: {line}", err=True)


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
