"""Data bandits: loaders, file search, checksums, downloads, exact regret, exact resume."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from envs_helpers import play, random_actions, sha256_of

import rlx
from rlx.errors import ConfigError, RlxError
from rlx.protocols import Bandit
from rlx.seeding import env_rng_state, restore_env_rng
from rlx.testing import check_env
from rlx_envs import files
from rlx_envs._lzw import unlzw
from rlx_envs.data import DataFormatError
from rlx_envs.files import ChecksumMismatchError, DataNotFoundError, DownloadError
from rlx_envs.uci import (
    AdultBandit,
    CensusBandit,
    CovertypeBandit,
    MagicBandit,
    MushroomBandit,
    StatlogBandit,
    WineBandit,
)

COVTYPE_SAMPLE = "covtype/covtype_sample10k.csv.gz"
CENSUS_HEADER = (
    "caseid,dAge,dAncstry1,dAncstry2,iAvail,iCitizen,iClass,dDepart,iDisabl1,iDisabl2,"
    "iEnglish,iFeb55,iFertil,dHispanic,dHour89,dHours,iImmigr,dIncome1,dIncome2,dIncome3,"
    "dIncome4,dIncome5,dIncome6,dIncome7,dIncome8,dIndustry,iKorean,iLang1,iLooking,iMarital,"
    "iMay75880,iMeans,iMilitary,iMobility,iMobillim,dOccup,iOthrserv,iPerscare,dPOB,dPoverty,"
    "dPwgt1,iRagechld,dRearning,iRelat1,iRelat2,iRemplpar,iRiders,iRlabor,iRownchld,dRpincome,"
    "iRPOB,iRrelchld,iRspouse,iRvetserv,iSchool,iSept80,iSex,iSubfam1,iSubfam2,iTmpabsnt,"
    "dTravtime,iVietnam,dWeek89,iWork89,iWorklwk,iWWII,iYearsch,iYearwrk,dYrsserv"
)


def write_census(path: Path, rows: int = 40, seed: int = 0) -> np.ndarray:
    """A small file in the USCensus1990.data.txt format; returns its values (without header)."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 4, size=(rows, 69))
    values[:, 0] = 10000 + np.arange(rows)  # caseid
    values[:, 35] = np.arange(rows) % 9  # dOccup: 9 codes, as in the full file
    lines = [CENSUS_HEADER] + [",".join(map(str, row)) for row in values]
    path.write_text("\n".join(lines) + "\n")
    return values


def write_covtype(path: Path, rows: int = 30, seed: int = 0) -> np.ndarray:
    """A small gzipped file in the UCI covtype.data format (no header, class last)."""
    rng = np.random.default_rng(seed)
    values = np.zeros((rows, 55), dtype=np.int64)
    values[:, :10] = rng.integers(0, 3000, size=(rows, 10))
    values[np.arange(rows), 10 + rng.integers(0, 4, rows)] = 1  # wilderness area
    values[np.arange(rows), 14 + rng.integers(0, 40, rows)] = 1  # soil type
    values[:, 54] = 1 + np.arange(rows) % 7
    text = "\n".join(",".join(map(str, row)) for row in values) + "\n"
    path.write_bytes(gzip.compress(text.encode()))
    return values


def write_wine(path: Path, rows: int = 12) -> None:
    rng = np.random.default_rng(0)
    lines = [
        ",".join([str(1 + i % 3), *(f"{v:.2f}" for v in rng.uniform(0, 10, 13))])
        for i in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n")


# -- every data bandit keeps the gymnasium and rlx contracts -----------------------------


@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("rlx/Mushroom-v0", {}),
        ("rlx/Statlog-v0", {}),
        ("rlx/Adult-v0", {"max_rows": 3000}),
        ("rlx/Magic-v0", {}),
        ("rlx/Wine-v0", {}),
    ],
)
def test_data_bandits_pass_the_environment_checks(shared, env_id, kwargs):
    env = rlx.make_env(env_id, **kwargs)
    check_env(env)
    assert isinstance(env.unwrapped, Bandit)


def test_covertype_passes_the_environment_checks_on_the_shared_sample(shared):
    check_env(rlx.make_env("rlx/Covertype-v0", path=shared / COVTYPE_SAMPLE))


def test_census_and_full_covertype_pass_the_environment_checks_on_small_files(tmp_path):
    census, covtype = tmp_path / "USCensus1990.data.txt", tmp_path / "covtype.data.gz"
    write_census(census)
    write_covtype(covtype)
    check_env(rlx.make_env("rlx/Census-v0", path=census, sha256=sha256_of(census)))
    check_env(rlx.make_env("rlx/Covertype-v0", path=covtype, sha256=sha256_of(covtype)))


