"""Sphinx extension that writes the generated pages of the rlx site and checks what it shows.

At ``builder-inited`` it writes, from the installed plugins and the repository's files:
one page per registered agent (``agents/``), the environments and the CLI reference and the
changelogs (``reference/``), one page per benchmark result (``benchmarks/``) and one API page
per public module (``api/``). These folders are git-ignored and rewritten at every build, so
a newly registered agent or module gets its page with no edit here.

The build warns, naming each culprit (and so fails with ``-W``, as CI builds it), on an
agent without a paper, a hyperparameter without a meaning, a public name without a
docstring (``check_docstrings``) and, once the HTML is written, a link or anchor that
leads nowhere (``check_links``).
"""

from __future__ import annotations

import html.parser
import importlib
import inspect
import json
import pkgutil
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from sphinx.application import Sphinx
from sphinx.util import logging

LOG = logging.getLogger(__name__)

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
RESULTS = ROOT / "benchmarks" / "results"

#: Top-level import packages whose public modules get API pages, in the order shown.
PACKAGES = (
    ("rlx", "rlx-core"),
    ("rlx_classical", "rlx-classical"),
    ("rlx_envs", "rlx-envs"),
    ("rlx_bandits", "rlx-bandits"),
    ("rlx_onpolicy", "rlx-onpolicy"),
    ("rlx_offpolicy", "rlx-offpolicy"),
    ("rlx_es", "rlx-es"),
    ("rlx_hillclimb", "rlx-hillclimb (example plugin)"),
    ("rlx_minidqn", "rlx-minidqn (example plugin)"),
)

#: Folders under docs/ that this extension owns and rewrites.
GENERATED = ("agents", "api", "benchmarks", "reference")

#: Benchmark scripts whose results file does not start with the script's name.
SCRIPT_OF = {"core_building_blocks_speed": "core_trainer_overhead"}


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the generator and the checks with Sphinx."""
    app.connect("builder-inited", generate)
    app.connect("build-finished", check_links)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


# --- helpers -----------------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it already holds it (keeps incremental builds)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _cell(value: Any) -> str:
    """One Markdown table cell: pipes escaped, newlines folded."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    """A Markdown table."""
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _rst_block(text: str) -> str:
    """A MyST block that renders ``text`` (a docstring) as reStructuredText."""
    return "```{eval-rst}\n" + text.strip() + "\n```\n"


def _slug(text: str) -> str:
    """An anchor-safe label."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def env_label(env_id: str) -> str:
    """The label of an environment's section on the environments page."""
    return "env-" + _slug(env_id)


# --- generation ----------------------------------------------------------------------------


def generate(app: Sphinx) -> None:
    """Write every generated page; fail on what the site would show wrongly."""
    from rlx.discovery import get_registry

    registry = get_registry()
    problems: list[str] = []
    app.config.nitpick_ignore = [*app.config.nitpick_ignore, *preset_configs(registry)]
    results = benchmark_pages()
    agent_pages(registry, results, problems)
    environment_page(registry)
    cli_page()
    changelog_page()
    modules = api_pages(problems)
    problems += check_docstrings(modules)
    for problem in sorted(set(problems)):
        LOG.warning("%s", problem, type="rlx", subtype="content")


def agent_problems(spec: Any, rows: list[dict[str, Any]]) -> list[str]:
    """What an agent's page cannot do without: a paper, and a meaning for every hyperparameter
    (``rows`` as :func:`rlx.config.describe` gives them)."""
    problems = []
    if not spec.paper.strip():
        problems.append(f"agent {spec.name!r} ({spec.distribution}) names no paper")
    for row in rows:
        if not str(row.get("help", "")).strip():
            problems.append(f"hyperparameter {row['name']!r} of agent {spec.name!r} has no meaning")
    return problems


def preset_configs(registry: Any) -> list[tuple[str, str]]:
    """The config classes that :func:`rlx.config.preset` builds inside agent classes: they are
    no module attributes, so the ``Config`` alias of a preset agent names no page."""
    ignored = []
    for spec in registry.agents.values():
        config = spec.load().Config
        if getattr(config, "preset", None):
            ignored.append(("py:class", f"{config.__module__}.{config.__qualname__}"))
    return ignored


