"""nop: garage's NOP, a fixed policy evaluated and never updated."""

from __future__ import annotations

import csv

import gymnasium
import numpy as np
import pytest

import rlx
from rlx.discovery import agent_spec
from rlx.errors import ConfigError
from rlx.testing import check_agent
from rlx_es.nop import NOPAgent


def _by_hand(env_id: str, action, seed: int, episodes: int) -> list[float]:
    """Returns of ``episodes`` episodes of one fixed action, the first reset seeded."""
    env = gymnasium.make(env_id)
    returns = []
    for episode in range(episodes):
        env.reset(seed=seed if episode == 0 else None)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(action)
            total, done = total + reward, terminated or truncated
        returns.append(total)
    return returns


@pytest.mark.parametrize(
    ("env_id", "settings"),
    [
        ("Pendulum-v1", {}),
        ("CartPole-v1", {"constant_action": [1]}),
        ("Pendulum-v1", {"constant_action": [0.5], "episodes_per_step": 2}),
    ],
)
def test_nop_keeps_the_agent_contract(env_id, settings):
    check_agent("nop", env_id, seed=1, iterations=2, **settings)


def test_it_plays_its_fixed_action_and_never_changes():
    agent = rlx.make("nop", "Pendulum-v1", seed=7, constant_action=[-1.5])
    before = agent.policy_state().arrays["action"].copy()
    returns = [r for _ in range(3) for r in agent.step().episode_returns]
    assert returns == _by_hand("Pendulum-v1", np.array([-1.5], np.float32), 7, 3)
    np.testing.assert_array_equal(agent.policy_state().arrays["action"], before)
    observations = np.zeros((4, 3), np.float32)
    np.testing.assert_array_equal(agent.act(observations), np.full((4, 1), -1.5, np.float32))
    # Pushing the cart right at every step: the pole falls within a few dozen steps.
    cartpole = rlx.make("nop", "CartPole-v1", seed=0, constant_action=[1])
    episode = cartpole.step()
    assert episode.episode_returns == _by_hand("CartPole-v1", 1, 0, 1)
    assert episode.episode_returns[0] < 30
    assert rlx.make("nop", "CartPole-v1").act(np.zeros(4, np.float32)) == 0


def test_the_zero_action_is_clipped_into_the_bounds():
    env = gymnasium.make("MountainCarContinuous-v0")
    env.action_space = gymnasium.spaces.Box(0.2, 1.0, shape=(1,), dtype=np.float32)
    agent = NOPAgent(env, seed=0)
    np.testing.assert_array_equal(agent.action, np.array([0.2], np.float32))


def test_its_spec_names_garage_and_takes_any_observation():
    spec = agent_spec("nop")
    assert "garage" in spec.paper and "NOP" in spec.paper
    assert spec.family == "es" and spec.observation_spaces == ("Any",)
    check_agent("nop", "FrozenLake-v1", seed=0, iterations=1)  # Discrete observations


def test_rlx_run_nop_logs_the_returns(rlx_cli, tmp_path):
    code, _, err = rlx_cli(
        "run", "nop", "--env", "Pendulum-v1", "--steps", "600", "--out", str(tmp_path / "r")
    )
    assert code == 0, err
    rows = list(csv.DictReader((tmp_path / "r" / "metrics.csv").open()))
    logged = [float(r["train/return_mean"]) for r in rows if r.get("train/return_mean")]
    assert logged and all(-2000 < value < 0 for value in logged)


def test_bad_values_are_one_config_error(rlx_cli, tmp_path):
    for setting, message in (
        ("constant_action=[3]", "lies outside Box(-2.0, 2.0, (1,), float32)"),
        ("constant_actoin=[1]", "Did you mean: constant_action"),
    ):
        code, _, err = rlx_cli(
            "run", "nop", "--env", "Pendulum-v1", "--set", setting, "--out", str(tmp_path / "r")
        )
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and message in lines[0], err
    with pytest.raises(ConfigError, match="takes 1"):
        rlx.make("nop", "Pendulum-v1", constant_action=[0.1, 0.2])
    with pytest.raises(ConfigError, match="not an action of Discrete"):
        rlx.make("nop", "CartPole-v1", constant_action=[2])
    with pytest.raises(ConfigError, match="one whole number"):
        rlx.make("nop", "CartPole-v1", constant_action=[0.5])
    with pytest.raises(ConfigError, match="one whole number"):
        rlx.make("nop", "CartPole-v1", constant_action=[0, 1])


def test_nothing_of_it_is_tuned():
    from rlx.tune import build_space

    assert build_space("nop").dimensions == []  # a fixed policy has nothing to search
