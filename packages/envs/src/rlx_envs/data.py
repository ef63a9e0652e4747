"""Bandits built from data sets: one row per round, in a fresh random order each episode.

A classification data set becomes a contextual bandit with one arm per class: the context
is the row's features, the reward is 1 for the row's true class and 0 otherwise (Riquelme,
Tucker and Snoek, "Deep Bayesian Bandits Showdown", ICLR 2018, section "Real-world data").

Features are encoded the same way for every data set: numeric columns are standardised
(zero mean, unit variance over the rows kept), 0/1 columns are kept as they are, and
categorical columns are one-hot encoded (one column per value present in the rows kept).

A data bandit is a few lines: a :class:`~rlx_envs.files.DataSet` naming the files and
their checksums, and a ``parse`` that turns a file into a :class:`Table`; see
:mod:`rlx_envs.uci` and the package README.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from rlx.errors import CheckpointError, ConfigError
from rlx_envs.base import BanditEnv, positive_int
from rlx_envs.files import DataFileError, DataSet, data_status, locate


class DataFormatError(DataFileError, ValueError):
    """A data file that passed its checksum but does not parse as the data set it should be."""


@dataclass(frozen=True)
class Table:
    """A parsed data file, one row per example.

    Attributes:
        labels: ``(n,)`` class of each row, as strings.
        numeric: ``(n, k)`` numbers, standardised in the context.
        binary: ``(n, b)`` 0/1 indicators, kept as they are.
        categorical: ``(n, m)`` values of categorical columns, one-hot encoded.
    """

    labels: np.ndarray
    numeric: np.ndarray | None = None
    binary: np.ndarray | None = None
    categorical: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("numeric", "binary", "categorical"):
            block = getattr(self, name)
            if block is not None and (block.ndim != 2 or len(block) != len(self.labels)):
                raise ValueError(
                    f"Table.{name} must have shape (n_rows, columns) with n_rows = "
                    f"{len(self.labels)} labels, got {block.shape}"
                )

    def take(self, rows: np.ndarray) -> Table:
        """The table restricted to ``rows`` (indices)."""

        def pick(block: np.ndarray | None) -> np.ndarray | None:
            return None if block is None else block[rows]

        return Table(
            self.labels[rows], pick(self.numeric), pick(self.binary), pick(self.categorical)
        )

    def features(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The encoded contexts ``(n, context_dim)`` float32, and their bounds ``(context_dim,)``.

        Numeric columns are bounded by their smallest and largest standardised value,
        0/1 and one-hot columns by [0, 1] (even when a column is constant in the data).
        """
        blocks, lows, highs = [], [], []
        if self.numeric is not None:
            numeric = self.numeric.astype(np.float64)
            std = numeric.std(axis=0)
            std[std == 0] = 1.0  # a constant column (possible in a subsample) stays 0
            standardised = ((numeric - numeric.mean(axis=0)) / std).astype(np.float32)
            blocks.append(standardised)
            lows.append(standardised.min(axis=0))
            highs.append(standardised.max(axis=0))
        indicators = []
        if self.binary is not None:
            indicators.append(self.binary.astype(np.float32))
        if self.categorical is not None:
            for column in self.categorical.T:
                values, codes = np.unique(column, return_inverse=True)
                one_hot = np.zeros((len(column), len(values)), np.float32)
                one_hot[np.arange(len(column)), codes] = 1.0
                indicators.append(one_hot)
        for block in indicators:
            blocks.append(block)
            lows.append(np.zeros(block.shape[1], np.float32))
            highs.append(np.ones(block.shape[1], np.float32))
        return np.hstack(blocks), np.concatenate(lows), np.concatenate(highs)


@dataclass(frozen=True)
class LoadedData:
    """The rows a data bandit plays: contexts ``(n, d)`` float32, labels ``(n,)`` class indices."""

    contexts: np.ndarray
    labels: np.ndarray
    classes: tuple[str, ...]
    low: np.ndarray
    high: np.ndarray