def agent_pages(registry: Any, results: dict[str, str], problems: list[str]) -> None:
    """``agents/index.md`` and one page per registered agent."""
    from rlx.config import describe
    from rlx.tuned import entries

    folder = DOCS / "agents"
    specs = sorted(registry.agents.values(), key=lambda s: (s.family, s.name))
    index = [
        "# Agents\n",
        "Every agent installed when this site was built, by family: its page gives the paper, "
        "the algorithm, every hyperparameter, the spaces it takes, the environments it has "
        "tuned settings for and the measured results. `rlx list` shows the same on your "
        "machine.\n",
    ]
    names: list[str] = []
    for family in sorted({spec.family for spec in specs}):
        members = [spec for spec in specs if spec.family == family]
        index.append(f"\n## {family}\n")
        index.append(
            _table(
                ("agent", "summary", "distribution"),
                ((f"[{s.name}]({s.name}.md)", s.summary, s.distribution) for s in members),
            )
        )
        names += [spec.name for spec in members]
    index.append("\n```{toctree}\n:hidden:\n\n" + "\n".join(names) + "\n```\n")
    _write(folder / "index.md", "\n".join(index))

    presets: dict[str, list[str]] = {}
    for spec in specs:
        presets.setdefault(spec.target.split(":")[0], []).append(spec.name)
    for spec in specs:
        cls = spec.load()
        rows = describe(cls.Config)
        problems += agent_problems(spec, rows)
        module = inspect.getmodule(cls)
        text = [f"# {spec.name}\n", f"{spec.summary}.\n" if spec.summary else ""]
        text.append(
            _table(
                ("", ""),
                (
                    ("family", spec.family),
                    ("distribution", f"{spec.distribution} {spec.version}"),
                    ("class", f"{{py:class}}`{cls.__module__}.{cls.__qualname__}`"),
                    ("paper", spec.paper),
                    ("observation spaces", ", ".join(spec.observation_spaces)),
                    ("action spaces", ", ".join(spec.action_spaces)),
                ),
            )
        )
        tuned = entries(spec.name) if spec.tuned else []
        example = _example_env(spec, [entry.env for entry in tuned])
        text.append(f"\n```bash\nrlx info {spec.name}\nrlx run {spec.name} --env {example}\n```\n")
        if module is not None and module.__doc__:
            text.append("\n## The algorithm\n")
            text.append(_rst_block(inspect.cleandoc(module.__doc__)))
        doc = inspect.getdoc(cls)
        if doc:
            text.append(f"\n## The `{cls.__name__}` class\n")
            text.append(_rst_block(doc))
        preset = dict(getattr(cls.Config, "preset", None) or {})
        if preset:
            text.append("\n## Preset\n")
            text.append(
                "This agent is a preset: its class sets these defaults on its base "
                "agent's hyperparameters.\n\n"
            )
            text.append(_table(("hyperparameter", "value"), preset.items()))
        related = [n for n in presets.get(spec.target.split(":")[0], []) if n != spec.name]
        if related:
            links = ", ".join(f"[{name}]({name}.md)" for name in related)
            text.append(f"\nDefined in the same module: {links}.\n")
        text.append("\n## Hyperparameters\n")
        text.append(
            "Set with `--set NAME=VALUE` or a config file's `[hyperparameters]` table; "
            "the search range is what `rlx tune` explores.\n\n"
        )
        text.append(
            _table(
                ("name", "type", "default", "range", "search range", "meaning"),
                (
                    (
                        f"`{row['name']}`",
                        row["type"],
                        f"`{row['default']!r}`",
                        row.get("range", ""),
                        _search_text(row.get("search")),
                        row["help"],
                    )
                    for row in rows
                ),
            )
            if rows
            else "No hyperparameters.\n"
        )
        text.append("\n## Tuned settings\n")
        if tuned:
            text.append(
                "`rlx run` starts from these on the environments below "
                "([tuned settings](../guide/tuned-settings.md)); `--untuned` does not.\n\n"
            )
            text.append(
                _table(
                    ("environment", "budget (steps)", "settings", "source"),
                    (
                        (
                            entry.env,
                            entry.trainer.get("steps", ""),
                            ", ".join(f"{k}={v!r}" for k, v in entry.hyperparameters.items()),
                            entry.source,
                        )
                        for entry in tuned
                    ),
                )
            )
        else:
            text.append("None shipped: `rlx run` uses the defaults above.\n")
        text.append("\n## Measured results\n")
        found = agent_results(spec.name, results)
        text.append(found or "No benchmark of this agent is in `benchmarks/results` yet.\n")
        _write(folder / f"{spec.name}.md", "\n".join(text))
    _prune(folder, {f"{name}.md" for name in names} | {"index.md"})


