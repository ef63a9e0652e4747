"""Architecture test: the import rules that keep rlx installable one family at a time.

The rules, checked by parsing every ``.py`` file under each package's ``src/`` directory with
:mod:`ast` (``import x`` and ``from x import y`` alike, including imports nested in functions
and under ``if TYPE_CHECKING:``):

1. A family (any top-level package other than ``rlx``: ``rlx_classical``, ``rlx_onpolicy``,
   ``rlx_es``, ...) never imports another family. Families are installed separately, so one
   that imported another would break whenever the other is not installed. Importing ``rlx``
   and third-party libraries is fine.
2. The core ``rlx`` never imports a family: the core knows families only through plugins.
3. Nothing in ``rlx`` outside ``rlx/nn/`` imports ``torch``. torch is an optional extra of
   rlx-core; ``import rlx`` must stay light and torch-free, and ``rlx list`` must not load it.
4. ``rlx.vector``, ``rlx.envstate``, ``rlx.normalization`` and ``rlx.schedules`` (the shared
   building blocks that torch-free families use) import neither torch, nor a family, nor
   ``rlx.nn``.
5. At run time, in a fresh interpreter, ``import rlx`` and importing the modules above together
   with ``rlx.trainer`` and ``rlx.cli`` leave ``torch`` out of ``sys.modules``.
6. No module of the core imports another in a circle (imports nested in functions and those
   under ``if TYPE_CHECKING:`` count: callbacks see the trainer through
   ``rlx.protocols.Trainer``): each module can be read, and changed, after the ones it uses.

Relative imports are resolved against the importing module, so they always stay inside their
own top-level package and can break rule 4 (``from .nn import layers``) but never rules 1-3.
Families are discovered by globbing ``packages/*/src/*`` and ``examples/*/src/*``, so a new
family is checked as soon as it exists.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from pathlib import Path, PurePosixPath
from textwrap import dedent

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE_GLOBS = ("packages/*/src/*", "examples/*/src/*")
CORE = "rlx"
TORCH = "torch"
NN = "rlx.nn"
#: Shared building blocks that must not depend on torch, rlx.nn or any family (rule 4).
LIGHT_MODULES = frozenset(
    {"rlx.vector", "rlx.envstate", "rlx.normalization", "rlx.schedules", "rlx.replay"}
)
#: Imported together in a fresh interpreter, these must not load torch (rule 5).
TORCH_FREE_AT_RUNTIME = (*sorted(LIGHT_MODULES), "rlx.trainer", "rlx.cli")


# --- the checker -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportStatement:
    line: int
    text: str
    #: Absolute names of the modules the statement may import: for ``from a import b`` both
    #: ``a`` and ``a.b`` (``b`` may be a submodule, as in ``from rlx import nn``).
    modules: tuple[str, ...]


def module_name(path: str) -> tuple[str, bool]:
    """The dotted module name of ``path`` (``.../src/rlx/nn/layers.py`` -> ``rlx.nn.layers``) and
    whether the file is a package's ``__init__.py``."""
    parts = PurePosixPath(path).parts
    if "src" not in parts:
        raise ValueError(f"{path}: not under a src/ directory")
    names = list(parts[parts.index("src") + 1 :])
    names[-1] = names[-1].removesuffix(".py")
    is_package = names[-1] == "__init__"
    if is_package:
        names.pop()
    return ".".join(names), is_package


def _resolve_relative(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module of ``from .x import y`` (``level`` dots) inside ``module``; never
    climbs above the top-level package (Python would refuse such an import anyway)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: max(len(package) - (node.level - 1), 1)]
    return ".".join([*base, node.module] if node.module else base)


def import_statements(path: str, source: str) -> list[ImportStatement]:
    """Every import statement in ``source``, at any depth, in line order, with relative imports
    resolved."""
    return sorted(_import_statements(path, source), key=lambda statement: statement.line)


