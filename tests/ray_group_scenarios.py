"""Seed groups on a Ray cluster of several nodes, for tests/test_ray_groups.py.

Run as ``python tests/ray_group_scenarios.py SCENARIO DIR`` inside a network namespace of its
own (:func:`run_isolated`): Ray then finds only the loopback interface, so its nodes, the
driver and every connection stay on 127.0.0.1. Each scenario prints one JSON line last.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

#: Ray notices a dead node within seconds rather than its default half a minute.
FAST_HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3}
TIME_COLUMNS = ("time/",)


def run_isolated(scenario: str, directory: Path, timeout: float = 300) -> dict:
    """The scenario's JSON line, run in a new network namespace (only loopback, up)."""
    script = Path(__file__).resolve()
    command = f"ip link set lo up && exec {sys.executable} {script} {scenario} {directory}"
    done = subprocess.run(
        ["unshare", "--net", "sh", "-c", command],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise AssertionError(
            f"scenario {scenario} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
            f"{done.stderr[-6000:]}"
        )
    return json.loads(lines[-1])


def namespaces_work() -> bool:
    """Whether this machine lets a test make a network namespace (root, or user namespaces)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    try:
        done = subprocess.run(
            ["unshare", "--net", "sh", "-c", "ip link set lo up"],
            capture_output=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def differences(a: Path, b: Path) -> list[str]:
    """How two groups' seed directories differ: the files each holds (lock files and
    TensorBoard event files, whose names carry a host, a process and a time, apart),
    metrics.csv row for row without its time columns, and every other file byte for byte
    except state.json's elapsed time and the checksum that covers it."""
    found = []
    seeds = sorted(p.name for p in a.glob("seed-*"))
    if seeds != sorted(p.name for p in b.glob("seed-*")):
        return [f"seed folders differ: {seeds} and {sorted(p.name for p in b.glob('seed-*'))}"]
    for seed in seeds:
        files = [_listing(a / seed), _listing(b / seed)]
        if files[0] != files[1]:
            found.append(f"{seed}: files differ: {sorted(files[0] ^ files[1])}")
            continue
        for name in sorted(files[0]):
            left, right = a / seed / name, b / seed / name
            if name == "metrics.csv":
                if _metrics(left) != _metrics(right):
                    found.append(f"{seed}/{name}: rows differ")
            elif name.endswith("state.json"):
                if _state(left) != _state(right):
                    found.append(f"{seed}/{name} differs")
            elif not name.endswith(".png") and left.read_bytes() != right.read_bytes():
                found.append(f"{seed}/{name} differs")
    return found


def _listing(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.name not in (".lock", ".lock.pid") and "tensorboard" not in p.parts
    }


def _metrics(path: Path) -> list[list[str]]:
    import csv

    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    keep = [i for i, name in enumerate(rows[0]) if not name.startswith(TIME_COLUMNS)]
    return [[row[i] for i in keep] for row in rows]


def _state(path: Path) -> dict:
    document = json.loads(path.read_text())
    document.pop("checksum", None)
    document.get("trainer", {}).pop("elapsed", None)
    return document


