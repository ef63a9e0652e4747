"""The built-in and user-supplied policies, and the spaces they take."""

from __future__ import annotations

import textwrap

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError, SpaceError


class TinyFrames(gym.Env):
    """84x84 RGB frames whose colour says which of two actions pays."""

    observation_space = gym.spaces.Box(0, 255, (84, 84, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.good = int(self.np_random.integers(2))
        return self._frame(), {}

    def _frame(self):
        frame = np.zeros((84, 84, 3), np.uint8)
        frame[..., self.good] = 255
        return frame

    def step(self, action):
        self.t += 1
        reward = 1.0 if action == self.good else 0.0
        self.good = int(self.np_random.integers(2))
        return self._frame(), reward, False, self.t >= 20, {}


class Grid(gym.Env):
    """MultiDiscrete actions: two independent choices, each rewarded when it is 1."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.MultiDiscrete([3, 2])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        reward = float(action[0] == 1) + float(action[1] == 1)
        return np.zeros(2, np.float32), reward, False, self.t >= 10, {}


gym.register("rlx-test/TinyFrames-v0", entry_point=TinyFrames)
gym.register("rlx-test/Grid-v0", entry_point=Grid)


def test_cnn_policy_on_image_frames_keeps_the_contract():
    from rlx.testing import check_agent

    check_agent(
        "ppo", "rlx-test/TinyFrames-v0", seed=0, n_envs=2, n_steps=8, batch_size=8, n_epochs=1
    )
    agent = rlx.make("ppo", "rlx-test/TinyFrames-v0", seed=0, n_envs=2, n_steps=8, batch_size=8)
    assert type(agent.policy.actor_body).__name__ == "NatureCNN"
    assert agent.buffer.observations.dtype == torch.uint8  # frames are stored as bytes


def test_multidiscrete_actions_are_learned():
    agent = rlx.make(
        "ppo", "rlx-test/Grid-v0", seed=0, n_envs=4, n_steps=50, batch_size=100, learning_rate=3e-3
    )
    for _ in range(15):
        iteration = agent.step()
    assert np.mean(iteration.episode_returns) > 17.0  # 20 is the best; uniform play earns 8.3
    action = agent.act(np.zeros(2, np.float32))
    assert agent.env.action_space.contains(action)
    assert list(action) == [1, 1]


def test_a_user_supplied_torch_module_is_the_policy_body(tmp_path, monkeypatch):
    (tmp_path / "my_nets.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            from torch import nn

            def body(observation_space, action_space):
                n = int(np.prod(observation_space.shape))
                return nn.Sequential(nn.Flatten(), nn.Linear(n, 32), nn.ReLU())
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    agent = rlx.make("a2c", "CartPole-v1", seed=0, policy="my_nets:body")
    assert isinstance(agent.policy.actor_body, torch.nn.Sequential)
    assert agent.policy.critic_body is None  # actor and critic share the user's body
    agent.step()
    with pytest.raises(ConfigError, match="cannot load policy"):
        rlx.make("a2c", "CartPole-v1", policy="my_nets:missing")
    with pytest.raises(ConfigError, match=r"package\.module:factory"):
        rlx.make("a2c", "CartPole-v1", policy="convolutional")


class Switches(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.MultiBinary(3)


gym.register("rlx-test/Switches-v0", entry_point=Switches)


class Words(gym.Env):
    observation_space = gym.spaces.Text(8)
    action_space = gym.spaces.Discrete(2)


gym.register("rlx-test/Words-v0", entry_point=Words)


@pytest.mark.parametrize(
    "env, message",
    [
        ("rlx-test/Words-v0", "Text.*it takes Box, Discrete, MultiDiscrete, MultiBinary, Dict"),
        ("rlx-test/Switches-v0", "MultiBinary.*takes Discrete, MultiDiscrete, Box action"),
    ],
)
def test_unsupported_spaces_name_the_supported_ones(env, message):
    with pytest.raises(SpaceError, match=message):
        rlx.make("ppo", env)


def test_unsupported_action_space_names_the_supported_ones():
    from rlx.nn.distributions import action_distribution

    with pytest.raises(SpaceError, match="Discrete, MultiDiscrete and Box"):
        action_distribution(gym.spaces.MultiBinary(3))
