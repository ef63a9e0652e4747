"""rlx-offpolicy's vectorised sum tree against the per-item loop of the usual Python one.

A prioritized replay buffer of 1,000,000 transitions makes, per gradient step, one
stratified draw of a minibatch (256 descents of the tree) and one update of the 256
priorities it drew (256 walks up). The usual implementation is a Python class that does
each of those one item at a time: ``update(i, p)`` walks from the leaf to the root adding
the change, ``get(s)`` walks from the root to a leaf; :class:`LoopSumTree` below is that,
over a NumPy array (the common form) and, as a second baseline, over a Python list (whose
scalar reads and writes are cheaper). rlx's :class:`~rlx_offpolicy.prioritized.SumTree`
runs one NumPy pass per tree level for the whole batch (its draws cross the top 10 levels
in one binary search of the running sums of the 1,024 nodes below them).

rlx's tree pads its leaves to a power of two (2**20 here), and so does the baseline: with
1,000,000 leaves exactly, the usual layout keeps its leaves at depth 20 but for 5% at
depth 19, so it would walk as far, but it would order the leaves differently (the last
level wraps around), and the same numbers would draw other leaves. Padded alike, the
trees draw the same leaves, which the script checks.

The trees start from the same 1,000,000 priorities, ``(|delta| + 1e-6)^0.6`` with
heavy-tailed TD errors ``|delta|`` (a half-normal times a log-normal), and then play the
same rounds: the same uniform numbers for the stratified draw, then the same new
priorities for the leaves drawn. The trees take turns so that all see the same machine
load, in two ways: in blocks of 50 rounds, each then works with its own tree in the cache,
as in a program that uses one; round by round, they evict each other's trees from the
cache at every round (together they exceed the 32 MB L3 cache of the machine the results
come from, the baseline's Python floats above all), which costs the vectorised tree most,
as it then waits on memory more than on Python. Reports rounds per second of each
part (the median of the repeats), their ratios, and the agreement of the trees (leaves
drawn, totals).

    python benchmarks/offpolicy_prioritized.py    # writes results/offpolicy_prioritized.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from rlx_offpolicy.prioritized import SumTree

CAPACITY = 1_000_000
LEAVES = 1 << 20  # the baseline's leaves: CAPACITY padded with zeros as rlx's tree is
BATCH = 256
ALPHA = 0.6
EPS = 1e-6


class LoopSumTree:
    """The usual per-item sum tree: ``2 * capacity - 1`` nodes, node ``i`` has children
    ``2i + 1`` and ``2i + 2``, the leaves are the last ``capacity`` nodes."""

    def __init__(self, capacity: int, as_list: bool = False) -> None:
        self.capacity = capacity
        self.tree: np.ndarray | list[float] = np.zeros(2 * capacity - 1)
        self.as_list = as_list

    def fill(self, priorities: np.ndarray) -> None:
        """Set every leaf and build the sums (vectorised: the setup is not measured)."""
        tree = np.zeros(2 * self.capacity - 1)
        tree[self.capacity - 1 : self.capacity - 1 + len(priorities)] = priorities
        end = self.capacity - 1  # nodes [start, end) have all their children at >= end
        while end > 0:
            start = end // 2
            tree[start:end] = (
                tree[2 * start + 1 : 2 * end : 2] + tree[2 * start + 2 : 2 * end + 1 : 2]
            )
            end = start
        self.tree = tree.tolist() if self.as_list else tree

    @property
    def total(self) -> float:
        return float(self.tree[0])

    def update(self, index: int, priority: float) -> None:
        node = index + self.capacity - 1
        change = priority - self.tree[node]
        self.tree[node] = priority
        while node != 0:
            node = (node - 1) // 2
            self.tree[node] += change

    def get(self, value: float) -> int:
        """The leaf whose cumulative range holds ``value``."""
        tree = self.tree
        node = 0
        while True:
            left = 2 * node + 1
            if left >= len(tree):
                return node - (self.capacity - 1)
            if value < tree[left]:
                node = left
            else:
                value -= tree[left]
                node = left + 1

    def sample(self, uniforms: np.ndarray) -> np.ndarray:
        segment = self.total / len(uniforms)
        return np.array(
            [self.get((i + float(u)) * segment) for i, u in enumerate(uniforms)], np.int64
        )

    def update_many(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        for index, priority in zip(indices.tolist(), priorities.tolist(), strict=True):
            self.update(index, priority)


def vectorised_sample(tree: SumTree, uniforms: np.ndarray) -> np.ndarray:
    segment = tree.total / len(uniforms)
    return tree.find((np.arange(len(uniforms)) + uniforms) * segment)


def priorities(rng: np.random.Generator, size: int) -> np.ndarray:
    td_errors = np.abs(rng.standard_normal(size)) * rng.lognormal(0.0, 1.0, size)
    return (td_errors + EPS) ** ALPHA


class Contender:
    """One tree, driven round by round, timing its draws and its updates apart."""

    def __init__(self, tree: SumTree | LoopSumTree, initial: np.ndarray) -> None:
        self.tree = tree
        if isinstance(tree, SumTree):
            tree.set_leaves(initial)
            self.sample = lambda uniforms: vectorised_sample(tree, uniforms)
            self.update = tree.update
        else:
            tree.fill(initial)
            self.sample = tree.sample
            self.update = tree.update_many
        self.sample_s = self.update_s = 0.0
        self.drawn: list[np.ndarray] = []

    def round(self, uniforms: np.ndarray, new: np.ndarray) -> None:
        start = time.perf_counter()
        leaves = self.sample(uniforms)
        middle = time.perf_counter()
        self.update(leaves, new)
        self.sample_s += middle - start
        self.update_s += time.perf_counter() - middle
        self.drawn.append(leaves)


CONTENDERS = {
    "vectorised": lambda: SumTree(CAPACITY),
    "loop_numpy": lambda: LoopSumTree(LEAVES),
    "loop_list": lambda: LoopSumTree(LEAVES, as_list=True),
}
BASELINES = ("loop_numpy", "loop_list")
PARTS = ("sample", "update", "round")


def measure(
    initial: np.ndarray, rounds: list[tuple[np.ndarray, np.ndarray]], repeats: int, block: int
) -> dict[str, object]:
    """Every contender plays ``rounds``, ``block`` at a time in turn, ``repeats`` times."""
    timings: dict[str, dict[str, list[float]]] = {
        name: {part: [] for part in PARTS} for name in CONTENDERS
    }
    for _ in range(repeats):
        trees = {name: Contender(new_tree(), initial) for name, new_tree in CONTENDERS.items()}
        order = list(trees.values())
        for turn, start in enumerate(range(0, len(rounds), block)):
            # Blocks of rounds in turn (the first one rotating): all see the same load.
            for contender in order[turn % 3 :] + order[: turn % 3]:
                for uniforms, new in rounds[start : start + block]:
                    contender.round(uniforms, new)
        n = len(rounds)
        for name, contender in trees.items():
            timings[name]["sample"].append(n / contender.sample_s)
            timings[name]["update"].append(n / contender.update_s)
            timings[name]["round"].append(n / (contender.sample_s + contender.update_s))
    median = {
        name: {part: statistics.median(values) for part, values in parts.items()}
        for name, parts in timings.items()
    }
    vectorised = np.concatenate(trees["vectorised"].drawn)
    return {
        "ops_per_s": median,
        "ops_per_s_all_repeats": timings,
        "ratio_vectorised_over": {
            baseline: {part: median["vectorised"][part] / median[baseline][part] for part in PARTS}
            for baseline in BASELINES
        },
        "leaves_drawn_agreeing": {
            baseline: float(np.mean(vectorised == np.concatenate(trees[baseline].drawn)))
            for baseline in BASELINES
        },
        "totals": {name: contender.tree.total for name, contender in trees.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=500, help="rounds timed per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="repeats; the median is kept")
    parser.add_argument(
        "--blocks",
        type=int,
        nargs="+",
        default=[50, 1],
        help="rounds a tree plays before the next one's turn: one measurement each",
    )
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results/offpolicy_prioritized.json"
    )
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    initial = priorities(rng, CAPACITY)
    rounds = [(rng.random(BATCH), priorities(rng, BATCH)) for _ in range(args.rounds)]
    measured = {block: measure(initial, rounds, args.repeats, block) for block in args.blocks}
    results = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
        },
        "numpy": np.__version__,
        "capacity": CAPACITY,
        "batch_size": BATCH,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "unit": "rounds per second (one round: a stratified draw of 256 and/or 256 updates)",
        "by_block": {str(block): result for block, result in measured.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    for block, result in measured.items():
        print(f"blocks of {block} round(s):")
        for name, parts in result["ops_per_s"].items():
            print(
                f"  {name:>10}: sample {parts['sample']:8.1f}/s  update {parts['update']:8.1f}/s"
                f"  both {parts['round']:8.1f}/s"
            )
        for baseline, parts in result["ratio_vectorised_over"].items():
            print(
                f"  vectorised / {baseline}: sample {parts['sample']:.1f}x  update "
                f"{parts['update']:.1f}x  both {parts['round']:.1f}x  (same leaves drawn: "
                f"{result['leaves_drawn_agreeing'][baseline]:.4%})"
            )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
