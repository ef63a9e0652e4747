"""CrossQ: the agent contract, batch renormalisation and the joint pass against hand
computations, no target network, exact resume of the statistics, bad input, and learning
Pendulum (sb3-contrib's CrossQ reaches -200 there within the zoo's 20k steps; here within 6k).
"""

from __future__ import annotations

import copy
import textwrap

import numpy as np
import pytest
import torch
from torch.nn import functional as F

import rlx
from rlx import tuned
from rlx.errors import ConfigError
from rlx.nn.renorm import BatchRenorm
from rlx.testing import check_agent, check_close_states, check_seed_batch
from rlx.trainer import Trainer
from rlx_offpolicy.crossq import CrossQ

#: Settings that learn from the second iteration on, in about a second per contract check.
SMALL = dict(
    learning_starts=32,
    batch_size=32,
    train_freq=16,
    gradient_steps=3,
    buffer_size=1_000,
    hidden_sizes=(32, 32),
    critic_hidden_sizes=(32, 32),
)


@pytest.mark.parametrize("extra", [{}, {"prioritized": True}, {"alpha": 0.1, "n_envs": 2}])
def test_agent_keeps_the_contract(extra):
    check_agent("crossq", "Pendulum-v1", iterations=3, **{**SMALL, **extra})


def test_the_cnn_on_image_observations_is_followed_by_a_renormalisation():
    from test_offpolicy_networks import IMAGES  # registers rlx-test/BrightFrames-v0

    settings = {**IMAGES, "critic_hidden_sizes": (32, 32)}
    check_agent("crossq", "rlx-test/BrightFrames-v0", iterations=3, network="cnn", **settings)
    agent = rlx.make("crossq", "rlx-test/BrightFrames-v0", **settings)
    assert isinstance(agent.actor.module.body[1], BatchRenorm)
    assert agent.critic.module.encoders is not None and len(agent.critic.module.norms) == 3


def test_defaults_are_sb3_contribs():
    c = rlx.make("crossq", "Pendulum-v1").config
    assert (c.learning_rate, c.policy_delay, c.hidden_sizes, c.critic_hidden_sizes) == (
        1e-3,
        3,
        (256, 256),
        (1024, 1024),
    )
    assert (c.batch_norm_momentum, c.batch_norm_eps, c.renorm_warmup_steps) == (0.01, 1e-3, 100_000)


# -- batch renormalisation against its definition ----------------------------------------------


def test_batch_renorm_is_batch_norm_in_the_warmup_then_renormalises_toward_the_running_stats():
    generator = torch.Generator().manual_seed(0)
    norm = BatchRenorm(3, (2,), momentum=0.01, eps=1e-3, warmup_steps=1)
    with torch.no_grad():
        norm.scale.uniform_(0.5, 2.0, generator=generator)
        norm.bias.uniform_(-1.0, 1.0, generator=generator)
    x = 3.0 + 10.0 * torch.randn(2, 64, 3, generator=generator)
    mean, var = x.mean(1, keepdim=True), x.var(1, unbiased=False, keepdim=True)
    std = (var + 1e-3).sqrt()

    # Pass 1 (the warm-up): plain batch normalisation, and the running statistics move.
    torch.testing.assert_close(norm(x), (x - mean) / std * norm.scale + norm.bias)
    torch.testing.assert_close(norm.running_mean, 0.01 * mean)
    torch.testing.assert_close(norm.running_var, 0.99 + 0.01 * var)
    # Pass 2, still the warm-up (renormalising starts after warmup_steps passes).
    torch.testing.assert_close(norm(x), (x - mean) / std * norm.scale + norm.bias)
    # Pass 3: x^ = (x - mu_B) / sigma_B * r + d with r, d clipped, from the statistics before.
    running_mean, running_var = norm.running_mean.clone(), norm.running_var.clone()
    sigma = (running_var + 1e-3).sqrt()
    r = (std / sigma).clamp(1 / 3, 3)
    d = ((mean - running_mean) / sigma).clamp(-5, 5)
    assert (r == 3).any() and (d.abs() < 5).all()  # the clip of r takes part
    torch.testing.assert_close(norm(x), ((x - mean) / std * r + d) * norm.scale + norm.bias)
    assert int(norm.steps) == 3
    # Evaluation: the running statistics, which stay as they are.
    norm.eval()
    running_mean, running_var = norm.running_mean.clone(), norm.running_var.clone()
    expected = (x - running_mean) / (running_var + 1e-3).sqrt() * norm.scale + norm.bias
    torch.testing.assert_close(norm(x), expected)
    assert torch.equal(norm.running_mean, running_mean) and int(norm.steps) == 3


def test_a_frozen_pass_gives_no_gradient_to_the_affine_map():
    norm = BatchRenorm(2)
    x = torch.randn(8, 2, requires_grad=True)
    norm(x, frozen=True).sum().backward()
    assert norm.scale.grad is None and norm.bias.grad is None and x.grad is not None


# -- the joint pass ----------------------------------------------------------------------------


