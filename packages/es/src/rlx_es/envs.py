"""A deceptive maze for novelty search, and a wrapper that adds a behaviour to ``info``.

``rlx/DeceptiveMaze-v0`` (after Lehman & Stanley 2011 and Conti et al. 2018): a point starts
near the bottom of the unit square, inside a cup-shaped trap wall open only through two narrow
gaps at the floor, and must reach the goal above the cup. Following the reward (minus the final
distance to the goal) leads straight up against the cup's roof, a dead end 0.2 from the goal;
the way out first leads down and sideways, away from the goal. The behaviour characterisation
is the final position (``info["bc"]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.utils import RecordConstructorArgs

#: Wall segments ((x1, y1), (x2, y2)) of the trap: a roof and two sides that stop 0.08 above
#: the floor, leaving the only ways out.
TRAP_WALLS = (
    ((0.15, 0.7), (0.85, 0.7)),
    ((0.15, 0.08), (0.15, 0.7)),
    ((0.85, 0.08), (0.85, 0.7)),
)


def _crosses(p: np.ndarray, q: np.ndarray, a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether segment ``p q`` intersects segment ``a b`` (touching counts)."""

    def orient(u: Any, v: Any, w: Any) -> float:
        return (v[0] - u[0]) * (w[1] - u[1]) - (v[1] - u[1]) * (w[0] - u[0])

    d1, d2 = orient(a, b, p), orient(a, b, q)
    d3, d4 = orient(p, q, a), orient(p, q, b)
    return (d1 * d2 <= 0) and (d3 * d4 <= 0)


class DeceptiveMaze(gymnasium.Env):
    """Point robot in ``[0, 1]^2``: observation = (x, y, elapsed fraction of the horizon),
    action = velocity in ``[-1, 1]^2`` times ``speed``; a move that would cross a wall is not
    made. Reward 0 until the last step, then minus the distance to the goal; reaching the goal
    region (within ``goal_radius`` of the goal, the roof of the trap is 0.2 away) ends the
    episode early with that reward.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, horizon: int = 100, speed: float = 0.03, goal_radius: float = 0.15):
        self.horizon, self.speed, self.goal_radius = horizon, speed, goal_radius
        self.start = np.array([0.5, 0.1])
        self.goal = np.array([0.5, 0.9])
        self.observation_space = spaces.Box(0.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.position = self.start.copy()
        self.t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.position = self.start + self.np_random.uniform(-0.01, 0.01, size=2)
        self.t = 0
        return self._observation(), {"bc": self.position.copy()}

    def _observation(self) -> np.ndarray:
        return np.array([*self.position, self.t / self.horizon], dtype=np.float32)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Move by ``action`` unless a trap wall is in the way; the reward, at the episode's end
        only, is minus the distance to the goal, and ``info["bc"]`` holds the position."""
        move = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0) * self.speed
        target = np.clip(self.position + move, 0.0, 1.0)
        if not any(_crosses(self.position, target, a, b) for a, b in TRAP_WALLS):
            self.position = target
        self.t += 1
        distance = float(np.linalg.norm(self.position - self.goal))
        reached = distance <= self.goal_radius
        truncated = self.t >= self.horizon
        reward = -distance if (reached or truncated) else 0.0
        info = {"bc": self.position.copy(), "distance": distance}
        return self._observation(), reward, reached, truncated and not reached, info


class BehaviourWrapper(gymnasium.Wrapper, RecordConstructorArgs):
    """Puts ``characterise(observation, info)`` into ``info[key]`` at every step and reset.

    The wrapper records its arguments in ``env.spec``, so agents that rebuild environments from
    the spec keep it (the callable must be picklable for the process and Ray backends: a
    module-level function).
    """

    def __init__(
        self,
        env: gymnasium.Env,
        characterise: Callable[[np.ndarray, dict[str, Any]], np.ndarray],
        key: str = "bc",
    ) -> None:
        RecordConstructorArgs.__init__(self, characterise=characterise, key=key)
        gymnasium.Wrapper.__init__(self, env)
        self.characterise, self.key = characterise, key

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset the wrapped environment and add the behaviour characterisation to ``info``."""
        observation, info = self.env.reset(**kwargs)
        info[self.key] = np.asarray(self.characterise(observation, info), dtype=np.float64)
        return observation, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step the wrapped environment and add the behaviour characterisation to ``info``."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        info[self.key] = np.asarray(self.characterise(observation, info), dtype=np.float64)
        return observation, reward, terminated, truncated, info
