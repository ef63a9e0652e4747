"""rlx against sb3-contrib, every algorithm of issue 28: runs each ``contrib_*.py`` benchmark in
turn (rlx and the sb3-contrib peer side by side in each), then writes
``results/contrib.md``, one row per task with its wall-clock ratio, linking each script's own
results file for the learning curves.

    python benchmarks/contrib.py                  # every benchmark, full budgets
    python benchmarks/contrib.py --quick          # a smoke run of each
    python benchmarks/contrib.py --only recurrent # the scripts whose name holds the word
    python benchmarks/contrib.py --summary-only   # rewrite contrib.md from the results files

Needs ``pip install stable-baselines3==2.9.2 sb3-contrib==2.9.2`` beside rlx (setup does not
install them: they are the peers, not dependencies). Run on an otherwise idle machine: the
ratios are wall-clock times.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
RESULTS = HERE / "results"
#: The line each script writes under a task's section: its training times and their ratio.
RATIO = re.compile(
    r"rlx (?P<rlx>\d[\d,]*(?:\.\d+)?) s, sb3-contrib (?P<peer>\d[\d,]*(?:\.\d+)?) s; "
    r"rlx / sb3-contrib = (?P<ratio>\d+(?:\.\d+)?)"
)


def scripts(only: list[str]) -> list[Path]:
    """The contrib benchmarks, those whose name holds one of ``only`` if given."""
    found = sorted(p for p in HERE.glob("contrib_*.py"))
    return [p for p in found if not only or any(word in p.stem for word in only)]


def rows(results: Path) -> list[tuple[str, str, str, str]]:
    """(task, rlx seconds, sb3-contrib seconds, ratio) for each section of a results file
    that states its training times."""
    found, section = [], ""
    for line in results.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        match = RATIO.search(line)
        if match:
            found.append((section, match["rlx"], match["peer"], match["ratio"]))
    return found


def summary(paths: list[Path]) -> str:
    """The markdown of ``results/contrib.md``."""
    lines = [
        "# rlx vs sb3-contrib",
        "",
        "Written by `benchmarks/contrib.py` from the results files of the `contrib_*.py` "
        "benchmarks (in this folder); each file says its settings, seeds, budgets and machine, "
        "and shows the "
        "returns at equal steps. Times are training time per seed, evaluations excluded.",
        "",
        "| benchmark | task | rlx s | sb3-contrib s | rlx / sb3-contrib |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for path in paths:
        results = RESULTS / f"{path.stem}.md"
        if not results.exists():
            lines.append(f"| `{path.name}` | (not run yet) | | | |")
            continue
        learning_only = [("(returns at equal steps only, no times)", "", "", "")]
        for task, rlx_s, peer_s, ratio in rows(results) or learning_only:
            lines.append(f"| `{results.name}` | {task} | {rlx_s} | {peer_s} | {ratio} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run the benchmarks asked for, then write the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of each benchmark")
    parser.add_argument("--seeds", type=int, default=None, help="seeds for every benchmark")
    parser.add_argument("--only", nargs="*", default=[], help="words of the scripts to run")
    parser.add_argument("--note", default="", help="a line for every results file")
    parser.add_argument("--summary-only", action="store_true", help="run nothing")
    args = parser.parse_args()
    chosen = scripts(args.only)
    if not chosen:
        parser.error(f"no contrib_*.py benchmark matches {args.only}")
    if not args.summary_only:
        for path in chosen:
            command = [sys.executable, str(path)]
            command += ["--quick"] if args.quick else []
            command += ["--seeds", str(args.seeds)] if args.seeds else []
            command += ["--note", args.note] if args.note else []
            print(f"== {path.name}", flush=True)
            subprocess.run(command, check=True)
    out = RESULTS / "contrib.md"
    out.write_text(summary(scripts([])))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