def _import_statements(path: str, source: str) -> Iterator[ImportStatement]:
    module, is_package = module_name(path)
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.Import):
            modules = tuple(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                origin = _resolve_relative(node, module, is_package)
            else:
                origin = node.module or ""
            modules = (origin, *(f"{origin}.{alias.name}" for alias in node.names))
        else:
            continue
        yield ImportStatement(node.lineno, ast.unparse(node), modules)


def _top(module: str) -> str:
    return module.partition(".")[0]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def broken_rules(importer: str, imported: str, families: Collection[str]) -> list[str]:
    """Why module ``importer`` may not import ``imported`` (empty when it may)."""
    owner, target = _top(importer), _top(imported)
    reasons: list[str] = []
    if owner != CORE and target in families and target != owner:
        reasons.append(f"rule 1: family {owner} imports family {target}")
    if owner == CORE and target in families:
        reasons.append(f"rule 2: rlx imports family {target}")
    if owner == CORE and target == TORCH and not _within(importer, NN):
        reasons.append("rule 3: rlx outside rlx/nn imports torch")
    if importer in LIGHT_MODULES and (
        target == TORCH or target in families or _within(imported, NN)
    ):
        reasons.append(f"rule 4: {importer} must not import torch, a family or rlx.nn")
    return reasons


def find_violations(sources: Mapping[str, str], families: Collection[str]) -> list[str]:
    """Each import in ``sources`` ({file path: source}) that breaks a rule, as
    ``path:line: statement -- reasons``; ``families`` are the top-level names of the families."""
    violations: list[str] = []
    for path, source in sorted(sources.items()):
        importer, _ = module_name(path)
        for statement in import_statements(path, source):
            per_module = (broken_rules(importer, m, families) for m in statement.modules)
            reasons = list(dict.fromkeys(chain.from_iterable(per_module)))
            if reasons:
                violations.append(
                    f"{path}:{statement.line}: {statement.text} -- {'; '.join(reasons)}"
                )
    return violations


# --- the real tree -----------------------------------------------------------------------------


def discover_packages(root: Path = REPO_ROOT) -> dict[str, Path]:
    """Top-level package name -> its directory, for the core and every family."""
    found: dict[str, Path] = {}
    for pattern in PACKAGE_GLOBS:
        for directory in root.glob(pattern):
            if directory.is_dir() and directory.name.isidentifier():
                found[directory.name] = directory
    return found


def read_sources(packages: Mapping[str, Path], root: Path = REPO_ROOT) -> dict[str, str]:
    return {
        file.relative_to(root).as_posix(): file.read_text(encoding="utf-8")
        for directory in packages.values()
        for file in sorted(directory.rglob("*.py"))
    }


def test_the_core_and_the_families_are_discovered() -> None:
    packages = discover_packages()
    assert CORE in packages
    assert {"rlx_classical", "rlx_onpolicy", "rlx_es", "rlx_bandits", "rlx_envs"} <= set(packages)
    assert "rlx_hillclimb" in packages, "the third-party example plugin is checked too"


def test_the_source_tree_follows_the_import_rules() -> None:
    packages = discover_packages()
    sources = read_sources(packages)
    assert "packages/core/src/rlx/schedules.py" in sources, "the checker must see the core"
    violations = find_violations(sources, families=set(packages) - {CORE})
    if violations:
        pytest.fail(
            f"{len(violations)} import(s) break the architecture rules (see the docstring of "
            "tests/test_architecture.py):\n" + "\n".join(violations),
            pytrace=False,
        )


#: Run in a fresh interpreter: imports the modules named in argv and prints, as json, whether
#: torch got loaded and, if so, the repository lines on the stack when it was first imported.
TORCH_CHECK_SCRIPT = """\
import importlib, json, sys, traceback

class WatchTorch:
    first_import = None

    def find_spec(self, name, path=None, target=None):
        if name == "torch" and WatchTorch.first_import is None:
            stack = traceback.extract_stack()[:-1]
            WatchTorch.first_import = [
                f"{frame.filename}:{frame.lineno}" for frame in stack if "/src/" in frame.filename
            ]
        return None

sys.meta_path.insert(0, WatchTorch())
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps({
    "imported": sys.argv[1:],
    "torch_loaded": "torch" in sys.modules,
    "torch_first_imported_from": WatchTorch.first_import,
}))
"""


@pytest.mark.parametrize(
    "modules", [(CORE,), TORCH_FREE_AT_RUNTIME], ids=["import rlx", "building blocks, trainer, cli"]
)
def test_importing_the_core_leaves_torch_unloaded(modules: tuple[str, ...]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", TORCH_CHECK_SCRIPT, *modules],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, f"import {', '.join(modules)} failed:\n{done.stderr}"
    check = json.loads(done.stdout.strip().splitlines()[-1])
    assert not check["torch_loaded"], f"import {', '.join(modules)} loaded torch: {check}"


# --- the checker catches what it should, and nothing else ---------------------------------------

FAMILIES = frozenset({"rlx_classical", "rlx_onpolicy", "rlx_es"})


def violations_in(path: str, source: str) -> list[str]:
    return find_violations({path: dedent(source)}, families=FAMILIES)


def assert_reported(violations: list[str], location: str, statement: str, rule: str) -> None:
    assert len(violations) == 1, violations
    assert violations[0].startswith(f"{location}: {statement} -- "), violations
    assert rule in violations[0], violations


def test_a_family_importing_another_family_inside_a_function_is_reported() -> None:
    source = """\
        import numpy as np


        def make_policy():
            from rlx_onpolicy.policies import ActorCritic

            return ActorCritic
        """
    violations = violations_in("packages/es/src/rlx_es/core.py", source)
    assert_reported(
        violations,
        "packages/es/src/rlx_es/core.py:5",
        "from rlx_onpolicy.policies import ActorCritic",
        "rule 1",
    )


def test_a_family_importing_another_family_for_type_checking_only_is_reported() -> None:
    source = """\
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            import rlx_classical.tabular as tabular
        """
    violations = violations_in("packages/es/src/rlx_es/agents.py", source)
    assert_reported(
        violations,
        "packages/es/src/rlx_es/agents.py:4",
        "import rlx_classical.tabular as tabular",
        "rule 1",
    )


def test_the_core_importing_a_family_is_reported() -> None:
    violations = violations_in("packages/core/src/rlx/api.py", "import rlx_classical\n")
    assert_reported(violations, "packages/core/src/rlx/api.py:1", "import rlx_classical", "rule 2")


def test_torch_imported_inside_a_function_of_the_core_is_reported() -> None:
    source = """\
        def fit(agent):
            import torch

            return torch.zeros(1)
        """
    violations = violations_in("packages/core/src/rlx/trainer.py", source)
    assert_reported(violations, "packages/core/src/rlx/trainer.py:2", "import torch", "rule 3")


def test_a_torch_submodule_imported_for_type_checking_by_the_core_is_reported() -> None:
    source = """\
        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from torch.nn import Module
        """
    violations = violations_in("packages/core/src/rlx/checkpoint.py", source)
    assert_reported(
        violations, "packages/core/src/rlx/checkpoint.py:4", "from torch.nn import Module", "rule 3"
    )


@pytest.mark.parametrize(
    "statement",
    [
        "from rlx.nn.layers import MLP",
        "from rlx import nn",
        "import rlx.nn",
        "from .nn import state",
    ],
)
def test_a_building_block_importing_rlx_nn_is_reported(statement: str) -> None:
    violations = violations_in("packages/core/src/rlx/vector.py", f"{statement}\n")
    assert_reported(violations, "packages/core/src/rlx/vector.py:1", statement, "rule 4")


def test_torch_in_a_building_block_breaks_rules_3_and_4() -> None:
    violations = violations_in("packages/core/src/rlx/schedules.py", "import torch\n")
    assert_reported(violations, "packages/core/src/rlx/schedules.py:1", "import torch", "rule 3")
    assert "rule 4" in violations[0]


def test_every_violation_in_every_file_is_listed() -> None:
    sources = {
        "packages/core/src/rlx/api.py": "import os\nimport rlx_es\n",
        "packages/core/src/rlx/trainer.py": "import torch\n\n\ndef f():\n    import torch.nn\n",
        "packages/es/src/rlx_es/core.py": "from rlx_classical import tabular\n",
    }
    assert [v.partition(" -- ")[0] for v in find_violations(sources, families=FAMILIES)] == [
        "packages/core/src/rlx/api.py:2: import rlx_es",
        "packages/core/src/rlx/trainer.py:1: import torch",
        "packages/core/src/rlx/trainer.py:5: import torch.nn",
        "packages/es/src/rlx_es/core.py:1: from rlx_classical import tabular",
    ]


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("packages/core/src/rlx/nn/layers.py", "import torch\nfrom torch import nn\n"),
        ("packages/core/src/rlx/nn/__init__.py", "import torch\n"),
        ("packages/onpolicy/src/rlx_onpolicy/ppo.py", "import torch\nfrom rlx.nn.state import x\n"),
        ("packages/es/src/rlx_es/core.py", "import numpy as np\nfrom rlx.vector import run\n"),
        ("packages/es/src/rlx_es/agents.py", "from rlx_es.core import Population\n"),
        ("packages/es/src/rlx_es/agents.py", "from .core import Population\nfrom . import ops\n"),
        ("packages/es/src/rlx_es/sub/mod.py", "from ..core import Population\n"),
        ("packages/core/src/rlx/api.py", "from rlx.discovery import get_registry\nimport numpy\n"),
        ("packages/core/src/rlx/normalization.py", "import numpy as np\nfrom rlx import spec\n"),
    ],
    ids=[
        "rlx.nn imports torch",
        "rlx.nn package imports torch",
        "family imports torch and rlx.nn.state",
        "family imports third-party and rlx",
        "family imports itself",
        "relative import",
        "relative import two levels up",
        "core imports core and third-party",
        "building block imports numpy and rlx",
    ],
)
def test_allowed_imports_are_not_reported(path: str, source: str) -> None:
    assert violations_in(path, source) == []