# -- loaders: rows, features, arms ------------------------------------------------------


def test_mushroom_loads_8124_rows_of_117_one_hot_features(shared):
    env = MushroomBandit()
    assert (env.n_rows, env.context_dim, env.n_arms) == (8124, 117, 2)
    assert np.bincount(env.labels).tolist() == [4208, 3916]  # edible, poisonous
    assert set(np.unique(env.contexts)) == {0.0, 1.0}
    assert np.all(env.contexts.sum(axis=1) == 22)  # one value of each attribute


def test_statlog_loads_the_training_file_and_the_tab_separated_test_file(shared):
    train, test = StatlogBandit(), StatlogBandit(split="test")
    assert (train.n_rows, train.context_dim, train.n_arms) == (43500, 9, 7)
    assert np.bincount(train.labels).tolist() == [34108, 37, 132, 6748, 2458, 6, 11]
    assert (test.n_rows, test.context_dim) == (14500, 9)
    assert np.bincount(test.labels).tolist() == [11478, 13, 39, 2155, 809, 4, 2]
    np.testing.assert_allclose(train.contexts.mean(axis=0), 0, atol=1e-4)
    np.testing.assert_allclose(train.contexts.std(axis=0), 1, atol=1e-4)


def test_statlog_reads_the_original_unix_compress_file(shared):
    compressed = shared / "shuttle" / "shuttle.trn.Z"
    original = gzip.decompress((shared / "shuttle" / "shuttle.trn.gz").read_bytes())
    assert unlzw(compressed.read_bytes()) == original
    np.testing.assert_array_equal(StatlogBandit(compressed).contexts, StatlogBandit().contexts)
    with pytest.raises(ValueError, match="not a UNIX compress"):
        unlzw(original)


def test_adult_drops_rows_with_missing_values_and_has_14_occupations(shared):
    train, test = AdultBandit(), AdultBandit(split="test")
    assert (train.n_rows, train.n_arms) == (30162, 14)
    assert test.n_rows == 15060
    assert train.class_names[0] == "Adm-clerical" and len(set(train.class_names)) == 14
    # 6 numeric features, one-hot income (the test file's trailing dots removed), and so on.
    assert train.context_dim == 6 + 7 + 16 + 7 + 6 + 5 + 2 + 41 + 2
    assert test.context_dim == train.context_dim - 1  # no Holand-Netherlands in adult.test


def test_magic_and_wine_load_their_classes(shared):
    magic, wine = MagicBandit(), WineBandit()
    assert (magic.n_rows, magic.context_dim, magic.n_arms) == (19020, 10, 2)
    assert np.bincount(magic.labels).tolist() == [12332, 6688]
    assert (wine.n_rows, wine.context_dim, wine.n_arms) == (178, 13, 3)
    assert np.bincount(wine.labels).tolist() == [59, 71, 48]


def test_covertype_reads_the_shared_sample_with_its_header(shared):
    env = CovertypeBandit(shared / COVTYPE_SAMPLE)
    assert (env.n_rows, env.context_dim, env.n_arms) == (10000, 54, 7)
    assert np.bincount(env.labels).tolist() == [1375, 1462, 1262, 1620, 1583, 1349, 1349]
    assert np.all(env.contexts[:, 10:14].sum(axis=1) == 1)  # wilderness indicators kept 0/1


def test_covertype_reads_the_uci_format_without_header(tmp_path, monkeypatch, no_shared):
    monkeypatch.setenv("RLX_UCI_DIR", str(tmp_path))
    path = tmp_path / "covtype" / "covtype.data.gz"
    path.parent.mkdir()
    values = write_covtype(path)
    env = CovertypeBandit(sha256=sha256_of(path))
    assert env.path == path
    assert (env.n_rows, env.context_dim, env.n_arms) == (30, 54, 7)
    np.testing.assert_array_equal(env.labels, values[:, 54] - 1)
    np.testing.assert_array_equal(env.contexts[:, 10:], values[:, 10:54])


def test_census_one_hot_encodes_every_attribute_but_caseid_and_doccup(tmp_path):
    path = tmp_path / "USCensus1990.data.txt"
    values = write_census(path)
    env = CensusBandit(path, sha256=sha256_of(path))
    assert env.n_rows == 40 and env.n_arms == 9
    assert env.class_names == tuple(str(i) for i in range(9))
    features = np.delete(values, [0, 35], axis=1)
    assert env.context_dim == sum(len(np.unique(column)) for column in features.T)
    assert np.all(env.contexts.sum(axis=1) == 67)
    np.testing.assert_array_equal(env.labels, values[:, 35])


