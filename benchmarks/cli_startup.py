"""How long ``rlx list``, ``rlx list envs`` and ``rlx --version`` take, start-up included.

``rlx list`` and ``rlx list envs`` read the plugins' entry points and metadata without
importing torch, gymnasium or any implementation (tests/test_cli.py and
tests/test_env_listing.py check the imports), so that they answer at once. How long "at once"
is depends on the machine and on its load, so it is measured here rather than asserted in the
tests.

Each command runs ``--repeats`` times in a fresh process (``python -m rlx.cli ...`` with this
interpreter), the commands taking turns; reported are the fastest, the median and the slowest
wall-clock seconds of the whole process, and the machine's load average when the runs began
(compare numbers only from an idle machine).

Writes ``benchmarks/results/cli_startup.json`` and ``.md``.

    python benchmarks/cli_startup.py                 # 5 repeats (about 10 seconds here)
    python benchmarks/cli_startup.py --repeats 2 --out /tmp/cli_startup.json   # a smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: The words after ``rlx``.
COMMANDS = [["list"], ["list", "envs"], ["--version"]]


def seconds(words: list[str]) -> float:
    """Wall-clock seconds of one ``rlx WORDS`` in a fresh process."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "rlx.cli", *words],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="benchmarks/results/cli_startup.json")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    for words in COMMANDS:  # a warm file cache for every command
        seconds(words)
    times: dict[str, list[float]] = {" ".join(["rlx", *words]): [] for words in COMMANDS}
    for _ in range(args.repeats):
        for words in COMMANDS:
            times[" ".join(["rlx", *words])].append(seconds(words))
    import importlib.metadata

    rows = [
        {
            "command": command,
            "repeats": len(values),
            "fastest_s": round(min(values), 3),
            "median_s": round(statistics.median(values), 3),
            "slowest_s": round(max(values), 3),
        }
        for command, values in times.items()
    ]
    for row in rows:
        print(json.dumps(row), flush=True)
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.python_version()}, rlx-core {importlib.metadata.version('rlx-core')}",
        "load_average_1min": round(load, 2),
        "rows": rows,
    }
    out = Path(args.out)
    out.write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Command-line start-up",
        "",
        f"Written by `benchmarks/cli_startup.py`. Machine: {result['machine']}; load average "
        f"{result['load_average_1min']} when the runs began. Each command in a fresh process "
        f"(`python -m rlx.cli ...`), {args.repeats} times after one warm-up run, the commands "
        "taking turns; wall-clock seconds of the whole process, interpreter start-up included.",
        "",
        "| command | fastest (s) | median (s) | slowest (s) |",
        "|---|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| `{row['command']}` | {row['fastest_s']:.2f} | {row['median_s']:.2f} | "
            f"{row['slowest_s']:.2f} |"
        )
    lines += [
        "",
        "`rlx list` and `rlx list envs` import neither torch, gymnasium nor an implementation "
        "(tests/test_cli.py and tests/test_env_listing.py check that); these times are not "
        "asserted anywhere: a loaded machine stretches them.",
    ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
