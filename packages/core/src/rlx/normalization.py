"""Running statistics for observation and reward normalisation (saved in checkpoints).

Observations are standardised with the running mean and variance of every observation seen
in training, then clipped; rewards are divided by the running standard deviation of the
discounted return (not of the reward), then clipped, which keeps the value targets near
unit scale whatever the reward scale (Engstrom et al. 2020, "Implementation Matters in Deep
Policy Gradients"). Evaluation uses the statistics without updating them.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class RunningMeanStd:
    """Mean and variance of a stream of batches, merged exactly (Chan et al. 1979)."""

    def __init__(self, shape: tuple[int, ...] = ()) -> None:
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 1e-4

    def update(self, batch: np.ndarray) -> None:
        """Merge a batch ``(n, *shape)`` into the mean, variance and count."""
        batch_mean = batch.mean(axis=0)
        batch_var = batch.var(axis=0)
        n = batch.shape[0]
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * (n / total)
        m2 = self.var * self.count + batch_var * n + delta**2 * (self.count * n / total)
        self.var = m2 / total
        self.count = total

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The statistics as float64 arrays ``<prefix>.mean``, ``<prefix>.var`` and
        ``<prefix>.count``, for a checkpoint."""
        return {
            f"{prefix}.mean": np.array(self.mean, np.float64),
            f"{prefix}.var": np.array(self.var, np.float64),
            f"{prefix}.count": np.array(self.count),
        }

    def load(self, arrays: dict[str, np.ndarray], prefix: str) -> None:
        """Take back what :meth:`arrays` returned under ``prefix``."""
        self.mean = np.array(arrays[f"{prefix}.mean"], np.float64)
        self.var = np.array(arrays[f"{prefix}.var"], np.float64)
        self.count = float(arrays[f"{prefix}.count"])


class ObservationNormalizer:
    """``clip((obs - mean) / sqrt(var + eps), -clip, clip)`` with running statistics."""

    def __init__(self, shape: tuple[int, ...], clip: float, epsilon: float = 1e-8) -> None:
        self.stats = RunningMeanStd(shape)
        self.clip = clip
        self.epsilon = epsilon

    def __call__(self, observations: np.ndarray, update: bool) -> np.ndarray:
        if update:
            self.stats.update(observations)
        scaled = (observations - self.stats.mean) / np.sqrt(self.stats.var + self.epsilon)
        return np.clip(scaled, -self.clip, self.clip).astype(np.float32)


class RewardScaler:
    """Divides rewards by the running standard deviation of each environment's discounted return."""

    def __init__(self, n_envs: int, gamma: float, clip: float, epsilon: float = 1e-8) -> None:
        self.stats = RunningMeanStd(())
        self.returns = np.zeros(n_envs, np.float64)
        self.gamma = gamma
        self.clip = clip
        self.epsilon = epsilon

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        self.returns = self.returns * self.gamma + rewards
        self.stats.update(self.returns)
        self.returns[dones] = 0.0
        scaled = rewards / np.sqrt(self.stats.var + self.epsilon)
        return np.clip(scaled, -self.clip, self.clip)

    def state(self, prefix: str) -> dict[str, Any]:
        """The return statistics and each environment's running discounted return, as arrays under
        ``prefix``: what exact resume needs."""
        return {**self.stats.arrays(prefix), f"{prefix}.returns": self.returns.copy()}

    def load(self, arrays: dict[str, np.ndarray], prefix: str) -> None:
        """Take back what :meth:`state` returned under ``prefix``."""
        self.stats.load(arrays, prefix)
        self.returns = arrays[f"{prefix}.returns"].astype(np.float64)
