"""Seeds of VPG, A2C and PPO trained as one batched computation (rlx_onpolicy.batched).

A seed of a batch is its single run: the same initial weights, environment seeds, actions
and minibatches; only the order of floating-point operations differs. The tolerance
(rlx.testing.check_seed_batch): after 5 iterations (up to 1,000 Adam steps), every float of
the seed's whole state (weights, optimiser moments, normalisers, environments) within
rlx.testing's default (1e-4, measured: see rlx.testing.checks.SEED_BATCH_TOLERANCE) of the
single run's (1e-3 under Pendulum's continuous actions, whose environments drift further),
everything else identical, the same environment steps and episodes (returns within 1e-5
relative).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx import tuned
from rlx.errors import NotBatchable, TrainingError
from rlx.testing import check_seed_batch
from rlx.testing.checks import SEED_BATCH_TOLERANCE

TOLERANCE = SEED_BATCH_TOLERANCE

CASES = {
    # the zoo's CartPole settings: one minibatch of the whole rollout, 20 epochs, linear
    # schedules of the learning rate and of the clip range (per seed: their step counts differ)
    "ppo-zoo": ("ppo", "CartPole-v1", tuned.hyperparameters("ppo", "CartPole-v1")),
    # several minibatches a seed, seeds with different numbers of them (padding, rows)
    "ppo-minibatches": ("ppo", "CartPole-v1", {"n_steps": 64, "batch_size": 64, "n_epochs": 4}),
    # Gaussian actions (log_std), clipped values, entropy bonus, actor and critic optimisers
    "ppo-gaussian": (
        "ppo",
        "Pendulum-v1",
        {
            "n_steps": 64,
            "n_epochs": 4,
            "clip_range_vf": 0.2,
            "ent_coef": 0.01,
            "actor_learning_rate": 1e-3,
            "normalize_observations": True,
            "normalize_rewards": True,
        },
    ),
    "a2c": ("a2c", "CartPole-v1", {"normalize_advantage": True}),
    "vpg": ("vpg", "CartPole-v1", {"n_steps": 32, "value_iterations": 5, "ent_coef": 0.01}),
    "a2c-adam": ("a2c", "Pendulum-v1", {"optimizer": "adam", "lr_schedule": "linear"}),
    # invalid-action masks: each seed's own masks in acting and in its minibatches' logits
    "maskable-ppo": (
        "maskable-ppo",
        "rlx/MaskedPick-v0",
        {"n_steps": 32, "batch_size": 64, "n_epochs": 4, "ent_coef": 0.01},
    ),
    "a2c-masks": ("a2c", "rlx/MaskedPick-v0", {"action_masks": True, "ent_coef": 0.01}),
}


def _agents(agent: str, env: str, settings: dict, seeds: range) -> list:
    made = [rlx.make(agent, env, seed=seed, **settings) for seed in seeds]
    for each in made:
        each.set_training_budget(50_000)
    return made


def _parameters(agent) -> torch.Tensor:
    return torch.cat([agent.policy.actor_vector.detach(), agent.policy.critic_vector.detach()])


@pytest.mark.parametrize("case", list(CASES))
def test_a_batched_seed_is_its_single_run(case: str) -> None:
    agent, env, settings = CASES[case]
    # Under continuous actions, which differ in their last bits, the environments' states
    # drift further: Pendulum's angular velocity by up to 4e-4 after 5 iterations.
    tolerance = 1e-3 if env == "Pendulum-v1" else TOLERANCE
    check_seed_batch(agent, env, iterations=5, tolerance=tolerance, **settings)


@pytest.mark.parametrize(
    "agent, settings",
    [
        ("ppo", {"n_steps": 32, "batch_size": 64, "n_epochs": 2}),
        ("trpo", {"n_envs": 2, "n_steps": 32, "critic_batch_size": 32, "critic_epochs": 2}),
    ],
)
def test_seeds_never_mix(agent: str, settings: dict) -> None:
    """Changing one seed's observations changes that seed's weights and no other's."""
    runs = []
    for perturb in (False, True):
        agents = _agents(agent, "CartPole-v1", settings, range(3))
        if perturb:
            observe = agents[1].sampler.observe
            agents[1].sampler.observe = lambda update=True, observe=observe: observe(update) * 1.5
        type(agents[0]).seed_batch(agents)
        for _ in range(3):
            for one in agents:
                one.step()
        runs.append([_parameters(one) for one in agents])
    plain, perturbed = runs
    assert torch.equal(plain[0], perturbed[0]) and torch.equal(plain[2], perturbed[2])
    assert not torch.allclose(plain[1], perturbed[1])