def _example_env(spec: Any, tuned: list[str]) -> str:
    """An environment the agent takes, for the page's first command: a quick tuned one first."""
    for quick in ("CartPole-v1", "Pendulum-v1", "FrozenLake-v1", "rlx/BitFlipping-v0"):
        if quick in tuned:
            return quick
    if tuned:
        return next((env for env in tuned if not env.startswith("ALE/")), tuned[0])
    if spec.family == "bandits":
        return "rlx/BernoulliMAB-v0" if "multi-armed" in spec.summary else "rlx/Statlog-v0"
    if spec.observation_spaces == ("Discrete",):
        return "FrozenLake-v1"
    if "Discrete" in spec.action_spaces or "Any" in spec.action_spaces:
        return "CartPole-v1"
    return "Pendulum-v1"


def _search_text(search: Any) -> str:
    """The tuning range of a hyperparameter as a short text."""
    if not search:
        return ""
    if isinstance(search, (list, tuple)) and len(search) == 2:
        return f"[{search[0]}, {search[1]}]"
    return str(search)


def agent_results(name: str, results: dict[str, str]) -> str:
    """The table rows of the benchmark results that name the agent, under their header."""
    pattern = re.compile(rf"(?<![\w-]){re.escape(name)}(?!\w)", re.IGNORECASE)
    parts = []
    for stem, text in sorted(results.items()):
        tables: list[str] = []
        header: list[str] = []
        matched: list[str] = []
        for line in [*text.splitlines(), ""]:
            if line.startswith("|"):
                if not header:
                    header = [line]
                elif set(line.replace("|", "").strip()) <= set("-: "):
                    header.append(line)
                elif pattern.search("|".join(line.split("|")[1:3])):
                    matched.append(line)
                continue
            if matched:
                tables.append("\n".join(header + matched) + "\n")
            header, matched = [], []
        if tables:
            figures = [
                f"![{label or stem}](../benchmarks/{Path(image).name})"
                for label, image in re.findall(r"!\[([^\]]*)\]\(([^)]+)\)", text)
                if (RESULTS / image).is_file()
            ]
            parts.append(
                f"From [{stem}](../benchmarks/{stem}.md):\n\n"
                + "\n".join(tables + [f"{figure}\n" for figure in figures])
            )
    return "\n".join(parts)


def benchmark_pages() -> dict[str, str]:
    """One page per results file of ``benchmarks/results``; returns the Markdown by stem."""
    folder = DOCS / "benchmarks"
    folder.mkdir(parents=True, exist_ok=True)
    pages: dict[str, str] = {}
    keep = {"index.md"}
    scripts = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py"))
    for md in sorted(RESULTS.glob("*.md")):
        text = md.read_text()
        if not _title(text):
            text = f"# {md.stem.replace('_', ' ').capitalize()}\n\n{text}"
        for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
            source = RESULTS / image
            if source.is_file():
                shutil.copyfile(source, folder / source.name)
                keep.add(source.name)
        text = _local_links(text)
        pages[md.stem] = text
        _write(folder / md.name, text + _provenance(md.stem, scripts))
        keep.add(md.name)
    for data in sorted(RESULTS.glob("*.json")):
        if data.stem in pages:
            continue
        page = _json_page(data) + _provenance(data.stem, scripts)
        pages[data.stem] = page
        _write(folder / f"{data.stem}.md", page)
        keep.add(f"{data.stem}.md")
    index = [
        "# Benchmarks\n",
        "Every results file of `benchmarks/results` in the repository. Each comes from one "
        "script of `benchmarks/` that runs rlx and its peer (Stable-Baselines3, CleanRL-style "
        "plain implementations, EvoTorch) side by side in one invocation; absolute times hold "
        "only for the machine named on the page (a 2-core x86_64 CPU machine unless it says "
        "otherwise), ratios travel better.\n",
        _table(
            ("results", "title", "reproduce"),
            (
                (f"[{stem}]({stem}.md)", _title(text), f"`python benchmarks/{script}.py`")
                for stem, text in sorted(pages.items())
                for script in [_script(stem, scripts)]
            ),
        ),
        "\n```{toctree}\n:hidden:\n\n" + "\n".join(sorted(pages)) + "\n```\n",
    ]
    _write(folder / "index.md", "\n".join(index))
    _prune(folder, keep)
    return pages


