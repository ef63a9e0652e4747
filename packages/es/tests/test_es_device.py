"""rlx-es's ``device`` (the population's forward pass: cpu by default, cuda asked for clearly,
auto weighs the work) and ``block_size=0`` (the whole population in one block, one per
worker). The tests that need CUDA itself are marked ``cuda``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.nn.state import AUTO_CUDA_MIN_WORK, mlp_work
from rlx.testing import check_agent
from rlx_es.evaluation import auto_block_size

torch.set_num_threads(1)

#: Small enough for every test to take seconds.
SMALL = dict(population_size=16, hidden_sizes=(8,))

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs CUDA: run on a GPU machine (shared/gpu/README.md says how)",
)
without_cuda = pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks what happens on a machine without CUDA"
)


def returns_of_generations(agent, generations: int) -> np.ndarray:
    return np.array([agent.step().episode_returns for _ in range(generations)])


# -- device ---------------------------------------------------------------------------------


def test_device_defaults_to_cpu():
    agent = rlx.make("openai-es", "CartPole-v1", seed=0, **SMALL)
    assert agent.config.device == "cpu"
    assert agent.device == torch.device("cpu")
    agent.step()
    assert agent.backend.evaluator.policy.device == torch.device("cpu")


@without_cuda
@pytest.mark.parametrize("name", ["openai-es", "cma-es"])
def test_cuda_without_cuda_is_one_config_error_naming_cuda(name):
    with pytest.raises(ConfigError, match="asks for CUDA, but torch sees no CUDA device"):
        rlx.make(name, "CartPole-v1", seed=0, device="cuda", hidden_sizes=(8,))


def test_unknown_device_is_a_config_error():
    with pytest.raises(ConfigError, match="'gpu' is not a torch device"):
        rlx.make("openai-es", "CartPole-v1", seed=0, device="gpu", **SMALL)


def test_auto_puts_small_populations_on_the_cpu():
    # 16 members x (4 x 8 + 8 x 2) multiply-adds: far below auto's threshold anywhere.
    agent = rlx.make("openai-es", "CartPole-v1", seed=0, device="auto", **SMALL)
    assert agent.device == torch.device("cpu")


@without_cuda
def test_auto_without_cuda_is_the_cpu_even_for_a_big_population():
    big = dict(population_size=16_384, hidden_sizes=(32, 32))
    assert mlp_work(16_384, [4, 32, 32, 2]) >= AUTO_CUDA_MIN_WORK
    agent = rlx.make("openai-es", "CartPole-v1", seed=0, device="auto", **big)
    assert agent.device == torch.device("cpu")


def test_auto_weighs_the_whole_population_forward_pass(monkeypatch):
    # With CUDA (pretended: nothing is allocated before a generation runs), the rule decides.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    sizes = [4, 32, 32, 2]  # CartPole, the default hidden layers
    assert mlp_work(8_192, sizes) < AUTO_CUDA_MIN_WORK <= mlp_work(8_224, sizes)
    for population, device in ((256, "cpu"), (8_192, "cpu"), (8_224, "cuda")):
        agent = rlx.make(
            "openai-es", "CartPole-v1", seed=0, device="auto", population_size=population
        )
        assert agent.device.type == device
        assert agent.settings.device == device
        assert agent.policy.device.type == "cpu"  # act: one observation, on the CPU
    process = rlx.make(
        "openai-es", "CartPole-v1", seed=0, device="auto", population_size=8_224, backend="process"
    )
    assert process.device.type == "cpu"


@pytest.mark.parametrize("backend", ["process", "ray"])
def test_cuda_with_a_worker_backend_is_a_config_error(backend):
    # Refused before anything starts, with or without CUDA on this machine.
    with pytest.raises(ConfigError, match=f"backend={backend} does not use"):
        rlx.make("openai-es", "CartPole-v1", seed=0, device="cuda", backend=backend, **SMALL)


def test_auto_with_a_worker_backend_is_the_cpu():
    agent = rlx.make("openai-es", "CartPole-v1", seed=0, device="auto", backend="process", **SMALL)
    assert agent.device == torch.device("cpu")
    assert agent.settings.device == "cpu"


def test_select_gathers_what_bind_of_the_members_gives():
    agent = rlx.make("openai-es", "Pendulum-v1", seed=0, **SMALL)
    policy = agent.policy
    parameters = np.random.default_rng(0).standard_normal((10, policy.n_params))
    members = np.array([1, 4, 5, 9])
    selected = policy.select(policy.bind(parameters), members)
    for (weight, bias), (direct_weight, direct_bias) in zip(
        selected, policy.bind(parameters[members]), strict=True
    ):
        assert torch.equal(weight, direct_weight) and torch.equal(bias, direct_bias)


@pytest.mark.cuda
@needs_cuda
def test_openai_es_keeps_the_agent_contract_on_cuda():
    check_agent("openai-es", "CartPole-v1", iterations=2, device="cuda", population_size=64)


@pytest.mark.cuda
@needs_cuda
def test_auto_takes_cuda_for_a_big_population():
    agent = rlx.make("openai-es", "CartPole-v1", seed=0, device="auto", population_size=16_384)
    assert agent.device.type == "cuda"


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_a_generation_on_cuda_plays_what_it_plays_on_the_cpu(env):
    config = dict(population_size=64, block_size=16)
    cpu = rlx.make("openai-es", env, seed=0, device="cpu", **config)
    cuda = rlx.make("openai-es", env, seed=0, device="cuda", **config)
    cpu_returns = np.array(cpu.step().episode_returns)
    cuda_returns = np.array(cuda.step().episode_returns)
    policy = cuda.backend.evaluator.policy
    assert policy.device.type == "cuda"
    # float32 on another device: a near tie can flip an argmax, so close, not identical.
    assert np.isclose(cpu_returns, cuda_returns, rtol=1e-3, atol=1e-3).mean() >= 0.9
    assert abs(cpu_returns.mean() - cuda_returns.mean()) <= 0.05 * abs(cpu_returns.mean()) + 1


# -- block_size=0 ----------------------------------------------------------------------------


def test_auto_block_size_is_the_population_or_one_block_per_worker():
    assert auto_block_size(256) == 256
    assert auto_block_size(16_384) == 16_384
    assert auto_block_size(256, workers=2) == 128
    assert auto_block_size(10, workers=4) == 3  # blocks of 3, 3, 3, 1
    assert auto_block_size(3, workers=8) == 1


def test_block_size_defaults_to_the_whole_population():
    agent = rlx.make("openai-es", "CartPole-v1", seed=0, **SMALL)
    assert agent.config.block_size == 0
    assert agent.settings.block_size == 16
    cma = rlx.make("cma-es", "CartPole-v1", seed=0, hidden_sizes=(8,))
    assert cma.settings.block_size == cma.population_size  # the strategy's default population


def test_block_size_zero_plays_what_its_block_size_plays():
    # Episodes follow the blocks' seeds: block_size=0 is exactly one block of the population,
    # and (with a process backend of two workers) exactly two blocks of half of it.
    auto = rlx.make("openai-es", "CartPole-v1", seed=3, **SMALL)
    whole = rlx.make("openai-es", "CartPole-v1", seed=3, block_size=16, **SMALL)
    np.testing.assert_array_equal(returns_of_generations(auto, 2), returns_of_generations(whole, 2))
    halves = rlx.make("openai-es", "CartPole-v1", seed=3, block_size=8, **SMALL)
    process = rlx.make("openai-es", "CartPole-v1", seed=3, backend="process", workers=2, **SMALL)
    try:
        assert process.settings.block_size == 8
        np.testing.assert_array_equal(
            returns_of_generations(process, 2), returns_of_generations(halves, 2)
        )
    finally:
        process.close()


@pytest.mark.parametrize("name", ["openai-es", "cem"])
def test_block_size_zero_is_deterministic_and_resumes_exactly(name):
    check_agent(name, "CartPole-v1", iterations=2, **SMALL)
