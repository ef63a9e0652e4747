"""One seed for every random number generator a run touches."""

from __future__ import annotations

import random
import sys
from typing import Any

import numpy as np

#: Seeds are integers in [0, MAX_SEED]: what gymnasium, NumPy's legacy seeding and torch all take.
MAX_SEED = 2**32 - 1


def check_seed(seed: object, what: str = "seed") -> int:
    """``seed`` as an int, or a :class:`~rlx.errors.ConfigError` naming the valid range."""
    from rlx.errors import ConfigError

    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"{what} must be an integer in [0, {MAX_SEED}], got {seed!r}")
    return seed


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


def derive(seed: int, purpose: str, *ids: int) -> int:
    """A seed for one use (``purpose``, plus indices such as a particle or a restart count).

    Built with ``numpy.random.SeedSequence`` from the run's seed, the purpose's bytes and the
    ids, so derived seeds do not collide across runs, purposes or indices the way arithmetic
    such as ``seed + 10_007 * i`` does. Returns an int in ``[0, 2**63)``.
    """
    words = np.frombuffer(purpose.encode().ljust(-(-len(purpose) // 4) * 4, b"\0"), np.uint32)
    entropy = [int(seed) % 2**64, *map(int, words), len(ids), *(int(i) % 2**64 for i in ids)]
    state = np.random.SeedSequence(entropy).generate_state(2, np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def generator_state(generator: np.random.Generator) -> dict[str, Any]:
    """The JSON-ready state of a NumPy generator (for checkpoints)."""
    return dict(generator.bit_generator.state)


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
