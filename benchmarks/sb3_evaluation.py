"""Stable-Baselines3 models evaluated the way rlx evaluates its agents (for the benchmarks).

``rlx.evaluation.evaluate`` plays both libraries' greedy policies on the same evaluation seeds;
:class:`Policy` gives an SB3 model rlx's ``act`` (with its ``VecNormalize`` statistics, frozen,
when it has them), and :func:`callback` evaluates it every ``every`` steps during ``learn``.
"""

from __future__ import annotations

from typing import Any


class Policy:
    """An SB3 model as the ``act`` that ``rlx.evaluation.evaluate`` calls."""

    def __init__(self, model: Any, normalizer: Any = None) -> None:
        self.model, self.normalizer = model, normalizer

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        if self.normalizer is not None:
            observation = self.normalizer.normalize_obs(observation)
        return self.model.predict(observation, deterministic=deterministic)[0]


def callback(env: Any, every: int, steps: int, episodes: int, seed: int, normalizer: Any = None):
    """An SB3 callback that evaluates on ``env`` at the first step past each multiple of
    ``every`` below ``steps``; ``measure()`` evaluates once more (at the end, as an rlx run
    does), and ``evaluations`` holds ``(step, mean return)`` pairs."""
    from stable_baselines3.common.callbacks import BaseCallback

    from rlx.evaluation import evaluate

    class Evaluate(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next = every
            self.evaluations: list[tuple[int, float]] = []

        def measure(self) -> None:
            result = evaluate(Policy(self.model, normalizer), env, episodes, seed=seed)
            self.evaluations.append((int(self.num_timesteps), result.mean_return))

        def _on_step(self) -> bool:
            if self.next <= self.num_timesteps < steps:
                self.measure()
                while self.next <= self.num_timesteps:
                    self.next += every
            return True

    return Evaluate()