def _title(text: str) -> str:
    """The first heading of a page."""
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def _script(stem: str, scripts: list[str]) -> str:
    """The benchmark script that wrote results file ``stem``: the longest matching prefix."""
    stem = SCRIPT_OF.get(stem, stem)
    candidates = [s for s in scripts if stem == s or stem.startswith(s + "_")]
    return max(candidates, key=len) if candidates else stem


def _provenance(stem: str, scripts: list[str]) -> str:
    """How to reproduce a results page."""
    script = _script(stem, scripts)
    return (
        f"\n\n---\n\nReproduce: `python benchmarks/{script}.py` from the repository root "
        f"(with Stable-Baselines3 installed where it compares with it); it rewrites "
        f"`benchmarks/results/{stem}.*`.\n"
    )


def _local_links(text: str) -> str:
    """Results pages link to files beside them; keep images and pages, name the rest."""

    def replace(match: re.Match[str]) -> str:
        bang, label, target = match.group(1), match.group(2), match.group(3)
        if target.startswith(("http://", "https://", "#")):
            return match.group(0)
        path = target.split("#")[0]
        if bang or (path.endswith(".md") and (RESULTS / path).is_file()):
            return match.group(0)
        return f"{label} (`{target}`)"

    return re.sub(r"(!?)\[([^\]]*)\]\(([^)]+)\)", replace, text)


def _json_page(path: Path) -> str:
    """A page for a results file that has no Markdown companion: its numbers, whole."""
    data = json.loads(path.read_text())
    title = data.get("benchmark") if isinstance(data, dict) else None
    lines = [f"# {title or path.stem.replace('_', ' ')}\n"]
    if isinstance(data, dict) and "machine" in data:
        lines.append(f"Machine: `{json.dumps(data['machine'])}`.\n")
    lines.append(
        f"The results file `benchmarks/results/{path.name}`, as the script wrote it:\n\n"
        "```json\n" + json.dumps(data, indent=2) + "\n```\n"
    )
    return "\n".join(lines)


def environment_page(registry: Any) -> None:
    """``reference/environments.md``: every environment an rlx plugin registers."""
    from rlx.cli import _describe_env

    text = [
        "# Environments\n",
        "The environments that rlx plugins register (`rlx list envs`), with their keyword "
        "arguments (`--env-kwargs`) and spaces. Any gymnasium id works too; `import rlx_envs` "
        "registers these with gymnasium for your own code.\n",
    ]
    for env_id, spec in sorted(registry.envs.items()):
        document = _describe_env(env_id)
        text.append(f"\n({env_label(env_id)})=\n## {env_id}\n")
        text.append(f"{document['summary']}\n" if document["summary"] else "")
        text.append(
            _table(
                ("", ""),
                (
                    ("distribution", f"{spec.distribution} {spec.version}"),
                    ("entry point", f"`{document['entry_point']}`"),
                    ("observation space", document["observation_space"]),
                    ("action space", document["action_space"]),
                    ("episode step limit", document["max_episode_steps"] or "none"),
                ),
            )
        )
        arguments = document["keyword_arguments"] or []
        if arguments:
            text.append(
                "\n"
                + _table(
                    ("keyword argument", "type", "default"),
                    (
                        (
                            f"`{row['name']}`",
                            row["type"],
                            "(required)" if row["required"] else f"`{row['default']!r}`",
                        )
                        for row in arguments
                    ),
                )
            )
        if document["data"]:
            names = sorted({Path(row["path"]).name for row in document["data"]})
            text.append(
                "\nData files it reads (searched in `path=`, `$RLX_UCI_DIR`, the cache and "
                f"the repository's `shared/data/uci/`): {', '.join(f'`{n}`' for n in names)}.\n"
            )
    _write(DOCS / "reference" / "environments.md", "\n".join(text))


