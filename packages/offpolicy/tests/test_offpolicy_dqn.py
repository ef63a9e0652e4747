"""DQN and its presets: the contract, the targets of each option, learning, bad input."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError, SpaceError, TrainingError
from rlx.testing import check_agent
from rlx.trainer import Trainer

FAST = dict(learning_starts=64, batch_size=32, train_freq=16, gradient_steps=4)


@pytest.mark.parametrize("name", ["dqn", "double-dqn", "dueling-dqn"])
def test_dqn_and_its_presets_keep_the_agent_contract(name):
    check_agent(name, "CartPole-v1", iterations=3, n_step=3, **FAST)


def test_several_environments_and_a_polyak_target_keep_the_contract():
    check_agent("dqn", "CartPole-v1", iterations=3, n_envs=3, tau=0.1, loss="mse", **FAST)


def test_the_presets_turn_their_options_on():
    assert rlx.make("double-dqn", "CartPole-v1").config.double
    config = rlx.make("dueling-dqn", "CartPole-v1").config
    assert config.dueling and config.double


def _fixed_batch(agent):
    generator = torch.Generator().manual_seed(0)
    return {
        "observations": torch.randn(8, 4, generator=generator),
        "actions": torch.randint(2, (8,), generator=generator),
        "rewards": torch.randn(8, generator=generator),
        "next_observations": torch.randn(8, 4, generator=generator),
        "terminated": torch.tensor([True, False] * 4),
        "discounts": torch.full((8,), 0.9),
    }


@pytest.mark.parametrize("double", [False, True])
def test_the_td_target_is_the_papers(double):
    agent = rlx.make("dqn", "CartPole-v1", seed=0, double=double, loss="mse", **FAST)
    with torch.no_grad():  # make the target network differ from the online one
        agent.target_vector.mul_(0.5)
    batch = _fixed_batch(agent)
    with torch.no_grad():
        online_next = agent.q_network(batch["next_observations"])
        target_next = agent.target_network(batch["next_observations"])
        if double:
            value = target_next.gather(1, online_next.argmax(1, keepdim=True)).squeeze(1)
        else:
            value = target_next.max(1).values
        target = batch["rewards"] + 0.9 * (~batch["terminated"]) * value
        q = agent.q_network(batch["observations"]).gather(1, batch["actions"][:, None]).squeeze(1)
    metrics = agent.update(batch)
    assert metrics["loss"] == pytest.approx(float(((q - target) ** 2).mean()), rel=1e-5)


def test_the_dueling_head_averages_out_the_advantages():
    agent = rlx.make("dueling-dqn", "CartPole-v1", seed=0)
    x = torch.randn(5, 4)
    net = agent.q_network
    with torch.no_grad():
        features = net.body(x)
        advantages = net.head(features)
        expected = net.value(features) + advantages - advantages.mean(-1, keepdim=True)
        torch.testing.assert_close(net(x), expected)
        # Acting in NumPy takes the argmax of the advantages: the same as of Q.
        np.testing.assert_array_equal(agent.greedy(x.numpy()), net(x).argmax(-1).numpy())


def test_a_hard_target_update_copies_and_a_soft_one_averages():
    hard = rlx.make("dqn", "CartPole-v1", seed=0, tau=1.0)
    soft = rlx.make("dqn", "CartPole-v1", seed=0, tau=0.25)
    for agent in (hard, soft):
        with torch.no_grad():
            agent.online_vector.add_(1.0)
        before = agent.target_vector.clone()
        agent.update_target()
        expected = agent.online_vector if agent is hard else before + 0.25 * 1.0
        if agent is soft:
            expected = before + 0.25 * (agent.online_vector - before)
        torch.testing.assert_close(agent.target_vector, expected)
        # The layers of the target network see it: they are views of the flat vector.
        torch.testing.assert_close(
            agent.target_network.head.bias, agent.target_vector[-2:].detach()
        )


def test_epsilon_decays_over_the_trainer_budget():
    agent = rlx.make("dqn", "CartPole-v1", seed=0, exploration_fraction=0.5, **FAST)
    agent.set_training_budget(1000)
    assert agent.epsilon == 1.0
    agent.env_steps = 250
    assert agent.epsilon == pytest.approx(1.0 - 0.5 * 0.95)
    agent.env_steps = 600
    assert agent.epsilon == pytest.approx(0.05)


def test_dqn_solves_cartpole_within_100k_steps():
    from rlx_offpolicy.zoo import hyperparameters

    agent = rlx.make("dqn", "CartPole-v1", seed=0, **hyperparameters("dqn", "CartPole-v1"))
    result = Trainer(
        agent,
        steps=100_000,
        eval_every=5_000,
        eval_episodes=10,
        target_return=475,
        progress=False,
        verbose=False,
    ).fit()
    assert result.best_return is not None and result.best_return >= 475, result


# -- bad input -----------------------------------------------------------------------------------


def test_dqn_on_continuous_actions_names_what_it_supports():
    with pytest.raises(SpaceError, match="it supports Discrete action spaces"):
        rlx.make("dqn", "Pendulum-v1")
    # Built directly, without the registry's check, the agent says the same and what to use.
    from rlx_offpolicy.dqn import DQN

    with pytest.raises(SpaceError, match=r"handles Discrete action spaces.*use sac, td3 or ddpg"):
        DQN(gym.make("Pendulum-v1"), DQN.Config(), 0)


def test_a_batch_larger_than_the_buffer_is_a_config_error():
    with pytest.raises(ConfigError, match="batch_size = 64 is larger than buffer_size = 10"):
        rlx.make("dqn", "CartPole-v1", batch_size=64, buffer_size=10)


def test_learning_starts_smaller_than_a_batch_waits_for_the_batch_with_a_notice():
    with pytest.warns(UserWarning, match="learning starts after 32 steps"):
        agent = rlx.make("dqn", "CartPole-v1", learning_starts=0, batch_size=32, train_freq=8)
    while not (metrics := agent.step().metrics):
        assert agent.env_steps < 32
    assert agent.env_steps >= 32 and metrics["updates"] == 1.0
    assert agent.config.learning_starts == 0  # the user's setting is kept as given


class NaNReward(gym.Wrapper):
    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        return obs, float("nan"), terminated, truncated, info


def test_a_nan_loss_stops_the_run(tmp_path):
    gym.register("rlx-test/NaNCartPole-v0", lambda: NaNReward(gym.make("CartPole-v1")))
    agent = rlx.make("dqn", "rlx-test/NaNCartPole-v0", seed=0, **FAST)
    with pytest.raises(TrainingError, match="the loss became nan"):
        Trainer(agent, steps=1000, eval_episodes=0, progress=False).fit()


# -- image observations ----------------------------------------------------------------------


class Flashes(gym.Env):
    """84x84 grayscale frames; a bright frame says action 1 pays, a dark one action 0."""

    observation_space = gym.spaces.Box(0, 255, (84, 84), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.bright, self.t = bool(self.np_random.integers(2)), 0
        return self._frame(), {}

    def _frame(self):
        return np.full((84, 84), 200 if self.bright else 20, np.uint8)

    def step(self, action):
        reward = float(int(action) == int(self.bright))
        self.bright, self.t = bool(self.np_random.integers(2)), self.t + 1
        return self._frame(), reward, False, self.t >= 20, {}


gym.register(
    "rlx-test/Flashes-v0",
    lambda: gym.wrappers.FrameStackObservation(Flashes(), 4),
)


def test_dqn_on_frame_stacks_uses_the_cnn_and_stores_each_frame_once():
    from rlx_offpolicy.frames import FrameReplayBuffer

    settings = dict(FAST, buffer_size=2000)
    check_agent("dqn", "rlx-test/Flashes-v0", iterations=3, **settings)
    agent = rlx.make("dqn", "rlx-test/Flashes-v0", seed=0, **settings)
    assert isinstance(agent.buffer, FrameReplayBuffer)
    assert agent.buffer.arrays["frames"].shape == (2000, 1, 84, 84)
    assert agent.buffer.arrays["actions"].dtype == np.uint8
    with pytest.raises(ConfigError, match="n_step=1"):
        rlx.make("dqn", "rlx-test/Flashes-v0", n_step=3)
