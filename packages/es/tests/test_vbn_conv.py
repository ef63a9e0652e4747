"""Virtual batch normalisation of convolutional feature maps (N, C, H, W), per channel, and a
conv policy with it searched by OpenAI-ES (estorch's VirtualBatchNorm on conv layers)."""

from __future__ import annotations

import textwrap

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch import nn

import rlx
from rlx.nn.layers import VirtualBatchNorm

FRAMES_ID = "rlx-test/VBNFrames-v0"


class Frames(gymnasium.Env):
    """8x8 float frames of two channels, bright or dark: action 1 pays on a bright frame."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0.0, 1.0, shape=(2, 8, 8), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.t, self.bright = 0, False

    def _frame(self) -> np.ndarray:
        self.bright = bool(self.np_random.random() < 0.5)
        base = 0.7 if self.bright else 0.3
        return np.clip(base + 0.2 * self.np_random.standard_normal((2, 8, 8)), 0, 1).astype(
            np.float32
        )

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action):
        reward = float(int(action) == int(self.bright))
        self.t += 1
        return self._frame(), reward, False, self.t >= 5, {}


if FRAMES_ID not in gymnasium.registry:
    gymnasium.register(FRAMES_ID, entry_point=Frames)


def test_feature_maps_take_reference_statistics_per_channel_over_examples_and_positions():
    torch.manual_seed(0)
    layer = VirtualBatchNorm(3)
    reference = torch.randn(6, 3, 4, 5) * torch.tensor([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1) + 1
    layer.set_reference(reference)
    per_channel = reference.transpose(0, 1).reshape(3, -1)
    torch.testing.assert_close(layer.reference_mean, per_channel.mean(1))
    torch.testing.assert_close(layer.reference_mean_square, per_channel.square().mean(1))
    assert int(layer.reference_size) == 6
    with torch.no_grad():
        layer.gamma.copy_(torch.tensor([1.0, 2.0, 0.5]))
        layer.beta.copy_(torch.tensor([0.0, -1.0, 3.0]))
    x = torch.randn(4, 3, 4, 5)
    out = layer(x)
    assert out.shape == x.shape
    for i in range(len(x)):
        # By hand: per channel, the reference examples with the example itself added.
        virtual = torch.cat([reference, x[i : i + 1]])
        for c in range(3):
            values = virtual[:, c]
            mean, var = values.mean(), values.var(unbiased=False)
            expected = layer.gamma[c] * (x[i, c] - mean) / torch.sqrt(var + 1e-5) + layer.beta[c]
            torch.testing.assert_close(out[i, c], expected, rtol=1e-4, atol=1e-5)
    # An example's output does not depend on the rest of its batch.
    torch.testing.assert_close(layer(x[2:3]), out[2:3])
    # Feature vectors (N, F) are normalised per feature as before.
    flat = VirtualBatchNorm(4)
    flat.set_reference(torch.randn(10, 4))
    assert flat(torch.randn(3, 4)).shape == (3, 4)


def test_a_reference_batch_of_another_width_is_refused():
    layer = VirtualBatchNorm(3)
    with pytest.raises(ValueError, match=r"VirtualBatchNorm\(3\).*\(6, 4, 5, 5\): 4"):
        layer.set_reference(torch.zeros(6, 4, 5, 5))
    with pytest.raises(ValueError, match=r"\(6, 2\): 2"):
        layer.set_reference(torch.zeros(6, 2))


def test_without_a_reference_feature_maps_get_the_per_channel_affine_map():
    layer = VirtualBatchNorm(2)
    with torch.no_grad():
        layer.gamma.copy_(torch.tensor([2.0, 3.0]))
        layer.beta.copy_(torch.tensor([1.0, -1.0]))
    x = torch.randn(3, 2, 4, 4)
    expected = x * torch.tensor([2.0, 3.0]).reshape(1, 2, 1, 1)
    expected = expected + torch.tensor([1.0, -1.0]).reshape(1, 2, 1, 1)
    torch.testing.assert_close(layer(x), expected)


def test_it_saves_its_reference_and_trains_inside_a_conv_net():
    torch.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(2, 4, 3), VirtualBatchNorm(4), nn.ReLU(), nn.Flatten())
    reference = torch.randn(8, 2, 6, 6)
    net[1].set_reference(net[0](reference).detach())
    copy = nn.Sequential(nn.Conv2d(2, 4, 3), VirtualBatchNorm(4), nn.ReLU(), nn.Flatten())
    copy.load_state_dict(net.state_dict())
    x = torch.randn(3, 2, 6, 6)
    torch.testing.assert_close(copy(x), net(x))
    net(x).sum().backward()
    assert net[1].gamma.grad is not None and net[1].gamma.grad.shape == (4,)


@pytest.fixture
def conv_vbn(tmp_path, monkeypatch):
    """A module with a conv policy whose feature maps go through a VirtualBatchNorm."""
    (tmp_path / "rlx_es_test_vbn.py").write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            from rlx.nn.layers import VirtualBatchNorm

            class ConvVBN(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(2, 4, 4, stride=4)
                    self.norm = VirtualBatchNorm(4)
                    self.head = nn.Linear(4 * 2 * 2, 2)
                    # Reference frames drawn once: part of the seed the network is built under.
                    with torch.no_grad():
                        self.norm.set_reference(self.conv(torch.rand(16, 2, 8, 8)))

                def forward(self, x):
                    return self.head(torch.relu(self.norm(self.conv(x))).flatten(1))

            def conv_vbn(observation_space, action_space):
                return ConvVBN()
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "rlx_es_test_vbn:conv_vbn"


def test_a_conv_policy_with_virtual_batch_norm_runs_batched_and_learns(conv_vbn):
    agent = rlx.make(
        "openai-es",
        FRAMES_ID,
        seed=0,
        network=conv_vbn,
        population_size=64,
        sigma=0.1,
        learning_rate=0.1,
    )
    policy = agent.policy
    # gamma and beta of the normalisation are searched; its reference statistics are buffers.
    names = [name for name, _ in policy.shapes]
    assert "norm.gamma" in names and "norm.reference_mean" in policy.buffers
    rng = np.random.default_rng(0)
    parameters = agent.strategy.mean + 0.1 * rng.standard_normal((5, policy.n_params))
    frames = rng.random((5, 2 * 8 * 8)).astype(np.float32)
    bound = policy.bind(parameters)
    # Each member's output is its own network's, whatever the other members.
    x = torch.from_numpy(frames).reshape(5, 1, 2, 8, 8)
    with torch.no_grad():
        eager = policy.vmapped({n: bound[n] for n, _ in policy.shapes}, policy.buffers, x)
    np.testing.assert_array_equal(
        policy.actions(bound, frames), eager.reshape(5, -1).argmax(1).numpy()
    )
    np.testing.assert_array_equal(
        policy.actions(policy.select(bound, np.array([3])), frames[[3]]),
        policy.actions(bound, frames)[[3]],
    )
    means = [agent.step().metrics["return_mean"] for _ in range(30)]
    # Random play returns 2.5 of 5; the population learns to read the brightness (4.76).
    assert np.mean(means[-5:]) >= 4.5, means
