"""``rlx list envs`` and ``rlx info ENV_ID``: environments on the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rlx_envs import files
from rlx_envs.plugin import ENVS, SPACES

MUSHROOM_FILES = ("agaricus-lepiota.data.gz", "agaricus-lepiota.data")


@pytest.fixture
def data_dirs(tmp_path, monkeypatch):
    """Only ``$RLX_UCI_DIR`` (a fresh folder) and a fresh cache are searched for data files."""
    uci = tmp_path / "uci"
    cache = tmp_path / "cache"
    monkeypatch.setenv("RLX_UCI_DIR", str(uci))
    monkeypatch.setenv("RLX_CACHE_DIR", str(cache))
    monkeypatch.setattr(files, "shared_dirs", lambda: [])
    return uci, cache / "uci"


# --- rlx list envs -----------------------------------------------------------------------------


def test_list_envs_json_shows_every_rlx_envs_environment(rlx_cli):
    from importlib.metadata import version

    code, out, _ = rlx_cli("list", "envs", "--json")
    assert code == 0
    rows = {row["id"]: row for row in json.loads(out)}
    for env_id, target, summary in ENVS:
        row = rows[env_id]
        assert row["distribution"] == "rlx-envs"
        assert row["version"] == version("rlx-envs")
        assert row["summary"] == summary and row["target"] == target
        assert (row["observation_space"], row["action_space"]) == SPACES[env_id]
    assert rows["rlx/Mushroom-v0"]["observation_space"] == "Box(117,)"
    assert rows["rlx/Mushroom-v0"]["action_space"] == "Discrete(2)"


def test_list_envs_table_has_one_line_per_environment(rlx_cli, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = rlx_cli("list", "envs")
    assert code == 0
    for env_id, _, summary in ENVS:
        lines = [line for line in out.splitlines() if f" {env_id} " in line]
        assert len(lines) == 1, (env_id, out)
        observations, actions = SPACES[env_id]
        assert "rlx-envs" in lines[0] and summary in lines[0]
        assert observations in lines[0] and actions in lines[0]
    assert "Any gymnasium id works too" in out


def test_list_still_lists_agents_and_list_agents_is_the_same(rlx_cli):
    default = rlx_cli("list", "--json")
    explicit = rlx_cli("list", "agents", "--json")
    assert default[0] == explicit[0] == 0 and default[1] == explicit[1]
    assert "random" in {row["name"] for row in json.loads(default[1])}


@pytest.mark.parametrize(
    "args, message",
    [
        (["list", "nothing"], "rlx list lists agents, envs or loggers, not 'nothing'"),
        (["list", "evns"], "Did you mean: envs"),
        (["list", "baseline"], "rlx list --family baseline"),
        (["list", "envs", "--family", "baseline"], "environments have no family"),
    ],
)
def test_list_refuses_what_it_cannot_list(rlx_cli, args, message):
    code, out, err = rlx_cli(*args)
    assert code == 2 and message in err, err
    assert "Traceback" not in out + err


def test_list_envs_never_imports_torch_or_environments(rlx_subprocess):
    """``rlx list envs`` lists without importing torch, gymnasium or the environments' modules.
    (How long it takes is measured by benchmarks/cli_startup.py, not asserted here: a
    wall-clock bound fails on a busy machine.)"""
    code = (
        "import sys\n"
        "from rlx.cli import main\n"
        "try:\n    main(['list', 'envs'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'gymnasium', 'rlx_envs.uci', 'rlx_envs.multi_armed',\n"
        "                     'rlx.trainer') if m in sys.modules]\n"
        "print(heavy, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "[]", f"rlx list envs imported {done.stderr.strip()}"
    assert rlx_subprocess("list", "envs").returncode == 0


# --- rlx info ENV_ID ---------------------------------------------------------------------------


def _info(rlx_cli, *args: str) -> dict:
    code, out, err = rlx_cli("info", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_info_of_mushroom_shows_arguments_spaces_and_data_files(rlx_cli, data_dirs):
    uci, cache = data_dirs
    data = _info(rlx_cli, "rlx/Mushroom-v0")
    assert data["kind"] == "environment" and data["id"] == "rlx/Mushroom-v0"
    assert data["distribution"] == "rlx-envs" and data["version"]
    assert data["entry_point"] == "rlx_envs.uci:MushroomBandit"
    assert data["summary"].startswith("UCI Mushroom")
    arguments = {row["name"]: row for row in data["keyword_arguments"]}
    # its own arguments, then those it passes on to DataBandit through **options
    assert [name for name in arguments][:6] == [
        "path",
        "reward_leave",
        "reward_edible",
        "reward_poisonous_lucky",
        "reward_poisonous_harmed",
        "prob_harmed",
    ]
    assert arguments["reward_edible"]["default"] == 5.0
    assert arguments["reward_poisonous_harmed"]["default"] == -35.0
    assert arguments["prob_harmed"] == {
        "name": "prob_harmed",
        "type": "float",
        "default": 0.5,
        "required": False,
    }
    for name, default in [("split", None), ("max_rows", None), ("download", False)]:
        assert arguments[name]["default"] == default and not arguments[name]["required"]
    # no data anywhere: the spaces the plugin declares, and why the environment was not built
    assert data["data"] == [
        {"path": str(root / "mushroom" / name), "exists": False}
        for root in (uci, cache)
        for name in MUSHROOM_FILES
    ]
    assert not data["spaces_built"]
    assert (data["observation_space"], data["action_space"]) == ("Box(117,)", "Discrete(2)")
    assert "DataNotFoundError" in data["note"]


def test_info_shows_which_data_file_is_present(rlx_cli, data_dirs, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    uci, _ = data_dirs
    present = uci / "mushroom" / "agaricus-lepiota.data"
    present.parent.mkdir(parents=True)
    present.write_text("not the real file\n")
    data = _info(rlx_cli, "rlx/Mushroom-v0")
    assert [row["exists"] for row in data["data"]] == [False, True, False, False]
    assert data["data"][1]["path"] == str(present)
    assert "ChecksumMismatchError" in data["note"]  # present, but not the genuine file

    code, out, _ = rlx_cli("info", "rlx/Mushroom-v0")
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("│") and "mushroom" in line]
    assert ["yes" in row for row in rows] == [False, True, False, False]
    assert str(present) in rows[1]
    assert "reward_poisonous_harmed" in out and "-35.0" in out and "data file" in out


def test_info_builds_the_environment_when_its_data_is_there(rlx_cli):
    if not files.shared_dirs():
        pytest.skip("no shared/data/uci folder here, so the UCI copies are not available")
    data = _info(rlx_cli, "rlx/Mushroom-v0")
    assert any(row["exists"] for row in data["data"])
    assert data["spaces_built"] and data["note"] is None
    assert data["observation_space"] == "Box(0.0, 1.0, (117,), float32)"
    assert data["action_space"] == "Discrete(2)"
    assert (data["observation_space_kind"], data["action_space_kind"]) == ("Box", "Discrete")


def test_info_of_a_synthetic_bandit_has_no_data_files(rlx_cli):
    data = _info(rlx_cli, "rlx/BernoulliMAB-v0")
    assert data["data"] is None and data["spaces_built"]
    assert data["action_space"] == "Discrete(10)"
    assert {"n_arms", "n_bandits", "means", "horizon"} <= {
        row["name"] for row in data["keyword_arguments"]
    }


def test_info_of_a_gymnasium_id(rlx_cli):
    data = _info(rlx_cli, "CartPole-v1")
    assert data["kind"] == "environment" and data["distribution"] == "gymnasium"
    assert data["entry_point"] == "gymnasium.envs.classic_control.cartpole:CartPoleEnv"
    assert data["max_episode_steps"] == 500 and data["data"] is None
    assert data["summary"]
    arguments = {row["name"]: row for row in data["keyword_arguments"]}
    assert arguments["render_mode"]["default"] is None
    assert arguments["sutton_barto_reward"]["default"] is False
    assert data["spaces_built"]
    assert data["observation_space_kind"] == "Box" and "(4,)" in data["observation_space"]
    assert data["action_space"] == "Discrete(2)"

    code, out, _ = rlx_cli("info", "CartPole-v1")
    assert code == 0
    assert "sutton_barto_reward" in out and "render_mode" in out and "Discrete(2)" in out


def test_info_shows_arguments_registered_with_the_id(rlx_cli):
    arguments = {row["name"]: row for row in _info(rlx_cli, "FrozenLake-v1")["keyword_arguments"]}
    assert arguments["map_name"]["default"] == "4x4"


def test_info_of_an_agent_is_unchanged(rlx_cli):
    data = _info(rlx_cli, "random")
    assert data["name"] == "random" and "kind" not in data


@pytest.mark.parametrize(
    "name, message",
    [
        ("rlx/Mushrom-v0", "Did you mean: rlx/Mushroom-v0"),
        ("Cartpole-v1", "Did you mean: CartPole-v1"),
        ("randm", "Did you mean: random"),
        ("Taxi-v3", "Please use `Taxi-v4` instead"),
        ("nothing-like-it", "unknown agent or environment 'nothing-like-it'"),
    ],
)
def test_info_of_an_unknown_name_suggests_agents_and_environments(rlx_cli, name, message):
    code, out, err = rlx_cli("info", name)
    assert code == 2 and message in err, err
    assert "Traceback" not in out + err and err.count("\n") == 1


# --- rlx_envs: the data files looked for -------------------------------------------------------


def test_data_status_follows_the_search_order_of_locate(data_dirs):
    from rlx_envs.files import DataNotFoundError
    from rlx_envs.uci import MushroomBandit, StatlogBandit

    uci, cache = data_dirs
    status = MushroomBandit.data_status()
    with pytest.raises(DataNotFoundError) as error:
        MushroomBandit()
    searched = [line.strip() for line in str(error.value).splitlines()[1:-1]]
    assert searched == [str(path) for path, _ in status]
    assert [exists for _, exists in status] == [False] * 4
    assert [path.parent.parent for path, _ in status] == [uci, uci, cache, cache]

    names = [path.name for path, _ in StatlogBandit.data_status()]
    assert names[:3] == ["shuttle.trn.gz", "shuttle.trn", "shuttle.trn.Z"]  # train, then test
    assert [path.name for path, _ in StatlogBandit.data_status("test")] == [
        "shuttle.tst.gz",
        "shuttle.tst",
    ] * 2
