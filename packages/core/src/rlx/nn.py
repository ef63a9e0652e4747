"""Torch helpers that several families share: checkpointing modules, optimisers and generators.

Only a family that uses torch imports this module (``pip install "rlx-core[torch]"``);
``import rlx`` and ``rlx list`` never load it. Everything here turns torch state into what
:class:`rlx.protocols.AgentState` holds (NumPy arrays and JSON), and back, without pickle.
"""

from __future__ import annotations

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
) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """An optimiser's state as arrays (its per-parameter tensors) and JSON (its settings)."""
    state = optimizer.state_dict()
    arrays = {
        f"{prefix}/optimizer/{index}/{key}": torch.as_tensor(value).detach().cpu().numpy().copy()
        for index, values in state["state"].items()
        for key, value in values.items()
    }
    return arrays, state["param_groups"]


def load_optimizer_state(
    prefix: str,
    optimizer: torch.optim.Optimizer,
    arrays: dict[str, np.ndarray],
    param_groups: list[dict[str, Any]],
) -> None:
    """Restore what :func:`optimizer_state` saved."""
    marker = f"{prefix}/optimizer/"
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in arrays.items():
        if key.startswith(marker):
            index, name = key[len(marker) :].split("/")
            state.setdefault(int(index), {})[name] = torch.from_numpy(value.copy())
    optimizer.load_state_dict({"state": state, "param_groups": param_groups})


def generator_array(generator: torch.Generator) -> np.ndarray:
    """A torch generator's state as a uint8 array."""
    return generator.get_state().numpy().copy()


def restore_generator_array(generator: torch.Generator, array: np.ndarray) -> None:
    generator.set_state(torch.from_numpy(array.copy()))


def resolve_device(device: str) -> torch.device:
    """``"auto"`` is CUDA when it is available, else the CPU; other names are checked."""
    from rlx.errors import ConfigError

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
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
