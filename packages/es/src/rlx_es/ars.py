"""ARS: Mania, Guy & Recht (2018), "Simple random search provides a competitive approach to
reinforcement learning", NeurIPS (arXiv:1803.07055), versions V1, V2, V1-t and V2-t.

Each iteration ``j`` (the paper's Algorithm 2):

1. draw ``n_delta`` directions ``delta_k ~ N(0, I)`` from one seed and evaluate the mirrored
   pairs ``M + nu delta_k`` and ``M - nu delta_k`` (``nu`` is ``delta_std``), one episode each;
2. rank the directions by ``max(r+_k, r-_k)`` and keep the best ``b`` (``n_top``; all of them
   for V1 and V2, fewer for the ``-t`` variants);
3. step ``M += alpha / (b sigma_R) * sum_k (r+_k - r-_k) delta_k`` over the kept directions,
   ``sigma_R`` the standard deviation of their ``2b`` returns (no step when they are all
   equal: the returns carry no direction);
4. V2 only: the policy reads states normalised as ``(x - mu_j) / sigma_j``, the mean and
   standard deviation (per dimension) of every state the members acted on since training
   began, updated from the iteration's rollouts after the step. Dimensions that never varied
   (standard deviation below ``1e-7``) read 0, as in the authors' code.

The policy is ARS's linear map ``a = M x`` by default (no bias; Box actions are the outputs
clipped to the bounds), or rlx-es's MLP (``hidden_sizes``, with ``with_bias``,
``squash_output`` and ReLU hidden layers by default, as sb3-contrib's) or a user's network.
The population is rlx-es's: described by the centre, ``delta_std`` and a seed, evaluated in
one batched forward pass per step on any backend; the V2 statistics come back from the
evaluators with the returns and are saved for exact resume.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

from rlx.config import hyperparameter
from rlx_es.agent import ESAgent, ESEvaluationConfig
from rlx_es.core import Population, check_fitness_shaping, shaping_function
from rlx_es.evaluation import Episodes, StateStatistics
from rlx_es.policy import VirtualBatchNorm

#: Standard deviations below this read as zero: the dimension is normalised to 0.
MIN_STATE_STD = 1e-7


class ARS:
    """Augmented random search over a flat parameter vector (ask/tell, fitness maximised).

    A generation is ``2 * n_delta`` members in mirrored pairs (member ``2k`` is
    ``theta + delta_std * delta_k``, member ``2k + 1`` its mirror); :meth:`tell` steps along
    the best ``n_top`` directions with the step size divided by their returns' standard
    deviation. ``fitness_shaping`` (a name of :data:`rlx_es.core.FITNESS_SHAPINGS`, a
    ``"package.module:function"`` or a function) maps the fitness first; ``raw`` is the paper's.
    """

    def __init__(
        self,
        centre: np.ndarray,
        n_delta: int,
        n_top: int | None = None,
        delta_std: float = 0.05,
        learning_rate: float = 0.02,
        fitness_shaping: str | Callable[[np.ndarray], np.ndarray] = "raw",
    ) -> None:
        n_top = n_delta if not n_top else n_top
        if not 1 <= n_top <= n_delta:
            raise ValueError(f"n_top must be 1 to n_delta={n_delta}, got {n_top}")
        self.theta = np.array(centre, dtype=np.float64)
        self.n_delta, self.n_top = n_delta, n_top
        self.delta_std, self.learning_rate = delta_std, learning_rate
        #: fitness ``(2 n_delta,)`` -> the values directions are ranked and stepped by
        self.shape_fitness = shaping_function(fitness_shaping)

    @property
    def mean(self) -> np.ndarray:
        """The current policy parameters ``M`` (the policy to deploy)."""
        return self.theta

    def ask(self, seed: int) -> Population:
        """The next generation: ``n_delta`` mirrored pairs ``M +- delta_std * delta_k``, the
        directions drawn from ``seed``."""
        return Population(self.theta.copy(), self.delta_std, seed, 2 * self.n_delta, mirrored=True)

    def top_directions(self, plus: np.ndarray, minus: np.ndarray) -> np.ndarray:
        """Indices of the ``n_top`` directions with the largest ``max(r+, r-)``, best first
        (ties in the order drawn)."""
        return np.argsort(-np.maximum(plus, minus), kind="stable")[: self.n_top]

    def tell(self, population: Population, fitness: np.ndarray) -> dict[str, float]:
        """Step ``M`` along the best directions (see the module's docstring); returns the
        returns' standard deviation, the step size and the norms of the step and of ``M``."""
        values = self.shape_fitness(np.asarray(fitness, dtype=np.float64))
        plus, minus = values[0::2], values[1::2]
        top = self.top_directions(plus, minus)
        sigma = float(np.concatenate([plus[top], minus[top]]).std())
        step_size = self.learning_rate / (self.n_top * sigma) if sigma > 0 else 0.0
        directions = population.noise(2 * top)  # the + members' rows: delta_k itself
        update = step_size * ((plus[top] - minus[top]) @ directions)
        self.theta = self.theta + update
        return {
            "return_std": sigma,
            "step_size": step_size,
            "update_norm": float(np.linalg.norm(update)),
            "parameter_norm": float(np.linalg.norm(self.theta)),
        }

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The parameters ``M`` (the rest is configuration)."""
        return {"theta": self.theta.copy()}, {}

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Inverse of :meth:`state`."""
        self.theta = np.array(arrays["theta"], dtype=np.float64)


@dataclass
class ARSConfig(ESEvaluationConfig):
    """sb3-contrib's ARS defaults (its names where it has the setting): a linear policy from
    zero, 8 directions, step 0.02, noise 0.05; ``version`` picks the paper's V1 or V2 and
    ``n_top`` below ``n_delta`` makes them V1-t and V2-t."""

    n_delta: int = hyperparameter(
        8,
        "directions sampled per iteration; each is played as a mirrored pair (2 n_delta episodes)",
        low=1,
    )
    n_top: int = hyperparameter(
        0,
        "directions the update uses, the best by max(r+, r-) (the paper's b; 0: all n_delta, "
        "V1/V2; fewer: V1-t/V2-t)",
        low=0,
    )
    learning_rate: float = hyperparameter(
        0.02,
        "step size alpha, divided by n_top times the standard deviation of the returns used",
        low=0,
        low_open=True,
        search=(1e-3, 0.1),
    )
    delta_std: float = hyperparameter(
        0.05,
        "standard deviation nu of the parameter noise along each direction",
        low=0,
        low_open=True,
        search=(0.005, 0.3),
    )
    version: str = hyperparameter(
        "v1",
        "v1: the policy reads the raw states; v2: states normalised by the running mean and "
        "standard deviation of every state visited in training (saved with the policy)",
        choices=("v1", "v2"),
    )
    zero_policy: bool = hyperparameter(
        True, "start from all-zero parameters (the paper's); false: the network's initialisation"
    )
    alive_bonus_offset: float = hyperparameter(
        0.0,
        "added to every step's reward in the returns the update uses, to cancel a per-step "
        "survival bonus (the paper's -1 on Hopper, Walker2d, Ant); logged returns are the "
        "environment's",
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (), "units of each hidden layer of the built-in policy (empty: ARS's linear policy)"
    )
    activation: str = hyperparameter(
        "relu",
        "activation of the built-in policy's hidden layers (sb3-contrib's MlpPolicy: relu)",
        choices=("relu", "tanh", "elu"),
    )
    with_bias: bool = hyperparameter(
        False, "the built-in policy's layers add a searched bias (ARS's linear policy: none)"
    )
    squash_output: bool = hyperparameter(
        False,
        "Box actions are tanh outputs scaled to the bounds; false: the outputs clipped to the "
        "bounds (ARS's linear policy)",
    )
    fitness_shaping: str = hyperparameter(
        "raw",
        "what the directions are ranked and stepped by: raw returns (the paper's), "
        "centered_ranks, z_scores, nes_utilities, or 'package.module:function' mapping the "
        "float64 returns (2 n_delta,) to one of the same shape",
        imports_code=True,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_fitness_shaping(self.fitness_shaping)
        if self.n_top > self.n_delta:
            raise ValueError(
                f"n_top={self.n_top} is more than the n_delta={self.n_delta} directions sampled: "
                f"use 1 to {self.n_delta} (0: all of them)"
            )
        if self.version == "v2" and self.rollout:
            raise ValueError(
                "version=v2 normalises the states the policy reads, which a run of your own "
                "rollouts does not show rlx-es: use version=v1 and normalise in your module"
            )
        if self.version == "v2" and self.virtual_batch_norm:
            raise ValueError(
                "version=v2 normalises the states by their running statistics; "
                "virtual_batch_norm would normalise them a second time: set one of them"
            )


class ARSAgent(ESAgent):
    """ARS (Mania et al. 2018) on a gymnasium environment; ``act`` uses ``M`` and, for V2,
    the state statistics gathered so far."""

    Config = ARSConfig
    name = "ars"

    def __init__(self, env: gymnasium.Env, config: Any = None, seed: int = 0) -> None:
        super().__init__(env, config, seed)
        #: V2: the count, mean and spread of every state the members acted on so far.
        self.states: StateStatistics | None = None
        if self.config.version == "v2":
            self.states = StateStatistics.empty(self.policy.obs_dim)
            self.policy.normalizer = VirtualBatchNorm(dim=self.policy.obs_dim)
            self.settings.state_statistics = True  # before the backend is made, on first use
            self._normalize()

    @property
    def population_size(self) -> int:
        """Members per generation: ``2 * n_delta`` (each direction and its mirror)."""
        return 2 * int(self.config.n_delta)

    def policy_options(self) -> dict[str, Any]:
        """ARS's linear policy by default: no bias and clipped (not squashed) Box actions;
        the configured hidden activation."""
        c = self.config
        return {"bias": c.with_bias, "squash": c.squash_output, "activation": c.activation}

    def build_strategy(self, initial: np.ndarray) -> ARS:
        """An :class:`ARS` from zero (``zero_policy``) or from the policy's initialisation."""
        c = self.config
        start = np.zeros_like(initial) if c.zero_policy else initial
        return ARS(start, c.n_delta, c.n_top, c.delta_std, c.learning_rate, c.fitness_shaping)

    def learn(self, population: Population, episodes: Episodes) -> dict[str, float]:
        """Step ``M`` on the returns plus ``alive_bonus_offset`` per step, then (V2) merge the
        generation's states into the statistics the next generation and ``act`` read."""
        offset = self.config.alive_bonus_offset
        metrics = self.strategy.tell(population, episodes.returns + offset * episodes.lengths)
        if self.states is not None and episodes.states is not None:
            self.states = self.states.merged(episodes.states)
            self._normalize()
            metrics["state_count"] = self.states.count
        return metrics

    def _normalize(self) -> None:
        """Point the policy's normaliser at the statistics gathered so far."""
        assert self.states is not None
        std = self.states.std
        self.policy.normalizer.mean = self.states.mean.astype(np.float32)
        self.policy.normalizer.std = np.where(std < MIN_STATE_STD, np.inf, std).astype(np.float32)
        self._acting = None

    def strategy_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``M`` and, for V2, the state statistics."""
        arrays, meta = self.strategy.state()
        if self.states is not None:
            arrays["states/mean"] = self.states.mean.copy()
            arrays["states/m2"] = self.states.m2.copy()
            meta = {**meta, "state_count": self.states.count}
        return arrays, meta

    def load_strategy_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Restore what :meth:`strategy_state` returned, the normaliser with it."""
        self.strategy.load_state(arrays, meta)
        if self.states is not None:
            self.states = StateStatistics(
                float(meta["state_count"]),
                np.array(arrays["states/mean"], dtype=np.float64),
                np.array(arrays["states/m2"], dtype=np.float64),
            )
            self._normalize()
