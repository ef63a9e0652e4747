"""Vector environments and the bookkeeping that runs on between learning iterations.

:func:`make_vector_env` builds ``n`` copies of an environment with gymnasium's ``make_vec``.
:class:`VectorRunner` steps them and owns what lives across iterations: the last
observations, which environments reset at the next step, the returns and lengths of the
unfinished episodes, and exact snapshots of all of it (:mod:`rlx.envstate`). It knows
nothing of buffers: a rollout or replay buffer stores what :meth:`VectorRunner.step` returns.

gymnasium's default ``NEXT_STEP`` autoreset: the step that ends an episode returns the
episode's final observation, and the next call to ``step`` only resets that environment
(reward 0, the action ignored). That reset step is no transition: :meth:`VectorRunner.step`
reports it with ``valid = False`` and leaves it out of the step count and the episode
statistics. The final observation of a truncated episode is therefore the observation its
last transition returned, the bootstrap a truncated step needs.

The worker processes of ``async`` vector environments ignore SIGINT: a terminal's Ctrl-C
reaches the whole process group, and only the main process should act on it (the trainer
finishes the iteration and saves).
"""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx import envstate
from rlx.errors import ConfigError
from rlx.seeding import derive


def make_vector_env(env: Any, n_envs: int, vectorization: str) -> Any:
    """``n_envs`` copies of ``env`` (from its spec) with gymnasium's NEXT_STEP autoreset.

    ``vectorization`` is ``auto`` (gymnasium's own vectorised implementation when the
    environment has one, such as CartPole, and no wrappers, else ``sync``), ``sync`` or
    ``async`` (worker processes that ignore SIGINT). Wrappers recorded in ``env.spec`` are
    applied to every copy.
    """
    import gymnasium as gym

    if env.spec is None:
        raise ConfigError(
            "vector environments are built from env.spec; make the environment with "
            "gymnasium.make (or rlx.make_env), or register it first"
        )
    if vectorization == "auto" and env.spec.additional_wrappers:
        vectorization = "sync"  # a vectorised implementation takes no wrappers
    try:
        vector = _make_vec(env, n_envs, vectorization)
    except ValueError as exc:
        if "RecordConstructorArgs" not in str(exc):
            raise
        raise ConfigError(
            f"{exc} Vector environments rebuild every wrapper from the environment's spec: make "
            "it inherit gymnasium.utils.RecordConstructorArgs (as gymnasium's own wrappers do)"
        ) from None
    autoreset = vector.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if autoreset != gym.vector.AutoresetMode.NEXT_STEP:
        vector.close()
        raise ConfigError(
            f"rlx needs vector environments with NEXT_STEP autoreset, got {autoreset}"
        )
    return vector


def _make_vec(env: Any, n_envs: int, vectorization: str) -> Any:
    import gymnasium as gym

    if vectorization == "async":
        from gymnasium.vector.async_vector_env import _async_worker

        vector = gym.make_vec(
            env.spec,
            num_envs=n_envs,
            vectorization_mode="async",
            vector_kwargs={"worker": functools.partial(_ignoring_sigint, _async_worker)},
        )
        return vector
    mode = None if vectorization == "auto" else vectorization
    return gym.make_vec(env.spec, num_envs=n_envs, vectorization_mode=mode)