def _cluster(head_cpus: int, workers: int):
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": head_cpus,
            "node_ip_address": "127.0.0.1",
            "_system_config": FAST_HEALTH,
        },
    )
    nodes = [cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1") for _ in range(workers)]
    cluster.wait_for_nodes()
    return cluster, nodes


def _group(out: Path, agent: str, env: str, settings: dict, **where):
    from rlx.groups import new_group

    settings = {"progress": False, **settings}
    return new_group(agent, env, seeds="0-3", settings=settings, out=out, **where).fit()


#: The groups the equality scenario trains on both backends: agent, env, settings, chunk.
EQUAL = [
    ("q-learning", "FrozenLake-v1", {"steps": 3000}, 1),
    ("ppo", "CartPole-v1", {"steps": 1024, "eval_episodes": 2}, 2),
    ("sac", "Pendulum-v1", {"steps": 300, "eval_episodes": 1}, 2),
]


def equal(directory: Path) -> dict:
    """Each group of :data:`EQUAL` on a 2-node Ray cluster and on local workers."""
    cluster, _ = _cluster(1, 1)
    out: dict = {}
    try:
        for agent, env, settings, chunk in EQUAL:
            settings = {**settings, "checkpoint_every": 0}
            if agent == "ppo":
                settings["n_steps"] = 128  # a hyperparameter: given below
            hyper = {"n_steps": settings.pop("n_steps")} if "n_steps" in settings else {}
            if agent == "sac":
                hyper = {"learning_starts": 100, "batch_size": 32}
            ray_dir, local_dir = directory / f"{agent}-ray", directory / f"{agent}-local"
            from rlx.groups import new_group

            new_group(
                agent,
                env,
                seeds="0-3",
                settings={"progress": False, **settings},
                hyperparameters=hyper,
                out=ray_dir,
                backend="ray",
                address=cluster.address,
                chunk_size=chunk,
            ).fit()
            new_group(
                agent,
                env,
                seeds="0-3",
                settings={"progress": False, **settings},
                hyperparameters=hyper,
                out=local_dir,
                jobs=2,
                chunk_size=chunk,
            ).fit()
            out[agent] = {
                "differences": differences(ray_dir, local_dir),
                "chunks": json.loads((ray_dir / "group.json").read_text())["chunks"],
            }
    finally:
        cluster.shutdown()
    return out


def lost_node(directory: Path) -> dict:
    """A node stopped while it trains a seed: the group completes on the node added after, from
    the seed's newest checkpoint, and equals an uninterrupted local group."""
    import threading

    cluster, nodes = _cluster(0, 1)  # the head trains nothing: the seeds start on the node
    settings = {"steps": 60_000, "checkpoint_every": 6000, "eval_every": 20_000}
    notices: list[str] = []
    result: dict = {}

    class Lines:
        def write(self, text: str) -> int:
            notices.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    from rich.console import Console

    def train() -> None:
        result["group"] = _group(
            directory / "ray",
            "q-learning",
            "Taxi-v4",
            settings,
            backend="ray",
            address=cluster.address,
            chunk_size=2,
            console=Console(file=Lines(), width=200),
        )

    thread = threading.Thread(target=train)
    thread.start()
    checkpoints = directory / "ray" / "seed-0" / "checkpoints"
    deadline = time.monotonic() + 120
    while not (checkpoints.is_dir() and any(checkpoints.iterdir())):
        if time.monotonic() > deadline or not thread.is_alive():
            break
        time.sleep(0.05)
    had_checkpoint = checkpoints.is_dir() and any(checkpoints.iterdir())
    final_before = (directory / "ray" / "seed-1" / "final").exists()
    cluster.remove_node(nodes[0])
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    thread.join(timeout=240)
    try:
        _group(directory / "local", "q-learning", "Taxi-v4", settings, jobs=1)
    finally:
        cluster.shutdown()
    group = result.get("group")
    return {
        "had_checkpoint": had_checkpoint,
        "seed_1_done_before": final_before,
        "finished": sorted(group.results) if group else None,
        "failed": group.failed if group else None,
        "notices": [line for line in "".join(notices).splitlines() if "lost" in line],
        "differences": differences(directory / "ray", directory / "local"),
    }


def interrupt(directory: Path) -> dict:
    """``rlx run --backend ray`` interrupted by Ctrl-C: exit 130, final/ in every seed, and
    ``--resume`` completes a group equal to an uninterrupted local one."""
    cluster, _ = _cluster(1, 1)
    rlx = str(Path(sys.executable).with_name("rlx"))
    common = ["--steps", "80000", "--checkpoint-every", "0", "--eval-every", "40000"]
    group = directory / "ray"
    where = ["--backend", "ray", "--address", cluster.address]
    try:
        process = subprocess.Popen(
            [
                rlx,
                "run",
                "q-learning",
                "--env",
                "Taxi-v4",
                "--seeds",
                "0-1",
                "--out",
                str(group),
                *common,
                *where,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 120
        while not all((group / f"seed-{s}" / "metrics.csv").exists() for s in (0, 1)):
            if time.monotonic() > deadline or process.poll() is not None:
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=120)
        if not (group / "summary.json").exists():
            return {"exit": process.returncode, "output": output[-3000:]}
        finals = [(group / f"seed-{s}" / "final").is_dir() for s in (0, 1)]
        reasons = [
            e["stop_reason"] for e in json.loads((group / "summary.json").read_text())["runs"]
        ]
        resumed = subprocess.run(
            [rlx, "run", "--resume", str(group), *where],
            capture_output=True,
            text=True,
            timeout=240,
            stdin=subprocess.DEVNULL,
        )
        local = subprocess.run(
            [
                rlx,
                "run",
                "q-learning",
                "--env",
                "Taxi-v4",
                "--seeds",
                "0-1",
                "--out",
                str(directory / "local"),
                *common,
            ],
            capture_output=True,
            text=True,
            timeout=240,
            stdin=subprocess.DEVNULL,
        )
    finally:
        cluster.shutdown()
    return {
        "exit": process.returncode,
        "output": output[-2000:],
        "finals": finals,
        "reasons": reasons,
        "resumed": resumed.returncode,
        "resumed_output": (resumed.stdout + resumed.stderr)[-2000:],
        "local": local.returncode,
        "differences": differences(group, directory / "local"),
    }


if __name__ == "__main__":
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    name, folder = sys.argv[1], Path(sys.argv[2])
    scenario = {"equal": equal, "lost-node": lost_node, "interrupt": interrupt}[name]
    print(json.dumps(scenario(folder)), flush=True)
