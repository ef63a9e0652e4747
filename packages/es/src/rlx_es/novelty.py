"""NS-ES, NSR-ES and NSRA-ES: OpenAI-ES guided by novelty.

Conti, Madhavan, Petroski Such, Lehman, Stanley & Clune (2018), "Improving Exploration in
Evolution Strategies for Deep Reinforcement Learning via a Population of Novelty-Seeking
Agents", NeurIPS. Each episode has a behaviour characterisation ``b`` (a vector: the final
position in a maze, for example). Each generation (Algorithm 1-3 of the paper):

1. pick one centre of the meta-population ``theta_1..theta_M`` with probability proportional
   to its novelty ``N(b(theta_m), A)``: the mean distance to its ``k`` nearest neighbours in
   the archive ``A``;
2. evaluate mirrored perturbations of that centre (returns and behaviours);
3. shape the fitness of each member: NS-ES ranks novelty alone; NSR-ES averages the ranks of
   novelty and return; NSRA-ES weighs them ``w * rank(return) + (1 - w) * rank(novelty)``.
   The paper's ranks are centered ranks, the default of ``fitness_shaping``; another shaping
   is applied alike to novelty and return before they are mixed (``raw`` mixes their units);
4. take an OpenAI-ES step of that centre with its own optimiser, evaluate the new centre for
   one episode and add its behaviour to the archive.

NSRA-ES adapts ``w``: it starts at ``initial_weight``; when the best centre return has not
improved for ``patience`` generations, ``w`` drops by ``weight_delta`` (more novelty, at least
``min_weight``); when it improves, ``w`` rises by ``weight_delta`` (at most 1).

``act`` uses the centre with the best return of its latest evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rlx.config import hyperparameter
from rlx.protocols import Iteration
from rlx_es.agent import ESAgent
from rlx_es.core import Population, novelty
from rlx_es.openai_es import OpenAIES, OpenAIESConfig


@dataclass
class NoveltyConfig(OpenAIESConfig):
    """OpenAI-ES hyperparameters plus the archive, the meta-population and the behaviour."""

    meta_population_size: int = hyperparameter(
        3, "centres of the meta-population, each with its own optimiser", low=1
    )
    k_nearest: int = hyperparameter(10, "neighbours in the archive that define novelty", low=1)
    behaviour_source: str = hyperparameter(
        "auto",
        "info: info[behaviour_key] at the episode's end (required); final_observation; "
        "auto: info when present, else the final observation",
        choices=("auto", "info", "final_observation"),
    )
    behaviour_key: str = hyperparameter("bc", "info key holding the behaviour characterisation")
    initial_weight: float = hyperparameter(
        1.0, "NSRA-ES: initial weight of the return (1 - weight goes to novelty)", low=0, high=1
    )
    min_weight: float = hyperparameter(0.0, "NSRA-ES: lowest weight of the return", low=0, high=1)
    weight_delta: float = hyperparameter(
        0.05, "NSRA-ES: change of the weight per adaptation", low=0, high=1
    )
    patience: int = hyperparameter(
        10, "NSRA-ES: generations without a better centre return before the weight drops", low=1
    )


class NoveltySearchAgent(ESAgent):
    """Base of NS-ES, NSR-ES and NSRA-ES; ``mode`` says how fitness mixes novelty and return."""

    Config = NoveltyConfig
    mode: ClassVar[str] = "ns"

    def behaviour_source(self) -> str | None:
        """The ``behaviour_source`` setting: novelty needs a behaviour for every episode."""
        return self.config.behaviour_source

    def memory_estimate(self, n_params: int) -> dict[str, tuple[int, str]]:
        """The population and environments, and each centre of the meta-population with its
        optimiser (a few float64 vectors of ``n_params``)."""
        parts = super().memory_estimate(n_params)
        centres = self.config.meta_population_size
        parts[f"{centres:,} centres (meta_population_size) of {n_params:,} parameters"] = (
            4 * centres * n_params * 8,
            "lower meta_population_size",
        )
        return parts

    def build_strategy(self, initial: np.ndarray) -> OpenAIES:
        """The meta-population: ``meta_population_size`` :class:`~rlx_es.openai_es.OpenAIES`
        centres, the first at ``initial`` and the others at fresh initial weights, and an empty
        archive; returns the first centre."""
        c = self.config
        init_rng = np.random.default_rng([self.seed, 0x4E53])
        self.centres = [
            OpenAIES(
                initial if m == 0 else self.policy.initial_parameters(init_rng),
                c.population_size,
                c.sigma,
                c.learning_rate,
                c.weight_decay,
                c.mirrored,
                c.optimizer,
                c.optimizer_kwargs,
                c.lr_scheduler,
                c.lr_scheduler_kwargs,
                c.fitness_shaping,
            )
            for m in range(c.meta_population_size)
        ]
        self.archive = np.zeros((0, 0))
        self.centre_behaviours = np.zeros((0, 0))
        self.centre_returns = np.full(c.meta_population_size, -math.inf)
        self.best_centre_return = -math.inf
        self.weight = c.initial_weight if self.mode == "nsra" else 1.0
        self.stall = 0
        self.chosen = 0
        self._centre_backend: Any = None
        return self.centres[0]

    def _evaluate_centres(self, indices: list[int]) -> tuple[np.ndarray, np.ndarray, int]:
        """One episode of each centre in ``indices``: returns ``(k,)``, behaviours ``(k, d)``
        and the environment steps played."""
        if self._centre_backend is None:
            self._centre_backend = self.local_backend(1)
        results = [
            self.evaluate_population(
                Population(self.centres[m].mean.copy(), 0.0, 0, 1), self._centre_backend
            )
            for m in indices
        ]
        returns = np.array([r.returns[0] for r in results])
        steps = int(sum(r.lengths[0] for r in results))
        return returns, np.stack([r.behaviours[0] for r in results]), steps

    def step(self) -> Iteration:
        c = self.config
        centre_steps = 0
        if self.archive.shape[0] == 0:
            returns, behaviours, centre_steps = self._evaluate_centres(
                list(range(len(self.centres)))
            )
            self.centre_returns[:] = returns
            self.centre_behaviours = behaviours
            self.archive = behaviours.copy()
            self.best_centre_return = float(returns.max())

        centre_novelty = novelty(self.centre_behaviours, self.archive, c.k_nearest)
        total = centre_novelty.sum()
        probabilities = (
            centre_novelty / total
            if total > 0
            else np.full(len(self.centres), 1 / len(self.centres))
        )
        self.chosen = int(self.rng.choice(len(self.centres), p=probabilities))
        strategy = self.centres[self.chosen]

        population = strategy.ask(int(self.rng.integers(2**31)))
        episodes = self.evaluate_population(population)
        member_novelty = novelty(episodes.behaviours, self.archive, c.k_nearest)
        novelty_shaped = strategy.shape_fitness(member_novelty)
        return_shaped = strategy.shape_fitness(episodes.returns)
        if self.mode == "ns":
            weights = novelty_shaped
        elif self.mode == "nsr":
            weights = (return_shaped + novelty_shaped) / 2
        else:
            weights = self.weight * return_shaped + (1 - self.weight) * novelty_shaped
        metrics = strategy.tell_weights(population, weights)
        self._track_best(population, episodes)
        self.last_population = population

        centre_return, centre_behaviour, steps = self._evaluate_centres([self.chosen])
        centre_steps += steps
        self.centre_returns[self.chosen] = centre_return[0]
        self.centre_behaviours[self.chosen] = centre_behaviour[0]
        self.archive = np.concatenate([self.archive, centre_behaviour])
        if centre_return[0] > self.best_centre_return:
            self.best_centre_return = float(centre_return[0])
            self.stall = 0
            if self.mode == "nsra":
                self.weight = min(1.0, self.weight + c.weight_delta)
        else:
            self.stall += 1
            if self.mode == "nsra" and self.stall >= c.patience:
                self.weight = max(c.min_weight, self.weight - c.weight_delta)
                self.stall = 0
        self.generation += 1
        iteration = self._iteration(episodes, metrics)
        iteration.env_steps += centre_steps
        iteration.metrics.update(
            {
                "novelty_mean": float(member_novelty.mean()),
                "archive_size": float(self.archive.shape[0]),
                "centre": float(self.chosen),
                "centre_return": float(centre_return[0]),
                "return_weight": float(self.weight),
            }
        )
        return iteration

    def close(self) -> None:
        super().close()
        if self._centre_backend is not None:
            self._centre_backend.close()
            self._centre_backend = None

    def deployed_parameters(self) -> np.ndarray:
        return self.centres[int(np.argmax(self.centre_returns))].mean

    def strategy_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays: dict[str, np.ndarray] = {
            "archive": self.archive.copy(),
            "centre_behaviours": self.centre_behaviours.copy(),
            "centre_returns": self.centre_returns.copy(),
        }
        meta: dict[str, Any] = {
            "best_centre_return": None
            if math.isinf(self.best_centre_return)
            else self.best_centre_return,
            "weight": self.weight,
            "stall": self.stall,
            "chosen": self.chosen,
        }
        for m, centre in enumerate(self.centres):
            centre_arrays, meta[f"centre{m}"] = centre.state()
            arrays.update({f"centre{m}/{k}": v for k, v in centre_arrays.items()})
        return arrays, meta

    def load_strategy_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Restore what :meth:`strategy_state` saved: each centre's strategy, the archive, the
        centres' behaviours and returns, and the NSRA-ES weight and counters."""
        for m, centre in enumerate(self.centres):
            prefix = f"centre{m}/"
            centre.load_state(
                {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)},
                meta[f"centre{m}"],
            )
        self.archive = np.array(arrays["archive"])
        self.centre_behaviours = np.array(arrays["centre_behaviours"])
        self.centre_returns = np.array(arrays["centre_returns"])
        best = meta["best_centre_return"]
        self.best_centre_return = -math.inf if best is None else float(best)
        self.weight, self.stall = float(meta["weight"]), int(meta["stall"])
        self.chosen = int(meta["chosen"])


class NSES(NoveltySearchAgent):
    """NS-ES: OpenAI-ES steps toward novel behaviour only (Conti et al. 2018)."""

    name = "ns-es"
    mode = "ns"


class NSRES(NoveltySearchAgent):
    """NSR-ES: steps toward the average of novelty and return ranks (Conti et al. 2018)."""

    name = "nsr-es"
    mode = "nsr"


class NSRAES(NoveltySearchAgent):
    """NSRA-ES: return and novelty with an adaptive weight (Conti et al. 2018)."""

    name = "nsra-es"
    mode = "nsra"