def cli_page() -> None:
    """``reference/cli.md``: every command and option, read from the Typer app itself."""
    import typer

    from rlx.cli import app

    group = typer.main.get_command(app)
    text = [
        "# Command-line reference\n",
        "Generated from the `rlx` command itself, so it matches the installed version "
        "(`rlx COMMAND --help` prints the same). The [CLI guide](../guide/cli.md) walks "
        "through it by task.\n",
    ]
    text.append("\n## rlx\n")
    text.append(_options(group, "rlx"))
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        text.append(f"\n## rlx {name}\n")
        text.append(_options(command, f"rlx {name}"))
    _write(DOCS / "reference" / "cli.md", "\n".join(text))


def _options(command: Any, path: str) -> str:
    """A command's usage, help and options table."""
    usage = "[OPTIONS]"
    for param in command.params:
        if param.param_type_name == "argument" and not param.hidden:
            name = param.metavar or param.name.upper()
            optional = not param.required and not name.startswith("[")
            usage += f" [{name}]" if optional else f" {name}"
    if getattr(command, "commands", None):
        usage += " COMMAND [ARGS]..."
    parts = [f"```text\n{path} {usage}\n```\n"]
    if command.help:
        parts.append(inspect.cleandoc(command.help).replace("\b\n", "") + "\n")
    rows = []
    for param in command.params:
        if param.hidden:
            continue
        if param.param_type_name == "argument":
            names = f"`{param.metavar or param.name.upper()}`"
            default = "(required)" if param.required else ""
        else:
            names = ", ".join(f"`{o}`" for o in (*param.opts, *param.secondary_opts))
            default = "" if param.default in (None, False, (), []) else f"`{param.default!r}`"
            if param.required:
                default = "(required)"
        rows.append((names, _param_type(param), default, getattr(param, "help", "") or ""))
    if rows:
        parts.append("\n" + _table(("option", "type", "default", "meaning"), rows))
    return "\n".join(parts)


def _param_type(param: Any) -> str:
    """The type of a command-line parameter, as a reader would name it."""
    if getattr(param, "is_flag", False):
        return "flag"
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    if annotation is None:
        return str(getattr(getattr(param, "type", None), "name", ""))
    text = getattr(annotation, "__name__", None) or str(annotation)
    return text.replace("typing.", "").replace("pathlib.", "")


def changelog_page() -> None:
    """``reference/changelog.md``: each distribution's changelog, headings one level down."""
    text = ["# Changelogs\n", "Each distribution is versioned on its own.\n"]
    changelogs = [*ROOT.glob("packages/*/CHANGELOG.md"), *ROOT.glob("examples/*/CHANGELOG.md")]
    for path in sorted(changelogs):
        name = _distribution_name(path.parent)
        body = path.read_text().split("\n", 1)[1] if path.read_text().startswith("# ") else ""
        body = re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + 1) + " ", body, flags=re.M)
        text.append(f"\n## {name}\n{body}")
    _write(DOCS / "reference" / "changelog.md", "\n".join(text))


def _distribution_name(folder: Path) -> str:
    """The distribution name written in a package's pyproject.toml."""
    import tomllib

    return str(tomllib.loads((folder / "pyproject.toml").read_text())["project"]["name"])


def public_modules() -> Iterator[tuple[str, str]]:
    """``(package title, module name)`` of every public module of the installed packages."""
    for package, title in PACKAGES:
        try:
            root = importlib.import_module(package)
        except ImportError:
            continue
        found = pkgutil.walk_packages(root.__path__, package + ".")
        names = [package, *sorted(info.name for info in found)]
        for name in names:
            if not any(part.startswith("_") for part in name.split(".")):
                yield title, name


