"""Every distribution of this repository is packaged like a library people install.

- every requirement it declares (dependencies, and the extras ``scripts/setup.sh`` installs)
  is satisfied by what is installed, so the declared bounds are the tested ones;
- a requirement on a library whose private modules rlx imports has an upper bound;
- it ships the MIT ``LICENSE`` (declared in ``license-files``, present beside pyproject.toml);
- its ``__version__`` is the installed metadata's version, written once, in pyproject.toml;
- ``rlx --version`` lists every installed rlx distribution, and a foreign distribution that
  ships the ``rlx`` import package or command is named, with what to do about it.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[1]
PYPROJECTS = sorted(
    [*REPO_ROOT.glob("packages/*/pyproject.toml"), *REPO_ROOT.glob("examples/*/pyproject.toml")]
)
DISTRIBUTIONS = {path.parent.relative_to(REPO_ROOT).as_posix(): path for path in PYPROJECTS}
UPPER_BOUND_OPERATORS = {"<", "<=", "==", "===", "~="}


def project(folder: str) -> dict:
    return tomllib.loads(DISTRIBUTIONS[folder].read_text())["project"]


def setup_extras() -> dict[str, list[str]]:
    """The extras ``scripts/setup.sh`` installs, by distribution folder (``packages/core``)."""
    script = (REPO_ROOT / "scripts" / "setup.sh").read_text()
    found = re.findall(r"^\s*([\w/-]+)\) echo \"\[([^\]]*)\]\"", script, flags=re.MULTILINE)
    return {folder: extras.split(",") for folder, extras in found}


def declared_requirements(folder: str) -> list[tuple[str, Requirement]]:
    """``(where, requirement)`` for the dependencies and the extras setup.sh installs."""
    table = project(folder)
    rows = [("dependencies", Requirement(text)) for text in table.get("dependencies", [])]
    optional = table.get("optional-dependencies", {})
    for extra in setup_extras().get(folder, []):
        rows += [(f"extra {extra}", Requirement(text)) for text in optional[extra]]
    return rows


def all_requirements() -> list[tuple[str, str, Requirement]]:
    """Every requirement of every distribution, extras included, whether installed or not."""
    rows = []
    for folder in DISTRIBUTIONS:
        table = project(folder)
        rows += [(folder, "dependencies", Requirement(t)) for t in table.get("dependencies", [])]
        for extra, texts in table.get("optional-dependencies", {}).items():
            rows += [(folder, f"extra {extra}", Requirement(t)) for t in texts]
    return rows


def private_imports() -> dict[str, list[str]]:
    """Top-level third-party modules whose private parts rlx's sources import, with where.

    ``import a._b``, ``from a._b import c`` and ``from a.b import _c`` all count: each relies on
    something the library does not promise to keep."""
    found: dict[str, list[str]] = {}
    sources = [*REPO_ROOT.glob("packages/*/src/**/*.py"), *REPO_ROOT.glob("examples/*/src/**/*.py")]
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0].startswith("rlx") or parts[0] == "__future__":
                    continue
                if any(part.startswith("_") and not part.endswith("__") for part in parts):
                    where = f"{path.relative_to(REPO_ROOT)}:{node.lineno} imports {name}"
                    found.setdefault(parts[0], []).append(where)
    return found


@pytest.mark.parametrize("folder", sorted(DISTRIBUTIONS))
def test_every_declared_requirement_is_satisfied_by_the_installed_version(folder):
    unsatisfied = []
    for where, requirement in declared_requirements(folder):
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            unsatisfied.append(f"{where}: {requirement} is not installed")
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            unsatisfied.append(f"{where}: {requirement}, but {installed} is installed")
    assert not unsatisfied, f"{folder}/pyproject.toml:\n" + "\n".join(unsatisfied)


def test_requirements_on_libraries_whose_private_modules_rlx_imports_have_an_upper_bound():
    private = private_imports()
    # rlx.vector imports gymnasium's async worker; the ES family's Ray backend imports
    # ray._private: if these went away, this test would have nothing left to check.
    assert {"gymnasium", "ray"} <= set(private), private
    distributions = metadata.packages_distributions()
    libraries = {
        canonicalize_name(dist): module
        for module in private
        for dist in distributions.get(module, [module])
    }
    unbounded = [
        f"{folder} ({where}): {requirement} (private imports: {private[libraries[name]]})"
        for folder, where, requirement in all_requirements()
        if (name := canonicalize_name(requirement.name)) in libraries
        and not any(spec.operator in UPPER_BOUND_OPERATORS for spec in requirement.specifier)
    ]
    assert not unbounded, "\n".join(unbounded)


@pytest.mark.parametrize("folder", sorted(DISTRIBUTIONS))
def test_every_distribution_ships_the_mit_license(folder):
    table = project(folder)
    assert table["license"] == "MIT"
    assert table["license-files"] == ["LICENSE"]
    license_file = REPO_ROOT / folder / "LICENSE"
    assert license_file.is_file(), f"{folder}/LICENSE is missing"
    assert license_file.read_text() == (REPO_ROOT / "LICENSE").read_text()
    assert "Copyright (c) 2026 The rlx developers" in license_file.read_text()
    assert "License :: OSI Approved :: MIT License" in table["classifiers"]
    assert table["authors"] == [{"name": "The rlx developers"}]


@pytest.mark.parametrize("folder", sorted(DISTRIBUTIONS))
def test_the_version_is_written_once_and_dunder_version_is_the_installed_one(folder):
    table = project(folder)
    pyproject = tomllib.loads(DISTRIBUTIONS[folder].read_text())
    (package_dir,) = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    init = REPO_ROOT / folder / package_dir / "__init__.py"
    literal = [
        node.lineno
        for node in ast.walk(ast.parse(init.read_text()))
        if isinstance(node, ast.Assign)
        and any(getattr(target, "id", None) == "__version__" for target in node.targets)
        and isinstance(node.value, ast.Constant)
    ]
    assert not literal, f"{init}: __version__ is a second copy of the number (line {literal})"
    module = importlib.import_module(Path(package_dir).name)
    assert module.__version__ == metadata.version(table["name"]) == table["version"], (
        "reinstall the distribution (bash scripts/setup.sh) after changing its version"
    )


def test_version_lists_rlx_core_first_then_every_installed_rlx_distribution(rlx_cli):
    code, out, err = rlx_cli("--version")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"rlx-core {metadata.version('rlx-core')}"
    plugins = {
        entry_point.dist.name
        for entry_point in metadata.entry_points(group="rlx.plugins")
        if entry_point.dist is not None and entry_point.dist.name != "rlx-core"
    }
    assert lines[1:] == [f"{name} {metadata.version(name)}" for name in sorted(plugins)]
    assert "rlx-hillclimb" in plugins and "rlx-classical" in plugins


def _install_fake_distribution(site: Path, package: bool, command: bool) -> None:
    """``rlx-workbench 2.3.0`` as pip leaves it: a dist-info folder whose RECORD lists the
    ``rlx`` import package and whose entry points declare an ``rlx`` console script."""
    info = site / "rlx_workbench-2.3.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rlx-workbench\nVersion: 2.3.0\n")
    record = ["rlx_workbench-2.3.0.dist-info/METADATA,,", "rlx_workbench-2.3.0.dist-info/RECORD,,"]
    if package:
        record += ["rlx/__init__.py,sha256=abc,10", "rlx/workbench.py,sha256=def,20"]
    if command:
        record.append("../../../bin/rlx,sha256=ghi,30")
        (info / "entry_points.txt").write_text("[console_scripts]\nrlx = rlx.workbench:main\n")
    (info / "RECORD").write_text("\n".join(record) + "\n")


@pytest.mark.parametrize(
    ("package", "command", "ships"),
    [
        (True, True, "the import package rlx and the rlx command"),
        (True, False, "the import package rlx,"),
        (False, True, "the rlx command,"),
    ],
    ids=["package and command", "package", "command"],
)
def test_a_foreign_distribution_shipping_rlx_is_named_with_what_to_do(
    rlx_cli, tmp_path, monkeypatch, package, command, ships
):
    _install_fake_distribution(tmp_path / "site", package=package, command=command)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))  # also invalidates the import caches
    for args in (["--version"], ["plugins"], ["plugins", "--json"]):
        code, out, err = rlx_cli(*args)
        assert code == 0
        assert f"warning: rlx-workbench 2.3.0 also installs {ships}" in err, (args, err)
        assert "belong to rlx-core" in err
        assert "pip uninstall rlx-workbench" in err
        assert "pip install --force-reinstall --no-deps rlx-core" in err
        if "--json" in args:
            json.loads(out)  # the warning goes to stderr: stdout stays JSON
    assert rlx_cli("--version")[1].splitlines()[0].startswith("rlx-core ")


def test_plugins_warns_of_no_foreign_rlx_on_a_clean_install(rlx_cli):
    code, _, err = rlx_cli("plugins")
    assert code == 0 and "also installs" not in err