def hand_critics(critic, x: torch.Tensor) -> torch.Tensor:
    """The renormalised critics on ``x`` ``(batch, in)`` in the warm-up, written out: each
    layer's input standardised with this batch's own statistics, per critic."""
    x = x.expand(critic.n, -1, -1)
    last = len(critic.weights) - 1
    for index, (weight, bias, norm) in enumerate(
        zip(critic.weights, critic.biases, critic.norms, strict=True)
    ):
        mean = x.mean(1, keepdim=True)
        var = ((x - mean) ** 2).mean(1, keepdim=True)
        x = (x - mean) / (var + norm.eps).sqrt() * norm.scale + norm.bias
        x = x @ weight + bias
        if index < last:
            x = F.relu(x)
    return x.squeeze(-1)


def test_the_joint_pass_normalises_with_the_mixtures_statistics_and_stops_the_target_gradient():
    agent = rlx.make("crossq", "Pendulum-v1", seed=3, **SMALL)
    while len(agent.buffer) < 64:
        agent.step()
    batch = agent.sample()
    observations, next_observations = batch["observations"], batch["next_observations"]
    critic = copy.deepcopy(agent.critic.module)
    state = agent.generator.get_state()
    alpha = agent.alpha()
    loss, _, _ = agent.critic_loss(batch, observations, next_observations, alpha)

    # The same next actions, from the same noise, of the actor in evaluation mode.
    agent.generator.set_state(state)
    with torch.no_grad():
        next_actions, next_log_probs = agent.sample_actions(next_observations)
    mixture = torch.cat(
        [
            torch.cat([observations, batch["actions"]], -1),
            torch.cat([next_observations, next_actions], -1),
        ]
    )
    q_all = hand_critics(critic, mixture)
    size = len(observations)
    q = q_all[:, :size]
    with torch.no_grad():
        soft = q_all[:, size:].min(0).values - alpha * next_log_probs
        target = batch["rewards"] + batch["discounts"] * (1 - batch["terminated"].float()) * soft
    expected = 0.5 * ((q - target) ** 2).mean(-1).sum()
    torch.testing.assert_close(loss, expected)

    # The statistics are the mixture's: its first layer's running mean moved toward the mean
    # of all 2B rows, not of the B replayed ones.
    before = critic.norms[0].running_mean[0, 0]
    moved = agent.critic.module.norms[0].running_mean[0, 0]
    torch.testing.assert_close(moved, before + 0.01 * (mixture.mean(0) - before))
    assert not torch.allclose(moved, before + 0.01 * (mixture[:size].mean(0) - before), atol=1e-4)
    # The replayed half alone would give other values: the normalisation is shared.
    assert not torch.allclose(hand_critics(critic, mixture[:size]), q)

    # No gradient through the target half: the gradient is that of the loss with the target
    # a constant (only the statistics of the next rows take part in q).
    gradient = torch.autograd.grad(loss, list(agent.critic.module.parameters()))
    hand_gradient = torch.autograd.grad(expected, list(critic.parameters()))
    for mine, theirs in zip(gradient, hand_gradient, strict=True):
        torch.testing.assert_close(mine, theirs)
    assert agent.critic.module.training is False and agent.actor.module.training is False


def test_there_is_no_target_network_and_the_actor_waits_policy_delay_updates():
    agent = rlx.make("crossq", "Pendulum-v1", policy_delay=3, **{**SMALL, "gradient_steps": 1})
    assert agent.critic.target is None and agent.actor.target is None
    assert set(agent.training_modules()) == {"critic", "temperature"}
    assert not any("target" in key for key in agent.resume_state().arrays)
    changes = []
    while agent.updates < 7:
        before = agent.actor.vector.detach().clone()
        agent.step()
        if agent.ready_to_learn():
            changes.append(not torch.equal(before, agent.actor.vector.detach()))
    # updates 1..7: the actor steps at the 3rd and the 6th
    assert changes[-7:] == [False, False, True, False, False, True, False]


# -- checkpoints -------------------------------------------------------------------------------


def test_the_renormalisation_statistics_are_saved_and_resumed_exactly():
    agent = rlx.make("crossq", "Pendulum-v1", seed=1, renorm_warmup_steps=4, **SMALL)
    for _ in range(6):
        agent.step()
    policy, resume = agent.policy_state(), agent.resume_state()
    for name in ("actor/body.norms.0.running_mean", "critic/norms.1.running_var"):
        assert name in policy.arrays or name in resume.arrays
    assert int(resume.arrays["critic/norms.0.steps"]) > 4  # past the warm-up: renormalising

    copy_ = rlx.make("crossq", "Pendulum-v1", seed=1, renorm_warmup_steps=4, **SMALL)
    copy_.load_policy_state(policy)
    copy_.load_resume_state(resume)
    for mine, theirs in zip(
        agent.critic.module.state_dict().values(),
        copy_.critic.module.state_dict().values(),
        strict=True,
    ):
        assert torch.equal(mine, theirs)
    for _ in range(3):
        agent.step(), copy_.step()
    for module in ("actor", "critic"):
        a, b = (
            getattr(agent, module).module.state_dict(),
            getattr(copy_, module).module.state_dict(),
        )
        assert all(torch.equal(a[key], b[key]) for key in a)
    observation = np.zeros(3, np.float32)
    np.testing.assert_array_equal(agent.act(observation), copy_.act(observation))


