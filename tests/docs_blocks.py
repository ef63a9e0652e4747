"""Run the code blocks of the documentation pages and of README.md, as a reader would.

``tests/test_docs_blocks.py`` runs every page that :func:`pages` finds (README.md and every
``docs/**/*.md`` outside the generated folders ``docs/agents/``, ``docs/api/``,
``docs/benchmarks/``, ``docs/reference/`` and ``docs/_build/``) as one test, with these
conventions:

- Fenced blocks whose language is ``bash`` or ``python`` run; every other language (``toml``,
  ``text``, ``console``, none) does not. A fence may be indented (inside a list item) and
  may use more backticks or tildes, so that a block can show another.
- The blocks of a page run in page order in one fresh scratch directory (pytest's
  ``tmp_path/work``), ``bash`` and ``python`` interleaved as they appear.
- A ``bash`` block runs as one ``bash -euo pipefail`` script: the first command that fails
  fails the block. ``# comments`` after commands are fine.
- The ``python`` blocks of a page share one namespace (``__name__ == "__main__"``), run with
  ``exec`` in the test's process, with the scratch directory as the current directory and
  first on ``sys.path``; the current directory, ``sys.path`` and the environment are
  restored afterwards, and modules imported from the scratch directory are forgotten.
- ``<!-- docs-test: skip REASON -->`` on the line just before a fence: the block is not run.
  A skip without a reason, a marker that is not directly followed by a fence and an unknown
  marker are errors that fail the page's test.
- ``<!-- docs-test: file NAME -->`` on the line just before a fence: the block's content is
  written to ``NAME`` (a relative path, subfolders created) in the scratch directory when
  its turn comes, instead of being run, so that the commands after it can read it (a
  ``run.toml``, a module imported by a later block).
- Environment: the variables of the test's process minus every ``RLX_*`` one, with
  ``CI=true``, ``MPLBACKEND=Agg``, ``HOME`` (and ``XDG_CACHE_HOME``, ``XDG_CONFIG_HOME``) in
  ``tmp_path/home`` (so rlx's download cache, ``~/.cache/rlx``, and every tracker's files stay
  in the test's folder), the virtual environment's ``bin`` first on ``PATH`` and the scratch
  directory first on ``PYTHONPATH``. ``bash`` gets ``/dev/null`` as its standard input.
- Each block has :data:`BLOCK_TIMEOUT` seconds (bash: its process group is killed; python:
  ``SIGALRM`` raises in the block).
- A failing block fails the test with the page and the line of the block's first line, the
  failing command with its line where bash says it, the block as it ran, and the tail of
  what it wrote to stderr (python: the traceback, whose line numbers are the page's).

Budgets are capped, so that a page runs in seconds rather than the hours its commands
promise (the page keeps the real numbers; :func:`cap_bash` and :func:`cap_python` rewrite
the block's text with regular expressions before it runs, and only integer literals). The
caps: :data:`STEPS_CAP` 500 environment steps (a few iterations of every agent; one of PPO
on Atari), :data:`RESUME_STEPS_CAP` 1,000, :data:`TRIALS_CAP` 2, :data:`EPISODES_CAP` 3,
:data:`SEEDS_CAP` 2.

- bash, ``rlx run``: ``--steps N`` becomes ``min(N, STEPS_CAP)``, and a run without
  ``--steps`` gets ``--steps STEPS_CAP`` (the tuned settings' budgets are millions of steps);
  ``--eval-episodes`` likewise at most :data:`EPISODES_CAP`, added where missing (an Atari
  evaluation of the default ten episodes takes longer than the training). A ``--resume``
  continues a run that stopped at the cap, so its ``--steps N`` becomes
  ``min(N, RESUME_STEPS_CAP)`` (twice the cap: there is something left to train), and a
  ``--resume`` without ``--steps`` keeps the run's own (capped) budget. ``--seeds SPEC``
  keeps the first :data:`SEEDS_CAP` seeds of the spec (``0-15`` becomes ``0-1``), and
  ``--jobs`` is at most :data:`SEEDS_CAP` (rlx refuses more worker processes than seeds).
- bash, ``rlx tune``: ``--trials`` at most :data:`TRIALS_CAP`, ``--seeds K`` at most
  :data:`SEEDS_CAP`, ``--steps`` and ``--eval-episodes`` as for ``rlx run`` (added where
  missing).
- bash, ``rlx eval``: ``--episodes`` at most :data:`EPISODES_CAP`, added where missing.
- python: the keyword arguments ``steps=`` (and ``"steps": N`` in a dict literal) at most
  :data:`STEPS_CAP`, on a line that calls a ``resume(`` :data:`RESUME_STEPS_CAP`;
  ``episodes=`` and ``eval_episodes=`` at most :data:`EPISODES_CAP`; ``seeds="SPEC"`` the
  first :data:`SEEDS_CAP` seeds.

``--time-limit`` and every other setting are left alone. A bash command is capped when it
starts (after ``;``, ``&&``, ``|``, a newline; ``X=1 ``, ``time `` or ``(`` may come first)
with ``rlx`` or a path ending in ``/rlx``, then ``run``, ``tune`` or ``eval``; comments and
quoted text are never rewritten.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Folders of docs/ that tools write; their pages are not run.
GENERATED = ("agents", "api", "benchmarks", "reference", "_build")

STEPS_CAP = 500
RESUME_STEPS_CAP = 2 * STEPS_CAP
TRIALS_CAP = 2
EPISODES_CAP = 3
SEEDS_CAP = 2
#: Seconds one block may take.
BLOCK_TIMEOUT = 300
#: Lines of stderr shown for a failing block.
TAIL_LINES = 40

RUN_LANGUAGES = ("bash", "python")


class DocsTestError(ValueError):
    """A page whose docs-test markers or fences cannot be read."""


class BlockFailed(AssertionError):
    """A block that failed; the message says where, what ran and what it wrote."""


@dataclass(frozen=True)
class Block:
    """One fenced block: ``line`` is the page's line (1-based) of its first content line."""

    language: str
    text: str
    line: int
    action: str = "run"  # "run", "skip" (argument: the reason), "file" (argument: the name)
    argument: str = ""

    @property
    def runs(self) -> bool:
        return self.action == "run" and self.language in RUN_LANGUAGES