def test_max_rows_keeps_a_seeded_random_subset(shared):
    full = WineBandit()
    small = WineBandit(max_rows=50)
    again = WineBandit(max_rows=50)
    other = WineBandit(max_rows=50, subsample_seed=1)
    assert (small.n_rows, small.horizon) == (50, 50)
    np.testing.assert_array_equal(small.contexts, again.contexts)
    assert not np.array_equal(small.labels, other.labels)
    np.testing.assert_allclose(small.contexts.mean(axis=0), 0, atol=1e-5)  # standardised again
    assert WineBandit(max_rows=1000).n_rows == full.n_rows


# -- exact regret -----------------------------------------------------------------------


def test_mushroom_regret_uses_expected_rewards(shared):
    env = MushroomBandit()
    env.reset(seed=0)
    arms = random_actions(2, 600)
    harmed = lucky = 0
    for arm in arms.tolist():
        edible = env.labels[env._row] == 0
        expected = [0.0, 5.0] if edible else [0.0, -15.0]
        np.testing.assert_array_equal(env.expected_rewards(), expected)
        _, reward, _, _, info = env.step(arm)
        assert info["expected_reward"] == expected[arm]
        assert info["optimal_reward"] == max(expected)
        assert info["regret"] == max(expected) - expected[arm]
        if arm == 0:
            assert reward == 0.0
        elif edible:
            assert reward == 5.0
        else:
            assert reward in (5.0, -35.0)
            harmed, lucky = harmed + (reward == -35.0), lucky + (reward == 5.0)
    assert harmed > 20 and lucky > 20


def test_classification_pays_one_for_the_true_class_only(shared):
    env = WineBandit()
    env.reset(seed=0)
    for _ in range(100):
        label = int(env.labels[env._row])
        assert env.optimal_reward() == 1.0
        wrong = (label + 1) % 3
        _, reward, _, _, info = env.step(wrong)
        assert (reward, info["regret"], info["expected_reward"]) == (0.0, 1.0, 0.0)
        label = int(env.labels[env._row])
        _, reward, _, _, info = env.step(label)
        assert (reward, info["regret"]) == (1.0, 0.0)


def test_one_episode_is_one_shuffled_pass_and_the_next_reshuffles(shared):
    env = WineBandit()
    env.reset(seed=0)
    seen = [env._row]
    for _ in range(177):
        *_, truncated, _ = env.step(0)
        assert not truncated
        seen.append(env._row)
    assert sorted(seen) == list(range(178)) and seen != list(range(178))
    *_, truncated, _ = env.step(0)
    assert truncated
    first_pass = list(env._order)
    env.reset()
    assert list(env._order) != first_pass


# -- determinism and exact resume ---------------------------------------------------------


def test_the_same_seed_gives_the_same_rows_in_the_same_order(shared):
    actions = random_actions(2, 300)
    one, two, other = MushroomBandit(), MushroomBandit(), MushroomBandit()
    assert play(one, actions, reset_seed=4) == play(two, actions, reset_seed=4)
    assert play(other, actions, reset_seed=5) != play(one, actions, reset_seed=4)


@pytest.mark.parametrize(
    "env_id, cls, kwargs",
    [("rlx/Mushroom-v0", MushroomBandit, {}), ("rlx/Wine-v0", WineBandit, {"horizon": 400})],
)
def test_a_restored_data_bandit_continues_exactly_across_passes(shared, env_id, cls, kwargs):
    env = rlx.make_env(env_id, **kwargs)
    actions = random_actions(env.action_space.n, 500)
    play(env, actions[:150], reset_seed=2)
    state = json.loads(json.dumps(env.unwrapped.state_dict()))
    rng_state = json.loads(json.dumps(env_rng_state(env)))
    expected = play(env, actions[150:])  # Wine: crosses a pass within the episode, then a reset

    wrapped = gymnasium.make(env.spec)
    wrapped.reset()  # gymnasium's wrappers refuse step() before a reset()
    restore_env_rng(wrapped, rng_state)
    wrapped.unwrapped.load_state_dict(state)
    assert play(wrapped, actions[150:]) == expected

    bare = cls(**kwargs)
    bare.load_state_dict(state)
    assert play(bare, actions[150:]) == expected


def test_a_state_saved_on_other_data_is_refused(shared):
    env = WineBandit()
    env.reset(seed=0)
    state = env.state_dict()
    with pytest.raises(RlxError, match="rows"):
        WineBandit(max_rows=100).load_state_dict(state)
    with pytest.raises(RlxError, match="MagicBandit"):
        WineBandit().load_state_dict({**state, "env": "MagicBandit"})


# -- finding, checking and downloading files ------------------------------------------------


