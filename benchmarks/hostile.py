"""The hostile suite of the third hardening pass: what rlx does with directories and input that
someone else prepared, as a user meets it on the command line.

Each case starts in a fresh folder with two watched roots, ``inside`` (what the command is
pointed at) and ``outside`` (a folder beside it that nothing may touch), and a module
``evilmod`` on ``PYTHONPATH`` that leaves a marker file when anything imports it. The case
prepares its directories (with rlx itself, then edits them as an attacker would), runs one
``rlx`` command in a new process, and records: the exit code, whether a traceback was printed,
the files changed under ``outside``, the user files lost under ``inside`` (files the case
named as the user's own) and whether ``evilmod`` was imported. The promises: exit code 0 or
2, no traceback, nothing written outside, no import without ``--trust-code``, nothing lost.

Writes ``benchmarks/results/hostile.json`` and ``.md`` (one row a case); exits 1 when a
promise is broken.

    python benchmarks/hostile.py              # about two minutes here
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
RLX = str(Path(sys.executable).with_name("rlx"))
EVIL = "import pathlib\npathlib.Path(__file__).with_name('IMPORTED').write_text('x')\n"
QUICK = ["--no-progress"]


def rlx(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root), "RLX_NO_COLOR": "1"}
    return subprocess.run(
        [RLX, *args], cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` with a hash of its content (a link as its target)."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            found[key] = "-> " + os.readlink(path)
        elif path.is_file():
            found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def edit(file: Path, change: Callable[[dict[str, Any]], None]) -> None:
    document = json.loads(file.read_text())
    change(document)
    file.write_text(json.dumps(document))


def run(root: Path, name: str = "inside", *extra: str) -> Path:
    done = rlx(root, "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "1000",
               "--out", name, *QUICK, *extra)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root / name


def group(root: Path, agent: str = "q-learning", env: str = "FrozenLake-v1") -> Path:
    done = rlx(root, "run", agent, "--env", env, "--seeds", "0-1", "--jobs", "1", "--steps",
               "1000", "--out", "inside", *QUICK)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root / "inside"


def settings(document: dict[str, Any]) -> dict[str, Any]:
    return document["trainer"] if "trainer" in document else document["settings"]


def recorded(where: str, key: str, value: Any) -> Callable[[Path], list[str]]:
    """A case: ``key`` of the recorded trainer settings in ``where`` set to ``value``."""

    def prepare(root: Path) -> list[str]:
        target = run(root) if where == "config.json" else group(root)
        text = json.dumps(value).replace("{outside}", str(root / "outside"))
        edit(target / where, lambda d: settings(d).__setitem__(key, json.loads(text)))
        return ["run", "--resume", "inside", "--steps", "2000", *QUICK]

    return prepare


def seed_link(root: Path) -> list[str]:
    group(root)
    other = run(root, "outside/other")
    shutil.rmtree(root / "inside" / "seed-1")
    (root / "inside" / "seed-1").symlink_to(other)
    return ["run", "--resume", "inside", "--steps", "2000", *QUICK]


def swapped_seeds(root: Path) -> list[str]:
    inside = group(root)
    (inside / "seed-0").rename(root / "zero")
    (inside / "seed-1").rename(inside / "seed-0")
    (root / "zero").rename(inside / "seed-1")
    return ["run", "--resume", "inside", "--steps", "2000", *QUICK]


def tune_links(root: Path) -> list[str]:
    tune = ["tune", "q-learning", "--env", "FrozenLake-v1", "--trials", "2", "--steps", "1000",
            "--eval-every", "500", "--eval-episodes", "5", "--out", "inside"]  # fmt: skip
    assert rlx(root, *tune).returncode == 0
    for name in ("trials.csv", "best.toml", "tuned.toml"):
        (root / "outside" / name).write_text("someone else's\n")
        (root / "inside" / name).unlink()
        (root / "inside" / name).symlink_to(root / "outside" / name)
    return [*tune[:4], "--trials", "3", *tune[6:]]


def resume_callback(root: Path) -> list[str]:
    run(root)
    return ["run", "--resume", "inside", "--steps", "2000", "--callback",
            "stop-on-plateau,patience=1", *QUICK]  # fmt: skip


def new_run(*args: str) -> Callable[[Path], list[str]]:
    return lambda root: ["run", *args, "--out", "inside/run", *QUICK]


def resume_file(root: Path) -> list[str]:
    (root / "inside" / "notes.txt").write_text("mine\n")
    return ["run", "--resume", "inside/notes.txt", *QUICK]


def marker_directory(root: Path) -> list[str]:
    inside = group(root)
    (inside / ".rlx-group").unlink()
    (inside / ".rlx-group").mkdir()
    return ["run", "--resume", "inside", "--steps", "2000", *QUICK]


def cut_header(root: Path) -> list[str]:
    inside = run(root, "inside", "--checkpoint-every", "500")
    lines = (inside / "metrics.csv").read_text().splitlines()
    lines[0] = ",".join(lines[0].split(",")[:3])
    (inside / "metrics.csv").write_text("\n".join(lines) + "\n")
    return ["run", "--resume", "inside", "--steps", "2000", *QUICK]


EVALUATE_ON = [{"name": "evaluate-on", "kwargs": {"env": "evilmod:Evil-v0"}}]
CASES: dict[str, Callable[[Path], list[str]]] = {
    "config.json: evaluate-on names evilmod": recorded("config.json", "callbacks", EVALUATE_ON),
    "group.json: evaluate-on names evilmod": recorded("group.json", "callbacks", EVALUATE_ON),
    "seed-1/config.json: evaluate-on names evilmod": recorded(
        "seed-1/config.json", "callbacks", EVALUATE_ON
    ),
    "config.json: a module:Class callback": recorded(
        "config.json", "callbacks", [{"name": "evilmod:Evil", "kwargs": {}}]
    ),
    "config.json: mlflow database outside": recorded(
        "config.json",
        "loggers",
        [{"name": "mlflow", "kwargs": {"tracking_uri": "sqlite:///{outside}/stolen.db"}}],
    ),
    "config.json: wandb to another entity": recorded(
        "config.json", "loggers", [{"name": "wandb", "kwargs": {"entity": "thief"}}]
    ),
    "group: seed-1 links to another run": seed_link,
    "group: seed directories swapped": swapped_seeds,
    "tune --out: outputs link outside": tune_links,
    "resume --callback replaces the recorded": resume_callback,
    "--env-kwargs map_name=99x99": new_run(
        "q-learning", "--env", "FrozenLake-v1", "--env-kwargs", 'map_name="99x99"'
    ),
    "--env-kwargs desc=[1,2]": new_run(
        "q-learning", "--env", "FrozenLake-v1", "--env-kwargs", "desc=[1,2]"
    ),
    "--env-kwargs is_slippery=maybe": new_run(
        "q-learning", "--env", "FrozenLake-v1", "--env-kwargs", "is_slippery=maybe"
    ),
    "--env-kwargs max_episode_steps=-5": new_run(
        "ppo", "--env", "CartPole-v1", "--env-kwargs", "max_episode_steps=-5"
    ),
    "--set n_envs=64 on dqn (33-fold)": new_run(
        "dqn", "--env", "CartPole-v1", "--steps", "500", "--set", "n_envs=64"
    ),
    "tune --storage sqlite:///:memory:": lambda root: [
        "tune",
        "q-learning",
        "--env",
        "FrozenLake-v1",
        "--trials",
        "1",
        "--steps",
        "500",
        "--storage",
        "sqlite:///:memory:",
        "--out",
        "inside/study",
    ],
    "--resume a file": resume_file,
    ".rlx-group is a directory": marker_directory,
    "metrics.csv header cut": cut_header,
}


def _said(stderr: str) -> str:
    """The line a user reads first: the error, else the first notice, else the last line."""
    lines = stderr.strip().splitlines() or [""]
    for start in ("error:", "Error:", "notice:"):
        found = [line for line in lines if line.startswith(start)]
        if found:
            return found[0]
    return lines[-1]


def main() -> int:
    rows = []
    for name, prepare in CASES.items():
        with tempfile.TemporaryDirectory(prefix="rlx-hostile-") as folder:
            root = Path(folder)
            (root / "inside").mkdir()
            (root / "outside").mkdir()
            (root / "evilmod.py").write_text(EVIL)
            args = prepare(root)
            own = {k: v for k, v in tree(root / "inside").items() if not v.startswith("->")}
            before = tree(root / "outside")
            done = rlx(root, *args)
            after_inside = tree(root / "inside")
            lost = [key for key, digest in own.items() if key.endswith(".txt") and
                    after_inside.get(key) != digest]  # fmt: skip
            changed = sorted(
                key for key in set(before) | set(tree(root / "outside"))
                if before.get(key) != tree(root / "outside").get(key)
            )  # fmt: skip
            rows.append(
                {
                    "case": name,
                    "command": "rlx " + " ".join(args),
                    "exit": done.returncode,
                    "traceback": "Traceback" in done.stderr,
                    "imported": (root / "IMPORTED").exists(),
                    "written_outside": changed,
                    "lost": lost,
                    "message": _said(done.stderr)[:160],
                }
            )
            print(f"{name}: exit {done.returncode}", file=sys.stderr)
    broken = [
        row for row in rows
        if row["exit"] not in (0, 2) or row["traceback"] or row["imported"]
        or row["written_outside"] or row["lost"]
    ]  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "hostile.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        "# Hostile suite (third hardening pass)",
        "",
        "`python benchmarks/hostile.py`: each case in a fresh folder, one `rlx` command in a new "
        "process. Promises: exit 0 or 2, no traceback, no import of `evilmod` without "
        "`--trust-code`, nothing written outside, no user file lost.",
        "",
        f"{len(rows)} cases; {len(broken)} broke a promise.",
        "",
        "| case | exit | traceback | imported | written outside | lost | message |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        message = row["message"].replace("|", "\\|")
        lines.append(
            f"| {row['case']} | {row['exit']} | {'yes' if row['traceback'] else 'no'} | "
            f"{'yes' if row['imported'] else 'no'} | {len(row['written_outside'])} | "
            f"{len(row['lost'])} | {message} |"
        )
    (RESULTS / "hostile.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