# --------------------------------------------------------------------------- pages and blocks

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>.*?)[ \t]*$")
MARKER = re.compile(r"^[ \t]*<!--[ \t]*docs-test:(?P<body>.*?)-->[ \t]*$")


def pages(root: Path = REPO_ROOT) -> list[Path]:
    """README.md and every ``docs/**/*.md`` outside the generated folders, sorted."""
    found = [root / "README.md"] if (root / "README.md").is_file() else []
    docs = root / "docs"
    for page in sorted(docs.rglob("*.md")) if docs.is_dir() else []:
        if page.relative_to(docs).parts[0] not in GENERATED:
            found.append(page)
    return found


def _marker(body: str, where: str) -> tuple[str, str]:
    action, _, argument = body.strip().partition(" ")
    argument = argument.strip()
    if action == "skip":
        if not argument:
            raise DocsTestError(
                f"{where}: a docs-test skip needs a reason: <!-- docs-test: skip WHY -->"
            )
        return action, argument
    if action == "file":
        name = Path(argument)
        if not argument or name.is_absolute() or ".." in name.parts:
            raise DocsTestError(
                f"{where}: a docs-test file needs a relative name inside the scratch directory, "
                f"got {argument!r}"
            )
        return action, argument
    raise DocsTestError(
        f"{where}: unknown docs-test marker {body.strip()!r} (skip REASON, file NAME)"
    )


def parse_blocks(text: str, page: str = "<page>") -> list[Block]:
    """The fenced blocks of a Markdown page in order, with their docs-test markers.

    A fence closes on a line of the same character, at least as long, and nothing else
    (CommonMark); a block's lines lose the opening fence's indentation.
    """
    lines = text.splitlines()
    blocks: list[Block] = []
    pending: tuple[str, str, int] | None = None  # a marker waiting for its fence
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        marker = MARKER.match(line)
        if marker:
            if pending is not None:
                raise DocsTestError(
                    f"{page}:{pending[2]}: docs-test marker not followed by a fence"
                )
            pending = (*_marker(marker["body"], f"{page}:{number}"), number)
            continue
        fence = FENCE.match(line)
        if not fence or (fence["fence"][0] == "`" and "`" in fence["info"]):
            if pending is not None:
                raise DocsTestError(
                    f"{page}:{pending[2]}: docs-test marker not followed by a fence"
                )
            continue
        opening, indent = fence["fence"], len(fence["indent"].expandtabs(4))
        language = fence["info"].split()[0].lower() if fence["info"] else ""
        start, content = number + 1, []
        while True:
            if number >= len(lines):
                raise DocsTestError(f"{page}:{start - 1}: the fence opened here is never closed")
            line = lines[number]
            number += 1
            closing = FENCE.match(line)
            if (
                closing
                and not closing["info"]
                and closing["fence"][0] == opening[0]
                and len(closing["fence"]) >= len(opening)
            ):
                break
            content.append(_dedent(line, indent))
        action, argument = ("run", "") if pending is None else pending[:2]
        pending = None
        body = "\n".join(content) + "\n" if content else ""
        blocks.append(Block(language, body, start, action, argument))
    if pending is not None:
        raise DocsTestError(f"{page}:{pending[2]}: docs-test marker not followed by a fence")
    return blocks


