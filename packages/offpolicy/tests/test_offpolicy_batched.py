"""Seeds of DQN (its double, dueling, prioritized, noisy, C51 and Rainbow presets), DDPG, TD3
and SAC learning as one batched computation (rlx_offpolicy.batched).

A seed of a batch is its single run: the same initial weights, environment seeds, actions
and minibatches; only the order of floating-point operations differs. The tolerance
(rlx.testing.check_seed_batch): after 10 iterations (24 to 48 gradient steps past the
warm-up), every float of the seed's whole state (networks, targets, optimiser moments,
replay buffer) within SEED_BATCH_TOLERANCE (1e-4, measured) of the single run's, everything
else identical (counters,
target-update schedule, random streams), and the same environment steps and episodes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.errors import NotBatchable, TrainingError
from rlx.testing import check_close_states, check_seed_batch
from rlx.testing.checks import SEED_BATCH_TOLERANCE

TOLERANCE = SEED_BATCH_TOLERANCE  # the measured rounding across seeds and CPUs, 10x
SMALL = {"learning_starts": 64, "batch_size": 32, "buffer_size": 5_000, "train_freq": 16}
#: Greedy actions soon: epsilon falls from 1 to 0.05 over the first 200 steps, so that the
#: seeds act with their trained networks (the batch's stacks) for most of the run.
GREEDY_SOON = {"exploration_steps": 200, "exploration_final": 0.05}

CASES = {
    "dqn": (
        "dqn",
        "CartPole-v1",
        {**SMALL, "gradient_steps": 8, "hidden_sizes": (32, 32), **GREEDY_SOON},
    ),
    "double-dueling": (
        "dueling-dqn",
        "CartPole-v1",
        {
            **SMALL,
            "gradient_steps": 8,
            "hidden_sizes": (32, 32),
            "target_update_interval": 50,
            **GREEDY_SOON,
        },
    ),
    "prioritized-3-step": (
        "prioritized-dqn",
        "CartPole-v1",
        {**SMALL, "gradient_steps": 8, "hidden_sizes": (32, 32), "n_step": 3, **GREEDY_SOON},
    ),
    "sac": ("sac", "Pendulum-v1", {**SMALL, "gradient_steps": 4, "hidden_sizes": (32, 32)}),
    "dqn-discrete-observations": (
        "dqn",
        "Taxi-v4",
        {**SMALL, "gradient_steps": 8, "hidden_sizes": (32, 32), **GREEDY_SOON},
    ),
    # Integer observations: packed rows are bytes, compared exactly (float observations that
    # differ in their last bit, within the tolerance, would differ in their bytes).
    "dqn-dict-observations-her": (
        "dqn",
        "rlx/BitFlipping-v0",
        {**SMALL, "gradient_steps": 8, "hidden_sizes": (32, 32), "her_goals": 4, **GREEDY_SOON},
    ),
    "ddpg": ("ddpg", "Pendulum-v1", {**SMALL, "gradient_steps": 4, "hidden_sizes": (32, 32)}),
    "c51": (
        "c51",
        "CartPole-v1",
        {
            **SMALL,
            "gradient_steps": 8,
            "hidden_sizes": (32, 32),
            "target_update_interval": 50,
            **GREEDY_SOON,
        },
    ),
    "double-c51": (
        "c51",
        "CartPole-v1",
        {**SMALL, "gradient_steps": 8, "hidden_sizes": (32, 32), "double": True, **GREEDY_SOON},
    ),
    "noisy": (
        "noisy-dqn",
        "CartPole-v1",
        {**SMALL, "gradient_steps": 8, "hidden_sizes": (32, 32), "target_update_interval": 50},
    ),
    "rainbow": (
        "rainbow",
        "CartPole-v1",
        {**SMALL, "gradient_steps": 8, "hidden_sizes": (32, 32), "target_update_interval": 50},
    ),
    # 3 updates a round, a policy step every 2nd: the rounds alternate in phase
    "td3": ("td3", "Pendulum-v1", {**SMALL, "gradient_steps": 3, "hidden_sizes": (32, 32)}),
}


def _agents(agent: str, env: str, settings: dict, seeds: range) -> list:
    made = [rlx.make(agent, env, seed=seed, **settings) for seed in seeds]
    for each in made:
        if hasattr(each, "set_training_budget"):
            each.set_training_budget(20_000)
    return made


def _parameters(agent) -> torch.Tensor:
    vectors = (
        [agent.online_vector, agent.target_vector]
        if hasattr(agent, "online_vector")
        else [agent.actor.vector, agent.critic.vector, agent.critic.target_vector]
    )
    extra = [agent.temperature.log_alpha] if hasattr(agent, "temperature") else []
    return torch.cat([v.detach().reshape(-1) for v in [*vectors, *extra]])


def _steps(optimizer, vector) -> int:
    """The step count of a flat optimiser on ``vector`` (0 before its first step)."""
    return int(optimizer.state.get(vector, {}).get("step", 0))


@pytest.mark.parametrize("case", list(CASES))
def test_a_batched_seed_is_its_single_run(case: str) -> None:
    agent, env, settings = CASES[case]
    check_seed_batch(agent, env, iterations=10, tolerance=TOLERANCE, **settings)


def test_seeds_never_mix() -> None:
    """Changing one seed's rewards changes that seed's weights and no other's."""
    settings = {**SMALL, "gradient_steps": 4, "hidden_sizes": (32, 32)}
    runs = []
    for perturb in (False, True):
        agents = _agents("dqn", "CartPole-v1", settings, range(3))
        if perturb:
            sample = agents[1].sample

            def scaled(sample=sample) -> dict:
                batch = sample()
                batch["rewards"] = batch["rewards"] * 3.0
                return batch

            agents[1].sample = scaled
        type(agents[0]).seed_batch(agents)
        for _ in range(8):
            for one in agents:
                one.step()
        runs.append([_parameters(one) for one in agents])
    plain, perturbed = runs
    assert torch.equal(plain[0], perturbed[0]) and torch.equal(plain[2], perturbed[2])
    assert not torch.allclose(plain[1], perturbed[1])