def api_pages(problems: list[str]) -> list[str]:
    """``api/index.md`` and one autodoc page per public module; returns the modules."""
    folder = DOCS / "api"
    modules: list[str] = []
    index = [
        "# API reference\n",
        "Every public module of rlx-core and the families, from their docstrings. "
        "`import rlx` gives the names most programs need: {py:func}`rlx.make`, "
        "{py:class}`rlx.Trainer`, {py:func}`rlx.load`, {py:func}`rlx.evaluate`.\n",
    ]
    current = None
    for title, name in public_modules():
        try:
            importlib.import_module(name)
        except ImportError as exc:
            problems.append(f"module {name} cannot be imported: {exc}")
            continue
        if title != current:
            index.append(f"\n## {title}\n")
            current = title
        summary = (inspect.getdoc(importlib.import_module(name)) or "").split("\n\n")[0]
        index.append(f"- [{name}]({name}.rst): {' '.join(summary.split())}")
        _write(folder / f"{name}.rst", _module_page(name))
        modules.append(name)
    index.append("\n```{toctree}\n:hidden:\n\n" + "\n".join(modules) + "\n```\n")
    _write(folder / "index.md", "\n".join(index))
    _prune(folder, {f"{m}.rst" for m in modules} | {"index.md"})
    return modules


def _module_page(name: str) -> str:
    """The autodoc page of one module; names a package loads lazily (``rlx.make``) are
    documented where the package exports them."""
    module = importlib.import_module(name)
    text = f"{name}\n{'=' * len(name)}\n\n.. automodule:: {name}\n"
    lazy = [n for n in getattr(module, "__all__", ()) if n not in vars(module)]
    for attr in lazy:
        obj = getattr(module, attr)
        kind = "autoclass" if inspect.isclass(obj) else "autofunction"
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        text += f"\n.. {kind}:: {name}.{attr}\n"
    return text


def check_docstrings(modules: list[str]) -> list[str]:
    """Public names of the public modules without a docstring (inherited ones count)."""
    missing = []
    for name in modules:
        module = importlib.import_module(name)
        if not inspect.getdoc(module):
            missing.append(f"module {name} has no docstring")
        for attr, obj in vars(module).items():
            if attr.startswith("_") or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if getattr(obj, "__module__", None) != name:
                continue
            if not inspect.getdoc(obj):
                missing.append(f"{name}.{attr} has no docstring")
            if inspect.isclass(obj):
                for member, value in vars(obj).items():
                    if member.startswith("_"):
                        continue
                    if inspect.isfunction(value) or isinstance(
                        value, (property, classmethod, staticmethod)
                    ):
                        if not inspect.getdoc(getattr(obj, member)):
                            missing.append(f"{name}.{attr}.{member} has no docstring")
    return missing


def _prune(folder: Path, keep: set[str]) -> None:
    """Remove generated files that no longer have a source (a removed agent or module)."""
    for path in folder.iterdir():
        if path.is_file() and path.name not in keep:
            path.unlink()


# --- links ---------------------------------------------------------------------------------


class _Links(html.parser.HTMLParser):
    """The ids a page defines and the links it makes."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id", "name"):
            if values.get(key):
                self.ids.add(str(values[key]))
        target = values.get("href") if tag in ("a", "link") else values.get("src")
        if target and tag in ("a", "img", "link", "script"):
            self.links.append(str(target))


def check_links(app: Sphinx, exception: Exception | None) -> None:
    """Warn about every internal link or anchor of the built HTML that leads nowhere."""
    if exception is not None or app.builder.format != "html":
        return
    broken = broken_links(Path(app.outdir))
    for problem in broken:
        LOG.warning("broken link: %s", problem, type="rlx", subtype="link")
    if not broken:
        LOG.info("links: every internal link and anchor resolves")


def broken_links(out: Path) -> list[str]:
    """``page: link (why)`` for each link, image or script of the HTML under ``out`` whose file
    or anchor does not exist; links to other sites are not followed."""
    pages: dict[Path, _Links] = {}
    for page in out.rglob("*.html"):
        parser = _Links()
        parser.feed(page.read_text(errors="replace"))
        pages[page.resolve()] = parser
    broken = []
    for page, parser in sorted(pages.items()):
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(out.resolve())}: {link} (no such file)")
            elif parts.fragment and target in pages:
                if unquote(parts.fragment) not in pages[target].ids:
                    broken.append(f"{page.relative_to(out.resolve())}: {link} (no such anchor)")
    return broken