def _dedent(line: str, indent: int) -> str:
    """``line`` without up to ``indent`` columns of leading blanks."""
    removed = 0
    while removed < indent and line[:1] in (" ", "\t"):
        removed += 4 - removed % 4 if line[0] == "\t" else 1
        line = line[1:]
    return line


# --------------------------------------------------------------------------- the caps


def cap_seeds(spec: str, keep: int = SEEDS_CAP) -> str:
    """The first ``keep`` seeds of a seed spec (``0-15``, ``0,3,7``, ``0-3,9``), as a spec."""
    seeds: list[int] = []
    for part in spec.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            return spec  # not a spec this knows: left as it is
        stop = int(last) if dash else int(first)
        seeds.extend(range(int(first), max(stop, int(first)) + 1)[: keep - len(seeds)])
        if len(seeds) >= keep:
            break
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(str(seed) for seed in seeds)


def _at_most(cap: int) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return match["head"] + str(min(int(match["number"].replace("_", "")), cap))

    return replace


def _integer_option(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w-])(?P<head>--{name}(?:[ \t]+|=))(?P<number>\d[\d_]*)(?![\w.])")


STEPS_OPTION = _integer_option("steps")
TRIALS_OPTION = _integer_option("trials")
EPISODES_OPTION = _integer_option("episodes")
EVAL_EPISODES_OPTION = _integer_option("eval-episodes")
SEEDS_COUNT_OPTION = _integer_option("seeds")
JOBS_OPTION = _integer_option("jobs")
SEEDS_SPEC_OPTION = re.compile(
    r"(?<![\w-])(?P<head>--seeds(?:[ \t]+|=))(?P<quote>['\"]?)(?P<spec>\d[\d,-]*)(?P=quote)"
)
RLX_COMMAND = re.compile(  # at the start of a command: after blanks, "(", "X=1 ", "time "
    r"^\s*(?:[({!]\s*)*(?:\w+=\S*\s+)*(?:time\s+)?(?:\S*/)?rlx(?:[ \t]+--[\w-]+)*[ \t]+"
    r"(?P<verb>run|tune|eval)(?=\s|$)"
)


def _capped(args: str, option: re.Pattern[str], cap: int, add: str = "") -> str:
    """``args`` with ``option``'s values at most ``cap``; without the option, ``add`` first."""
    if option.search(args):
        return option.sub(_at_most(cap), args)
    return f" {add} {cap}{args}" if add else args


def _cap_rlx_command(command: str) -> str:
    """One shell command (no separators, no comment) with its rlx budgets capped."""
    found = RLX_COMMAND.match(command)
    if not found:
        return command
    head, args = command[: found.end()], command[found.end() :]
    verb = found["verb"]
    if verb == "eval":
        return head + _capped(args, EPISODES_OPTION, EPISODES_CAP, "--episodes")
    if verb == "tune":
        args = _capped(args, TRIALS_OPTION, TRIALS_CAP)
        args = _capped(args, SEEDS_COUNT_OPTION, SEEDS_CAP)
        args = _capped(args, EVAL_EPISODES_OPTION, EPISODES_CAP, "--eval-episodes")
        return head + _capped(args, STEPS_OPTION, STEPS_CAP, "--steps")
    args = SEEDS_SPEC_OPTION.sub(
        lambda m: m["head"] + m["quote"] + cap_seeds(m["spec"]) + m["quote"], args
    )
    args = _capped(args, JOBS_OPTION, SEEDS_CAP)  # rlx refuses more workers than seeds
    if re.search(r"(?<![\w-])--resume(?=[\s=]|$)", args):
        return head + _capped(args, STEPS_OPTION, RESUME_STEPS_CAP)
    args = _capped(args, EVAL_EPISODES_OPTION, EPISODES_CAP, "--eval-episodes")
    return head + _capped(args, STEPS_OPTION, STEPS_CAP, "--steps")


