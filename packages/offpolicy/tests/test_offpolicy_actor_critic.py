"""SAC, TD3 and DDPG: the agent contract, their pieces against references, bad input, and
learning Pendulum within the issue's budgets (fixed seeds, real thresholds).

The learning runs stop as soon as the mean deterministic evaluation return (10 episodes on
fixed seeds, every 1,000 steps) reaches -200, so they cost only what learning costs; they use
the tuned settings (``rlx_offpolicy/tuned.toml``), which benchmarks/offpolicy_speed.py also uses.
"""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Normal, TanhTransform, TransformedDistribution
from torch.nn import functional as F

import rlx
from rlx import tuned
from rlx.errors import SpaceError, UnknownNameError
from rlx.testing import check_agent
from rlx.trainer import Trainer
from rlx_offpolicy.networks import CriticEnsemble
from rlx_offpolicy.sac import SAC, SACConfig, squashed_gaussian

#: Settings that learn from the second iteration on, in about a second per contract check.
SMALL = dict(
    learning_starts=32,
    batch_size=32,
    train_freq=16,
    gradient_steps=3,
    buffer_size=1_000,
    hidden_sizes=(32, 32),
)

# -- the contract ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, extra",
    [
        ("sac", {}),
        ("td3", {}),
        ("ddpg", {}),
        # Two environments, and episodes that end in the resumed part: the noise processes
        # restart per environment, and their state is part of the exact resume.
        ("ddpg", {"action_noise": "ornstein-uhlenbeck", "n_envs": 2, "train_freq": 40}),
    ],
    ids=["sac", "td3", "ddpg-normal", "ddpg-ornstein-uhlenbeck"],
)
def test_agent_keeps_the_contract(name, extra):
    check_agent(name, "Pendulum-v1", iterations=3, **{**SMALL, **extra})


def test_sac_with_a_fixed_alpha_keeps_the_contract_and_does_not_learn_it():
    check_agent("sac", "Pendulum-v1", iterations=3, alpha=0.2, **SMALL)
    agent = rlx.make("sac", "Pendulum-v1", alpha=0.2, **SMALL)
    metrics = {}
    while not metrics:
        metrics = agent.step().metrics
    assert "alpha" not in agent.optimizers and "alpha_loss" not in metrics
    assert metrics["alpha"] == pytest.approx(0.2)


# -- the pieces against references --------------------------------------------------------------


def test_sac_log_probability_equals_torch_distributions():
    generator = torch.Generator().manual_seed(0)
    mean = 2 * torch.randn(256, 3, generator=generator)
    log_std = torch.empty(256, 3).uniform_(-5, 2, generator=generator)
    noise = torch.randn(256, 3, generator=generator)
    actions, log_prob = squashed_gaussian(mean, log_std, noise)

    u = mean + log_std.exp() * noise
    tanh = TanhTransform(cache_size=1)  # log_prob(tanh(u)) then uses u, not atanh(a)
    reference = TransformedDistribution(Normal(mean, log_std.exp()), [tanh])
    expected = reference.log_prob(tanh(u)).sum(-1)
    torch.testing.assert_close(actions, torch.tanh(u))
    torch.testing.assert_close(log_prob, expected, atol=1e-4, rtol=0)

    # Where 1 - tanh(u)^2 rounds to 0 in float32 the stable form stays finite and exact.
    u = torch.tensor([[-40.0], [-12.0], [12.0], [40.0]])
    _, log_prob = squashed_gaussian(u, torch.zeros_like(u), torch.zeros_like(u))
    exact = -0.5 * math.log(2 * math.pi) - 2 * (math.log(2) - u.abs()[:, 0].double())
    assert torch.isfinite(log_prob).all()
    torch.testing.assert_close(log_prob.double(), exact, atol=1e-4, rtol=1e-6)


def _separate_stack(critic, index, observations, actions):
    """Critic ``index`` of the ensemble as ordinary linear layers with their own gradients."""
    layers = [
        (weight.clone().requires_grad_(), bias.clone().requires_grad_())
        for weight, bias in critic.member(index)
    ]
    x = torch.cat([observations, actions], -1)
    for k, (weight, bias) in enumerate(layers):
        x = F.linear(x, weight, bias)
        if k < len(layers) - 1:
            x = torch.relu(x)
    return x[:, 0], layers


