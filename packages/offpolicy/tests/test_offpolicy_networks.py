"""The ``network`` setting in SAC, TD3 and DDPG (and DQN): a user's network and the CNN keep
the agent contract, the actor and every critic encode observations with bodies of their own
(their targets too), a saved run naming a user's network loads only when trusted, and bad
settings say what is wrong."""

from __future__ import annotations

import textwrap

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import rlx
from rlx.errors import ConfigError, SpaceError, UntrustedCodeError
from rlx.nn.layers import MLP, NatureCNN
from rlx.testing import check_agent
from rlx.trainer import Trainer
from rlx_offpolicy.networks import CriticEnsemble

#: Settings that learn from the second iteration on.
SMALL = dict(
    learning_starts=64,
    batch_size=32,
    train_freq=32,
    gradient_steps=2,
    buffer_size=1_000,
    hidden_sizes=(32, 32),
)


@pytest.fixture
def nets_module(tmp_path, monkeypatch):
    """A module of network factories on ``sys.path``, as a user's would be."""
    (tmp_path / "rlx_test_offpolicy_nets.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            from torch import nn

            def tanh_body(observation_space, action_space):
                n = int(np.prod(observation_space.shape))
                return nn.Sequential(nn.Flatten(), nn.Linear(n, 32), nn.Tanh())

            def not_a_module(observation_space, action_space):
                return {"layers": 2}

            def not_flat(observation_space, action_space):
                return nn.Flatten(0)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "rlx_test_offpolicy_nets"


def encoders(agent) -> list[nn.Module]:
    """The actor's body and each critic's encoder, online networks first, then targets."""
    modules = [agent.actor.module.body, *agent.critic.module.encoders]
    if agent.actor.target is not None:
        modules.append(agent.actor.target.body)
    return [*modules, *agent.critic.target.encoders]


def assert_separate(modules: list[nn.Module]) -> None:
    """Distinct modules whose parameters share no memory."""
    assert len({id(module) for module in modules}) == len(modules)
    pointers = [p.data_ptr() for module in modules for p in module.parameters()]
    assert len(set(pointers)) == len(pointers)


# -- a user's network -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sac", "td3", "ddpg"])
def test_a_users_network_keeps_the_contract_in_the_actor_critics(name, nets_module):
    network = f"{nets_module}:tanh_body"
    check_agent(name, "Pendulum-v1", iterations=3, network=network, **SMALL)

    agent = rlx.make(name, "Pendulum-v1", network=network, **SMALL)
    modules = encoders(agent)
    assert all(isinstance(module, nn.Sequential) for module in modules)
    assert_separate(modules)
    assert len(agent.critic.module.encoders) == (1 if name == "ddpg" else 2)
    assert agent._policy is None and not agent.flat  # acting goes through torch
    # The flat vectors (the optimisers', the targets') hold the encoders too.
    for flat in (agent.actor, agent.critic):
        assert flat.vector.numel() == sum(p.numel() for p in flat.module.parameters())
    assert agent.critic.target_vector.numel() == agent.critic.vector.numel()


def test_a_users_network_keeps_the_contract_in_dqn(nets_module):
    network = f"{nets_module}:tanh_body"
    check_agent("dqn", "CartPole-v1", iterations=3, network=network, **SMALL)
    agent = rlx.make("dqn", "CartPole-v1", network=network, **SMALL)
    assert isinstance(agent.q_network.body, nn.Sequential)


def test_a_saved_run_with_a_users_network_loads_only_when_trusted(nets_module, tmp_path):
    network = f"{nets_module}:tanh_body"
    agent = rlx.make("sac", "Pendulum-v1", network=network, **SMALL)
    run = tmp_path / "run"
    Trainer(agent, steps=128, eval_every=0, eval_episodes=0, run_dir=run, progress=False).fit()
    with pytest.raises(UntrustedCodeError, match=r"sets network="):
        rlx.load(run)
    loaded = rlx.load(run, trust_code=True)
    observation = np.zeros(3, np.float32)
    assert np.array_equal(loaded.act(observation), agent.act(observation))


# -- the CNN on image observations ------------------------------------------------------------


class BrightFrames(gym.Env):
    """48x48 RGB frames of one random brightness ``b``; the action ``a`` in ``[-1, 1]`` pays
    ``-(a - (2 b - 1))^2``, so the best action is read off the frame."""

    observation_space = gym.spaces.Box(0, 255, (48, 48, 3), np.uint8)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.brightness, self.t = float(self.np_random.uniform()), 0
        return self._frame(), {}

    def _frame(self):
        return np.full((48, 48, 3), round(255 * self.brightness), np.uint8)

    def step(self, action):
        reward = -((float(action[0]) - (2 * self.brightness - 1)) ** 2)
        self.brightness, self.t = float(self.np_random.uniform()), self.t + 1
        return self._frame(), reward, False, self.t >= 20, {}


gym.register("rlx-test/BrightFrames-v0", BrightFrames)

#: Small and quick: the CNN's updates cost far more than the MLP's.
IMAGES = dict(
    learning_starts=32,
    batch_size=16,
    train_freq=16,
    gradient_steps=1,
    buffer_size=500,
    hidden_sizes=(32, 32),
)


@pytest.mark.parametrize("name", ["sac", "td3", "ddpg"])
def test_the_cnn_on_image_observations_keeps_the_contract(name):
    check_agent(name, "rlx-test/BrightFrames-v0", iterations=3, network="cnn", **IMAGES)

    agent = rlx.make(name, "rlx-test/BrightFrames-v0", **IMAGES)  # auto: the CNN on frames
    modules = encoders(agent)
    assert all(isinstance(module, NatureCNN) for module in modules)
    assert_separate(modules)
    assert agent.buffer.arrays["observations"].dtype == np.uint8
    # Independent initialisation: the twin critics' encoders start from different weights.
    if name != "ddpg":
        first, second = agent.critic.module.encoders
        assert not torch.equal(first.linear[0].weight, second.linear[0].weight)
    # The critics' layers take the encoders' features with the action.
    weight = agent.critic.module.weights[0]
    assert weight.shape[1] == NatureCNN((48, 48, 3)).features_dim + 1


def test_an_ensemble_with_encoders_equals_separate_critics_and_freezes_them():
    torch.manual_seed(0)
    bodies = [MLP([6, 16], "relu") for _ in range(2)]
    critic = CriticEnsemble(2, 16, 2, (16, 8), "relu", encoders=bodies)
    observations = torch.randn(64, 6)
    actions = torch.randn(64, 2, requires_grad=True)
    q = critic(observations, actions)
    assert q.shape == (2, 64)
    for index, body in enumerate(bodies):
        x = torch.cat([body(observations), actions], -1)
        layers = critic.member(index)
        for k, (weight, bias) in enumerate(layers):
            x = F.linear(x, weight, bias)
            x = torch.relu(x) if k < len(layers) - 1 else x
        torch.testing.assert_close(q[index], x[:, 0])

    # Frozen (the policy update): gradients reach the actions, no weight (encoders included).
    q1 = critic(observations, actions, members=1, frozen=True)
    q1.sum().backward()
    assert actions.grad is not None and actions.grad.abs().sum() > 0
    assert all(p.grad is None for p in critic.parameters())


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("name, env", [("dqn", "CartPole-v1"), ("sac", "Pendulum-v1")])
@pytest.mark.parametrize(
    "network, error, message",
    [
        ("cnn", SpaceError, r"network=cnn needs image observations"),
        ("nocolon", ConfigError, r"network must be 'auto', 'mlp', 'cnn' or 'package\.module"),
        (":not_a_module", ConfigError, r"must return a torch\.nn\.Module, got dict"),
        (":not_flat", ConfigError, r"must map \(batch, \*observation_shape\) to \(batch, "),
    ],
    ids=["cnn-on-vectors", "no-colon", "not-a-module", "not-2d"],
)
def test_a_bad_network_setting_says_what_is_wrong(name, env, network, error, message, nets_module):
    if network.startswith(":"):
        network = nets_module + network
    with pytest.raises(error, match=message):
        rlx.make(name, env, network=network, **SMALL)