def _ignoring_sigint(worker: Callable[..., None], *args: Any) -> None:
    """Run gymnasium's async ``worker`` (the process's target) with SIGINT ignored first.

    Ctrl-C is the main process's to handle; a worker that died of it mid-step would end the
    run with an error instead of a saved checkpoint. Module-level, so "spawn" can pickle it.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker(*args)


@dataclass
class VectorStep:
    """What one step of every environment gave, each array with leading axis ``n_envs``.

    ``next_observations`` are what the environments returned (a final observation where an
    episode ended); ``rewards`` are float64; ``valid`` is False for the reset steps of
    NEXT_STEP autoreset, which are no transitions.
    """

    next_observations: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated


class VectorRunner:
    """Steps a vector environment and keeps the state that outlives one iteration.

    Finished episodes accumulate in :attr:`finished_returns` and :attr:`finished_lengths`
    until :meth:`pop_finished` takes them. :meth:`close` releases the environments (the
    worker processes of async ones) and keeps a snapshot; the next use reopens them where
    they were (async ones restart their episodes).
    """

    def __init__(
        self,
        env: Any,
        n_envs: int,
        vectorization: str,
        seed: int,
        transform: Callable[[Any], np.ndarray] | None = None,
    ) -> None:
        self.n_envs = n_envs
        #: Applied to every batch of observations the environments return (an
        #: :class:`rlx.observations.ObservationCoder`'s ``pack`` for Dict or Discrete ones).
        self.transform = transform
        self._make = functools.partial(make_vector_env, env, n_envs, vectorization)
        self._reopen_seed = derive(seed, "reopen environments")
        self._envs: Any = self._make()
        self._closed: tuple[dict[str, np.ndarray], dict[str, Any]] | None = None
        self.observations = self._observed(self._envs.reset(seed=seed)[0])
        self.autoreset = np.zeros(n_envs, bool)
        self.episode_returns = np.zeros(n_envs)
        self.episode_lengths = np.zeros(n_envs, np.int64)
        self.finished_returns: list[float] = []
        self.finished_lengths: list[int] = []

    def step(self, actions: Any) -> VectorStep:
        """Step every environment with ``actions`` (what the environments accept)."""
        next_observations, rewards, terminated, truncated, _ = self.envs.step(actions)
        next_observations = self._observed(next_observations)
        valid = ~self.autoreset
        rewards = np.asarray(rewards, np.float64)
        self.episode_returns += rewards
        self.episode_lengths += valid
        done = terminated | truncated
        if done.any():
            for i in np.flatnonzero(done):
                self.finished_returns.append(float(self.episode_returns[i]))
                self.finished_lengths.append(int(self.episode_lengths[i]))
            self.episode_returns[done] = 0.0
            self.episode_lengths[done] = 0
        self.autoreset = done
        self.observations = next_observations
        return VectorStep(next_observations, rewards, terminated, truncated, valid)

    def _observed(self, observations: Any) -> Any:
        return observations if self.transform is None else self.transform(observations)

    def pop_finished(self) -> tuple[list[float], list[int]]:
        """Returns and lengths of the episodes finished since the last call."""
        finished = self.finished_returns, self.finished_lengths
        self.finished_returns, self.finished_lengths = [], []
        return finished

    # -- checkpoints ----------------------------------------------------------------------

    def state(self, prefix: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Arrays and JSON for an exact resume (the environments' snapshot included)."""
        arrays: dict[str, np.ndarray] = {
            f"{prefix}/observations": np.array(self.observations),
            f"{prefix}/autoreset": self.autoreset.copy(),
            f"{prefix}/episode_returns": self.episode_returns.copy(),
            f"{prefix}/episode_lengths": self.episode_lengths.copy(),
        }
        env_arrays, env_meta = envstate.snapshot(self.envs)
        arrays.update({f"{prefix}/envs/{key}": value for key, value in env_arrays.items()})
        return arrays, {"envs": env_meta}

    def load(
        self, arrays: dict[str, np.ndarray], meta: dict[str, Any], prefix: str, seed: int
    ) -> None:
        """Restore :meth:`state`; environments that cannot be restored (asynchronous ones)
        restart their episodes, reset with ``seed``."""
        if meta["envs"] is None or not envstate.can_restore(self.envs):
            self.observations = self._observed(self.envs.reset(seed=seed)[0])
            self.autoreset[:] = False
            self.episode_returns[:] = 0.0
            self.episode_lengths[:] = 0
            return
        marker = f"{prefix}/envs/"
        envstate.restore(
            self.envs,
            {k[len(marker) :]: v for k, v in arrays.items() if k.startswith(marker)},
            meta["envs"],
        )
        self.observations = arrays[f"{prefix}/observations"].copy()
        self.autoreset = arrays[f"{prefix}/autoreset"].copy()
        self.episode_returns = arrays[f"{prefix}/episode_returns"].copy()
        self.episode_lengths = arrays[f"{prefix}/episode_lengths"].copy()

    @property
    def envs(self) -> Any:
        """The vector environment, reopened where it was if :meth:`close` released it."""
        if self._envs is None:
            self._envs = self._make()
            if self._closed is not None:
                arrays, meta = self._closed
                self._closed = None
                self.load(arrays, meta, "closed", self._reopen_seed)
        return self._envs

    def close(self) -> None:
        if self._envs is not None:
            self._closed = self.state("closed")
            self._envs.close()
            self._envs = None
