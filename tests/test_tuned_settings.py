"""Tuned settings as data (rlx.tuned): the families' files are valid, a malformed file is
caught with a message that names the entry, and lookups give copies."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from rlx import tuned
from rlx.errors import ConfigError, UnknownNameError

FAMILIES = {
    "rlx_onpolicy:tuned.toml": (
        "ppo", "a2c", "vpg", "svpg", "recurrent-ppo", "maskable-ppo", "trpo",
    ),
    "rlx_es:tuned.toml": ("ars",),
    "rlx_offpolicy:tuned.toml": (
        "dqn", "double-dqn", "dueling-dqn", "prioritized-dqn", "noisy-dqn", "c51", "rainbow",
        "ddpg", "td3", "sac", "qr-dqn", "tqc", "crossq",
    ),
}  # fmt: skip


@pytest.mark.parametrize("resource", list(FAMILIES))
def test_every_entry_of_a_family_file_builds_its_agents_config(resource):
    pytest.importorskip(resource.split(":")[0])
    assert tuned.check_file(resource, FAMILIES[resource]) >= 5


def test_lookups_give_copies_and_name_what_is_known():
    pytest.importorskip("rlx_offpolicy")
    settings = tuned.hyperparameters("sac", "Pendulum-v1")
    settings["learning_rate"] = 1.0
    assert tuned.hyperparameters("sac", "Pendulum-v1")["learning_rate"] == 1e-3
    entry = tuned.find("dqn", "CartPole-v1")
    assert entry is not None and entry.trainer == {"steps": 50_000}
    assert entry.source.startswith("rl-baselines3-zoo")
    assert tuned.find("dqn", "MountainCar-v0") is None or tuned.find("dqn", "MountainCar-v0")
    assert tuned.find("random", "CartPole-v1") is None  # an agent whose family has none
    with pytest.raises(UnknownNameError, match=r"unknown agent .td4.. Did you mean: td3"):
        tuned.hyperparameters("td4", "Pendulum-v1")
    pairs = {(e.agent, e.env) for e in tuned.entries(env="Pendulum-v1")}
    assert {("sac", "Pendulum-v1"), ("td3", "Pendulum-v1")} <= pairs


def _package(tmp_path: Path, monkeypatch, text: str) -> str:
    """A package ``fake_tuned_<n>`` holding ``tuned.toml`` with ``text``; its resource name."""
    name = f"fake_tuned_{uuid.uuid4().hex}"  # read_file caches by name
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tuned.toml").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return f"{name}:tuned.toml"


GOOD = """
[ppo."CartPole-v1"]
source = "a test"
trainer = { steps = 1000 }
[ppo."CartPole-v1".hyperparameters]
n_envs = 2
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD.replace('source = "a test"', ""), r"source .* is required"),
        (GOOD.replace("source", "sorce"), r"unknown key 'sorce'"),
        (GOOD.replace("steps = 1000", "eval_every = 10"), r"trainer takes steps, not 'eval_every'"),
        (GOOD.replace("n_envs = 2", "n_env = 2"), r"unknown hyperparameter 'n_env'"),
        (GOOD.replace("n_envs = 2", "n_envs = 0"), r"n_envs"),
        (GOOD.replace("n_envs = 2", "gamma = 'high'"), r"gamma"),
        (GOOD + '\n[ppo."Acrobot-v1"]\nsource = "x"\nwrappers = ["no-such-wrapper"]\n', r"no-such"),
        (GOOD.replace("[ppo.", "[not_an_agent.").replace("\n[ppo", "[x"), r"not_an_agent"),
        ("ppo = 3\n", r"ppo must be a table of environments"),
        ("[ppo\n", r"unreadable"),
    ],
)
def test_a_malformed_file_is_one_error_naming_the_entry(tmp_path, monkeypatch, text, message):
    pytest.importorskip("rlx_onpolicy")
    resource = _package(tmp_path, monkeypatch, text)
    with pytest.raises((ConfigError, UnknownNameError), match=message):
        tuned.check_file(resource, FAMILIES["rlx_onpolicy:tuned.toml"])


