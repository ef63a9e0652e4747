"""DDPG's and TD3's exploration noise by name (``action_noise``), or a user's class by import
path, loaded only when trusted (rlx_offpolicy.noise)."""

from __future__ import annotations

import copy
import json
import math
import textwrap

import numpy as np
import pytest

import rlx
from rlx.errors import ConfigError, UntrustedCodeError
from rlx.testing import check_agent
from rlx.trainer import Trainer
from rlx_offpolicy.noise import GaussianNoise, OrnsteinUhlenbeckNoise

SMALL = dict(
    learning_starts=32,
    batch_size=32,
    train_freq=16,
    gradient_steps=3,
    buffer_size=1_000,
    hidden_sizes=(32, 32),
)
AGENTS = ["ddpg", "td3"]
#: Two environments, and Pendulum's 200-step episodes ending inside the resumed part.
RESETS = {"n_envs": 2, "train_freq": 40}


@pytest.fixture
def noise_module(tmp_path, monkeypatch):
    """A module of the user's importable as ``rlx_offpolicy_test_noise``."""
    (tmp_path / "rlx_offpolicy_test_noise.py").write_text(
        textwrap.dedent(
            """
            import numpy as np

            class Alternating:
                '''+-0.3 with a little jitter, the sign flipping at each draw and back to +
                at each episode's start.'''

                built = []

                def __init__(self, action_shape, n_envs, rng):
                    type(self).built.append((tuple(action_shape), n_envs))
                    self.rng = rng
                    self.sign = -np.ones((n_envs, *action_shape))

                def __call__(self):
                    self.sign = -self.sign
                    return 0.3 * self.sign + 0.01 * self.rng.standard_normal(self.sign.shape)

                def reset(self, starting):
                    self.sign[starting] = -1.0

                def state(self):
                    return {"sign": self.sign.copy()}

                def load_state(self, arrays):
                    self.sign = np.array(arrays["sign"])

            class NoReset:
                def __init__(self, action_shape, n_envs, rng):
                    self.shape = (n_envs, *action_shape)

                def __call__(self):
                    return np.zeros(self.shape)

            class WrongShape(NoReset):
                def __call__(self):
                    return np.zeros(3)

                def reset(self, starting):
                    pass

            class NoArguments:
                def __init__(self):
                    pass

            def not_a_class(action_shape, n_envs, rng):
                return None
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import rlx_offpolicy_test_noise

    rlx_offpolicy_test_noise.Alternating.built.clear()
    return rlx_offpolicy_test_noise


# -- by name -----------------------------------------------------------------------------------


@pytest.mark.parametrize("noise", ["gaussian", "ornstein-uhlenbeck"])
@pytest.mark.parametrize("name", AGENTS)
def test_each_agent_explores_with_each_noise_by_name_and_resumes_exactly(name, noise):
    check_agent(name, "Pendulum-v1", iterations=3, action_noise=noise, **{**SMALL, **RESETS})
    agent = rlx.make(name, "Pendulum-v1", action_noise=noise, **SMALL)
    expected = {"gaussian": GaussianNoise, "ornstein-uhlenbeck": OrnsteinUhlenbeckNoise}[noise]
    assert type(agent.noise) is expected


def test_normal_the_former_name_of_ddpgs_gaussian_noise_still_reads():
    agent = rlx.make("ddpg", "Pendulum-v1", action_noise="normal", **SMALL)
    assert type(agent.noise) is GaussianNoise and agent.config.action_noise == "normal"


@pytest.mark.parametrize("name", AGENTS)
def test_gaussian_noise_is_action_noise_std_times_the_agents_normal_draws(name):
    agent = rlx.make(name, "Pendulum-v1", action_noise_std=0.3, n_envs=3, **SMALL)
    observations = np.asarray(agent.runner.observations, np.float32)
    eps = copy.deepcopy(agent.rng).standard_normal((3, 1))
    actions = agent.explore(observations)
    expected = np.clip(agent.greedy(observations) + 0.3 * eps, -1, 1)
    np.testing.assert_allclose(actions, expected, rtol=1e-6)
    assert actions.dtype == np.float32


@pytest.mark.parametrize("name", AGENTS)
def test_ou_noise_restarts_with_each_episode_per_environment_copy(name):
    agent = rlx.make(name, "Pendulum-v1", action_noise="ornstein-uhlenbeck", n_envs=2, **SMALL)
    c = agent.config
    agent.noise.value[:] = [[0.5], [0.5]]
    agent.runner.episode_lengths[:] = [0, 7]  # copy 0 starts an episode, copy 1 goes on
    observations = np.asarray(agent.runner.observations, np.float32)
    eps = copy.deepcopy(agent.rng).standard_normal((2, 1))
    actions = agent.explore(observations)
    expected = np.array([[0.0], [0.5 - c.ou_theta * 0.5 * c.ou_dt]])
    expected += c.ou_sigma * math.sqrt(c.ou_dt) * eps
    np.testing.assert_allclose(agent.noise.value, expected)
    np.testing.assert_allclose(
        actions, np.clip(agent.greedy(observations) + expected, -1, 1), rtol=1e-6
    )


def _lag_one_correlation(noise, steps: int = 20_000) -> float:
    draws = np.array([noise()[0, 0] for _ in range(steps)])
    return float(np.corrcoef(draws[:-1], draws[1:])[0, 1])


def test_ou_noise_is_temporally_correlated_and_normal_noise_is_not():
    rng = np.random.default_rng(0)
    ou = OrnsteinUhlenbeckNoise((1,), 1, rng, theta=0.15, sigma=0.2, dt=1e-2)
    # x_{t+1} = (1 - theta dt) x_t + noise: a lag-one correlation of 1 - theta dt = 0.9985.
    assert _lag_one_correlation(ou) > 0.99
    assert abs(_lag_one_correlation(GaussianNoise((1,), 1, rng, std=0.2))) < 0.05


def test_ou_noise_resets_only_the_copies_that_start_an_episode():
    ou = OrnsteinUhlenbeckNoise((2,), 3, np.random.default_rng(1), theta=0.15, sigma=0.2, dt=1e-2)
    for _ in range(50):
        ou()
    before = ou.value.copy()
    ou.reset(np.array([False, True, False]))
    np.testing.assert_array_equal(ou.value[1], 0.0)
    np.testing.assert_array_equal(ou.value[[0, 2]], before[[0, 2]])
    assert np.all(before[1] != 0.0)


def test_ddpg_ou_state_saved_under_its_former_key_still_resumes():
    settings = {**SMALL, "action_noise": "ornstein-uhlenbeck"}
    agent = rlx.make("ddpg", "Pendulum-v1", **settings)
    for _ in range(3):
        agent.step()
    state = agent.resume_state()
    assert set(state.arrays) >= {"action_noise.value"}
    state.arrays["ou_noise"] = state.arrays.pop("action_noise.value")
    resumed = rlx.make("ddpg", "Pendulum-v1", **settings)
    resumed.load_policy_state(agent.policy_state())
    resumed.load_resume_state(state)
    np.testing.assert_array_equal(resumed.noise.value, agent.noise.value)


# -- a user's class ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", AGENTS)
def test_a_users_noise_class_explores_both_agents_and_resumes_exactly(name, noise_module):
    target = "rlx_offpolicy_test_noise:Alternating"
    check_agent(name, "Pendulum-v1", iterations=3, action_noise=target, **{**SMALL, **RESETS})
    agent = rlx.make(name, "Pendulum-v1", action_noise=noise_module.Alternating, n_envs=2, **SMALL)
    assert agent.config.action_noise == target  # the class is recorded by its import path
    assert noise_module.Alternating.built[-1] == ((1,), 2)
    assert agent.noise.rng is agent.rng  # drawn from the agent's saved stream
    observations = np.asarray(agent.runner.observations, np.float32)
    greedy = agent.greedy(observations)
    first = agent.explore(observations) - greedy  # both copies start an episode: +0.3
    agent.runner.episode_lengths[:] = [5, 0]  # copy 1 starts another: + again
    second = agent.explore(observations) - greedy
    np.testing.assert_allclose(first, 0.3, atol=0.05)
    np.testing.assert_allclose(second, [[-0.3], [0.3]], atol=0.05)
    assert set(agent.resume_state().arrays) >= {"action_noise.sign"}


@pytest.mark.parametrize("name", AGENTS)
def test_a_run_naming_a_users_noise_loads_only_when_trusted(name, noise_module, tmp_path):
    agent = rlx.make(name, "Pendulum-v1", seed=0, action_noise=noise_module.Alternating, **SMALL)
    run = tmp_path / "run"
    Trainer(agent, steps=200, eval_every=0, eval_episodes=0, run_dir=run, progress=False).fit()
    recorded = json.loads((run / "config.json").read_text())["hyperparameters"]["action_noise"]
    assert recorded == "rlx_offpolicy_test_noise:Alternating"
    with pytest.raises(UntrustedCodeError, match="sets action_noise="):
        rlx.load(run)
    loaded = rlx.load(run, trust_code=True)
    observation = np.array([0.1, 0.9, -2.0], np.float32)
    np.testing.assert_array_equal(loaded.act(observation), agent.act(observation))


@pytest.mark.parametrize(
    "target, message",
    [
        ("NoReset", r"lacks reset\(starting\)"),
        (
            "NoArguments",
            r"must be built as Class\(action_shape=\.\.\., n_envs=\.\.\., rng=\.\.\.\)",
        ),
        ("not_a_class", "is not a class"),
        ("Alternatin", "cannot load action_noise.*Did you mean: Alternating"),
    ],
)
def test_a_class_that_does_not_fit_is_one_config_error_at_construction(
    noise_module, target, message
):
    with pytest.raises(ConfigError, match=message):
        rlx.make("td3", "Pendulum-v1", action_noise=f"rlx_offpolicy_test_noise:{target}")


def test_noise_of_the_wrong_shape_is_one_config_error(noise_module):
    agent = rlx.make("ddpg", "Pendulum-v1", action_noise=noise_module.WrongShape, **SMALL)
    with pytest.raises(ConfigError, match=r"returned noise of shape \(3,\); it must be"):
        agent.explore(np.asarray(agent.runner.observations, np.float32))


@pytest.mark.parametrize("name", AGENTS)
def test_a_misspelt_noise_on_the_command_line_is_exit_2_with_a_suggestion(name, rlx_cli, tmp_path):
    code, _, err = rlx_cli(
        "run", name, "--env", "Pendulum-v1", "--set", "action_noise=ornstein-uhlenbek",
        "--steps", "10", "--out", str(tmp_path / "r"),
    )  # fmt: skip
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "Did you mean: ornstein-uhlenbeck" in lines[0]
