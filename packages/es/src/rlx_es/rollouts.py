"""estorch's shape of the API: a user's policy module and rollout class, no gymnasium environment.

A user writes a ``torch.nn.Module`` (the policy) and a class whose ``rollout(policy)`` plays
the policy however it likes and returns its return, or ``(return, behaviour)`` for the
novelty agents. The ES agents search the module's parameters when the ``rollout`` setting
names that class and ``network`` the module's class (``'package.module:Class'`` both, built
as ``Class(**rollout_kwargs)`` and ``Class(**network_kwargs)``).

Such a run trains on :data:`ROLLOUT_ENV_ID`, a stand-in environment registered by this
plugin, so that it goes through the same Trainer, run directory, evaluations, checkpoints and
exact resume as any other. An episode of it is one rollout played by the agent: its
observation is the rollout's seed and the agent's action the return it got, which the
environment pays as its reward. The population's rollouts play no environment at all.

Every rollout runs under ``torch.no_grad()`` with Python's, NumPy's and torch's global
generators seeded from the member's seed (and restored afterwards); a ``rollout`` that takes
a ``seed`` keyword receives it too (to reset its own environment with). A generation then
depends only on its seeds, on any backend, and a resumed run continues exactly.
"""

from __future__ import annotations

import copy
import inspect
import random
from collections.abc import Iterator
from contextlib import contextmanager
from numbers import Real
from typing import Any

import gymnasium
import numpy as np
import torch

from rlx.config import load_setting
from rlx.errors import ConfigError, RlxError
from rlx.nn.layers import load_network

#: The environment id of runs whose agent plays the user's rollouts.
ROLLOUT_ENV_ID = "rlx/Rollout-v0"


class RolloutEnv(gymnasium.Env):
    """The stand-in environment of a run of a user's rollouts (:data:`ROLLOUT_ENV_ID`).

    One step an episode: the observation ``(1,)`` int64 is a seed drawn from the reset's seed,
    the action ``(1,)`` float64 is the return of the rollout the agent played with it, paid
    back as the reward. Evaluations of the trainer thus report the centre's rollouts.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's own attribute)

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(0, 2**31 - 1, shape=(1,), dtype=np.int64)
        self.action_space = gymnasium.spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float64)
        self._observation = np.zeros(1, dtype=np.int64)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """A new rollout: its seed, drawn from ``seed``."""
        super().reset(seed=seed)
        self._observation = np.array([self.np_random.integers(2**31)], dtype=np.int64)
        return self._observation.copy(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """The rollout's return ``action[0]`` as the reward; the episode ends."""
        reward = float(np.asarray(action, dtype=np.float64).reshape(-1)[0])
        return self._observation.copy(), reward, True, False, {}


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Python's, NumPy's and torch's (CPU) global generators seeded with ``seed`` inside, and
    given back their states afterwards."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


class RolloutPolicy:
    """The user's policy module and rollout object: a member's parameters in, its rollout's
    return (and behaviour) out.

    ``network`` is built as ``Class(**network_kwargs)`` under torch's generator seeded with
    ``seed`` (its initial weights are part of the run's seed); its parameters, in
    ``parameters()`` order, are the flat vector the strategy searches, its buffers stay as
    built. ``rollout`` is built as ``Class(**rollout_kwargs)`` once per process.
    """

    #: No observation normalisation: the rollout feeds the module itself.
    normalizer = None

    def __init__(
        self,
        network: str,
        rollout: str,
        seed: int,
        network_kwargs: dict[str, Any] | None = None,
        rollout_kwargs: dict[str, Any] | None = None,
    ) -> None:
        load_setting(network, "network")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.module = load_network(network, what="network", **(network_kwargs or {}))
        self.parameters = list(self.module.parameters())
        if not self.parameters:
            raise ConfigError(f"network {network!r} has no parameters for the strategy to search")
        self.n_params = sum(p.numel() for p in self.parameters)
        self.target = rollout
        cls = load_setting(rollout, "rollout")
        try:
            self.player = cls(**(rollout_kwargs or {}))
        except TypeError as exc:
            raise ConfigError(
                f"rollout {rollout!r} rejected its arguments {rollout_kwargs or {}}: {exc}"
            ) from exc
        play = getattr(self.player, "rollout", None)
        if not callable(play):
            raise ConfigError(
                f"rollout {rollout!r} must be a class with a method rollout(policy) returning "
                f"the return (or (return, behaviour)); {type(self.player).__name__} has none"
            )
        self._play = play
        try:
            self._takes_seed = "seed" in inspect.signature(play).parameters
        except (TypeError, ValueError):  # a builtin without a signature
            self._takes_seed = False

    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        """The module's own initial parameters ``(n_params,)`` as float64 (``rng`` unused: the
        module was built under a seed drawn from the run's seed)."""
        return np.concatenate(
            [p.detach().cpu().double().reshape(-1).numpy() for p in self.parameters]
        )

    @torch.no_grad()
    def policy_with(self, parameters: np.ndarray) -> torch.nn.Module:
        """The module, its parameters set to ``parameters`` ``(n_params,)`` (in place)."""
        flat = torch.as_tensor(np.asarray(parameters, dtype=np.float64))
        offset = 0
        for p in self.parameters:
            p.copy_(flat[offset : offset + p.numel()].reshape(p.shape).to(p.dtype))
            offset += p.numel()
        return self.module

    def play(self, parameters: np.ndarray, seed: int) -> tuple[float, np.ndarray | None]:
        """One rollout of the member ``parameters`` under ``seed``: its return and behaviour
        (None when the rollout returned a return alone)."""
        module = self.policy_with(parameters)
        with seeded(seed), torch.no_grad():
            result = self._play(module, seed=seed) if self._takes_seed else self._play(module)
        behaviour = None
        if isinstance(result, tuple) and len(result) == 2:
            result, behaviour = result
        if isinstance(result, torch.Tensor) and result.numel() == 1:
            result = result.item()
        if isinstance(result, np.ndarray) and result.size == 1:
            result = result.item()
        if not isinstance(result, Real) or isinstance(result, bool):
            raise RlxError(
                f"rollout {self.target!r}: rollout(policy) must return the return, a number, "
                f"or (return, behaviour); got {type(result).__name__}"
            )
        if behaviour is not None:
            behaviour = np.asarray(
                behaviour.detach().cpu() if isinstance(behaviour, torch.Tensor) else behaviour,
                dtype=np.float64,
            ).ravel()
        return float(result), behaviour

    def module_copy(self, parameters: np.ndarray) -> torch.nn.Module:
        """A copy of the module with ``parameters``, the user's to keep (the agent's own module
        is overwritten by every rollout)."""
        return copy.deepcopy(self.policy_with(parameters))
