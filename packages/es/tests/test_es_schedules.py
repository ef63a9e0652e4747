"""OpenAI-ES (and the novelty agents) with any torch optimiser and a learning-rate scheduler."""

from __future__ import annotations

import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.testing import check_agent

SMALL = dict(population_size=8, hidden_sizes=(8,), max_episode_steps=50)


def test_a_scheduler_steps_after_every_update_of_the_centre_and_resumes_exactly():
    agent = rlx.make(
        "openai-es",
        "CartPole-v1",
        seed=0,
        learning_rate=0.1,
        lr_scheduler="ExponentialLR",
        lr_scheduler_kwargs={"gamma": 0.5},
        **SMALL,
    )
    for _ in range(3):
        agent.step()
    assert agent.strategy.optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**3)
    check_agent(
        "openai-es",
        "CartPole-v1",
        iterations=3,
        lr_scheduler="StepLR",
        lr_scheduler_kwargs={"step_size": 2, "gamma": 0.5},
        **SMALL,
    )
    check_agent(
        "nsr-es", "CartPole-v1", iterations=2, lr_scheduler="ExponentialLR",
        lr_scheduler_kwargs={"gamma": 0.9}, meta_population_size=2, **SMALL,
    )  # fmt: skip


def test_any_torch_optimiser_by_class_name():
    agent = rlx.make("openai-es", "CartPole-v1", seed=0, optimizer="RAdam", **SMALL)
    assert type(agent.strategy.optimizer) is torch.optim.RAdam
    check_agent("openai-es", "CartPole-v1", iterations=2, optimizer="RAdam", **SMALL)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"optimizer": "Radamm"}, "unknown optimizer 'Radamm'. Did you mean"),
        ({"lr_scheduler": "Cosine"}, "unknown lr_scheduler 'Cosine'"),
        ({"lr_scheduler": "StepLR"}, "lr_scheduler StepLR rejected its arguments"),
    ],
)
def test_bad_optimiser_or_scheduler_is_one_config_error(settings, message):
    with pytest.raises(ConfigError) as info:
        rlx.make("openai-es", "CartPole-v1", **SMALL, **settings)
    assert message in str(info.value)
