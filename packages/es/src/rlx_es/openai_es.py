"""OpenAI-ES: Salimans, Ho, Chen, Sidor & Sutskever (2017), "Evolution Strategies as a Scalable
Alternative to Reinforcement Learning", arXiv:1703.03864.

Each generation (Algorithm 2 of the paper, with the reference code's choices):

1. draw ``population_size / 2`` noise vectors ``eps_j ~ N(0, I)`` from one seed and evaluate the
   mirrored pairs ``theta + sigma eps_j`` and ``theta - sigma eps_j`` (antithetic sampling);
2. replace the returns by centered ranks in ``[-0.5, 0.5]`` (fitness shaping; ``fitness_shaping``
   picks another from :data:`rlx_es.core.FITNESS_SHAPINGS` or a user's function);
3. estimate the gradient ``g = sum_i rank_i eps_i / population_size`` (as the reference code,
   without the ``1/sigma`` factor, which the step size absorbs);
4. hand ``-g + weight_decay * theta`` to a torch optimiser (Adam by default) as the gradient of
   the centre ``theta``.

Workers only need the seed and the centre to rebuild their members, and send back returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlx.config import hyperparameter
from rlx.nn.optim import make_optimizer, make_scheduler
from rlx.nn.state import load_optimizer_state, optimizer_state
from rlx_es.agent import ESAgent, ESConfig
from rlx_es.core import Population, check_fitness_shaping, shaping_function

OptimizerFactory = Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]


class OpenAIES:
    """The OpenAI-ES strategy over a flat parameter vector (ask/tell, fitness maximised).

    ``optimizer`` is a name for :func:`rlx.nn.optim.make_optimizer` (with ``optimizer_kwargs``)
    or a callable building any torch optimiser from the parameter list. ``fitness_shaping`` is a
    name of :data:`rlx_es.core.FITNESS_SHAPINGS`, a ``"package.module:function"`` or a function
    mapping the fitness ``(population_size,)`` to weights of the same shape. The centre is a
    float64 ``torch.nn.Parameter``.
    """

    def __init__(
        self,
        centre: np.ndarray,
        population_size: int,
        sigma: float = 0.02,
        learning_rate: float = 0.01,
        weight_decay: float = 0.005,
        mirrored: bool = True,
        optimizer: str | OptimizerFactory = "adam",
        optimizer_kwargs: dict[str, Any] | None = None,
        lr_scheduler: str | None = None,
        lr_scheduler_kwargs: dict[str, Any] | None = None,
        fitness_shaping: str | Callable[[np.ndarray], np.ndarray] = "centered_ranks",
    ) -> None:
        if mirrored and population_size % 2:
            raise ValueError(
                f"population_size must be even for mirrored (antithetic) sampling, got "
                f"{population_size}: use {population_size - 1} or {population_size + 1}, "
                "or turn mirrored sampling off"
            )
        self.theta = torch.nn.Parameter(torch.tensor(np.asarray(centre), dtype=torch.float64))
        self.population_size, self.sigma = population_size, sigma
        self.weight_decay, self.mirrored = weight_decay, mirrored
        #: fitness ``(n,)`` -> weights ``(n,)`` of the members' noise in the gradient estimate
        self.shape_fitness = shaping_function(fitness_shaping)
        if callable(optimizer):
            self.optimizer = optimizer([self.theta])
        else:
            self.optimizer = make_optimizer(
                optimizer, [self.theta], learning_rate, **(optimizer_kwargs or {})
            )
        #: A torch learning-rate scheduler stepped after every update of the centre, or None.
        self.scheduler = (
            make_scheduler(lr_scheduler, self.optimizer, **(lr_scheduler_kwargs or {}))
            if lr_scheduler is not None
            else None
        )

    @property
    def mean(self) -> np.ndarray:
        """The centre ``theta`` as a NumPy view (the policy to deploy)."""
        return self.theta.detach().numpy()

    def ask(self, seed: int) -> Population:
        """The next generation around the centre, in mirrored pairs unless ``mirrored`` is off, the
        noise drawn from ``seed``."""
        return Population(
            self.mean.copy(), self.sigma, seed, self.population_size, mirrored=self.mirrored
        )

    def tell(self, population: Population, fitness: np.ndarray) -> dict[str, float]:
        """Shape the fitness (centered ranks by default) and step the centre (:meth:`tell_weights`);
        returns the gradient norm, the update ratio and the parameter norm."""
        return self.tell_weights(population, self.shape_fitness(fitness))

    def tell_weights(self, population: Population, weights: np.ndarray) -> dict[str, float]:
        """Step along ``sum_i weights_i eps_i / size``: for already shaped fitness (novelty)."""
        gradient = weights @ population.noise() / population.size
        before = self.mean.copy()
        self.optimizer.zero_grad()
        self.theta.grad = torch.from_numpy(-gradient + self.weight_decay * before)
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        update = np.linalg.norm(self.mean - before)
        return {
            "gradient_norm": float(np.linalg.norm(gradient)),
            "update_ratio": float(update / (np.linalg.norm(before) + 1e-12)),
            "parameter_norm": float(np.linalg.norm(self.mean)),
        }

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The centre, the optimiser's state and the learning-rate scheduler's."""
        arrays, meta = optimizer_state("centre", self.optimizer)
        arrays["theta"] = self.mean.copy()
        schedule = self.scheduler.state_dict() if self.scheduler is not None else None
        return arrays, {"optimizer": meta, "scheduler": schedule}

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Inverse of :meth:`state`."""
        with torch.no_grad():
            self.theta.copy_(torch.from_numpy(np.array(arrays["theta"])))
        load_optimizer_state("centre", self.optimizer, arrays, meta["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(meta["scheduler"])


@dataclass
class OpenAIESConfig(ESConfig):
    """Defaults of Salimans et al.'s MuJoCo experiments, with a smaller policy."""

    sigma: float = hyperparameter(
        0.02, "standard deviation of the parameter noise", low=0, low_open=True, search=(0.005, 0.2)
    )
    learning_rate: float = hyperparameter(
        0.01, "step size of the optimiser", low=0, low_open=True, search=(1e-3, 0.1)
    )
    weight_decay: float = hyperparameter(
        0.005, "L2 coefficient added to the gradient of the centre", low=0
    )
    optimizer: str = hyperparameter(
        "adam",
        "optimiser of the centre: adam, adamw, sgd (momentum 0.9 unless optimizer_kwargs says "
        "otherwise), rmsprop, adagrad, any torch.optim class or 'package.module:Class'",
        imports_code=True,
    )
    optimizer_kwargs: dict[str, Any] = hyperparameter(
        {},
        "keyword arguments of the optimiser, a JSON object on the command line "
        "(optimizer=sgd optimizer_kwargs='{\"momentum\": 0}': plain SGD)",
    )
    lr_scheduler: str | None = hyperparameter(
        None,
        "a torch.optim.lr_scheduler class (StepLR, CosineAnnealingLR, ...) stepped after every "
        "update of the centre (None: a constant step size)",
    )
    lr_scheduler_kwargs: dict[str, Any] = hyperparameter(
        {}, "keyword arguments of the scheduler, a JSON object on the command line"
    )
    mirrored: bool = hyperparameter(True, "antithetic sampling: members come in pairs +eps, -eps")
    fitness_shaping: str = hyperparameter(
        "centered_ranks",
        "weights of the members from their returns: centered_ranks (Salimans et al. 2017), "
        "z_scores, raw, nes_utilities (Wierstra et al. 2014), or 'package.module:function' "
        "mapping a float64 array of returns (population_size,) to one of the same shape",
        imports_code=True,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_fitness_shaping(self.fitness_shaping)
        if self.mirrored and self.population_size % 2:
            raise ValueError(
                f"population_size must be even for mirrored (antithetic) sampling, got "
                f"{self.population_size}: use {self.population_size - 1} or "
                f"{self.population_size + 1}, or set mirrored=false"
            )


class OpenAIESAgent(ESAgent):
    """OpenAI-ES (Salimans et al. 2017) on a gymnasium environment; ``act`` uses the centre."""

    Config = OpenAIESConfig
    name = "openai-es"

    def build_strategy(self, initial: np.ndarray) -> OpenAIES:
        """An :class:`OpenAIES` with the configured noise, optimiser, learning-rate scheduler and
        mirrored sampling."""
        c = self.config
        return OpenAIES(
            initial,
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