# -- bad input ---------------------------------------------------------------------------------


@pytest.fixture
def nets_module(tmp_path, monkeypatch):
    """A module of network factories on ``sys.path``, as a user's would be."""
    (tmp_path / "rlx_test_crossq_nets.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            from torch import nn

            def plain(observation_space, action_space):
                size = int(np.prod(observation_space.shape))
                return nn.Sequential(nn.Linear(size, 16), nn.ReLU())

            def normalised(observation_space, action_space):
                size = int(np.prod(observation_space.shape))
                return nn.Sequential(nn.BatchNorm1d(size), nn.Linear(size, 16), nn.ReLU())
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "rlx_test_crossq_nets"


def test_a_users_network_without_normalisation_is_one_config_error(nets_module):
    with pytest.raises(ConfigError, match="holds no normalisation layer; add an"):
        rlx.make("crossq", "Pendulum-v1", network=f"{nets_module}:plain", **SMALL)
    check_agent("crossq", "Pendulum-v1", iterations=3, network=f"{nets_module}:normalised", **SMALL)


def test_the_cli_exits_2_with_one_message_on_a_bad_setting(
    nets_module, tmp_path, monkeypatch, capsys
):
    from rlx.cli import main

    monkeypatch.chdir(tmp_path)
    for setting, message in (
        (f"network={nets_module}:plain", "holds no normalisation layer"),
        ("policy_delay=0", "policy_delay"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["run", "crossq", "--env", "Pendulum-v1", "--set", setting])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and message in err and err.count("error:") == 1, err


#: Seed batches are compared under tanh. Batch renormalisation centres the pre-activations on
#: 0, so under ReLU the rounding by which a batch differs from its single run now and then
#: moves one to the other side of the kink: that sample's share of a gradient appears in one
#: run and not the other, and the runs part by far more than rounding (up to 7.7e-3 in the
#: critic's Adam moments, in 1 of 8 groups of 3 seeds measured). tanh is smooth: rounding
#: stays rounding. (benchmarks/seed_batch_rounding.py measures both.)
BATCHED = {**SMALL, "activation": "tanh"}
#: test_a_batched_seed_is_its_single_run's settings: renormalising from the 40th pass.
BATCHED_SEED = {**BATCHED, "renorm_warmup_steps": 40}
#: test_seeds_that_learn_apart_keep_their_statistics's settings.
APART = {**BATCHED, "learning_starts": 64, "gradient_steps": 1, "policy_delay": 2}


def test_a_batched_seed_is_its_single_run():
    """Three seeds as one batch, each with its own running statistics: every seed's whole
    state (weights, statistics, optimiser moments, buffer) within rlx.testing's tolerance of
    its single run after 10 iterations, 27 updates and 13 actor steps, renormalising from the
    40th pass."""
    check_seed_batch("crossq", "Pendulum-v1", iterations=10, **BATCHED_SEED)


def test_seeds_that_learn_apart_keep_their_statistics():
    """Seed 0 takes 5 iterations alone, then joins seeds 1 and 2 in their warm-up: the
    batch's passes move seed 0's statistics only until the others learn, and each seed
    steps its actor at its own phase of the delay (one update a round, a step every 2nd:
    seed 0's fall in other rounds than theirs)."""
    settings = APART
    alone = [rlx.make("crossq", "Pendulum-v1", seed=seed, **settings) for seed in range(3)]
    for k, one in enumerate(alone):
        for _ in range(11 if k == 0 else 6):
            one.step()
    agents = [rlx.make("crossq", "Pendulum-v1", seed=seed, **settings) for seed in range(3)]
    for _ in range(5):
        agents[0].step()
    batch = CrossQ.seed_batch(agents)
    learning, actor_steps = [], []
    for _ in range(6):
        for one in agents:
            one.step()
        learning.append(batch.learning.tolist())
        states = [a.optimizers["actor"].state.get(a.actor.vector, {}) for a in agents]
        actor_steps.append([int(state.get("step", 0)) for state in states])
    assert [True, False, False] in learning and [True, True, True] in learning
    stepped = np.diff(actor_steps, axis=0).tolist()
    assert [1, 0, 0] in stepped and [0, 1, 1] in stepped
    for k in range(3):
        check_close_states(alone[k], agents[k], where=f"seed {k}")


# -- learning ----------------------------------------------------------------------------------


def test_crossq_reaches_minus_200_on_pendulum_within_6k_steps():
    settings = tuned.hyperparameters("crossq", "Pendulum-v1")
    agent = rlx.make("crossq", "Pendulum-v1", seed=0, **settings)
    trainer = Trainer(
        agent,
        steps=6_000,
        eval_every=1_000,
        eval_episodes=10,
        target_return=-200,
        progress=False,
        verbose=False,
        plot=False,
    )
    result = trainer.fit()
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= -200 and result.env_steps <= 6_000
