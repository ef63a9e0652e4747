"""The UCI data bandits of Riquelme, Tucker and Snoek, "Deep Bayesian Bandits Showdown" (2018).

Each class names its data files with their sha256 and parses the original UCI format
(its quirks are noted in each ``parse``). Where the files are searched for, and how to
download them: :mod:`rlx_envs.files`. Contexts and arms: :mod:`rlx_envs.data`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from rlx.errors import ConfigError
from rlx_envs.data import ClassificationBandit, DataBandit, Table
from rlx_envs.files import DataFile, DataSet, open_text

MUSHROOM = DataSet(
    "Mushroom",
    "mushroom",
    (
        DataFile(
            "agaricus-lepiota.data.gz",
            "bf2157cb0f7aca0b2ce5537471c6b9636380b20e322a5aa97af985ba45affffa",
        ),
        DataFile(
            "agaricus-lepiota.data",
            "e65d082030501a3ebcbcd7c9f7c71aa9d28fdfff463bf4cf4716a3fe13ac360e",
        ),
    ),
)
STATLOG = DataSet(
    "Statlog (Shuttle)",
    "shuttle",
    (
        DataFile(
            "shuttle.trn.gz",
            "7e5b6c9db2350161b89b562a6b73c3ec2eea2c1d6f632bf568401236ad49b751",
            split="train",
        ),
        DataFile(
            "shuttle.trn",
            "87b24ee9fb5137e1d417659cf905d84d0e15342bbaa60770f1ae83da1a38200a",
            split="train",
        ),
        DataFile(
            "shuttle.trn.Z",
            "ffd2cbf221d4982ccc77c674621c23291447f3fd9484c00d8078858965e0e7ed",
            split="train",
        ),
        DataFile(
            "shuttle.tst.gz",
            "89057c33f1d70464e4882e12802c6e25b76cc9e2c2af1be9d186617a5efc7d40",
            split="test",
        ),
        DataFile(
            "shuttle.tst",
            "4d06df909e29d5f908fcbce4e003c8038a7bb5230b57820b4b87be6f38b1c747",
            split="test",
        ),
    ),
)
COVERTYPE = DataSet(
    "Covertype",
    "covtype",
    (
        # scikit-learn's fetch_covtype checks its copy of covtype.data.gz against this value.
        DataFile(
            "covtype.data.gz",
            "614360d0257557dd1792834a85a1cdebfadc3c4f30b011d56afee7ffb5b15771",
        ),
        # A 10,000-row sample with a header line, for tests only: accepted through path=.
        DataFile(
            "covtype_sample10k.csv.gz",
            "2e715039661e4067e9b22aeb5a3631bbefbe2a95525892ecd1c9ced5c0e40db4",
            searched=False,
        ),
        DataFile(
            "covtype_sample10k.csv",
            "ce19d1aaa1dbfd3eb62acd4d693975010cf796617188d7e5706cafd9bc82f9c7",
            searched=False,
        ),
    ),
)
ADULT = DataSet(
    "Adult",
    "adult",
    (
        DataFile(
            "adult.data.gz",
            "c7a2b4716a97f930123e0baf879188d701e798172631a654fc703d4b082907f3",
            split="train",
        ),
        DataFile(
            "adult.data",
            "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
            split="train",
        ),
        DataFile(
            "adult.test.gz",
            "8a2c1bffa6e7ce5abfa43881ae5e87c4311ebc2b3cd526c9c40a43f19f06f799",
            split="test",
        ),
        DataFile(
            "adult.test",
            "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
            split="test",
        ),
    ),
)
CENSUS = DataSet(
    "US Census 1990",
    "census1990",
    (
        # Probably the file's sha256 (the oid of a Git LFS copy), not verified against UCI's
        # file: pass sha256=... if your copy is the genuine one and differs.
        DataFile(
            "USCensus1990.data.txt",
            "38e99f50855ddc03167b715b36519ef40b77295ae4e85dfef0c6429ac79ed799",
        ),
    ),
)
MAGIC = DataSet(
    "MAGIC Gamma Telescope",
    "magic",
    (
        DataFile(
            "magic04.data.gz",
            "318f3f9d066a87b9a36cf3dcad60af14b9446a50f25dc408b308aa61108671f7",
        ),
        DataFile(
            "magic04.data",
            "e9314b7ebd4b4b59a3b3d65f7316663963777b16a46786877651dbbaa640b36a",
        ),
    ),
)
WINE = DataSet(
    "Wine",
    "wine",
    (
        DataFile(
            "wine.data.gz",
            "326545a6b8f307d66c73ba40f1f0ab948af15d3b429596ef012a7272424d8e10",
        ),
        DataFile(
            "wine.data",
            "6be6b1203f3d51df0b553a70e57b8a723cd405683958204f96d23d7cd6aea659",
        ),
    ),
)


class MushroomBandit(DataBandit):
    """Eat a mushroom or not: arm 0 = leave it, arm 1 = eat it (8124 mushrooms, 117 features).

    The paper's rewards: leaving a mushroom pays 0; eating an edible one pays +5; eating a
    poisonous one pays +5 or -35 with probability 1/2 each (expected -15), so the best arm
    is to eat exactly the edible ones. Regret uses these expected rewards. The 22
    attributes are all categorical and one-hot encoded; the 2480 missing stalk-root
    values (``?``) are a category of their own, as in the paper's code.
    """

    dataset = MUSHROOM
    classes = ("e", "p")

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        reward_leave: float = 0.0,
        reward_edible: float = 5.0,
        reward_poisonous_lucky: float = 5.0,
        reward_poisonous_harmed: float = -35.0,
        prob_harmed: float = 0.5,
        **options: Any,
    ) -> None:
        if not 0.0 <= prob_harmed <= 1.0:
            raise ConfigError(f"prob_harmed must be in [0, 1], got {prob_harmed!r}")
        self.reward_leave = float(reward_leave)
        self.reward_edible = float(reward_edible)
        self.reward_poisonous_lucky = float(reward_poisonous_lucky)
        self.reward_poisonous_harmed = float(reward_poisonous_harmed)
        self.prob_harmed = float(prob_harmed)
        super().__init__(path, **options)

    @classmethod
    def parse(cls, path: Path) -> Table:
        # Comma-separated, no header, the class (e/p) first; "?" marks a missing stalk-root.
        with open_text(path) as text:
            rows = [line.strip().split(",") for line in text if line.strip()]
        data = np.array(rows)
        return Table(labels=data[:, 0], categorical=data[:, 1:])

    def _n_arms(self) -> int:
        return 2

    def expected_rewards(self) -> np.ndarray:
        if self.labels[self._row] == 0:  # edible
            eat = self.reward_edible
        else:
            eat = (
                self.prob_harmed * self.reward_poisonous_harmed
                + (1.0 - self.prob_harmed) * self.reward_poisonous_lucky
            )
        return np.array([self.reward_leave, eat])

    def _draw_reward(self, action: int) -> float:
        harmed = self.np_random.random() < self.prob_harmed  # drawn every round: see DataBandit
        if action == 0:
            return self.reward_leave
        if self.labels[self._row] == 0:
            return self.reward_edible
        return self.reward_poisonous_harmed if harmed else self.reward_poisonous_lucky


class StatlogBandit(ClassificationBandit):
    """Statlog (Shuttle): 9 numeric sensor readings; 7 arms, one per class (1..7).

    ``split="train"`` (default, 43500 rows, as in the paper) or ``"test"`` (14500 rows).
    About 80% of rows are class 1, and classes 2, 6 and 7 are rare.
    """

    dataset = STATLOG
    classes = ("1", "2", "3", "4", "5", "6", "7")

    @classmethod
    def parse(cls, path: Path) -> Table:
        # shuttle.trn is separated by spaces but shuttle.tst by tabs: split on any whitespace.
        with open_text(path) as text:
            data = np.loadtxt(text, ndmin=2)
        return Table(labels=data[:, -1].astype(int).astype(str), numeric=data[:, :-1])


class CovertypeBandit(ClassificationBandit):
    """Covertype: forest cover type (7 arms) from 54 cartographic features (581012 rows).

    The 10 quantitative features are standardised; the 4 wilderness-area and 40 soil-type
    indicators are kept as 0/1. Reads UCI's ``covtype.data.gz`` (no header) and also
    the shared 10,000-row sample ``covtype_sample10k.csv.gz`` (a header line), through
    ``path=``; the sample is for tests, not for benchmark numbers.
    """

    dataset = COVERTYPE
    classes = ("1", "2", "3", "4", "5", "6", "7")

    @classmethod
    def parse(cls, path: Path) -> Table:
        with open_text(path) as text:
            has_header = not text.readline()[:1].isdigit()
            text.seek(0)
            data = np.loadtxt(text, delimiter=",", dtype=np.int32, skiprows=int(has_header))
        if data.ndim != 2 or data.shape[1] != 55:
            raise ValueError(f"expected 55 comma-separated columns, got shape {data.shape}")
        return Table(labels=data[:, 54].astype(str), numeric=data[:, :10], binary=data[:, 10:54])


class AdultBandit(ClassificationBandit):
    """Adult: guess a person's occupation (14 arms) from the other census attributes.

    As in the paper, the arms are the 14 occupations; the income class (<=50K, >50K) is a
    feature. Rows with a missing value are dropped (30162 of 32561 in ``split="train"``,
    15060 of 16281 in ``"test"``). Six numeric attributes are standardised and eight
    categorical ones one-hot encoded.
    """

    dataset = ADULT
    classes = (
        "Adm-clerical",
        "Armed-Forces",
        "Craft-repair",
        "Exec-managerial",
        "Farming-fishing",
        "Handlers-cleaners",
        "Machine-op-inspct",
        "Other-service",
        "Priv-house-serv",
        "Prof-specialty",
        "Protective-serv",
        "Sales",
        "Tech-support",
        "Transport-moving",
    )
    NUMERIC = (0, 2, 4, 10, 11, 12)
    CATEGORICAL = (1, 3, 5, 7, 8, 9, 13, 14)
    OCCUPATION = 6

    @classmethod
    def parse(cls, path: Path) -> Table:
        # Fields are separated by ", "; adult.test starts with "|1x3 Cross validator" and its
        # income labels end with a dot; both files end with an empty line; "?" is missing.
        rows = []
        with open_text(path) as text:
            for line in text:
                if not line.strip() or line.startswith("|"):
                    continue
                fields = [field.strip() for field in line.split(",")]
                if "?" in fields:
                    continue
                fields[14] = fields[14].rstrip(".")
                rows.append(fields)
        data = np.array(rows)
        return Table(
            labels=data[:, cls.OCCUPATION],
            numeric=data[:, cls.NUMERIC].astype(np.float64),
            categorical=data[:, cls.CATEGORICAL],
        )


class CensusBandit(ClassificationBandit):
    """US Census 1990: guess the occupation code ``dOccup`` from the 67 other attributes.

    All attributes are categorical codes and one-hot encoded; ``caseid`` is dropped. The
    arms are the distinct ``dOccup`` values of the rows kept, in numeric order (9 in the
    paper). The full file has 2458285 rows; by default a random subset of 150000 is
    kept (the cap in the paper's code), since all of them one-hot encoded would take
    about 4 GB; pass ``max_rows=None`` for all. The known sha256 of
    ``USCensus1990.data.txt`` is probable but unverified: pass ``sha256=`` if yours differs.
    """

    dataset = CENSUS
    LABEL = "dOccup"
    DROPPED = ("caseid",)

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        max_rows: int | None = 150_000,
        **options: Any,
    ) -> None:
        super().__init__(path, max_rows=max_rows, **options)

    @classmethod
    def parse(cls, path: Path) -> Table:
        # A header line of attribute names, then comma-separated integer codes.
        with open_text(path) as text:
            header = [name.strip() for name in text.readline().split(",")]
            if cls.LABEL not in header:
                raise ValueError(f"the header line has no {cls.LABEL!r} column")
            kept = [i for i, name in enumerate(header) if name not in cls.DROPPED]
            data = np.loadtxt(text, delimiter=",", dtype=np.int32, usecols=kept, ndmin=2)
        label = kept.index(header.index(cls.LABEL))
        features = [i for i in range(len(kept)) if i != label]
        return Table(labels=data[:, label].astype(str), categorical=data[:, features])


class MagicBandit(ClassificationBandit):
    """MAGIC Gamma Telescope: gamma signal (``g``, arm 0) or hadron background (``h``, arm 1).

    10 numeric image features, standardised; 19020 rows.
    """

    dataset = MAGIC
    classes = ("g", "h")

    @classmethod
    def parse(cls, path: Path) -> Table:
        # Comma-separated, no header, 10 numbers then the class.
        with open_text(path) as text:
            data = np.loadtxt(text, delimiter=",", dtype=str, ndmin=2)
        return Table(labels=data[:, 10], numeric=data[:, :10].astype(np.float64))


class WineBandit(ClassificationBandit):
    """Wine: which of 3 cultivars (arms 0..2 for classes 1..3) from 13 chemical measurements.

    178 rows, standardised.
    """

    dataset = WINE
    classes = ("1", "2", "3")

    @classmethod
    def parse(cls, path: Path) -> Table:
        # Comma-separated, no header, the class first; some values lack a leading zero (".28").
        with open_text(path) as text:
            data = np.loadtxt(text, delimiter=",", ndmin=2)
        return Table(labels=data[:, 0].astype(int).astype(str), numeric=data[:, 1:])
