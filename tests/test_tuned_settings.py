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
    "rlx_onpolicy:tuned.toml": ("ppo", "a2c", "vpg", "svpg"),
    "rlx_offpolicy:tuned.toml": (
        "dqn", "double-dqn", "dueling-dqn", "prioritized-dqn", "noisy-dqn", "c51", "rainbow",
        "ddpg", "td3", "sac",
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
