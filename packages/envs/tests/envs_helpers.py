"""Helpers shared by the rlx-envs tests (a module of its own: every package has a conftest)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def play(env, actions, reset_seed=None):
    """Step through ``actions`` (resetting without a seed after truncation); the full trace."""
    trace = []
    if reset_seed is not None:
        observation, _ = env.reset(seed=reset_seed)
        trace.append(observation.tolist())
    for action in actions:
        observation, reward, terminated, truncated, info = env.step(int(action))
        trace.append((observation.tolist(), reward, terminated, truncated, info))
        if truncated:
            observation, _ = env.reset()
            trace.append(observation.tolist())
    return trace


def random_actions(n_arms: int, n: int, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).integers(n_arms, size=n)