def test_a_seed_whose_loss_is_not_finite_stops_alone() -> None:
    settings = {**SMALL, "gradient_steps": 4, "hidden_sizes": (32, 32)}
    alone = _agents("sac", "Pendulum-v1", settings, range(3))
    for one in alone:
        for _ in range(8):
            one.step()
    agents = _agents("sac", "Pendulum-v1", settings, range(3))
    batch = type(agents[0]).seed_batch(agents)
    with torch.no_grad():
        agents[1].critic.target_vector.fill_(float("nan"))
    failed = None
    for _ in range(8):
        for k, one in enumerate(agents):
            if k == 1 and failed is not None:
                continue
            try:
                one.step()
            except TrainingError as exc:
                assert k == 1
                failed = exc
                batch.leave(one)
    assert failed is not None and "SAC, update 1 " in str(failed) and "became nan" in str(failed)
    for k in (0, 2):
        difference = float((_parameters(alone[k]) - _parameters(agents[k])).abs().max())
        assert difference <= TOLERANCE, f"seed {k}: {difference}"


@pytest.mark.parametrize(("agent", "env"), [("sac", "Pendulum-v1"), ("dqn", "CartPole-v1")])
def test_a_seed_learns_alike_whoever_learns_beside_it(agent: str, env: str) -> None:
    """Seed 0 of a batch whose seeds 1 and 2 stop after 6 rounds equals, bit for bit, seed 0
    of a batch where they go on: no part of a seed's update (its optimiser step included)
    depends on which seeds step with it, or at what counts, so seeds that a Ctrl-C or their
    budgets stop at different rounds resume exactly in one batch."""
    settings = {**SMALL, "gradient_steps": 2, "hidden_sizes": (32, 32)}
    runs = []
    for others_stop in (False, True):
        agents = _agents(agent, env, settings, range(3))
        batch = type(agents[0]).seed_batch(agents)
        for i in range(10):
            for one in agents:
                if one.batch is not None:
                    one.step()
            if others_stop and i == 5:
                batch.leave(agents[1])
                batch.leave(agents[2])
        runs.append(_parameters(agents[0]))
    assert torch.equal(runs[0], runs[1])


@pytest.mark.parametrize(
    ("agent", "env"),
    [
        ("td3", "Pendulum-v1"),
        ("sac", "Pendulum-v1"),
        ("noisy-dqn", "CartPole-v1"),
        ("rainbow", "CartPole-v1"),
    ],
)
def test_seeds_that_start_learning_apart_follow_their_single_runs(agent: str, env: str) -> None:
    """Seed 0 trains alone for 5 iterations, then joins seeds 1 and 2, which sit the batch's
    first rounds out (their warm-up: their random streams, and NoisyNet's noise they act
    with, untouched) and start at update 0. TD3, one update a round and a policy step every
    2nd: seed 0's policy steps fall in other rounds than theirs, each at its own count."""
    settings = {**SMALL, "gradient_steps": 1, "hidden_sizes": (32, 32)}
    alone = _agents(agent, env, settings, range(3))
    logged = [
        [one.step().metrics for _ in range(15 if k == 0 else 10)][-10:]
        for k, one in enumerate(alone)
    ]
    agents = _agents(agent, env, settings, range(3))
    for _ in range(5):
        agents[0].step()
    batch = type(agents[0]).seed_batch(agents)
    learning, policy_steps = [], []  # who learnt in each round; the actors' step counts
    for i in range(10):
        for k, one in enumerate(agents):  # the same metrics (none before learning, TD3's
            metrics = one.step().metrics  # actor_loss from a seed's first policy step)
            assert metrics.keys() == logged[k][i].keys(), f"seed {k}, round {i}"
            for name, value in metrics.items():
                assert value == pytest.approx(logged[k][i][name], rel=1e-3, abs=1e-4), name
        learning.append(batch.learning.tolist())
        if agent == "td3":
            policy_steps.append([_steps(a.optimizers["actor"], a.actor.vector) for a in agents])
    assert [True, False, False] in learning and [True, True, True] in learning
    if agent == "td3":  # rounds where seed 0 stepped its policy and 1 and 2 did not, and back
        stepped = np.diff(policy_steps, axis=0).tolist()
        assert [1, 0, 0] in stepped and [0, 1, 1] in stepped
    for k in range(3):  # counters, step counts and random streams exactly, floats to TOLERANCE
        check_close_states(alone[k], agents[k], TOLERANCE, f"seed {k}")


@pytest.mark.parametrize(
    ("agent", "settings", "reason"),
    [
        ("td3", {"lr_scheduler": "StepLR", "lr_scheduler_kwargs": {"step_size": 10}}, "lr_sch"),
        ("dqn", {"optimizer": "AdamW"}, "optimizer 'AdamW'"),
    ],
)
def test_what_cannot_be_batched_says_why(agent: str, settings: dict, reason: str) -> None:
    env = "Pendulum-v1" if agent == "td3" else "CartPole-v1"
    agents = [rlx.make(agent, env, seed=seed, **settings) for seed in range(2)]
    with pytest.raises(NotBatchable, match=reason):
        type(agents[0]).seed_batch(agents)
    assert all(one.batch is None for one in agents)
