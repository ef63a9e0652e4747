"""One seed for every random number generator a run touches."""

from __future__ import annotations

import random
import sys
from typing import Any

import numpy as np


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global RNG and torch (when a family has imported it).

    torch is seeded only if it is already imported: rlx-core never imports it itself.
    Agents should draw from their own ``np.random.Generator`` built from the same seed.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


def agent_generator(seed: int, stream: int = 0) -> np.random.Generator:
    """A NumPy generator for an agent, independent of its environment's.

    gymnasium seeds an environment with ``np.random.default_rng(seed)``: an agent that did
    the same would draw the very numbers the environment draws (its exploration would be
    tied to the environment's noise). ``stream`` separates several generators of one agent.
    """
    return np.random.default_rng([seed, 0x61676E74, stream])


def generator_state(generator: np.random.Generator) -> dict[str, Any]:
    """The JSON-ready state of a NumPy generator (for checkpoints)."""
    return generator.bit_generator.state


def restore_generator(generator: np.random.Generator, state: dict[str, Any]) -> None:
    """Put a generator back into a state from :func:`generator_state`."""
    generator.bit_generator.state = state


def env_rng_state(env: Any) -> dict[str, Any]:
    """The state of a gymnasium environment's RNGs (its own and its action space's)."""
    return {
        "env": generator_state(env.unwrapped.np_random),
        "action_space": generator_state(env.action_space.np_random),
    }


def restore_env_rng(env: Any, state: dict[str, Any]) -> None:
    """Restore :func:`env_rng_state`; the next ``reset()`` then continues the saved sequence."""
    restore_generator(env.unwrapped.np_random, state["env"])
    restore_generator(env.action_space.np_random, state["action_space"])