def test_rlx_uci_dir_comes_before_the_cache_and_the_shared_copies(tmp_path, monkeypatch):
    monkeypatch.setenv("RLX_UCI_DIR", str(tmp_path))
    (tmp_path / "wine").mkdir()
    write_wine(tmp_path / "wine" / "wine.data")
    env = WineBandit(sha256=sha256_of(tmp_path / "wine" / "wine.data"))
    assert env.path == tmp_path / "wine" / "wine.data" and env.n_rows == 12


def test_a_missing_file_lists_every_place_searched(tmp_path, monkeypatch, no_shared):
    monkeypatch.setenv("RLX_UCI_DIR", str(tmp_path / "uci"))
    with pytest.raises(DataNotFoundError) as error:
        MagicBandit()
    message = str(error.value)
    for root in (tmp_path / "uci", files.cache_dir()):
        for name in ("magic04.data.gz", "magic04.data"):
            assert str(root / "magic" / name) in message
    assert "download=True" in message and "https://archive.ics.uci.edu" in message
    assert isinstance(error.value, RlxError)


def test_the_search_finds_shared_next_to_a_repository_clone(tmp_path, monkeypatch):
    # The CI layout: <workspace>/repo is the clone, <workspace>/shared holds the data.
    data = tmp_path / "shared" / "data" / "uci" / "wine" / "wine.data"
    data.parent.mkdir(parents=True)
    write_wine(data)
    (tmp_path / "repo" / "packages").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "repo" / "packages")
    assert files.shared_dirs()[0] == tmp_path / "shared" / "data" / "uci"
    assert WineBandit(sha256=sha256_of(data)).path == data


def test_an_explicit_path_that_is_not_a_file_is_reported(tmp_path):
    with pytest.raises(DataNotFoundError, match="nothing-here"):
        WineBandit(tmp_path / "nothing-here")


def test_a_checksum_mismatch_says_what_was_expected_and_how_to_accept_the_file(tmp_path):
    path = tmp_path / "wine.data"
    write_wine(path)
    with pytest.raises(ChecksumMismatchError) as error:
        WineBandit(path)
    message = str(error.value)
    assert sha256_of(path) in message and "6be6b1203f3d51df" in message
    assert "sha256=" in message and isinstance(error.value, RlxError)
    with pytest.raises(ChecksumMismatchError, match="you passed"):
        WineBandit(path, sha256="0" * 64)


def test_a_checksum_mismatch_in_a_searched_folder_is_an_error_not_a_skip(tmp_path, monkeypatch):
    monkeypatch.setenv("RLX_UCI_DIR", str(tmp_path))
    (tmp_path / "wine").mkdir()
    write_wine(tmp_path / "wine" / "wine.data")
    with pytest.raises(ChecksumMismatchError, match=str(tmp_path / "wine" / "wine.data")):
        WineBandit()


def test_download_fetches_into_the_cache_and_checks_the_file(tmp_path, monkeypatch, no_shared):
    source = tmp_path / "served" / "wine.data"
    source.parent.mkdir()
    write_wine(source)
    monkeypatch.setitem(files.UCI_URLS, "wine.data", source.as_uri())
    with pytest.raises(DataNotFoundError):
        WineBandit(sha256=sha256_of(source))
    env = WineBandit(download=True, sha256=sha256_of(source))
    assert env.path == files.cache_dir() / "wine" / "wine.data"
    assert env.path.read_bytes() == source.read_bytes() and env.n_rows == 12
    assert WineBandit(sha256=sha256_of(source)).path == env.path  # found in the cache now


def _files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def test_a_failed_download_leaves_nothing_in_the_cache(tmp_path, monkeypatch, no_shared):
    monkeypatch.setitem(files.UCI_URLS, "wine.data", (tmp_path / "absent.data").as_uri())
    with pytest.raises(DownloadError, match="could not download"):
        WineBandit(download=True)
    assert _files_under(files.cache_dir()) == []


def test_a_download_with_the_wrong_checksum_leaves_nothing_in_the_cache(
    tmp_path, monkeypatch, no_shared
):
    source = tmp_path / "wine.data"
    write_wine(source)  # not the real file: its checksum is not the known one
    monkeypatch.setitem(files.UCI_URLS, "wine.data", source.as_uri())
    with pytest.raises(DownloadError, match="is wrong"):
        WineBandit(download=True)
    assert _files_under(files.cache_dir()) == []


def test_a_file_that_does_not_parse_is_reported(tmp_path):
    path = tmp_path / "wine.data"
    path.write_text("this is not,the wine data\n")
    with pytest.raises(DataFormatError, match="cannot read"):
        WineBandit(path, sha256=sha256_of(path))


def test_an_unknown_split_is_a_config_error(shared):
    with pytest.raises(ConfigError, match="train, test"):
        StatlogBandit(split="validation")
    with pytest.raises(ConfigError, match="max_rows"):
        WineBandit(max_rows=0)
