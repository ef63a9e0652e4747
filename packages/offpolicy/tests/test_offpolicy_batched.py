"""Seeds of DQN (its double, dueling and prioritized presets), DDPG and SAC learning as one batched
computation (rlx_offpolicy.batched).

A seed of a batch is its single run: the same initial weights, environment seeds, actions
and minibatches; only the order of floating-point operations differs. The tolerance
(rlx.testing.check_seed_batch): after 10 iterations (24 to 48 gradient steps past the
warm-up), every float of the seed's whole state (networks, targets, optimiser moments,
replay buffer) within 1e-5 of the single run's, everything else identical (counters,
target-update schedule, random streams), and the same environment steps and episodes.
"""

from __future__ import annotations

import pytest
import torch

import rlx
from rlx.errors import NotBatchable, TrainingError
from rlx.testing import check_seed_batch

TOLERANCE = 1e-5
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
    "ddpg": ("ddpg", "Pendulum-v1", {**SMALL, "gradient_steps": 4, "hidden_sizes": (32, 32)}),
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

            def scaled(n_step: int = 1, sample=sample) -> dict:
                batch = sample(n_step)
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


@pytest.mark.parametrize(
    ("agent", "settings", "reason"),
    [
        ("td3", {}, "TD3 has no batched update"),
        ("noisy-dqn", {}, "NoisyNet"),
        ("c51", {}, "distributional"),
        ("dqn", {"optimizer": "AdamW"}, "optimizer 'AdamW'"),
    ],
)
def test_what_cannot_be_batched_says_why(agent: str, settings: dict, reason: str) -> None:
    env = "Pendulum-v1" if agent == "td3" else "CartPole-v1"
    agents = [rlx.make(agent, env, seed=seed, **settings) for seed in range(2)]
    with pytest.raises(NotBatchable, match=reason):
        type(agents[0]).seed_batch(agents)
    assert all(one.batch is None for one in agents)
