"""Prioritized replay on DDPG, TD3 and SAC: the shared settings build the prioritized buffer,
the importance weights reach the critic loss, the critics' TD errors become the priorities,
a resume is exact, a seed batch is each seed's single run, and SAC with it learns Pendulum.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx import tuned
from rlx.errors import ConfigError, UnknownNameError
from rlx.testing import check_agent, check_seed_batch
from rlx.trainer import Trainer
from rlx_offpolicy.base import twin_priority_errors
from rlx_offpolicy.prioritized import PrioritizedReplayBuffer

SMALL = dict(
    learning_starts=32,
    batch_size=32,
    train_freq=16,
    gradient_steps=3,
    buffer_size=1_000,
    hidden_sizes=(32, 32),
)
AGENTS = ["ddpg", "td3", "sac"]


@pytest.mark.parametrize("name", AGENTS)
def test_the_prioritized_agents_keep_the_contract_and_resume_exactly(name):
    # check_agent compares a run stopped and resumed (the tree's leaves restored) with an
    # uninterrupted one, and two runs of one seed.
    check_agent(name, "Pendulum-v1", iterations=4, prioritized=True, **SMALL)


@pytest.mark.parametrize("name", AGENTS)
def test_updates_set_the_priorities_of_the_drawn_transitions_from_the_critics(name):
    agent = rlx.make(name, "Pendulum-v1", seed=0, prioritized=True, priority_alpha=0.5, **SMALL)
    assert isinstance(agent.buffer, PrioritizedReplayBuffer)
    assert not isinstance(rlx.make(name, "Pendulum-v1", **SMALL).buffer, PrioritizedReplayBuffer)
    agent.set_training_budget(1_000)
    iteration = None
    while agent.updates < 12:
        iteration = agent.step()
    priorities = agent.buffer.priorities[: len(agent.buffer)]
    # New transitions enter at the max priority; those drawn leave it for their |delta|^alpha.
    assert (priorities > 0).all()
    moved = priorities[priorities != agent.buffer.max_priority]
    assert len(np.unique(moved)) > 50, "the drawn transitions got priorities of their own"
    assert 0.4 < iteration.metrics["importance_beta"] < 1.0  # rising toward 1 over the budget


@pytest.mark.parametrize("name", AGENTS)
def test_the_importance_weights_reach_the_critic_loss(name):
    """One batch given to three copies of an agent at its first update: at weight zero the
    critics stay as they are, at one they move, and half weights halve the loss."""
    settings = {**SMALL, "gradient_steps": 1}
    batch, losses = None, {}
    for weight in (0.0, 0.5, 1.0):
        agent = rlx.make(name, "Pendulum-v1", seed=0, prioritized=True, **settings)
        while not agent.ready_to_learn():
            agent.collect()
        if batch is None:
            batch = agent.sample()
        trial = {key: value.clone() for key, value in batch.items()}
        trial["weights"] = torch.full_like(batch["weights"], weight)
        critic = agent.critic.vector.detach().clone()
        agent.generator.manual_seed(7)  # the same target noise for each
        losses[weight] = agent.update(trial)["critic_loss"]
        moved = not torch.equal(agent.critic.vector.detach(), critic)
        assert moved == (weight > 0), weight
    assert losses[0.0] == 0.0 and losses[1.0] > 0
    assert losses[0.5] == pytest.approx(0.5 * losses[1.0], rel=1e-5)


def test_twin_critics_set_the_mean_of_their_absolute_td_errors():
    errors = torch.tensor([[[1.0, -2.0, 0.0]], [[3.0, 2.0, -4.0]]]).transpose(0, 1)  # (1, 2, 3)
    np.testing.assert_array_equal(twin_priority_errors(errors).numpy(), [[2.0, 2.0, 2.0]])
    one = torch.tensor([[-1.5, 0.5]])  # DDPG: one critic
    np.testing.assert_array_equal(twin_priority_errors(one).numpy(), [1.5, 0.5])


@pytest.mark.parametrize("name", ["td3", "sac"])
def test_a_batched_prioritized_seed_is_its_single_run(name):
    settings = {
        "learning_starts": 64,
        "batch_size": 32,
        "buffer_size": 5_000,
        "train_freq": 16,
        "gradient_steps": 4,
        "hidden_sizes": (32, 32),
    }
    check_seed_batch(name, "Pendulum-v1", iterations=10, prioritized=True, **settings)


def test_bad_prioritized_settings_are_one_config_error():
    with pytest.raises(UnknownNameError, match="Did you mean: prioritized"):
        rlx.make("sac", "Pendulum-v1", prioritised=True)
    with pytest.raises(ConfigError, match="priority_beta"):
        rlx.make("td3", "Pendulum-v1", prioritized=True, priority_beta=1.5)
    with pytest.raises(ConfigError, match="priority_alpha"):
        rlx.make("ddpg", "Pendulum-v1", prioritized=True, priority_alpha=-1)


def test_bad_prioritized_settings_exit_2_on_the_command_line(rlx_cli):
    code, _, err = rlx_cli("run", "td3", "--env", "Pendulum-v1", "--set", "priority_eps=0")
    assert code == 2
    assert "priority_eps" in err


def test_sac_with_prioritized_replay_reaches_minus_200_on_pendulum_within_10k_steps():
    settings = tuned.hyperparameters("sac", "Pendulum-v1")
    agent = rlx.make("sac", "Pendulum-v1", seed=0, prioritized=True, **settings)
    result = Trainer(
        agent,
        steps=10_000,
        eval_every=1_000,
        eval_episodes=10,
        target_return=-200,
        progress=False,
        verbose=False,
        plot=False,
    ).fit()
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= -200 and result.env_steps <= 10_000
