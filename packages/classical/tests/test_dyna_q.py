"""rlx-classical's Dyna-Q: planning is the Q-learning backup on modelled transitions, it
needs fewer real steps than Q-learning, and the model resumes exactly."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.spaces import Discrete

import rlx
from rlx.errors import CheckpointError, ConfigError, SpaceError
from rlx.testing import check_agent, same_state, whole_state

#: Sutton and Barto's settings for the Dyna maze (section 8.2): constant epsilon 0.1.
BOOK = dict(learning_rate=0.1, gamma=0.95, epsilon_start=0.1, epsilon_end=0.1)


def play(agent, episodes: int) -> None:
    for _ in range(episodes):
        agent.step()


def greedy_return(agent, env, limit: int = 100) -> float:
    """The return of one greedy episode (the environments here are deterministic)."""
    observation, _ = env.reset(seed=0)
    total, done, steps = 0.0, False, 0
    while not done and steps < limit:
        observation, reward, terminated, truncated, _ = env.step(agent.act(observation))
        total, done, steps = total + float(reward), terminated or truncated, steps + 1
    return total


def steps_to_return(agent, env, threshold: float, budget: int) -> int | None:
    """Real environment steps until the greedy policy, checked after each episode, reaches
    ``threshold`` (None if it does not within ``budget``)."""
    while agent.env_steps < budget:
        agent.step()
        if greedy_return(agent, env) >= threshold:
            return agent.env_steps
    return None


# -- learning ------------------------------------------------------------------------------


def test_planning_reaches_the_optimal_cliff_walk_in_fewer_real_steps_than_q_learning():
    # CliffWalking: -1 a step, -100 and back to the start for a step into the cliff; the
    # shortest path, along the cliff, returns -13. Same settings and seed for both agents.
    steps = {}
    for name, settings in (("q-learning", {}), ("dyna-q", {"planning_steps": 20})):
        agent = rlx.make(name, "CliffWalking-v1", seed=0, **BOOK, **settings)
        steps[name] = steps_to_return(agent, gymnasium.make("CliffWalking-v1"), -13, 30_000)
    # Measured: 7,553 real steps for Q-learning, 493 for Dyna-Q.
    assert steps["q-learning"] is not None and steps["dyna-q"] is not None
    assert 4 * steps["dyna-q"] < steps["q-learning"]


def test_dyna_q_learns_taxi_with_its_defaults():
    agent = rlx.make("dyna-q", "Taxi-v4", seed=0)
    rlx.Trainer(agent, steps=50_000, eval_every=0, progress=False).fit()
    result = rlx.evaluate(agent, gymnasium.make("Taxi-v4"), episodes=200, seed=1)
    assert result.mean_return >= 7.0


# -- the update ------------------------------------------------------------------------------


class OneStepEnv(gymnasium.Env):
    """One action: from state 0 to state 1 with reward 1, ending the episode one way."""

    observation_space = Discrete(2)
    action_space = Discrete(1)

    def __init__(self, ending: str) -> None:
        self.ending = ending

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        return 1, 1.0, self.ending == "terminated", self.ending == "truncated", {}


@pytest.mark.parametrize("planning_steps", [0, 1, 2, 3])
@pytest.mark.parametrize("ending, target", [("terminated", 1.0), ("truncated", 1.5)])
def test_each_planning_step_is_a_q_learning_backup_of_the_modelled_transition(
    planning_steps, ending, target
):
    # The model knows one transition, (0, 0) -> 1 with reward 1, so every planning step
    # replays it: Q(0, 0) <- Q(0, 0) + alpha (target - Q(0, 0)), with target R + gamma
    # Q(1, 0) = 1 + 0.5 * 1 after a time limit, R alone after termination. The real step
    # and n planning steps take Q(0, 0) from 0 to target (1 - 0.5^(n + 1)).
    settings = dict(learning_rate=0.5, gamma=0.5, planning_steps=planning_steps)
    agent = rlx.make("dyna-q", OneStepEnv(ending), seed=0, **settings)
    agent.q[1] = [1.0]
    agent.step()
    assert agent.q_table[0, 0] == target * (1 - 0.5 ** (planning_steps + 1))
    assert agent.q_table[1, 0] == 1.0  # never visited as a starting state: left alone


def test_planning_steps_zero_is_q_learning_exactly():
    # With n = 0 Dyna-Q draws no random numbers beyond Q-learning's, so the runs coincide.
    q_learning = rlx.make("q-learning", "Taxi-v4", seed=3, learning_rate=0.1)
    dyna_zero = rlx.make("dyna-q", "Taxi-v4", seed=3, learning_rate=0.1, planning_steps=0)
    for _ in range(30):
        assert q_learning.step().episode_returns == dyna_zero.step().episode_returns
    assert q_learning.env_steps == dyna_zero.env_steps
    assert np.array_equal(q_learning.q_table, dyna_zero.q_table)
    assert same_state(q_learning.policy_state(), dyna_zero.policy_state())


def test_planning_changes_the_table():
    tables = []
    for planning_steps in (0, 5):
        agent = rlx.make("dyna-q", "Taxi-v4", seed=3, planning_steps=planning_steps)
        play(agent, 3)
        tables.append(agent.q_table)
    assert not np.array_equal(*tables)


def test_the_model_holds_the_deterministic_outcome_of_every_pair_tried_and_nothing_else():
    env = gymnasium.make("CliffWalking-v1")
    agent = rlx.make("dyna-q", env, seed=1, planning_steps=5, **BOOK)
    play(agent, 4)
    iteration = agent.step()
    model = agent.resume_state().arrays
    pairs = model["model_pairs"]
    assert len({(s, a) for s, a in pairs.tolist()}) == len(pairs)  # each pair once
    assert len(pairs) == iteration.metrics["model_pairs"]
    tried = np.zeros((agent.n_states, agent.n_actions), dtype=bool)
    tried[pairs[:, 0], pairs[:, 1]] = True
    assert (model["model_next_state"][~tried] == -1).all()
    for s, a in pairs.tolist():
        [(_, next_state, reward, terminated)] = env.unwrapped.P[s][a]
        assert model["model_next_state"][s, a] == next_state
        assert model["model_reward"][s, a] == reward
        assert model["model_terminated"][s, a] == terminated
    # Planning backs up modelled pairs only: every other entry keeps its initial value.
    changed = agent.q_table != agent.config.initial_q
    assert not (changed & ~tried).any()


class RecordTransitions(gymnasium.Wrapper):
    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.last: dict[tuple[int, int], tuple[float, int, bool]] = {}

    def reset(self, *, seed=None, options=None):
        self.state, info = super().reset(seed=seed, options=options)
        return self.state, info

    def step(self, action):
        next_state, reward, terminated, truncated, info = super().step(action)
        self.last[int(self.state), int(action)] = (float(reward), int(next_state), terminated)
        self.state = next_state
        return next_state, reward, terminated, truncated, info


def test_in_a_stochastic_environment_the_model_keeps_each_pairs_last_outcome():
    env = RecordTransitions(gymnasium.make("FrozenLake-v1"))  # slippery
    agent = rlx.make("dyna-q", env, seed=2, planning_steps=5)
    play(agent, 50)
    model = agent.resume_state().arrays
    assert len(model["model_pairs"]) == len(env.last)
    for (s, a), (reward, next_state, terminated) in env.last.items():
        assert model["model_reward"][s, a] == reward
        assert model["model_next_state"][s, a] == next_state
        assert model["model_terminated"][s, a] == terminated


# -- reproducibility and resume --------------------------------------------------------------


@pytest.mark.parametrize(
    "env, settings",
    [("FrozenLake-v1", {}), ("FrozenLake-v1", {"planning_steps": 0}), ("Taxi-v4", {})],
)
def test_dyna_q_passes_the_rlx_contract_check(env, settings):
    check_agent("dyna-q", env, seed=4, **settings)


def test_the_policy_is_the_q_table_and_the_model_is_resume_state():
    agent = rlx.make("dyna-q", "FrozenLake-v1", seed=0)
    play(agent, 19)
    iteration = agent.step()
    assert set(agent.policy_state().arrays) == {"q"}
    arrays = agent.resume_state().arrays
    assert arrays["model_reward"].shape == arrays["model_next_state"].shape == (16, 4)
    assert arrays["model_terminated"].shape == (16, 4)
    assert arrays["model_pairs"].shape == (iteration.metrics["model_pairs"], 2)


def test_trainer_resume_matches_an_uninterrupted_run(tmp_path):
    from rlx.checkpoint import load_checkpoint

    settings = dict(checkpoint_every=2_000, tensorboard=False, eval_every=0, progress=False)
    for run, steps in (("full", 8_000), ("run", 4_000)):
        agent = rlx.make("dyna-q", "Taxi-v4", seed=2, planning_steps=5)
        rlx.Trainer(agent, steps=steps, run_dir=tmp_path / run, **settings).fit()
    rlx.Trainer.resume(tmp_path / "run", steps=8_000).fit()

    full = load_checkpoint(tmp_path / "full" / "final")
    resumed = load_checkpoint(tmp_path / "run" / "final")
    assert resumed.document["trainer"]["env_steps"] == full.document["trainer"]["env_steps"]
    assert same_state(resumed.policy, full.policy)
    assert same_state(resumed.resume, full.resume)


def test_a_resumed_agent_continues_with_the_same_model(tmp_path):
    uninterrupted = rlx.make("dyna-q", "CliffWalking-v1", seed=5, **BOOK)
    play(uninterrupted, 3)
    resumed = rlx.make("dyna-q", "CliffWalking-v1", seed=5, **BOOK)
    resumed.load_policy_state(uninterrupted.policy_state())
    resumed.load_resume_state(uninterrupted.resume_state())
    assert resumed.model == uninterrupted.model
    play(uninterrupted, 3)
    play(resumed, 3)
    assert same_state(whole_state(resumed), whole_state(uninterrupted))


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, message",
    [(-1, r"planning_steps must be in \[0, inf\]"), (2.5, "planning_steps expects an integer")],
)
def test_bad_planning_steps_are_refused(value, message):
    with pytest.raises(ConfigError, match=message):
        rlx.make("dyna-q", "FrozenLake-v1", planning_steps=value)


def test_a_model_for_another_environment_is_refused():
    frozen_lake = rlx.make("dyna-q", "FrozenLake-v1", seed=0)
    taxi = rlx.make("dyna-q", "Taxi-v4", seed=0)
    with pytest.raises(CheckpointError, match="500 states and 6 actions"):
        taxi.load_resume_state(frozen_lake.resume_state())


def test_a_model_listing_a_pair_twice_is_refused():
    agent = rlx.make("dyna-q", "FrozenLake-v1", seed=0)
    play(agent, 5)
    state = agent.resume_state()
    pairs = state.arrays["model_pairs"]
    state.arrays["model_pairs"] = np.concatenate([pairs, pairs[:1]])
    with pytest.raises(CheckpointError, match="twice"):
        agent.load_resume_state(state)


def test_a_box_observation_space_is_refused_naming_discrete():
    with pytest.raises(SpaceError, match="Discrete"):
        rlx.make("dyna-q", "CartPole-v1")


def test_the_plugin_registers_dyna_q_in_the_classical_family():
    spec = rlx.registry.agents["dyna-q"]
    assert spec.family == "classical"
    assert spec.distribution == "rlx-classical"
    assert spec.observation_spaces == spec.action_spaces == ("Discrete",)
    from rlx_classical import DynaQ

    assert spec.load() is DynaQ