class DataBandit(BanditEnv):
    """Base class of the data bandits: the rows of a data file, one per round.

    Subclasses set ``dataset`` (and ``classes`` when the arms are known in advance), define
    ``parse(path) -> Table``, and say what the arms pay (:class:`ClassificationBandit`
    pays 1 for the true class).

    Each episode visits the rows in a new random order drawn from ``np_random`` (one
    shuffled pass; a horizon longer than the data starts a new pass). Contexts never
    depend on the arms pulled: every round draws the same random numbers whatever the
    action, so two agents given the same seed see the same contexts.

    :param path: the data file; by default it is searched for (see :mod:`rlx_envs.files`).
    :param split: which file of the data set, for those with several (``"train"``/``"test"``).
    :param max_rows: keep a random subset of this many rows (default: all), chosen with
        ``subsample_seed`` when the data is loaded, so that the context size is fixed
        before the first reset; features are standardised over the rows kept.
    :param subsample_seed: seed of that subset.
    :param horizon: rounds per episode; default: the number of rows (one pass).
    :param download: fetch the file from UCI into the cache when it is found nowhere.
    :param sha256: accept a file with this checksum instead of the known one.
    """

    dataset: ClassVar[DataSet]
    #: The label values, in arm order; None: the distinct labels of the rows kept, sorted.
    classes: ClassVar[tuple[str, ...] | None] = None

    @classmethod
    def parse(cls, path: Path) -> Table:
        """Read a data file of this data set."""
        raise NotImplementedError

    @classmethod
    def data_status(cls, split: str | None = None) -> list[tuple[Path, bool]]:
        """The files searched for (every split, or ``split``), in the order they are searched,
        and whether each exists; ``rlx info ENV_ID`` shows them. ``path=`` skips the search."""
        return data_status(cls.dataset, split)

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        split: str | None = None,
        max_rows: int | None = None,
        subsample_seed: int = 0,
        horizon: int | None = None,
        download: bool = False,
        sha256: str | None = None,
    ) -> None:
        splits = self.dataset.splits
        split = splits[0] if split is None else split
        if split not in splits:
            raise ConfigError(
                f"{type(self).__name__}: unknown split {split!r}; valid: {', '.join(splits)}"
            )
        if max_rows is not None:
            max_rows = positive_int("max_rows", max_rows)
        self.split = split
        self.path = locate(self.dataset, split, path, sha256, download)
        status = self.path.stat()
        data = _load(
            type(self),
            str(self.path.resolve()),
            (status.st_size, status.st_mtime_ns),
            max_rows,
            int(subsample_seed),
        )
        #: ``(n_rows, context_dim)`` float32 contexts (read-only, shared between copies).
        self.contexts = data.contexts
        #: ``(n_rows,)`` index of each row's class in :attr:`class_names`.
        self.labels = data.labels
        #: The label value of each class (for a classification bandit: of each arm).
        self.class_names = data.classes
        self.n_rows = len(data.labels)
        super().__init__(
            n_arms=self._n_arms(),
            context_dim=self.contexts.shape[1],
            horizon=self.n_rows if horizon is None else horizon,
            low=data.low,
            high=data.high,
        )
        self._pass_seed: int | None = None
        self._order = np.arange(self.n_rows)
        self._row = 0

    def _n_arms(self) -> int:
        raise NotImplementedError

    def _begin_episode(self, seed: int | None) -> None:
        self._new_pass()

    def _new_pass(self) -> None:
        self._pass_seed = int(self.np_random.integers(2**63))
        self._order = np.random.default_rng(self._pass_seed).permutation(self.n_rows)

    def _next_context(self) -> np.ndarray:
        position = self.round % self.n_rows
        if position == 0 and self.round > 0:
            self._new_pass()
        self._row = int(self._order[position])
        return self.contexts[self._row]

    def _extra_state(self) -> dict[str, Any]:
        return {"rows": self.n_rows, "pass_seed": self._pass_seed}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        if state["rows"] != self.n_rows:
            raise CheckpointError(
                f"{type(self).__name__}: the saved state is for {state['rows']} rows of data, "
                f"this environment has {self.n_rows} (a different file, split or max_rows?)"
            )
        self._pass_seed = state["pass_seed"]
        if self._pass_seed is None:
            return
        self._order = np.random.default_rng(self._pass_seed).permutation(self.n_rows)
        self._row = int(self._order[int(state["round"]) % self.n_rows])
        if not np.array_equal(self.contexts[self._row], np.float32(state["context"])):
            raise CheckpointError(
                f"{type(self).__name__}: the saved context is not the row the saved state "
                "points at: the data differs from the data the state was saved with"
            )


class ClassificationBandit(DataBandit):
    """One arm per class; pulling the row's true class pays 1, any other arm 0."""

    def _n_arms(self) -> int:
        return len(self.class_names)

    def expected_rewards(self) -> np.ndarray:
        rewards = np.zeros(self.n_arms)
        rewards[self.labels[self._row]] = 1.0
        return rewards

    def _draw_reward(self, action: int) -> float:
        return 1.0 if action == self.labels[self._row] else 0.0


@functools.lru_cache(maxsize=4)
def _load(
    cls: type[DataBandit],
    path: str,
    stamp: tuple[int, int],
    max_rows: int | None,
    subsample_seed: int,
) -> LoadedData:
    """Parse, subsample and encode a data file; cached, so copies of an environment share it.

    ``stamp`` (size and modification time) makes a changed file load again.
    """
    try:
        table = cls.parse(Path(path))
    except (ValueError, IndexError) as exc:
        raise DataFormatError(f"{cls.dataset.name}: cannot read {path}: {exc}") from exc
    if len(table.labels) == 0:
        raise DataFormatError(f"{cls.dataset.name}: {path} holds no rows")
    if max_rows is not None and max_rows < len(table.labels):
        rows = np.random.default_rng(subsample_seed).choice(len(table.labels), max_rows, False)
        table = table.take(np.sort(rows))
    classes = cls.classes or tuple(sorted(set(table.labels.tolist()), key=_natural))
    index = {name: i for i, name in enumerate(classes)}
    values, codes = np.unique(table.labels, return_inverse=True)
    unknown = [value for value in values.tolist() if value not in index]
    if unknown:
        raise DataFormatError(
            f"{cls.dataset.name}: {path} has labels {unknown[:5]} outside the known classes "
            f"{list(classes)}"
        )
    labels = np.array([index[value] for value in values.tolist()], dtype=np.int64)[codes]
    contexts, low, high = table.features()
    contexts.flags.writeable = False
    labels.flags.writeable = False
    return LoadedData(contexts, labels, classes, low, high)


def _natural(value: str) -> tuple[int, int | str]:
    """Sort key: numbers by value (``"2"`` before ``"10"``), then other strings."""
    return (0, int(value)) if value.lstrip("-").isdigit() else (1, value)