def test_twin_critics_in_one_batched_pass_equal_two_separate_linear_stacks():
    torch.manual_seed(0)
    critic = CriticEnsemble(2, 3, 2, (16, 8), "relu")
    observations = torch.randn(64, 3)
    actions = torch.randn(64, 2, requires_grad=True)
    q = critic(observations, actions)
    assert q.shape == (2, 64)
    (q**2).sum().backward()
    for index in range(2):
        expected, layers = _separate_stack(critic, index, observations, actions.detach())
        torch.testing.assert_close(q[index], expected)
        (expected**2).sum().backward()
        for (weight, bias), batched_weight, batched_bias in zip(
            layers, critic.weights, critic.biases, strict=True
        ):
            torch.testing.assert_close(batched_weight.grad[index].T, weight.grad)
            torch.testing.assert_close(batched_bias.grad[index, 0], bias.grad)

    # Frozen (the policy update): gradients reach the actions only; one member alone works.
    critic.zero_grad()
    actions.grad = None
    q1 = critic(observations, actions, members=1, frozen=True)
    q1.sum().backward()
    assert all(w.grad is None or not w.grad.any() for w in critic.weights)
    reference_actions = actions.detach().clone().requires_grad_()
    expected, _ = _separate_stack(critic, 0, observations, reference_actions)
    expected.sum().backward()
    torch.testing.assert_close(q1[0], expected)
    torch.testing.assert_close(actions.grad, reference_actions.grad)


def test_ornstein_uhlenbeck_noise_follows_its_recursion_and_restarts_with_each_episode():
    agent = rlx.make("ddpg", "Pendulum-v1", action_noise="ornstein-uhlenbeck", n_envs=2, **SMALL)
    c = agent.config
    agent.noise.value[:] = [[0.5], [0.5]]
    agent.runner.episode_lengths[:] = [0, 7]  # environment 0 starts an episode
    observations = np.asarray(agent.runner.observations, np.float32)
    eps = copy.deepcopy(agent.rng).standard_normal((2, 1))
    actions = agent.explore(observations)
    step = c.ou_sigma * math.sqrt(c.ou_dt) * eps
    expected = np.array([[0.0], [0.5 - c.ou_theta * 0.5 * c.ou_dt]]) + step
    np.testing.assert_allclose(agent.noise.value, expected)
    np.testing.assert_allclose(
        actions, np.clip(agent.greedy(observations) + expected, -1, 1), rtol=1e-6
    )


def test_td3_delays_the_actor_and_the_target_updates():
    agent = rlx.make("td3", "Pendulum-v1", policy_delay=2, **{**SMALL, "gradient_steps": 1})
    while agent.updates == 0 or agent.updates % 2:
        agent.step()
    vectors = lambda: [  # noqa: E731
        v.detach().clone()
        for v in (
            agent.actor.vector,
            agent.actor.target_vector,
            agent.critic.vector,
            agent.critic.target_vector,
        )
    ]
    before = vectors()
    agent.step()  # update 2k+1: the critics only
    after = vectors()
    changed = [not torch.equal(a, b) for a, b in zip(before, after, strict=True)]
    assert changed == [False, False, True, False]
    agent.step()  # update 2k+2: the actor and both targets too
    assert all(not torch.equal(a, b) for a, b in zip(after, vectors(), strict=True))


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sac", "td3", "ddpg"])
def test_a_discrete_action_space_names_box_and_suggests_dqn(name):
    with pytest.raises(SpaceError, match=r"takes Box action spaces; use dqn"):
        rlx.make(name, "CartPole-v1")


def test_dqn_on_a_box_action_space_suggests_the_actor_critics():
    # every agent of Box actions, as registered (sac, td3, ddpg and those added since)
    with pytest.raises(SpaceError, match=r"takes Discrete action spaces; use sac, .*td3, .*ddpg"):
        rlx.make("dqn", "Pendulum-v1")


def test_the_agent_built_directly_gives_the_same_advice():
    with pytest.raises(SpaceError, match=r"SAC handles Box action spaces, not Discrete.*use dqn"):
        SAC(gym.make("CartPole-v1"), SACConfig(), 0)


def test_the_tuned_settings_are_copies_and_name_what_they_know():
    settings = tuned.hyperparameters("sac", "Pendulum-v1")
    settings["learning_rate"] = 1.0
    assert tuned.hyperparameters("sac", "Pendulum-v1")["learning_rate"] == 1e-3
    assert tuned.hyperparameters("dqn", "CartPole-v1")["gradient_steps"] == 128
    with pytest.raises(UnknownNameError, match=r"unknown agent .td4.. Did you mean: td3"):
        tuned.hyperparameters("td4", "Pendulum-v1")


# -- learning ---------------------------------------------------------------------------------


def train(name: str, steps: int, seed: int = 0):
    agent = rlx.make(name, "Pendulum-v1", seed=seed, **tuned.hyperparameters(name, "Pendulum-v1"))
    trainer = Trainer(
        agent,
        steps=steps,
        eval_every=1_000,
        eval_episodes=10,
        target_return=-200,
        progress=False,
        verbose=False,
        plot=False,
    )
    return trainer.fit()


def test_sac_reaches_minus_200_on_pendulum_within_20k_steps():
    result = train("sac", 20_000)
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= -200 and result.env_steps <= 20_000


@pytest.mark.parametrize("name", ["td3", "ddpg"])
def test_deterministic_actors_reach_minus_200_on_pendulum_within_30k_steps(name):
    result = train(name, 30_000)
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= -200 and result.env_steps <= 30_000
