"""The neural bandits' ``device``: cpu by default, cuda asked for clearly, auto weighs the work,
checkpoints move between devices. The tests that need CUDA itself are marked ``cuda``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError
from rlx.nn.state import AUTO_CUDA_MIN_WORK, mlp_work
from rlx.testing import check_agent, same_state

torch.set_num_threads(1)  # 2-core machines: oversubscribed BLAS threads are many times slower

WHEEL = "rlx/Wheel-v0"  # 2-d contexts, 5 arms
NEURAL_AGENTS = [
    "neural-greedy",
    "dropout",
    "neural-linear",
    "param-noise",
    "variational",
    "bootstrap",
]
#: Small networks, training every other round, so that every test takes seconds.
TINY_NETWORK = dict(
    hidden_sizes=(8,), training_freq=2, training_steps=2, batch_size=16, initial_pulls=1
)
#: Big enough for auto to want CUDA: 4,096 x (2 x 1,024 + 1,024 x 5) multiply-adds and more.
BIG_NETWORK = dict(hidden_sizes=(1024,), batch_size=4096)

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs CUDA: run on a GPU machine (shared/gpu/README.md says how)",
)
without_cuda = pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks what happens on a machine without CUDA"
)


def tensors_of(agent) -> list[torch.Tensor]:
    """Every parameter of the agent's networks and every tensor of their optimisers' state
    (but the step counts, which torch keeps on the CPU)."""
    tensors = []
    for module, optimizer in agent.networks.values():
        tensors += list(module.parameters())
        for state in optimizer.state.values():
            tensors += [value for key, value in state.items() if key != "step"]
    return tensors


def play(agent, rounds: int) -> None:
    for _ in range(rounds):
        agent.step()


@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_neural_agent_runs_on_the_cpu_by_default(name):
    agent = rlx.make(name, WHEEL, seed=0, **TINY_NETWORK)
    assert agent.config.device == "cpu"
    assert agent.device == torch.device("cpu")
    assert agent.generator.device.type == "cpu"
    play(agent, 10)  # the optimisers' state exists after a training
    assert all(tensor.device.type == "cpu" for tensor in tensors_of(agent))


@without_cuda
@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_cuda_without_cuda_is_one_config_error_naming_cuda(name):
    with pytest.raises(ConfigError, match="asks for CUDA, but torch sees no CUDA device"):
        rlx.make(name, WHEEL, seed=0, device="cuda", **TINY_NETWORK)


@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_unknown_device_is_a_config_error(name):
    with pytest.raises(ConfigError, match="'gpu' is not a torch device"):
        rlx.make(name, WHEEL, seed=0, device="gpu", **TINY_NETWORK)


@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_auto_puts_small_networks_on_the_cpu(name):
    # Below auto's threshold wherever it runs: the defaults (50 units, minibatches of 512).
    agent = rlx.make(name, WHEEL, seed=0, device="auto")
    assert agent.device == torch.device("cpu")


@without_cuda
@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_auto_without_cuda_is_the_cpu_even_for_big_networks(name):
    agent = rlx.make(name, WHEEL, seed=0, device="auto", **BIG_NETWORK)
    assert agent.device == torch.device("cpu")
    assert agent.generator.device.type == "cpu"


@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_auto_weighs_a_training_steps_forward_passes(monkeypatch, name):
    small = rlx.make(name, WHEEL, seed=0, device="auto", **TINY_NETWORK)
    big = rlx.make(name, WHEEL, seed=0, device="auto", **BIG_NETWORK)
    # With CUDA (pretended: nothing is allocated), the rule decides.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert small.choose_device().type == "cpu"
    assert big.choose_device().type == "cuda"
    passes = 2 if name == "variational" else 1
    work = mlp_work(4096, [2, 1024, 5], networks=passes)
    assert work >= AUTO_CUDA_MIN_WORK > mlp_work(16, [2, 8, 5], networks=passes)


@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_neural_agent_keeps_the_rlx_contract_with_device_cpu_given(name):
    check_agent(name, WHEEL, iterations=20, device="cpu", **TINY_NETWORK)


@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_device_cpu_given_is_the_default_run_bit_for_bit(name):
    default = rlx.make(name, WHEEL, seed=0, **TINY_NETWORK)
    explicit = rlx.make(name, WHEEL, seed=0, device="cpu", **TINY_NETWORK)
    play(default, 30)
    play(explicit, 30)
    assert same_state(default.policy_state(), explicit.policy_state())
    assert same_state(default.resume_state(), explicit.resume_state())


@pytest.mark.parametrize("name", NEURAL_AGENTS)
def test_a_generator_state_saved_on_cuda_is_reseeded_on_the_cpu_with_a_warning(name):
    # What a CUDA run leaves behind: a 16-byte generator state in its resume part.
    agent = rlx.make(name, WHEEL, seed=0, **TINY_NETWORK)
    play(agent, 10)
    policy, resume = agent.policy_state(), agent.resume_state()
    resume.arrays["training/torch_rng"] = np.arange(16, dtype=np.uint8)
    resumed = rlx.make(name, WHEEL, seed=1, **TINY_NETWORK)
    resumed.load_policy_state(policy)
    with pytest.warns(RuntimeWarning, match="saved on another device type"):
        resumed.load_resume_state(resume)
    assert same_state(policy, resumed.policy_state())
    play(resumed, 10)  # and it goes on


# -- on CUDA -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NEURAL_AGENTS)
@pytest.mark.cuda
@needs_cuda
def test_neural_agent_trains_and_resumes_exactly_on_cuda(name):
    # 30 rounds: fifteen trainings, a checkpoint, fifteen more after it.
    check_agent(name, WHEEL, iterations=30, device="cuda", **TINY_NETWORK)


@pytest.mark.parametrize("name", NEURAL_AGENTS)
@pytest.mark.cuda
@needs_cuda
def test_neural_agent_keeps_its_networks_and_data_on_cuda(name):
    agent = rlx.make(name, WHEEL, seed=0, device="cuda", **TINY_NETWORK)
    assert agent.device.type == "cuda" and agent.generator.device.type == "cuda"
    play(agent, 40)
    assert all(tensor.device.type == "cuda" for tensor in tensors_of(agent))
    # The device copy of the replay data holds what the arrays hold.
    pairs = zip(agent.data.tensors(agent.device), agent.data.tensors(), strict=True)
    for on_device, on_cpu in pairs:
        assert on_device.device.type == "cuda"
        assert torch.equal(on_device.cpu(), on_cpu)


@pytest.mark.parametrize("name", NEURAL_AGENTS)
@pytest.mark.cuda
@needs_cuda
def test_a_cpu_checkpoint_loads_into_a_cuda_agent(name):
    agent = rlx.make(name, WHEEL, seed=0, **TINY_NETWORK)
    play(agent, 20)
    policy, resume = agent.policy_state(), agent.resume_state()
    on_cuda = rlx.make(name, WHEEL, seed=0, device="cuda", **TINY_NETWORK)
    on_cuda.load_policy_state(policy)
    with pytest.warns(RuntimeWarning, match="saved on another device type"):
        on_cuda.load_resume_state(resume)
    # The networks and the optimisers' state are the saved ones, now on the device.
    assert same_state(policy, on_cuda.policy_state())
    saved = {k: v for k, v in resume.arrays.items() if k != "training/torch_rng"}
    loaded = {k: v for k, v in on_cuda.resume_state().arrays.items() if k in saved}
    assert saved.keys() == loaded.keys()
    assert all(np.array_equal(saved[k], loaded[k]) for k in saved)
    assert all(tensor.device.type == "cuda" for tensor in tensors_of(on_cuda))
    play(on_cuda, 20)
    assert all(tensor.device.type == "cuda" for tensor in tensors_of(on_cuda))