def _shell_pieces(script: str) -> Iterator[tuple[bool, str]]:
    """The script cut into (is_command, text) pieces, in order: commands, and between them
    separators (newlines, ``;``, ``&&``, ``||``, ``|``, ``&``) and comments. Quotes and
    backslashes are respected; joining the texts gives the script back."""
    start = index = 0
    quote = ""
    size = len(script)
    while index < size:
        char = script[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 2
                continue
            if char == quote:
                quote = ""
            index += 1
            continue
        if char == "\\":
            index += 2
            continue
        if char in "'\"":
            quote = char
            index += 1
            continue
        if char == "#" and (index == 0 or script[index - 1].isspace()):
            end = script.find("\n", index)
            end = size if end < 0 else end
            yield True, script[start:index]
            yield False, script[index:end]
            start = index = end
            continue
        redirection = char == "&" and (
            script[index - 1 : index] in ("<", ">") or script[index + 1 : index + 2] == ">"
        )
        if char in ";|&\n" and not redirection:
            end = index + 1
            while char != "\n" and end < size and script[end] in ";|&":
                end += 1
            yield True, script[start:index]
            yield False, script[index:end]
            start = index = end
            continue
        index += 1
    yield True, script[start:]


def cap_bash(script: str) -> str:
    """``script`` with the budgets of its ``rlx run``, ``rlx tune`` and ``rlx eval`` capped."""
    return "".join(
        _cap_rlx_command(text) if is_command else text for is_command, text in _shell_pieces(script)
    )


PY_STEPS = re.compile(
    r"(?:(?<![\w.])(?P<keyword>steps[ \t]*=(?!=)[ \t]*)"
    r"|(?P<key>(?P<q>['\"])steps(?P=q)[ \t]*:[ \t]*))(?P<number>\d[\d_]*)(?![\w.])"
)
PY_EPISODES = re.compile(
    r"(?<![\w.])(?P<head>(?:eval_)?episodes[ \t]*=(?!=)[ \t]*)(?P<number>\d[\d_]*)(?![\w.])"
)
PY_SEEDS = re.compile(
    r"(?<![\w.])(?P<head>seeds[ \t]*=(?!=)[ \t]*)(?P<q>['\"])(?P<spec>\d[\d,-]*)(?P=q)"
)


def cap_python(source: str) -> str:
    """``source`` with its budgets capped (see the module docstring)."""
    lines = []
    for line in source.splitlines(keepends=True):
        cap = RESUME_STEPS_CAP if "resume(" in line else STEPS_CAP
        line = PY_STEPS.sub(
            lambda m, cap=cap: (
                (m["keyword"] or m["key"]) + str(min(int(m["number"].replace("_", "")), cap))
            ),
            line,
        )
        line = PY_EPISODES.sub(_at_most(EPISODES_CAP), line)
        line = PY_SEEDS.sub(lambda m: m["head"] + m["q"] + cap_seeds(m["spec"]) + m["q"], line)
        lines.append(line)
    return "".join(lines)


# --------------------------------------------------------------------------- running a page


def page_environment(home: Path, scratch: Path) -> dict[str, str]:
    """The environment every block of a page runs in (see the module docstring)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RLX_")}
    bin_dir = str(Path(sys.executable).parent)  # the venv's bin, not the interpreter it links to
    python_path = [str(scratch), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env.update(
        CI="true",
        MPLBACKEND="Agg",
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        PATH=os.pathsep.join([bin_dir, env.get("PATH", "")]),
        PYTHONPATH=os.pathsep.join(python_path),
    )
    return env


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    kept = text.rstrip("\n").splitlines()[-lines:]
    return "\n".join(kept) if kept else "(nothing)"


def _indented(text: str) -> str:
    return "\n".join("    " + line for line in text.rstrip("\n").splitlines())


ERR_TRAP = "trap 'echo \"docs-test: line $LINENO: $BASH_COMMAND\" >&2' ERR\n"
FAILED_AT = re.compile(r"^docs-test: line (\d+): (.*)$", re.MULTILINE)


def run_bash(block: Block, page: str, scratch: Path, env: dict[str, str], timeout: float) -> None:
    """Run a bash block as one ``bash -euo pipefail`` script; raise :class:`BlockFailed`."""
    script = cap_bash(block.text)
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", ERR_TRAP + script],
        cwd=scratch,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # one process group: a timeout ends rlx's workers too
    )
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        problem = f"timed out after {timeout:g} s"
    else:
        if process.returncode == 0:
            return
        problem = f"exit code {process.returncode}"
    failed = FAILED_AT.findall(stderr)
    where = ""
    if failed:
        script_line, command = failed[-1]
        where = f"\nfailed command (page line {block.line + int(script_line) - 2}): {command}"
    stderr = FAILED_AT.sub("", stderr)
    raise BlockFailed(
        f"{page}:{block.line}: bash block failed, {problem}{where}\n"
        f"--- the block as run (budgets capped) ---\n{_indented(script)}\n"
        f"--- stderr, last {TAIL_LINES} lines ---\n{_tail(stderr)}"
    )


class BlockTimeout(Exception):
    """A python block that ran past its time."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only: no limit here
        return

    def expire(signum: int, frame: object) -> None:
        raise BlockTimeout(f"timed out after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def python_context(scratch: Path, env: dict[str, str]) -> Iterator[None]:
    """The scratch directory as current directory and first on ``sys.path``, ``env`` as the
    environment; everything restored afterwards, modules imported from scratch forgotten."""
    cwd, environ, path = os.getcwd(), dict(os.environ), list(sys.path)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(scratch)
    sys.path.insert(0, str(scratch))
    _forget_shadowed(scratch)
    try:
        yield
    finally:
        os.chdir(cwd)
        sys.path[:] = path
        os.environ.clear()
        os.environ.update(environ)
        inside = str(scratch.resolve()) + os.sep
        for name, module in list(sys.modules.items()):
            origin = getattr(module, "__file__", None) or ""
            if origin and os.path.realpath(origin).startswith(inside):
                del sys.modules[name]


def _forget_shadowed(scratch: Path) -> None:
    """Forget modules that a module of the scratch directory shadows: another test in this
    process may have imported its own ``my_nets`` from its own folder."""
    import importlib

    inside = str(scratch.resolve()) + os.sep
    names = {p.stem for p in scratch.glob("*.py")} | {
        p.name for p in scratch.iterdir() if p.is_dir()
    }
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] not in names:
            continue
        origin = getattr(module, "__file__", None) or ""
        if not os.path.realpath(origin).startswith(inside):
            del sys.modules[name]
    importlib.invalidate_caches()


def run_python(block: Block, page: str, namespace: dict, timeout: float) -> None:
    """Exec a python block in ``namespace``; raise :class:`BlockFailed` with its traceback,
    whose line numbers are the page's."""
    source = cap_python(block.text)
    code = compile("\n" * (block.line - 1) + source, page, "exec")
    output = io.StringIO()
    try:
        with (
            _time_limit(timeout),
            contextlib.redirect_stdout(output),
            contextlib.redirect_stderr(output),
        ):
            exec(code, namespace)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a SystemExit of the block fails it too
        trace = "".join(traceback.format_exception(exc))
        raise BlockFailed(
            f"{page}:{block.line}: python block failed: {type(exc).__name__}: {exc}\n"
            f"--- the block as run (budgets capped) ---\n{_indented(source)}\n"
            f"--- output, last {TAIL_LINES} lines ---\n{_tail(output.getvalue())}\n"
            f"--- traceback ---\n{_tail(trace)}"
        ) from None


def run_page(
    page: Path, tmp_path: Path, timeout: float = BLOCK_TIMEOUT, root: Path = REPO_ROOT
) -> int:
    """Run every block of ``page`` in order in ``tmp_path/work``; return how many ran.

    Raises :class:`DocsTestError` for a page whose markers are wrong and :class:`BlockFailed`
    for the first block that fails.
    """
    name = page.relative_to(root).as_posix() if page.is_relative_to(root) else str(page)
    blocks = parse_blocks(page.read_text(encoding="utf-8"), name)
    scratch, home = tmp_path / "work", tmp_path / "home"
    scratch.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    env = page_environment(home, scratch)
    namespace: dict = {"__name__": "__main__"}
    ran = 0
    for block in blocks:
        if block.action == "file":
            target = scratch / block.argument
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
        elif not block.runs:
            continue
        elif block.language == "bash":
            run_bash(block, name, scratch, env, timeout)
            ran += 1
        else:
            with python_context(scratch, env):
                run_python(block, name, namespace, timeout)
            ran += 1
    return ran
