"""A third-party plugin works through the real command line, exactly like a built-in family.

The example distribution in ``examples/rlx-hillclimb`` must be installed
(``pip install -e examples/rlx-hillclimb``, as the CI setup does for every package). Every
command runs in a subprocess, so the plugin is found the way a user's ``rlx`` finds it:
through its ``rlx.plugins`` entry point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

DISTRIBUTION = "rlx-hillclimb"
AGENT = "hill-climbing"
#: Environment steps after which hill climbing with seed 0 solves CartPole-v1 (see its tests).
STEPS = 20_000
#: CartPole-v1 counts as solved at 195; the random agent scores about 22.
SOLVED = 195.0


@pytest.fixture(scope="module", autouse=True)
def example_installed() -> None:
    try:
        metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pytest.fail(
            f"the example plugin {DISTRIBUTION} is not installed; "
            "run `pip install -e examples/rlx-hillclimb` from the repository root",
            pytrace=False,
        )


def rlx(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``rlx ARGS`` as a user would, with only the given RLX_* variables set."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("RLX_")}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "rlx.cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )


def json_of(result: subprocess.CompletedProcess[str]) -> object:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_rlx_list_shows_the_agent_with_its_distribution_and_version():
    agents = {spec["name"]: spec for spec in json_of(rlx("list", "--json"))}
    assert AGENT in agents, f"{AGENT} missing from rlx list: {sorted(agents)}"
    spec = agents[AGENT]
    assert (spec["distribution"], spec["version"]) == (DISTRIBUTION, "0.1.0")
    assert spec["family"] == "example"


def test_rlx_plugins_shows_the_distribution_loaded():
    plugins = {p["distribution"]: p for p in json_of(rlx("plugins", "--json"))}
    assert DISTRIBUTION in plugins, f"{DISTRIBUTION} missing from rlx plugins: {sorted(plugins)}"
    plugin = plugins[DISTRIBUTION]
    assert plugin["loaded"], plugin["error"]
    assert (plugin["module"], plugin["agents"]) == ("rlx_hillclimb.plugin", [AGENT])
    assert plugin["loggers"] == ["jsonl"]


def test_agent_comes_from_the_entry_point_not_from_rlx_core():
    agents = [spec["name"] for spec in json_of(rlx("list", "--json", RLX_LOAD_PLUGINS="rlx-core"))]
    assert "random" in agents
    assert AGENT not in agents


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hillclimb") / "run"
    options = ["--env", "CartPole-v1", "--steps", str(STEPS), "--no-progress"]
    result = rlx("run", AGENT, *options, "--out", str(path), "--logger", "jsonl")
    assert result.returncode == 0, result.stderr
    assert f"run directory: {path}" in result.stdout
    return path


def test_rlx_run_writes_a_complete_run_directory(run_dir: Path):
    assert (run_dir / "config.json").is_file()
    assert (run_dir / "metrics.csv").is_file()
    assert (run_dir / "final").is_dir()
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["agent"], config["distribution"]) == (AGENT, DISTRIBUTION)


def test_rlx_eval_of_the_run_beats_the_random_agent_and_solves_cartpole(run_dir: Path):
    result = json_of(rlx("eval", str(run_dir), "--json"))
    assert result["agent"] == AGENT
    assert result["mean_return"] >= SOLVED, result


def test_the_plugins_logger_recorded_every_row_the_run_wrote(run_dir: Path):
    """A logger a third party registers gets what metrics.csv gets, and the run's end."""
    import csv

    with open(run_dir / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1] == {"event": "end", "stop_reason": "steps"}
    assert len(lines) - 1 == len(rows) > 0
    for line, row in zip(lines, rows, strict=False):
        assert line["step"] == int(row["env_steps"])
    config = json.loads((run_dir / "config.json").read_text())
    assert config["trainer"]["loggers"] == [{"name": "jsonl", "kwargs": {}}]


def test_a_bad_option_of_the_plugins_logger_is_one_message():
    result = rlx("run", AGENT, "--env", "CartPole-v1", "--logger", "jsonl,path=x.jsonl")
    assert result.returncode == 2
    assert "logger 'jsonl' has no option 'path'" in result.stderr
    assert "Options: file" in result.stderr
