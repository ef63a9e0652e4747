"""TQC: the agent contract, the truncated target mixture and the critic loss against hand
computations, the actor's objective, bad settings, seed batches, and learning Pendulum-v1."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.testing import check_agent, check_seed_batch
from rlx.trainer import Trainer
from rlx_offpolicy.tqc import truncated_mixture

SMALL = dict(
    learning_starts=32,
    batch_size=32,
    train_freq=16,
    gradient_steps=3,
    buffer_size=1_000,
    hidden_sizes=(32, 32),
    n_quantiles=5,
)


@pytest.mark.parametrize(
    "extra",
    [{}, {"n_critics": 3, "top_quantiles_to_drop_per_net": 1, "prioritized": True}],
    ids=["defaults", "three-critics-prioritized"],
)
def test_tqc_keeps_the_agent_contract(extra):
    check_agent("tqc", "Pendulum-v1", iterations=3, **{**SMALL, **extra})


def test_the_truncated_mixture_pools_sorts_and_drops_the_largest():
    # 2 critics, 2 transitions, 3 quantiles each; 1 dropped per critic: the 2 largest of 6.
    quantiles = torch.tensor(
        [
            [[1.0, 5.0, 3.0], [0.0, -1.0, 2.0]],  # critic 1
            [[4.0, 2.0, 6.0], [7.0, 1.0, 1.5]],  # critic 2
        ]
    )
    kept = truncated_mixture(quantiles, 1)
    torch.testing.assert_close(kept, torch.tensor([[1.0, 2, 3, 4], [-1.0, 0, 1, 1.5]]))
    torch.testing.assert_close(truncated_mixture(quantiles, 0)[1], torch.tensor(
        [-1.0, 0, 1, 1.5, 2, 7]
    ))  # fmt: skip
    # A seed batch's leading axis is carried through.
    torch.testing.assert_close(truncated_mixture(quantiles.expand(3, -1, -1, -1), 1)[2], kept)


def _hand_loss(quantiles: list[float], targets: list[float]) -> float:
    """Mean over the quantiles i and the targets j of rho^1_tau_i(target_j - theta_i)."""
    n, total = len(quantiles), 0.0
    for i, theta in enumerate(quantiles):
        tau = (2 * i + 1) / (2 * n)
        for target in targets:
            u = target - theta
            huber = 0.5 * u * u if abs(u) <= 1 else abs(u) - 0.5
            total += abs(tau - (1.0 if u < 0 else 0.0)) * huber
    return total / (n * len(targets))


def test_the_critic_loss_is_a_hand_computation():
    agent = rlx.make("tqc", "Pendulum-v1", seed=0, n_critics=3, top_quantiles_to_drop_per_net=2)
    with torch.no_grad():  # make the target critics differ from the online ones
        agent.critic.target_vector.mul_(0.5)
    generator = torch.Generator().manual_seed(0)
    batch = {
        "observations": torch.randn(4, 3, generator=generator),
        "actions": torch.rand(4, 1, generator=generator) * 2 - 1,
        "rewards": torch.randn(4, generator=generator),
        "next_observations": torch.randn(4, 3, generator=generator),
        "terminated": torch.tensor([False, True, False, False]),
        "discounts": torch.full((4,), 0.9),
    }
    next_actions = torch.rand(4, 1, generator=generator) * 2 - 1
    next_log_probs = torch.randn(4, generator=generator)
    agent.sample_actions = lambda observations: (next_actions, next_log_probs)
    alpha = torch.tensor([0.3])
    loss, q_mean, losses = agent.critic_loss(
        batch, batch["observations"], batch["next_observations"], alpha
    )
    with torch.no_grad():
        current = agent.critic.module(batch["observations"], batch["actions"]).tolist()
        after = agent.critic.target(batch["next_observations"], next_actions).tolist()
    hand = []
    for k in range(4):
        pooled = sorted(after[m][k][i] for m in range(3) for i in range(25))[: 3 * 25 - 3 * 2]
        soft = [z - 0.3 * float(next_log_probs[k]) for z in pooled]
        reward, done = float(batch["rewards"][k]), bool(batch["terminated"][k])
        targets = [reward + (0.0 if done else 0.9 * z) for z in soft]
        hand.append(np.mean([_hand_loss(current[m][k], targets) for m in range(3)]))
    np.testing.assert_allclose(losses.numpy(), hand, rtol=1e-5)
    assert float(loss.detach()) == pytest.approx(float(np.mean(hand)), rel=1e-5)
    assert float(q_mean) == pytest.approx(float(np.mean(current)), rel=1e-5)
    # The gradient reaches the online critics only.
    loss.backward()
    assert agent.critic.vector.grad is not None and agent.critic.vector.grad.abs().sum() > 0


def test_the_actor_maximises_the_mean_of_all_quantiles():
    agent = rlx.make("tqc", "Pendulum-v1", seed=0, n_critics=3)
    observations = torch.randn(5, 3)
    actions = (torch.rand(5, 1) * 2 - 1).requires_grad_(True)
    value = agent.policy_value(observations, actions)
    with torch.no_grad():
        quantiles = agent.critic.module(observations, actions)  # (3, 5, 25)
    torch.testing.assert_close(value.detach(), quantiles.mean((0, 2)))
    value.sum().backward()  # through the actions, not into the critics' weights
    grad = agent.critic.vector.grad
    assert actions.grad is not None and (grad is None or not grad.any())


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"top_quantiles_to_drop_per_net": 25}, r"top_quantiles_to_drop_per_net = 25 must be"),
        ({"n_critics": 0}, r"n_critics"),
        ({"n_quantiles": 0}, r"n_quantiles"),
    ],
)
def test_bad_settings_are_one_config_error(settings, message):
    with pytest.raises(ConfigError, match=message):
        rlx.make("tqc", "Pendulum-v1", **settings)


def test_a_bad_setting_on_the_command_line_is_exit_2(rlx_cli, tmp_path):
    code, _, err = rlx_cli(
        "run", "tqc", "--env", "Pendulum-v1", "--set", "top_quantiles_to_drop_per_net=30",
        "--steps", "10", "--out", str(tmp_path / "r"),
    )  # fmt: skip
    assert code == 2 and "top_quantiles_to_drop_per_net = 30 must be below" in err, err


@pytest.fixture
def nets_module(tmp_path, monkeypatch):
    """A module with a network factory on ``sys.path``, as a user's would be."""
    (tmp_path / "rlx_test_tqc_nets.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            from torch import nn

            def tanh_body(observation_space, action_space):
                n = int(np.prod(observation_space.shape))
                return nn.Sequential(nn.Flatten(), nn.Linear(n, 16), nn.Tanh())
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "rlx_test_tqc_nets"


def test_each_quantile_critic_encodes_with_its_own_user_network(nets_module):
    settings = {**SMALL, "network": f"{nets_module}:tanh_body", "n_critics": 3}
    check_agent("tqc", "Pendulum-v1", iterations=3, **settings)
    agent = rlx.make("tqc", "Pendulum-v1", **settings)
    assert len(agent.critic.module.encoders) == 3 and not agent.flat
    assert agent.critic.module(torch.zeros(4, 3), torch.zeros(4, 1)).shape == (3, 4, 5)


def test_a_batched_seed_is_its_single_run():
    settings = {**SMALL, "buffer_size": 5_000, "learning_starts": 64, "gradient_steps": 4}
    check_seed_batch("tqc", "Pendulum-v1", iterations=10, **settings)


def test_tqc_reaches_minus_200_on_pendulum_within_the_zoos_budget():
    from rlx.tuned import hyperparameters

    # The zoo's settings and budget (20k steps), with 64-64 hidden layers instead of
    # 256-256 to keep the test short; sb3-contrib's TQC reaches -151 +- 88 with the zoo's
    # (rl-baselines3-zoo benchmark.md). Seed 0 reaches -200 after 4k steps.
    settings = dict(hyperparameters("tqc", "Pendulum-v1"), hidden_sizes=(64, 64))
    agent = rlx.make("tqc", "Pendulum-v1", seed=0, **settings)
    result = Trainer(
        agent,
        steps=20_000,
        eval_every=1_000,
        eval_episodes=10,
        target_return=-200,
        progress=False,
        verbose=False,
    ).fit()
    assert result.best_return is not None and result.best_return >= -200, result
