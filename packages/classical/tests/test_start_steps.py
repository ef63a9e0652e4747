"""rlx-classical's ``start_steps``: uniformly random actions for the first environment steps of
training, learned from as usual, drawn from the agent's own generator and resumed exactly."""

from __future__ import annotations

import numpy as np
import pytest

import rlx
from rlx.protocols import Agent
from rlx.testing import check_agent

AGENTS = ("q-learning", "sarsa", "sarsa-lambda", "dyna-q")


class RecordingEnv:
    """Wraps an environment and records every action training sends to it."""

    def __init__(self, env):
        self.env = env
        self.actions: list[int] = []

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, action):
        self.actions.append(int(action))
        return self.env.step(action)


def training_actions(name: str, steps: int, seed: int = 0, **settings) -> tuple[list[int], Agent]:
    """The first ``steps`` actions of a FrozenLake training run, and the agent after it.

    Apart from the warm-up the agent is greedy (epsilon 0) on a table that prefers action 0
    (left) by 1 in every state, and learns so slowly (alpha 1e-5; at most 11 updates of an
    entry per step, Dyna-Q's planning included, each under alpha in size) that 1,000 steps
    cannot change that preference: its own policy only ever goes left.
    """
    agent = rlx.make(
        name, "FrozenLake-v1", seed=seed, epsilon_start=0.0, epsilon_end=0.0, learning_rate=1e-5,
        **settings,
    )  # fmt: skip
    for row in agent.q:
        row[0] = 1.0
    recorder = RecordingEnv(agent.env)
    agent.env = recorder
    while len(recorder.actions) < steps:
        agent.step()
    return recorder.actions[:steps], agent


@pytest.mark.parametrize("name", AGENTS)
def test_the_first_start_steps_actions_are_uniform_then_the_policy_acts(name):
    warm_up = 400
    actions, agent = training_actions(name, warm_up + 200, start_steps=warm_up)
    counts = np.bincount(actions[:warm_up], minlength=4)
    # Uniform over 4 actions: 100 expected each, standard deviation about 8.7; the agent's own
    # policy would give 400 times action 0 (checked below without the warm-up).
    assert counts.min() > 60 and counts.max() < 140, counts
    assert set(training_actions(name, warm_up)[0]) == {0}
    # Then the policy acts, and the table has learned from the random steps as usual.
    assert set(actions[warm_up:]) == {0}
    assert np.count_nonzero(agent.q_table[:, 1:]) > 0


def test_the_warm_up_draws_from_the_agent_seed_and_epsilon_reports_it():
    first = training_actions("q-learning", 100, start_steps=100)[0]
    assert training_actions("q-learning", 100, start_steps=100)[0] == first
    assert training_actions("q-learning", 100, seed=1, start_steps=100)[0] != first
    agent = rlx.make("q-learning", "FrozenLake-v1", seed=0, start_steps=30, epsilon_start=0.5)
    assert agent.epsilon == 1.0
    while agent.env_steps < 30:
        agent.step()
    assert agent.epsilon < 0.5


def test_start_steps_zero_is_the_run_without_a_warm_up():
    plain = rlx.make("sarsa", "FrozenLake-v1", seed=3)
    explicit = rlx.make("sarsa", "FrozenLake-v1", seed=3, start_steps=0)
    for _ in range(20):
        plain.step()
        explicit.step()
    assert np.array_equal(plain.q_table, explicit.q_table)


def test_greedy_acting_ignores_the_warm_up():
    agent = rlx.make("q-learning", "FrozenLake-v1", seed=0, start_steps=1_000)
    agent.q[0] = [0.0, 0.0, 5.0, 0.0]
    assert all(agent.act(0, deterministic=True) == 2 for _ in range(50))


@pytest.mark.parametrize("name", ["q-learning", "sarsa-lambda", "dyna-q"])
def test_training_with_a_warm_up_resumes_exactly(name):
    # 5 iterations from seed 0 end inside the 50 warm-up steps and 10 end after them, so
    # check_agent's resumed run crosses the end of the warm-up.
    agent = rlx.make(name, "FrozenLake-v1", seed=0, start_steps=50)
    for _ in range(5):
        agent.step()
    assert agent.env_steps < 50
    for _ in range(5):
        agent.step()
    assert agent.env_steps >= 50
    check_agent(name, "FrozenLake-v1", iterations=5, start_steps=50)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("start_steps=-1", "start_steps must be in [0, inf], got -1"),
        ("start_step=10", "Did you mean: start_steps"),
    ],
)
def test_a_bad_start_steps_on_the_command_line_is_one_message(rlx_cli, tmp_path, setting, message):
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--set", setting,
        "--steps", "100", "--out", str(tmp_path / "r"),
    )  # fmt: skip
    assert code == 2
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r").exists()
