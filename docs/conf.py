"""Sphinx configuration of the rlx documentation site (MyST Markdown, furo theme).

The agent, environment, CLI, benchmark, API and changelog pages are generated at every build
by ``_ext/rlx_docs.py`` from the installed plugins and the repository's files; the build
fails, naming the culprit, on a missing docstring, a broken reference or link, an agent
without a paper or a hyperparameter without a meaning.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "rlx"
author = "The rlx developers"
copyright = "2026, the rlx developers"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "rlx_docs",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "README.md"]
root_doc = "index"

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
# Option names and shell text stay as typed: no "--" turned into a dash, no curly quotes.
smartquotes = False

# Every reference to an rlx object must resolve; types of other libraries (numpy, torch,
# gymnasium, the standard library) are not documented here and are not looked up.
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r"(?!rlx).*"), (r"py:.*", r"rlx.*\._\w+")]
# An unqualified annotation (``Trainer``) matching two documented classes is not broken.
suppress_warnings = ["myst.header", "ref.python"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "furo"
html_title = "rlx"
html_static_path: list[str] = []