def test_the_good_file_passes(tmp_path, monkeypatch):
    pytest.importorskip("rlx_onpolicy")
    resource = _package(tmp_path, monkeypatch, GOOD)
    assert tuned.check_file(resource) == 1
    assert tuned.read_file(resource)["ppo"]["CartPole-v1"].hyperparameters == {"n_envs": 2}


def test_a_known_agent_without_settings_on_an_env_names_those_it_has():
    pytest.importorskip("rlx_offpolicy")
    with pytest.raises(UnknownNameError, match=r"no tuned settings for sac on Acrobot-v1; sac has"):
        tuned.hyperparameters("sac", "Acrobot-v1")


# -- rlx run starts from them ------------------------------------------------------------------


def _config(run: Path) -> dict:
    import json

    return json.loads((run / "config.json").read_text())


def test_rlx_run_starts_from_the_tuned_settings_says_so_and_records_them(rlx_cli, tmp_path):
    """DQN on CartPole (300 steps: before its first update): the zoo's settings, one line
    saying so, config.json's ``tuned``; --set wins key by key; --resume keeps the record."""
    pytest.importorskip("rlx_offpolicy")
    run = tmp_path / "tuned"
    code, _, err = rlx_cli(
        "run", "dqn", "--env", "CartPole-v1", "--steps", "300", "--set", "gamma=0.9",
        "--out", str(run), "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("tuned settings of dqn")]
    assert len(lines) == 1 and "rl-baselines3-zoo, hyperparams/dqn.yml" in lines[0]
    assert "--untuned" in lines[0] and "gamma" not in lines[0]  # the user's key is theirs
    config = _config(run)
    assert config["hyperparameters"]["learning_rate"] == 2.3e-3
    assert config["hyperparameters"]["hidden_sizes"] == [256, 256]
    assert config["hyperparameters"]["gamma"] == 0.9
    assert config["trainer"]["steps"] == 300  # --steps wins over the tuned budget
    assert config["tuned"]["source"] == "rl-baselines3-zoo, hyperparams/dqn.yml"
    assert config["tuned"]["trainer"] == {"steps": 50_000}
    code, _, err = rlx_cli("run", "--resume", str(run), "--steps", "600", "--no-progress")
    assert code == 0, err
    assert _config(run)["tuned"] == config["tuned"] and _config(run)["trainer"]["steps"] == 600


def test_untuned_runs_the_defaults_and_records_nothing(rlx_cli, tmp_path):
    pytest.importorskip("rlx_offpolicy")
    from rlx_offpolicy.dqn import DQNConfig

    run = tmp_path / "untuned"
    code, _, err = rlx_cli(
        "run", "dqn", "--env", "CartPole-v1", "--steps", "300", "--untuned", "--out", str(run),
        "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    assert "tuned settings" not in err
    config = _config(run)
    assert "tuned" not in config
    assert config["hyperparameters"]["learning_rate"] == DQNConfig().learning_rate != 2.3e-3


def test_a_pair_without_settings_says_nothing_more(rlx_cli, tmp_path):
    pytest.importorskip("rlx_classical")
    run = tmp_path / "q"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "500", "--out", str(run),
        "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    assert "tuned" not in err and "tuned" not in _config(run)


def test_untuned_with_resume_is_one_error(rlx_cli, tmp_path):
    code, _, err = rlx_cli("run", "--resume", str(tmp_path), "--untuned")
    assert code == 2 and "--untuned" in err and len(err.strip().splitlines()) == 1


def test_a_group_starts_every_seed_from_the_tuned_settings(rlx_cli, tmp_path):
    import json

    pytest.importorskip("rlx_offpolicy")
    group = tmp_path / "group"
    code, _, err = rlx_cli(
        "run", "dqn", "--env", "CartPole-v1", "--steps", "300", "--seeds", "0-1", "--jobs", "1",
        "--out", str(group), "--no-progress",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads((group / "group.json").read_text())["tuned"] is True
    for k in (0, 1):
        config = _config(group / f"seed-{k}")
        assert config["tuned"]["source"].startswith("rl-baselines3-zoo")
        assert config["hyperparameters"]["learning_rate"] == 2.3e-3 and config["seed"] == k


def test_merge_takes_the_budget_and_implied_wrappers_and_is_idempotent():
    pytest.importorskip("rlx_onpolicy")
    entry, hyperparameters, settings, wrappers, _ = tuned.merge("ppo", "ALE/Pong-v5")
    assert entry is not None and settings == {"steps": 10_000_000}
    assert [w["name"] for w in wrappers] == ["atari"]
    assert hyperparameters["n_steps"] == 128
    again = tuned.merge("ppo", "ALE/Pong-v5", hyperparameters, settings, wrappers)
    assert again[1:4] == (hyperparameters, settings, wrappers)  # merging twice is merging once
    _, _, settings, wrappers, _ = tuned.merge(
        "ppo", "ALE/Pong-v5", {"n_steps": 64}, {"steps": 1000}, [{"name": "atari", "kwargs": {}}]
    )
    assert settings == {"steps": 1000}
    assert [w["name"] for w in wrappers] == ["atari"]  # the user's atari, not a second one
    assert tuned.merge("ppo", "NoSuchEnv-v0", {"n_steps": 8})[0:2] == (None, {"n_steps": 8})


def test_rlx_info_lists_the_tuned_pairs(rlx_cli):
    import json

    pytest.importorskip("rlx_offpolicy")
    code, out, err = rlx_cli("info", "sac", "--json")
    assert code == 0, err
    envs = [entry["env"] for entry in json.loads(out)["tuned_settings"]]
    assert "Pendulum-v1" in envs
    code, out, err = rlx_cli("info", "Pendulum-v1", "--json")
    assert code == 0, err
    assert {"sac", "td3", "ddpg"} <= set(json.loads(out)["tuned_agents"])
    code, out, err = rlx_cli("info", "Pendulum-v1")
    assert "agents with tuned settings here" in out


def test_rlx_tune_writes_its_best_trial_as_tuned_settings_too(tmp_path):
    """tuned.toml beside best.toml: the best trial's hyperparameters and budget as an entry
    of a family's file; best.toml reruns the trial from the agent's defaults (tuned = false)."""
    import tomllib

    pytest.importorskip("optuna")
    from rlx.tune import tune

    out = tmp_path / "tune"
    space = {"epsilon_start": 1.0, "epsilon_end": 0.05, "epsilon_decay_steps": 1500}
    tune("q-learning", "FrozenLake-v1", trials=2, steps=2000, eval_every=500, eval_episodes=10,
         space=space, out=out, prune=False)  # fmt: skip
    best = tomllib.loads((out / "best.toml").read_text())
    assert best["tuned"] is False
    entries = tuned.parse((out / "tuned.toml").read_text(), "tuned.toml")
    entry = entries["q-learning"]["FrozenLake-v1"]
    assert entry.hyperparameters == best["hyperparameters"]
    assert entry.trainer == {"steps": 2000} and entry.source.startswith("rlx tune, study")


def test_a_config_file_with_tuned_false_runs_the_defaults(rlx_cli, tmp_path):
    pytest.importorskip("rlx_offpolicy")
    config = tmp_path / "run.toml"
    config.write_text('agent = "dqn"\nenv = "CartPole-v1"\ntuned = false\n')
    run = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "--config", str(config), "--steps", "300", "--out", str(run), "--no-progress"
    )
    assert code == 0, err
    assert "tuned" not in _config(run) and "tuned settings" not in err
    config.write_text('agent = "dqn"\nenv = "CartPole-v1"\ntuned = "no"\n')
    code, _, err = rlx_cli("run", "--config", str(config), "--out", str(tmp_path / "x"))
    assert code == 2 and "tuned must be true or false" in err
