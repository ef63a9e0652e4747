"""Torch state to checkpoint arrays and back, devices and thread counts.

Everything here turns torch state into what :class:`rlx.protocols.AgentState` holds (NumPy
arrays and JSON), and back, without pickle.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn


def module_arrays(prefix: str, module: nn.Module) -> dict[str, np.ndarray]:
    """A module's parameters and buffers as arrays named ``prefix/<name>``."""
    return {
        f"{prefix}/{name}": tensor.detach().cpu().numpy().copy()
        for name, tensor in module.state_dict().items()
    }


def load_module_arrays(prefix: str, module: nn.Module, arrays: dict[str, np.ndarray]) -> None:
    """Restore what :func:`module_arrays` saved (onto the module's own device)."""
    module.load_state_dict(
        {name: torch.from_numpy(arrays[f"{prefix}/{name}"].copy()) for name in module.state_dict()}
    )


def optimizer_state(
    prefix: str, optimizer: torch.optim.Optimizer
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """An optimiser's state: arrays (its per-parameter tensors) and JSON (settings, scalars).

    Works for any optimiser whose ``state_dict`` follows torch's layout; per-parameter values
    that are not tensors (a ``None`` momentum buffer, a Python step count) go to the JSON.
    """
    state = optimizer.state_dict()
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    for index, values in state["state"].items():
        for key, value in values.items():
            if torch.is_tensor(value):
                arrays[f"{prefix}/optimizer/{index}/{key}"] = value.detach().cpu().numpy().copy()
            else:
                scalars[f"{index}/{key}"] = value
    return arrays, {"param_groups": state["param_groups"], "scalars": scalars}


def load_optimizer_state(
    prefix: str,
    optimizer: torch.optim.Optimizer,
    arrays: dict[str, np.ndarray],
    meta: dict[str, Any],
) -> None:
    """Restore what :func:`optimizer_state` saved."""
    marker = f"{prefix}/optimizer/"
    state: dict[int, dict[str, Any]] = {}
    for key, value in arrays.items():
        if key.startswith(marker):
            index, name = key[len(marker) :].split("/")
            state.setdefault(int(index), {})[name] = torch.from_numpy(value.copy())
    for key, value in meta["scalars"].items():
        index, name = key.split("/", 1)
        state.setdefault(int(index), {})[name] = value
    # JSON turns tuples (Adam's betas) into lists; torch wants them back.
    groups = [
        {k: tuple(v) if k == "betas" else v for k, v in group.items()}
        for group in meta["param_groups"]
    ]
    optimizer.load_state_dict({"state": state, "param_groups": groups})


def generator_array(generator: torch.Generator) -> np.ndarray:
    """A torch generator's state as a uint8 array."""
    return generator.get_state().numpy().copy()


def restore_generator_array(
    generator: torch.Generator, array: np.ndarray, reseed: int | None = None
) -> bool:
    """Restore what :func:`generator_array` saved; returns whether the state was restored.

    A generator's state is specific to its device type (5,056 bytes on the CPU, 16 on
    CUDA). A state saved on another device type cannot be restored: with ``reseed`` the
    generator is seeded with it instead (deterministic, but not the draws an uninterrupted
    run would have made) and a warning says so; without, it is a ``CheckpointError``.
    """
    own = generator.get_state()
    if array.dtype == np.uint8 and array.shape == tuple(own.shape):
        generator.set_state(torch.from_numpy(array.copy()))
        return True
    from rlx.errors import CheckpointError

    where = f"a {array.size}-byte torch generator state, saved on another device type"
    if reseed is None:
        raise CheckpointError(
            f"{where}, cannot be restored on {generator.device.type} ({own.numel()} bytes)"
        )
    warnings.warn(
        f"{where}, cannot be restored on {generator.device.type}: the generator is seeded "
        "anew from the run's seed and step count; the run goes on deterministically but does "
        "not draw what it would have drawn on the device it was saved on",
        RuntimeWarning,
        stacklevel=2,
    )
    generator.manual_seed(reseed)
    return False


def modules_state(
    modules: dict[str, nn.Module],
) -> dict[str, np.ndarray]:
    """The arrays of several named modules (the policy part of a torch agent)."""
    arrays: dict[str, np.ndarray] = {}
    for name, module in modules.items():
        arrays.update(module_arrays(name, module))
    return arrays


def load_modules_state(modules: dict[str, nn.Module], arrays: dict[str, np.ndarray]) -> None:
    """Restore what :func:`modules_state` saved."""
    for name, module in modules.items():
        load_module_arrays(name, module, arrays)


def optimizers_state(
    optimizers: dict[str, torch.optim.Optimizer],
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and JSON of several named optimisers (part of a torch agent's resume state)."""
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {}
    for name, optimizer in optimizers.items():
        optimizer_arrays, meta[name] = optimizer_state(name, optimizer)
        arrays.update(optimizer_arrays)
    return arrays, meta


def load_optimizers_state(
    optimizers: dict[str, torch.optim.Optimizer],
    arrays: dict[str, np.ndarray],
    meta: dict[str, Any],
) -> None:
    """Restore what :func:`optimizers_state` saved."""
    for name, optimizer in optimizers.items():
        load_optimizer_state(name, optimizer, arrays, meta[name])


def set_torch_threads(threads: int) -> None:
    """Use ``threads`` CPU threads in torch (0 leaves torch's default).

    Small networks are fastest on one thread; several processes side by side each want one.
    """
    if threads:
        torch.set_num_threads(threads)


#: ``auto``'s threshold: multiply-adds of one minibatch's forward pass from which an MLP agent
#: goes to CUDA. Below it a GPU loses to one CPU thread, kernel launches and transfers costing
#: more than the arithmetic: PPO at its defaults (64-unit layers, minibatches of 64, some
#: 3e5 multiply-adds) ran 2.5x slower on an H100 than on the CPU, and 6.5x faster with 64
#: environments, minibatches of 4,096 and 256-unit layers (about 6e8). The threshold sits
#: between, where a single-threaded CPU needs about a millisecond per forward pass.
AUTO_CUDA_MIN_WORK = 10_000_000


def mlp_work(batch: int, sizes: Sequence[int], networks: int = 1) -> int:
    """Multiply-adds of one forward pass of ``networks`` MLPs with layer sizes ``sizes``
    (input, hidden..., output) on ``batch`` rows: what ``auto`` weighs."""
    return batch * networks * sum(a * b for a, b in itertools.pairwise(sizes))


def resolve_device(device: str, image: bool = False, work: int = 0) -> torch.device:
    """The torch device a ``device`` setting names; other names than these are checked.

    ``"auto"`` is CUDA when torch sees a CUDA device and the network is worth it: a CNN
    over image observations (``image``), or MLPs whose minibatch forward pass takes at least
    :data:`AUTO_CUDA_MIN_WORK` multiply-adds (``work``, see :func:`mlp_work`); else the CPU.
    """
    from rlx.errors import ConfigError

    if device == "auto":
        worth_it = image or work >= AUTO_CUDA_MIN_WORK
        return torch.device("cuda" if worth_it and torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as exc:
        raise ConfigError(f"device {device!r} is not a torch device ({exc})") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"device {device!r} asks for CUDA, but torch sees no CUDA device here; "
            "use device=cpu or device=auto"
        )
    return resolved


def host_scalars(values: dict[str, Any]) -> dict[str, float]:
    """Metrics as floats, in their order; the tensors among them (0-d, on one device) are
    read from the device in one transfer."""
    tensors = {key: value for key, value in values.items() if isinstance(value, torch.Tensor)}
    read: dict[str, float] = {}
    if tensors:
        stacked = torch.stack([value.detach().reshape(()).float() for value in tensors.values()])
        read = dict(zip(tensors, stacked.tolist(), strict=True))
    return {key: read[key] if key in read else float(value) for key, value in values.items()}