def test_relative_imports_resolve_within_their_own_package() -> None:
    statements = import_statements(
        "packages/es/src/rlx_es/sub/__init__.py", "from . import a\nfrom ..core import b\n"
    )
    assert [s.modules for s in statements] == [
        ("rlx_es.sub", "rlx_es.sub.a"),
        ("rlx_es.core", "rlx_es.core.b"),
    ]


# --- rule 6: no import circles in the core -----------------------------------------------------


def import_graph(sources: Mapping[str, str], package: str = CORE) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports anywhere (a ``from a import b`` of a
    submodule ``b`` counts as importing ``a.b``; of a name, as importing ``a``)."""
    modules = {
        module_name(path)[0]: path for path in sources if _top(module_name(path)[0]) == package
    }

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges: set[str] = set()
        for statement in import_statements(path, sources[path]):
            origin, *names = statement.modules
            targets = [m for m in names if m in modules] or [origin]
            edges.update(t for t in map(known, targets) if t and _within(t, package))
        edges.discard(module)
        graph[module] = edges
    return graph


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other in a circle (strongly connected
    components of more than one module), each sorted."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in graph.get(module, ()):
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            group = []
            while (other := stack.pop()) != module:
                group.append(other)
            if group:
                cycles.append(sorted([module, *group]))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return cycles


def test_no_module_of_the_core_imports_another_in_a_circle() -> None:
    sources = read_sources({CORE: discover_packages()[CORE]})
    assert import_cycles(import_graph(sources)) == []


def test_a_circle_through_a_function_level_or_type_checking_import_is_reported() -> None:
    sources = {
        "src/rlx/a.py": "from rlx.b import thing\n",
        "src/rlx/b.py": "def f():\n    from rlx import a\n",
        "src/rlx/c.py": "import typing\nif typing.TYPE_CHECKING:\n    from rlx import d\n",
        "src/rlx/d.py": "from rlx import c\n",
        "src/rlx/__init__.py": "",
    }
    assert import_cycles(import_graph(sources)) == [["rlx.a", "rlx.b"], ["rlx.c", "rlx.d"]]
