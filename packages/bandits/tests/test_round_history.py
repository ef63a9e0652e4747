"""Per-round histories of the multi-armed agents: arms, rewards, regret and pull probabilities,
from Python (``agent.history``) and in metrics.csv, kept across an exact resume."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import rlx
from rlx.errors import CheckpointError
from rlx.protocols import AgentState
from rlx.testing import same_state, transfer_state, whole_state

pytest.importorskip("rlx_envs", reason="the bandits run on rlx-envs' rlx/BernoulliMAB-v0")

AGENTS = [
    "epsilon-greedy",
    "ucb1",
    "bayesian-ucb",
    "gradient-bandit",
    "thompson",
    "fixed",
    "uniform",
]
BERNOULLI_ID = "rlx/BernoulliMAB-v0"
DETERMINISTIC = {"ucb1", "bayesian-ucb"}


def played(name: str, rounds: int, **config):
    agent = rlx.make(name, BERNOULLI_ID, seed=3, **config)
    for _ in range(rounds):
        agent.step()
    return agent


@pytest.mark.parametrize("name", AGENTS)
def test_the_history_is_every_round_and_recording_it_changes_no_play(name, play):
    agent = played(name, 600, history=True)
    plain = played(name, 600)
    history = agent.history
    assert plain.history is None
    assert len(history) == 600 == len(history.arms) == len(history.probabilities)
    # Recording draws no number from the agent's generator: the same statistics and generator.
    assert same_state(agent.policy_state(), plain.policy_state())
    assert agent.resume_state().meta["rng"] == plain.resume_state().meta["rng"]
    assert history.regrets.sum() == pytest.approx(agent.cumulative_regret)
    assert history.rewards.sum() == pytest.approx(agent.cumulative_reward)
    probabilities = history.probabilities
    assert probabilities.shape == (600, 10)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    assert (probabilities >= 0).all()
    # The pulled arm always had a positive probability (Thompson's is an estimate).
    pulled = probabilities[np.arange(600), history.arms]
    assert (pulled > 0).mean() > (0.98 if name == "thompson" else 0.9999)
    with pytest.raises(ValueError):
        history.arms[0] = 1  # read-only views


@pytest.mark.parametrize("name", AGENTS)
def test_the_probabilities_are_those_the_arms_were_pulled_with(name):
    # Pull counts minus the summed probabilities is a martingale: within a few standard
    # deviations of 0 for every arm when the probabilities are right, and not otherwise.
    history = played(name, 3000, history=True).history
    pulls = np.bincount(history.arms, minlength=10)
    expected = history.probabilities.sum(axis=0)
    spread = np.sqrt((history.probabilities * (1 - history.probabilities)).sum(axis=0)) + 1
    assert (np.abs(pulls - expected) < 5 * spread).all(), (pulls, expected.round(1))
    if name in DETERMINISTIC:
        np.testing.assert_array_equal(history.probabilities.argmax(axis=1), history.arms)


def test_epsilon_greedy_shares_epsilon_and_the_greedy_mass_among_ties():
    history = played("epsilon-greedy", 1, history=True, epsilon=0.2).history
    # Round one: every mean is 0, all ten arms tie for the best.
    np.testing.assert_allclose(history.probabilities[0], 0.1)
    agent = played("epsilon-greedy", 400, history=True, epsilon=0.2)
    last = agent.history.probabilities[-1]
    assert sorted(set(last.round(9).tolist())) == [0.02, 0.82]


def test_metrics_csv_has_a_row_per_round_that_equals_the_history(tmp_path):
    agent = rlx.make("thompson", BERNOULLI_ID, seed=0, history=True)
    rlx.Trainer(agent, steps=250, run_dir=tmp_path / "run", progress=False).fit()
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = [row for row in csv.DictReader(f) if row["agent/arm"]]
    assert len(rows) == 250
    assert [int(float(row["agent/arm"])) for row in rows] == agent.history.arms.tolist()
    regrets = [float(row["agent/regret"]) for row in rows]  # 6 significant digits in the csv
    np.testing.assert_allclose(regrets, agent.history.regrets, rtol=1e-5)
    probabilities = [[float(row[f"agent/probability/arm_{k}"]) for k in range(10)] for row in rows]
    np.testing.assert_allclose(probabilities, agent.history.probabilities, rtol=1e-5)


def test_a_user_log_every_wins_over_the_row_per_round(tmp_path):
    agent = rlx.make("ucb1", BERNOULLI_ID, seed=0, history=True)
    rlx.Trainer(agent, steps=300, log_every=100, run_dir=tmp_path / "run", progress=False).fit()
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = [row for row in csv.DictReader(f) if row["agent/arm"]]
    assert 3 <= len(rows) <= 4
    assert len(agent.history) == 300


@pytest.mark.parametrize("name", ["thompson", "epsilon-greedy"])
def test_the_history_resumes_exactly(name, play):
    settings = {"seed": 0, "history": True, "env_kwargs": {"n_bandits": 2, "horizon": 40}}
    agent = rlx.make(name, BERNOULLI_ID, **settings)
    play(agent, 90)
    resumed = rlx.make(name, BERNOULLI_ID, **settings)
    transfer_state(agent, resumed)
    assert len(resumed.history) == 90
    play(agent, 50)
    play(resumed, 50)
    assert same_state(whole_state(agent), whole_state(resumed))
    for column in ("bandits", "arms", "rewards", "regrets", "probabilities"):
        np.testing.assert_array_equal(
            getattr(agent.history, column), getattr(resumed.history, column)
        )
    assert set(agent.history.bandits.tolist()) == {0, 1}


def test_the_history_resumes_from_the_command_line(rlx_cli, tmp_path):
    out = tmp_path / "run"
    args = ["--env", BERNOULLI_ID, "--set", "history=true", "--seed", "1"]
    code, _, err = rlx_cli("run", "gradient-bandit", *args, "--steps", "120", "--out", str(out))
    assert code == 0, err
    code, _, err = rlx_cli("run", "--resume", str(out), "--steps", "200")
    assert code == 0, err
    code, _, err = rlx_cli(
        "run", "gradient-bandit", *args, "--steps", "200", "--out", str(tmp_path / "whole")
    )
    assert code == 0, err

    def arms(run):
        with open(run / "metrics.csv") as f:
            return [row["agent/arm"] for row in csv.DictReader(f) if row["agent/arm"]]

    assert len(arms(out)) == 200
    assert arms(out) == arms(tmp_path / "whole")


def test_a_saved_history_of_another_shape_is_refused():
    agent = played("uniform", 5, history=True)
    state = agent.training_state()
    arrays = dict(state.arrays)
    arrays["history/probabilities"] = np.zeros((5, 3))
    with pytest.raises(CheckpointError, match="round history has columns of shapes"):
        agent.load_training_state(AgentState(arrays=arrays))
    del arrays["history/arms"]
    with pytest.raises(CheckpointError, match="lacks arms"):
        agent.load_training_state(AgentState(arrays=arrays))


def test_a_bad_history_value_is_one_message(rlx_cli, tmp_path):
    code, _, err = rlx_cli(
        "run", "ucb1", "--env", BERNOULLI_ID, "--set", "histroy=true",
        "--steps", "10", "--out", str(tmp_path / "r"),
    )  # fmt: skip
    assert code == 2 and "Did you mean: history" in err, err
    code, _, err = rlx_cli(
        "run", "ucb1", "--env", BERNOULLI_ID, "--set", "history=maybe",
        "--steps", "10", "--out", str(tmp_path / "r"),
    )  # fmt: skip
    assert code == 2 and "history" in err and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()
