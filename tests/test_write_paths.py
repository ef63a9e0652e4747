"""Every file rlx's packages write goes through :mod:`rlx.files` (written beside its place and
renamed onto it, so that a link planted in a run, group or study directory is replaced, never
written through). This test reads the source of every package and fails for a call that writes
a file any other way, unless it is listed below with the reason it is safe."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(ROOT.glob("packages/*/src/**/*.py"))

#: Calls that write a file, by the name called (``open`` and ``fdopen`` when their mode writes).
WRITING = {
    "write_text", "write_bytes", "savefig", "imwrite", "get_writer", "save_file", "mkstemp",
    "mkdtemp", "NamedTemporaryFile", "savez", "savez_compressed",
}  # fmt: skip
#: Calls that write only when made on these modules (``os.replace``, ``shutil.copy``, ...).
MODULE_WRITING = {
    "os": {"open", "replace", "rename", "symlink", "link"},
    "shutil": {"copy", "copy2", "copyfile", "copytree", "move"},
    "np": {"save"},
    "torch": {"save"},
}

#: (file under packages/, function, call) -> why it is safe without rlx.files.
ALLOWED = {
    ("core/src/rlx/checkpoint.py", "save_checkpoint", "mkdtemp"): "a checkpoint is a folder, "
    "written whole in a new private temporary folder beside it",
    ("core/src/rlx/checkpoint.py", "save_checkpoint", "save_file"): "into that private folder",
    ("core/src/rlx/checkpoint.py", "_swap_into_place", "os.replace"): "renames the finished "
    "folder onto its place; a link there is renamed aside, not followed",
    ("core/src/rlx/checkpoint.py", "tidy", "os.replace"): "puts back a checkpoint folder that "
    "an interrupted swap moved aside (links are skipped)",
    ("core/src/rlx/groups/worker.py", "run_chunk", "mkdtemp"): "a remote chunk trains in a new "
    "private temporary folder of the worker's own, removed at its end; the driver writes the "
    "group through rlx.files",
    ("core/src/rlx/plotting.py", "_write_png", "savefig"): "into memory (io.BytesIO); the bytes "
    "go through rlx.files",
    (
        "core/src/rlx/tune/outputs.py",
        "_plots",
        "savefig",
    ): "into a file object of rlx.files.writing",
    ("core/src/rlx/video.py", "append", "get_writer"): "streams into a file of "
    "rlx.files.temporary_beside",
    ("core/src/rlx/video.py", "finish", "imwrite"): "encodes into memory ('<bytes>'); the bytes "
    "go through rlx.files",
}


def _mode(call: ast.Call) -> str | None:
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    on_os = isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == "os"
    if name not in ("open", "fdopen") or (on_os and name == "open"):  # os.open: MODULE_WRITING
        return None
    mode = call.args[1] if len(call.args) >= 2 else None
    for keyword in call.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    if mode is None:
        return None
    return mode.value if isinstance(mode, ast.Constant) else "?"


def writes(source: Path) -> list[tuple[str, str, int]]:
    """(function, call, line) of every call in ``source`` that writes a file."""
    found: list[tuple[str, str, int]] = []
    stack: list[str] = []

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            stack.append(node.name)
            self.generic_visit(node)
            stack.pop()

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_Call(self, node: ast.Call) -> None:
            func, called = node.func, None
            if isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else None
                if func.attr in MODULE_WRITING.get(owner or "", ()):
                    called = f"{owner}.{func.attr}"
                elif func.attr in WRITING:
                    called = func.attr
            elif isinstance(func, ast.Name) and func.id in WRITING:
                called = func.id
            mode = _mode(node)
            if mode is not None and (mode == "?" or set(mode) & set("wax+")):
                called = f"open({mode})"
            if called is not None:
                found.append((stack[-1] if stack else "<module>", called, node.lineno))
            self.generic_visit(node)

    Visitor().visit(ast.parse(source.read_text(encoding="utf-8")))
    return found


def test_the_scan_sees_the_writes_it_looks_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os, shutil\n"
        "def f(p):\n"
        "    open(p, 'w').write('x')\n"
        "    p.write_text('x')\n"
        "    os.replace(p, p)\n"
        "    shutil.copy(p, p)\n"
        "    open(p).read()\n"
        "    'a'.replace('a', 'b')\n"
    )
    assert [called for _, called, _ in writes(sample)] == [
        "open(w)", "write_text", "os.replace", "shutil.copy",
    ]  # fmt: skip


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT / "packages")))
def test_every_file_write_goes_through_rlx_files(source):
    where = str(source.relative_to(ROOT / "packages"))
    if where == "core/src/rlx/files.py":
        return  # the writer itself
    stray = [
        f"{where}:{line} {function}() calls {called}"
        for function, called, line in writes(source)
        if (where, function, called) not in ALLOWED
    ]
    assert not stray, (
        "write files through rlx.files (writing, write_bytes_atomic, write_text_atomic, "
        "write_json_atomic, open_to_append, temporary_beside, open_lock), or list the call in "
        "ALLOWED with the reason it is safe:\n" + "\n".join(stray)
    )


# -- a study directory's outputs, as a hostile user leaves them --------------------------------

TUNE = ("tune", "q-learning", "--env", "FrozenLake-v1", "--trials", "2", "--steps", "1000",
        "--eval-every", "500", "--eval-episodes", "5", "--no-prune")  # fmt: skip


def test_tune_replaces_links_among_its_outputs_and_writes_nothing_through_them(rlx_cli, tmp_path):
    out, outside = tmp_path / "study", tmp_path / "outside"
    code, _, err = rlx_cli(*TUNE, "--out", str(out))
    assert code == 0, err
    outside.mkdir()
    names = ("trials.csv", "best.toml", "tuned.toml", "optimization_history.png")
    for name in names:  # each output now points at a file of someone else's
        (outside / name).write_text("someone else's\n")
        (out / name).unlink()
        (out / name).symlink_to(outside / name)
    code, _, err = rlx_cli(*TUNE, "--trials", "3", "--out", str(out))
    assert code == 0, err
    for name in names:
        assert (outside / name).read_text() == "someone else's\n", name
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0, name


@pytest.mark.parametrize("where", ["trials", "trials/0"])
def test_tune_refuses_a_study_whose_trial_folders_are_links(rlx_cli, tmp_path, where):
    out, outside = tmp_path / "study", tmp_path / "outside"
    code, _, err = rlx_cli(*TUNE, "--out", str(out))
    assert code == 0, err
    (out / where).rename(outside)
    (out / where).symlink_to(outside)
    before = sorted(p.name for p in outside.rglob("*"))
    code, _, err = rlx_cli(*TUNE, "--trials", "3", "--out", str(out))
    assert code == 2 and "symbolic link" in err and "Traceback" not in err, err
    assert sorted(p.name for p in outside.rglob("*")) == before
