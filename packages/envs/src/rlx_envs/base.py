"""What every rlx bandit environment shares: a gymnasium environment with exact regret.

One step is one round: the agent sees a context (the observation), pulls one of
``n_arms`` arms (the action), and receives a reward. ``info`` carries

- ``"expected_reward"``: the expected reward of the pulled arm for this context;
- ``"optimal_reward"``: the expected reward of the best arm for this context;
- ``"regret"``: their difference, exact and never negative,

so that an agent's cumulative regret is exact rather than estimated from noisy rewards.
Episodes never terminate; they are truncated after ``horizon`` rounds.

Randomness: every draw (contexts, rewards, data order) comes from gymnasium's ``np_random``,
seeded by ``reset(seed=...)``. :meth:`BanditEnv.state_dict` captures everything needed to
continue mid-episode exactly, that generator's state included, so it is self-contained;
restoring :func:`rlx.seeding.env_rng_state` as well (as rlx-bandits agents do) is harmless.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium.spaces import Box, Discrete

from rlx.errors import CheckpointError, ConfigError
from rlx.seeding import generator_state, restore_generator


class BanditEnv(gymnasium.Env[np.ndarray, np.int64]):
    """Base class: subclasses draw contexts and rewards and give the expected rewards.

    Implements :class:`rlx.protocols.Bandit` (``n_arms``, ``context_dim``, :meth:`context`,
    :meth:`pull`, :meth:`optimal_reward`) on top of the gymnasium API.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        n_arms: int,
        context_dim: int,
        horizon: int,
        low: float | np.ndarray = -np.inf,
        high: float | np.ndarray = np.inf,
    ) -> None:
        self.n_arms = positive_int("n_arms", n_arms)
        self.context_dim = int(context_dim)
        self.horizon = positive_int("horizon", horizon)
        self.observation_space = Box(low, high, (self.context_dim,), np.float32)
        self.action_space = Discrete(self.n_arms)
        #: Rounds played in this episode.
        self.round = 0
        self._context = np.zeros(self.context_dim, np.float32)
        self._started = False

    # -- implemented by each environment ------------------------------------------------

    def _begin_episode(self, seed: int | None) -> None:
        """Prepare a new episode, after ``np_random`` has been (re)seeded."""

    def _next_context(self) -> np.ndarray:
        """Draw the context of the next round, shape ``(context_dim,)``, float32."""
        raise NotImplementedError

    def expected_rewards(self) -> np.ndarray:
        """The expected reward of every arm for the current context: a new array ``(n_arms,)``."""
        raise NotImplementedError

    def _draw_reward(self, action: int) -> float:
        """A reward of arm ``action`` for the current context."""
        raise NotImplementedError

    def _extra_state(self) -> dict[str, Any]:
        """The environment's own JSON state, beyond the round, context and generator."""
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`_extra_state` returned."""

    # -- gymnasium ----------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode and return its first context."""
        super().reset(seed=seed)
        self._begin_episode(seed)
        self.round = 0
        self._context = self._next_context()
        self._started = True
        return self.context(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, float]]:
        """Pull ``action`` for the current context; the next context comes with the reward."""
        arm = self._check_action(action)
        if not self._started:
            raise gymnasium.error.ResetNeeded(
                f"{type(self).__name__}: call reset() (or load_state_dict()) before step()"
            )
        expected = self.expected_rewards()
        optimal = float(expected.max())
        pulled = float(expected[arm])
        reward = float(self._draw_reward(arm))
        self.round += 1
        self._context = self._next_context()
        info = {"regret": optimal - pulled, "optimal_reward": optimal, "expected_reward": pulled}
        return self.context(), reward, False, self.round >= self.horizon, info

    # -- rlx.protocols.Bandit -----------------------------------------------------------

    def context(self) -> np.ndarray:
        """The current context (a copy), shape ``(context_dim,)``, float32."""
        return self._context.copy()

    def pull(self, action: int) -> float:
        """Pull an arm for the current context and move to the next round; return the reward."""
        return self.step(action)[1]

    def optimal_reward(self) -> float:
        """The expected reward of the best arm for the current context."""
        return float(self.expected_rewards().max())

    # -- exact resume -------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue this episode exactly, as JSON values."""
        return {
            "env": type(self).__name__,
            "round": self.round,
            "started": self._started,
            "context": self._context.tolist(),
            "rng": generator_state(self.np_random),
            **self._extra_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`: later steps match those of the saved environment."""
        if state.get("env") != type(self).__name__:
            raise CheckpointError(
                f"cannot load the state of a {state.get('env')!r} environment into "
                f"{type(self).__name__}"
            )
        context = np.asarray(state["context"], dtype=np.float32)
        if context.shape != (self.context_dim,):
            raise CheckpointError(
                f"{type(self).__name__}: the saved context has shape {context.shape}, this "
                f"environment's contexts have shape ({self.context_dim},)"
            )
        self._load_extra_state(state)
        restore_generator(self.np_random, state["rng"])
        self.round = int(state["round"])
        self._context = context
        self._started = bool(state["started"])

    # -- helpers ------------------------------------------------------------------------

    def _check_action(self, action: Any) -> int:
        array = np.asarray(action)
        if (
            array.shape != ()
            or not np.issubdtype(array.dtype, np.integer)
            or not 0 <= int(array) < self.n_arms
        ):
            raise ValueError(
                f"{type(self).__name__}: action {action!r} is not an arm; arms are the integers "
                f"0..{self.n_arms - 1}"
            )
        return int(array)


def positive_int(name: str, value: Any) -> int:
    """``value`` as an int >= 1, or a ConfigError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)