def test_a_seed_whose_loss_is_not_finite_stops_alone() -> None:
    """Seed 1's critic turned to NaN: its step raises its single run's TrainingError; seeds
    0 and 2 go on as their single runs."""
    settings = {"n_steps": 32, "batch_size": 64, "n_epochs": 2}
    alone = _agents("ppo", "CartPole-v1", settings, range(3))
    for one in alone:
        for _ in range(3):
            one.step()
    agents = _agents("ppo", "CartPole-v1", settings, range(3))
    batch = type(agents[0]).seed_batch(agents)
    with torch.no_grad():
        agents[1].policy.critic_vector.fill_(float("nan"))
    agents[0].step()
    with pytest.raises(TrainingError, match=r"PPO, update 1 .*the loss became nan"):
        agents[1].step()
    batch.leave(agents[1])
    agents[2].step()
    for _ in range(2):
        for k in (0, 2):
            agents[k].step()
    for k in (0, 2):
        assert float((_parameters(alone[k]) - _parameters(agents[k])).abs().max()) <= TOLERANCE


def test_a_seed_that_leaves_is_left_alone() -> None:
    """After a seed leaves, later rounds neither step its environments nor move its weights."""
    agents = _agents("a2c", "CartPole-v1", {}, range(2))
    batch = type(agents[0]).seed_batch(agents)
    for one in agents:
        one.step()
    batch.leave(agents[0])
    weights, steps = _parameters(agents[0]).clone(), agents[0].env_steps
    for _ in range(3):
        agents[1].step()
    assert torch.equal(_parameters(agents[0]), weights) and agents[0].env_steps == steps
    assert agents[0].batch is None


@pytest.mark.parametrize(
    ("agent", "settings", "reason"),
    [
        ("svpg", {}, "SVPG has no batched update"),
        ("vpg", {"value_batch_size": 64}, "value_batch_size"),
        ("ppo", {"target_kl": 0.01}, "target_kl"),
        ("ppo", {"optimizer": "AdamW"}, "optimizer 'AdamW'"),
        (
            "ppo",
            {"lr_scheduler": "StepLR", "lr_scheduler_kwargs": {"step_size": 10}},
            "lr_scheduler",
        ),
    ],
)
def test_what_cannot_be_batched_says_why(agent: str, settings: dict, reason: str) -> None:
    agents = _agents(agent, "CartPole-v1", settings, range(2))
    with pytest.raises(NotBatchable, match=reason):
        type(agents[0]).seed_batch(agents)
    assert all(one.batch is None for one in agents)


def test_seeds_with_different_settings_are_not_batched() -> None:
    agents = [
        rlx.make("ppo", "CartPole-v1", seed=0),
        rlx.make("ppo", "CartPole-v1", seed=1, learning_rate=1e-3),
    ]
    with pytest.raises(NotBatchable, match="settings differ"):
        type(agents[0]).seed_batch(agents)


def test_acting_and_saving_a_batched_seed_use_its_own_row() -> None:
    """A batched seed's act() and checkpoint arrays are its row of the stacks."""
    agents = _agents("ppo", "CartPole-v1", {"n_steps": 32, "batch_size": 64}, range(2))
    type(agents[0]).seed_batch(agents)
    for _ in range(2):
        for one in agents:
            one.step()
    observation = np.zeros(4, dtype=np.float32)
    for one in agents:
        copy = rlx.make("ppo", "CartPole-v1", seed=99, n_steps=32, batch_size=64)
        copy.load_policy_state(one.policy_state())
        assert torch.equal(_parameters(copy), _parameters(one))
        assert copy.act(observation) == one.act(observation)
