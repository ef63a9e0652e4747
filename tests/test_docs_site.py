"""The documentation site's checks (docs/_ext/rlx_docs.py) catch what they promise to, and every
installed agent, hyperparameter and public name passes them, and the site builds with warnings
as errors (``scripts/docs.sh``, the same command as ``hatch run docs:build``)."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

pytest.importorskip("sphinx", reason="the docs tools are installed by scripts/setup.sh")
rlx_docs = pytest.importorskip("rlx_docs")


def test_an_agent_without_a_paper_or_a_meaning_is_named():
    from rlx import AgentSpec

    spec = AgentSpec(name="nameless", target="m:A", family="x", summary="s")
    rows = [{"name": "alpha", "help": "step size"}, {"name": "beta", "help": " "}]
    problems = rlx_docs.agent_problems(spec, rows)
    assert problems == [
        "agent 'nameless' (unknown) names no paper",
        "hyperparameter 'beta' of agent 'nameless' has no meaning",
    ]


def test_every_installed_agent_has_a_paper_and_meanings():
    from rlx.config import describe
    from rlx.discovery import get_registry

    problems = []
    for spec in get_registry().agents.values():
        problems += rlx_docs.agent_problems(spec, describe(spec.load().Config))
    assert problems == []


def test_a_public_name_without_a_docstring_is_named(monkeypatch):
    module = types.ModuleType("rlx_fake_public", "A module with a docstring.")

    def documented() -> None:
        """Here."""

    def bare() -> None:
        pass

    class Thing:
        """A class."""

        def method(self) -> None:
            pass

        def _private(self) -> None:
            pass

    for obj in (documented, bare, Thing):
        obj.__module__ = module.__name__
        setattr(module, obj.__name__, obj)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    assert rlx_docs.check_docstrings([module.__name__]) == [
        "rlx_fake_public.bare has no docstring",
        "rlx_fake_public.Thing.method has no docstring",
    ]


def test_every_public_name_of_the_installed_packages_has_a_docstring():
    modules = [name for _, name in rlx_docs.public_modules()]
    assert "rlx.replay" in modules and "rlx_offpolicy.dqn" in modules
    assert rlx_docs.check_docstrings(modules) == []


def test_broken_files_and_anchors_are_found_and_good_links_pass(tmp_path):
    (tmp_path / "guide").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="guide/a.html#here">ok</a> <a href="guide/a.html#gone">anchor</a> '
        '<a href="missing.html">file</a> <a href="https://example.org/x">outside</a> '
        '<img src="guide/pic.png"> <a href="#top" id="top">self</a>'
    )
    (tmp_path / "guide" / "a.html").write_text('<h2 id="here">Here</h2><a href="../index.html">')
    (tmp_path / "guide" / "pic.png").write_bytes(b"png")
    assert rlx_docs.broken_links(tmp_path) == [
        "index.html: guide/a.html#gone (no such anchor)",
        "index.html: missing.html (no such file)",
    ]


def test_benchmark_rows_are_matched_to_their_agent():
    results = {
        "demo": "# Demo\n\n| row | x |\n| --- | --- |\n| ppo-hopper | 1 |\n"
        "| double-dqn | 2 |\n| dqn-cartpole | 3 |\n\ntext\n"
    }
    ppo = rlx_docs.agent_results("ppo", results)
    dqn = rlx_docs.agent_results("dqn", results)
    assert "ppo-hopper" in ppo and "dqn" not in ppo
    assert "dqn-cartpole" in dqn and "double-dqn" not in dqn
    assert rlx_docs.agent_results("sac", results) == ""


def test_the_site_builds_with_no_warning_and_no_broken_link(tmp_path):
    """What CI asks of the site: ``scripts/docs.sh`` (Sphinx with ``-W``) exits 0."""
    env = {**os.environ, "RLX_DOCS_OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "docs.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-12000:]
    assert (tmp_path / "html" / "agents" / "ppo.html").is_file()
    assert (tmp_path / "html" / "reference" / "cli.html").is_file()
