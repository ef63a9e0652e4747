"""Deep contextual bandits: neural reward models explored by approximate posterior sampling.

Riquelme, Tucker & Snoek (2018), "Deep Bayesian Bandits Showdown: An Empirical Comparison of
Bayesian Deep Networks for Thompson Sampling", ICLR. The five agents share what the paper's
algorithms share:

- the replay data: every round so far (context, pulled arm, reward);
- the reward network: an MLP from a context to one reward estimate per arm, trained by squared
  error on the pulled arm only (the other arms' rewards are not observed); with ``network``
  ``package.module:factory`` the hidden layers are the user's module, a linear head on its
  features (all agents but :class:`Variational`, whose layers are Bayesian);
- the training schedule: every ``training_freq`` rounds, ``training_steps`` minibatch steps
  on all data, with RMSProp (Bayes-by-backprop: Adam; the ``optimizer`` setting) at the
  learning rate ``initial_lr / (1 + lr_decay * step)``, gradients clipped to a global norm.
  ``step`` counts
  the optimiser's steps over all trainings so far: the paper's hyperparameters ask to restart
  the decay at each training (``reset_lr``), but its TensorFlow code built the optimiser on
  the first schedule, so the restart never reached it; the default follows what the code
  did (the CHANGELOG has the measurement);
- ``initial_pulls`` rounds of round robin before any model decides;
- dropout (``dropout``, off by default): in training, each hidden unit is dropped with that
  probability after its activation, the kept ones scaled by ``1 / (1 - dropout)``; with
  ``dropout_decisions`` each decision is taken by a network thinned by a fresh draw of
  masks, a Thompson-sampling approximation (Gal & Ghahramani 2016), the ``dropout`` agent
  (the Showdown's "Dropout"). Greedy arms (:meth:`greedy`, evaluation) and the statistics
  computed from the network's outputs use the whole network.

Randomness: network initialisation, minibatches, weight noise and dropout masks are drawn
from ``self.generator`` (a ``torch.Generator`` on the agent's device); decisions (epsilon,
ensemble member, posterior draws of the linear head) from ``self.rng`` (NumPy). Both are saved
in checkpoints, with the networks, the optimiser state and the data, so a resumed run
continues exactly.

Device: the networks, the generator and every tensor made while running live on
``self.device`` (the ``device`` setting); the replay data stays in NumPy and is uploaded once
per round (see :meth:`ReplayData.tensors`); only the chosen arm and scalars come back.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from rlx.config import hyperparameter, preset
from rlx.errors import ConfigError
from rlx.memory import mlp_nbytes
from rlx.nn.layers import MLP, load_network
from rlx.nn.optim import Schedulers, make_optimizer, make_scheduler
from rlx.nn.state import (
    generator_array,
    load_modules_state,
    load_optimizers_state,
    mlp_work,
    modules_state,
    optimizers_state,
    resolve_device,
    restore_generator_array,
    set_torch_threads,
)
from rlx.protocols import AgentState
from rlx.seeding import derive
from rlx_bandits.base import BanditLearner
from rlx_bandits.linear import NormalInverseGammaRegressions, regressions_estimate

#: loss(contexts (b, d) float32, arms (b,) int64, rewards (b,) float32) -> scalar tensor
Loss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class NetworkConfig:
    """Hyperparameters every neural agent has (defaults: Riquelme et al. 2018)."""

    network: str = hyperparameter(
        "mlp",
        "mlp (hidden_sizes, ReLU) or 'package.module:factory' returning a torch module, "
        "called with the observation and action spaces, that maps contexts (batch, "
        "context_dim) to features (batch, k), its weights as the factory makes them (seeded "
        "from the agent's seed); a linear head with one output per arm goes on top",
        imports_code=True,
    )
    network_kwargs: dict[str, Any] = hyperparameter(
        {}, "keyword arguments of the network factory, a JSON object on the command line"
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (50,), "units of each hidden layer of the reward network (ReLU; network mlp)"
    )
    init_scale: float = hyperparameter(
        0.3, "weights start uniform in [-init_scale, init_scale]", low=0, low_open=True
    )
    training_freq: int = hyperparameter(50, "rounds between two trainings of the network", low=1)
    training_steps: int = hyperparameter(100, "minibatch steps per training", low=0)
    batch_size: int = hyperparameter(
        512, "rounds per minibatch, drawn with replacement from all data so far", low=1
    )
    initial_lr: float = hyperparameter(
        0.1, "learning rate at the start of every training", low=0, low_open=True
    )
    lr_decay: float = hyperparameter(
        0.5, "learning rate after s optimiser steps: initial_lr / (1 + lr_decay * s)", low=0
    )
    reset_lr: bool = hyperparameter(
        False, "restart the learning-rate decay (s = 0) at every training"
    )
    max_grad_norm: float = hyperparameter(
        5.0, "gradients are clipped to this global norm", low=0, low_open=True
    )
    initial_pulls: int = hyperparameter(
        2, "rounds each arm is pulled in turn (round robin) before the model decides", low=0
    )
    optimizer: str = hyperparameter(
        "rmsprop",
        "rmsprop (the Showdown code's: decay 0.9, mean squares starting at 1, no keyword "
        "arguments), or adam, adamw, sgd, a torch.optim class (RMSprop: torch's own, ...) or "
        "'package.module:Class'; the learning-rate decay counts the optimiser's own steps, "
        "so one that keeps no step count (sgd) restarts it at every training",
        imports_code=True,
    )
    optimizer_kwargs: dict[str, Any] = hyperparameter(
        {}, "keyword arguments of the optimiser, a JSON object on the command line"
    )
    lr_scheduler: str | None = hyperparameter(
        None,
        "a torch.optim.lr_scheduler class (StepLR, CosineAnnealingLR, ExponentialLR, ...) "
        "stepped after every optimiser step, instead of the lr_decay schedule; it starts "
        "from initial_lr and carries over from one training to the next",
    )
    lr_scheduler_kwargs: dict[str, Any] = hyperparameter(
        {}, "keyword arguments of the scheduler, a JSON object on the command line"
    )
    device: str = hyperparameter(
        "cpu",
        "torch device: cpu, cuda, or auto (cuda when present for networks and minibatches of "
        "at least 1e7 multiply-adds a forward pass, else cpu)",
    )
    torch_threads: int = hyperparameter(
        1,
        "torch CPU threads (0: leave torch's default); these small networks are fastest on "
        "one, and several runs side by side do not fight over the cores",
        low=0,
    )
    dropout: float = hyperparameter(
        0.0,
        "probability, in [0, 1), of zeroing each hidden unit in training (the kept ones are "
        "scaled by 1 / (1 - dropout); with a network factory, each of its output features); "
        "greedy arms use the whole network",
    )
    dropout_decisions: bool = hyperparameter(
        False,
        "take decisions with dropout on: each decision uses a random thinned network, a "
        "Thompson-sampling approximation (Gal & Ghahramani 2016); no effect with dropout 0",
    )

    def __post_init__(self) -> None:
        if not self.hidden_sizes or any(size < 1 for size in self.hidden_sizes):
            raise ValueError(
                f"hidden_sizes must be one or more positive layer sizes, got {self.hidden_sizes}"
            )
        if not 0.0 <= self.dropout < 1.0:  # also refuses NaN
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.network != "mlp" and ":" not in self.network:
            raise ConfigError(
                f"network must be 'mlp' or 'package.module:factory', got {self.network!r}"
            )
        if self.optimizer == "rmsprop" and self.optimizer_kwargs:
            raise ConfigError(
                "optimizer rmsprop (the Showdown's) takes no optimizer_kwargs; use "
                "optimizer RMSprop (torch's) to set its arguments"
            )
        if self.lr_scheduler is not None:
            if self.reset_lr:
                raise ConfigError(
                    "reset_lr restarts the lr_decay schedule, which lr_scheduler replaces; "
                    "for restarts choose a scheduler that has them (CosineAnnealingWarmRestarts)"
                )
            # The name and the arguments are checked now, on a stand-in optimiser, so that a
            # bad one fails before the first round rather than at the first training.
            probe = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
            make_scheduler(self.lr_scheduler, probe, **self.lr_scheduler_kwargs)


# -- building blocks --------------------------------------------------------------------------


class ReplayData:
    """Every round so far: ``contexts`` ``(n, d)`` float32, ``actions`` ``(n,)`` int64,
    ``rewards`` ``(n,)`` float64 and, for bootstrapping, ``masks`` ``(n, q)`` bool.

    Arrays grow by doubling, so adding a round allocates nothing most of the time.
    """

    def __init__(self, context_dim: int, n_masks: int = 0, capacity: int = 1024) -> None:
        self.contexts = np.zeros((capacity, context_dim), dtype=np.float32)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float64)
        self.masks = np.zeros((capacity, n_masks), dtype=bool)
        self.size = 0
        #: A copy of the data on another device than the CPU (see :meth:`tensors`): its
        #: device, its tensors (contexts, actions, rewards) and how many rows it holds.
        self._mirror: tuple[torch.device, tuple[torch.Tensor, ...]] | None = None
        self._mirrored = 0

    def add(
        self, context: np.ndarray, action: int, reward: float, mask: np.ndarray | None = None
    ) -> None:
        """Append one round (and, for bootstrapping, its ``(q,)`` mask of the networks it enters),
        doubling the arrays when they are full."""
        if self.size == len(self.actions):
            self._resize(2 * self.size)
        self.contexts[self.size] = context
        self.actions[self.size] = action
        self.rewards[self.size] = reward
        if mask is not None:
            self.masks[self.size] = mask
        self.size += 1

    def _resize(self, capacity: int) -> None:
        for name in ("contexts", "actions", "rewards", "masks"):
            old = getattr(self, name)
            new = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)

    def tensors(
        self, device: torch.device | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The data so far: contexts ``(n, d)`` float32, actions ``(n,)`` int64, rewards
        ``(n,)`` float32, on ``device``.

        On the CPU (the default) contexts and actions are views of the arrays. On another
        device they are a copy kept there, to which each round is uploaded once: the rows
        added since the last call go up now, the older ones are there already.
        """
        n = self.size
        if device is None or device.type == "cpu":
            return (
                torch.from_numpy(self.contexts[:n]),
                torch.from_numpy(self.actions[:n]),
                torch.from_numpy(self.rewards[:n]).float(),
            )
        if self._mirror is None or self._mirror[0] != device or len(self._mirror[1][1]) < n:
            capacity = len(self.actions)
            self._mirror = (
                device,
                (
                    torch.empty(self.contexts.shape, dtype=torch.float32, device=device),
                    torch.empty(capacity, dtype=torch.int64, device=device),
                    torch.empty(capacity, dtype=torch.float32, device=device),
                ),
            )
            self._mirrored = 0
        contexts, actions, rewards = self._mirror[1]
        start = self._mirrored
        if start < n:
            contexts[start:n].copy_(torch.from_numpy(self.contexts[start:n]))
            actions[start:n].copy_(torch.from_numpy(self.actions[start:n]))
            rewards[start:n].copy_(torch.from_numpy(self.rewards[start:n]).float())
            self._mirrored = n
        return contexts[:n], actions[:n], rewards[:n]

    def arrays(self) -> dict[str, np.ndarray]:
        """Copies of the rows so far of ``contexts``, ``actions``, ``rewards`` and ``masks``."""
        n = self.size
        return {
            name: getattr(self, name)[:n].copy()
            for name in ("contexts", "actions", "rewards", "masks")
        }

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Replace the data with saved :meth:`arrays` (the copy on another device is then stale,
        uploaded again at the next :meth:`tensors`)."""
        self.size = 0
        self._mirrored = 0  # the rows are replaced: the device copy is stale
        n = len(arrays["actions"])
        self._resize(max(n, len(self.actions)))
        for name in ("contexts", "actions", "rewards", "masks"):
            getattr(self, name)[:n] = arrays[name]
        self.size = n


def drop_units(x: torch.Tensor, p: float, generator: torch.Generator) -> torch.Tensor:
    """``x`` with each element zeroed with probability ``p`` and the others scaled by
    ``1 / (1 - p)`` (inverted dropout, Srivastava et al. 2014), the mask drawn from
    ``generator`` (``torch.nn.functional.dropout`` takes none, so runs with it would be
    neither reproducible nor resumable)."""
    keep = torch.rand(x.shape, generator=generator, device=x.device) >= p
    return x * keep * (1.0 / (1.0 - p))


class RewardNetwork(nn.Module):
    """Contexts ``(b, d)`` -> ReLU hidden layers -> one reward estimate per arm ``(b, k)``.

    :meth:`features` is the last hidden layer ``(b, hidden_sizes[-1])``, the representation
    that :class:`NeuralLinear` regresses on. Given a generator, both apply dropout after each
    hidden layer's activation (:func:`drop_units`, masks drawn from it); without one, or with
    ``dropout`` 0, they are the whole network. The network lives on ``generator``'s device.

    With ``body`` (a user module from contexts ``(b, d)`` to features ``(b, features)``) the
    hidden layers are that module, its weights as it was made; dropout, if any, applies to
    its output features. The head's weights start uniform in ``[-init_scale, init_scale]``
    either way.
    """

    def __init__(
        self,
        context_dim: int,
        hidden_sizes: Iterable[int],
        n_arms: int,
        init_scale: float,
        generator: torch.Generator,
        dropout: float = 0.0,
        body: tuple[nn.Module, int] | None = None,
    ) -> None:
        super().__init__()
        self.custom_body = body is not None
        if body is None:
            self.body = MLP([context_dim, *hidden_sizes], "relu")
            features = self.body.features_dim
            initialised = [*self.body.layers]
        else:
            self.body, features = body
            initialised = []
        self.head = nn.Linear(features, n_arms)
        self.dropout = dropout
        self.to(generator.device)
        with torch.no_grad():
            for layer in [*initialised, self.head]:
                layer.weight.uniform_(-init_scale, init_scale, generator=generator)
                layer.bias.zero_()

    def features(
        self, contexts: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """The last hidden layer ``(b, hidden_sizes[-1])`` (or the user body's features) for
        contexts ``(b, d)``; with ``generator`` and ``dropout`` above 0, with dropout after each
        hidden activation."""
        if generator is None or self.dropout == 0.0:
            return self.body(contexts)
        if self.custom_body:
            return drop_units(self.body(contexts), self.dropout, generator)
        x = contexts
        for layer in self.body.layers:  # MLP's forward pass, a dropout after each activation
            x = self.body.activation(F.linear(x, layer.weight, layer.bias))
            x = drop_units(x, self.dropout, generator)
        return x

    def forward(
        self, contexts: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        return self.head(self.features(contexts, generator))


def squared_error(network: nn.Module, generator: torch.Generator | None = None) -> Loss:
    """Mean squared error of ``network``'s estimate for the pulled arm (the paper sums the
    weighted errors and divides by the batch size, which is the same), with the network's
    dropout on when ``generator`` is given (it draws the masks)."""

    def loss(contexts: torch.Tensor, arms: torch.Tensor, rewards: torch.Tensor) -> torch.Tensor:
        predicted = network(contexts, generator).gather(1, arms[:, None]).squeeze(1)
        return (predicted - rewards).square().mean()

    return loss


def rmsprop(parameters: Iterable[nn.Parameter], learning_rate: float) -> torch.optim.RMSprop:
    """RMSProp as the paper's TensorFlow 1 code ran it: decay 0.9, mean squares starting at 1.

    torch starts the mean squares at 0, which makes the first steps ``lr / sqrt(0.1)`` per
    weight whatever the gradient, too large at the paper's learning rate of 0.1.

    The mean squares live on the parameters' device; the step count stays on the CPU, where
    torch keeps it for an optimiser that is neither fused nor capturable (and where
    ``load_state_dict`` leaves it), so reading it needs no device synchronisation.
    """
    parameters = list(parameters)
    optimizer = torch.optim.RMSprop(parameters, lr=learning_rate, alpha=0.9, eps=1e-10)
    for parameter in parameters:
        optimizer.state[parameter] = {
            "step": torch.tensor(0.0, device="cpu"),
            "square_avg": torch.ones_like(parameter),
        }
    return optimizer


def optimizer_steps(optimizer: torch.optim.Optimizer, parameter: nn.Parameter) -> int:
    """How many steps ``optimizer`` has taken (its step count for ``parameter``)."""
    state = optimizer.state.get(parameter, {})
    return int(state["step"]) if "step" in state else 0


# -- what the agents share ---------------------------------------------------------------------


class NeuralBandit(BanditLearner):
    """Replay data, training schedule, round robin and checkpoints of the neural agents.

    Subclasses put every trained module with its optimiser in ``self.networks`` (name ->
    ``(module, optimizer)``) and implement ``select``, ``greedy`` and ``update``.
    """

    Config: ClassVar[type] = NetworkConfig
    #: Forward passes of a network over one minibatch per training step, as ``auto`` weighs
    #: them (the variational network's local reparameterisation makes two).
    passes_per_step: ClassVar[int] = 1

    def __init__(self, env: Any, config: Any, seed: int, n_masks: int = 0) -> None:
        super().__init__(env, config, seed)
        set_torch_threads(config.torch_threads)
        self.device = self.choose_device()
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.data = ReplayData(self.context_dim, n_masks)
        self.networks: dict[str, tuple[nn.Module, torch.optim.Optimizer]] = {}
        self._schedulers: Schedulers | None = None

    def memory_estimate(self) -> dict[str, tuple[int, str]]:
        """The reward networks (``n_networks`` of them in an ensemble; the variational one
        keeps two values a weight) with their optimiser state, a minibatch's activations
        (``batch_size``, and ``kl_samples`` contexts where they are drawn); estimated from
        ``hidden_sizes`` even when a ``network`` factory makes the body."""
        c = self.config
        networks = int(getattr(c, "n_networks", 1)) * (2 if self.passes_per_step > 1 else 1)
        sizes = [self.context_dim, *c.hidden_sizes, self.n_arms]
        batch = max(c.batch_size, int(getattr(c, "kl_samples", 0)))
        parts = {
            f"reward networks of hidden sizes {list(c.hidden_sizes)}": (
                networks * mlp_nbytes(sizes),
                "lower hidden_sizes",
            ),
            f"minibatches of {batch:,} rounds (batch_size)": (
                networks * mlp_nbytes(sizes, batch, copies=0) + batch * (self.context_dim + 3) * 8,
                "lower batch_size" if batch == c.batch_size else "lower kl_samples",
            ),
        }
        return parts

    def choose_device(self) -> torch.device:
        """The ``device`` setting resolved; ``auto`` weighs one training step's forward
        passes over a minibatch (:func:`rlx.nn.state.resolve_device`), estimated from
        ``hidden_sizes`` even when a ``network`` factory makes the body."""
        c = self.config
        sizes = [self.context_dim, *c.hidden_sizes, self.n_arms]
        work = mlp_work(c.batch_size, sizes, networks=self.passes_per_step)
        return resolve_device(c.device, work=work)

    def new_network(self, member: int = 0) -> RewardNetwork:
        """A reward network; ``member`` tells the networks of an ensemble apart (each gets
        its own body from a ``network`` factory, with its own initial weights)."""
        config = self.config
        return RewardNetwork(
            self.context_dim,
            config.hidden_sizes,
            self.n_arms,
            config.init_scale,
            self.generator,
            config.dropout,
            body=None if config.network == "mlp" else self.user_body(member),
        )

    def user_body(self, member: int = 0) -> tuple[nn.Module, int]:
        """The ``network`` factory's module and its feature width, probed with a zero context.

        The factory runs under torch's global generator forked and seeded from the agent's
        seed (and ``member``), so its initial weights are the same for the same seed.
        """
        target = self.config.network
        env = self.env
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive(self.seed, "initial weights", member))
            body = load_network(
                target,
                env.observation_space,
                env.action_space,
                what="network",
                **self.config.network_kwargs,
            )
        try:
            with torch.no_grad():
                features = body(torch.zeros(1, self.context_dim))
        except Exception as exc:
            raise ConfigError(
                f"network {target!r} failed on a context of shape (1, {self.context_dim}): {exc}"
            ) from exc
        if not isinstance(features, torch.Tensor) or features.ndim != 2 or len(features) != 1:
            shape = tuple(features.shape) if isinstance(features, torch.Tensor) else features
            raise ConfigError(
                f"network {target!r} must map contexts (batch, {self.context_dim}) to features "
                f"(batch, k); it returned {shape!r} for a batch of one"
            )
        return body, int(features.shape[1])

    def new_optimizer(self, parameters: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
        """The ``optimizer`` setting for ``parameters``, at ``initial_lr`` (:meth:`train`
        sets the rate of every step)."""
        config = self.config
        if config.optimizer == "rmsprop":
            return rmsprop(parameters, config.initial_lr)
        return make_optimizer(
            config.optimizer, parameters, config.initial_lr, **config.optimizer_kwargs
        )

    @property
    def decision_generator(self) -> torch.Generator | None:
        """What a decision's dropout masks are drawn from: ``self.generator`` with
        ``dropout_decisions``, else None (the whole network decides)."""
        return self.generator if self.config.dropout_decisions else None

    def greedy(self, context: np.ndarray) -> int:
        """The arm whose estimate by ``self.network`` is highest (agents with another model
        override this)."""
        with torch.no_grad():
            return int(self.network(self.as_tensor(context)).argmax())

    def round_robin(self, context: np.ndarray) -> int | None:
        """The arm to pull while the first ``initial_pulls`` rounds per arm last, else None.

        ``context`` is checked all the same, so a wrong one is refused from the first round.
        """
        self.check_context(context)
        if self.data.size < self.n_arms * self.config.initial_pulls:
            return self.data.size % self.n_arms
        return None

    def as_tensor(self, context: np.ndarray) -> torch.Tensor:
        """A checked context as a batch of one, ``(1, d)`` float32."""
        context = self.check_context(context)
        return torch.as_tensor(context, dtype=torch.float32, device=self.device)[None]

    def training_due(self) -> bool:
        """Whether the data just reached a multiple of ``training_freq`` rounds: time to train."""
        return self.data.size % self.config.training_freq == 0

    def train(
        self,
        parameters: Iterable[nn.Parameter],
        optimizer: torch.optim.Optimizer,
        loss: Loss,
        rows: torch.Tensor | None = None,
    ) -> None:
        """``training_steps`` minibatch steps on all data (or only ``rows``, ``(m,)`` int64)."""
        config = self.config
        parameters = list(parameters)
        contexts, actions, rewards = self.data.tensors(self.device)
        n = self.data.size if rows is None else len(rows)
        schedulers = self.schedulers
        done = 0 if config.reset_lr else optimizer_steps(optimizer, parameters[0])
        for step in range(done, done + config.training_steps):
            if not schedulers:
                for group in optimizer.param_groups:
                    group["lr"] = config.initial_lr / (1.0 + config.lr_decay * step)
            batch = torch.randint(
                n, (config.batch_size,), generator=self.generator, device=self.device
            )
            if rows is not None:
                batch = rows[batch]
            optimizer.zero_grad()
            loss(contexts[batch], actions[batch], rewards[batch]).backward()
            nn.utils.clip_grad_norm_(parameters, config.max_grad_norm)
            optimizer.step()
            schedulers.step((optimizer,))

    @property
    def schedulers(self) -> Schedulers:
        """The ``lr_scheduler`` of each optimiser (none without one), made on first use, once
        the agent has built its networks."""
        if self._schedulers is None:
            c = self.config
            self._schedulers = Schedulers(c.lr_scheduler, c.lr_scheduler_kwargs, self._optimizers())
        return self._schedulers

    def learned_state(self) -> AgentState:
        """The networks (what acting needs)."""
        return AgentState(arrays=modules_state(self._modules()))

    def load_learned_state(self, state: AgentState) -> None:
        """Restore the networks that :meth:`learned_state` saved."""
        load_modules_state(self._modules(), state.arrays)

    def training_state(self) -> AgentState:
        """The replay data, the optimisers and the torch generator."""
        arrays, optimizers = optimizers_state(self._optimizers())
        arrays.update({f"data/{key}": value for key, value in self.data.arrays().items()})
        arrays["torch_rng"] = generator_array(self.generator)
        meta = {"optimizers": optimizers, "schedulers": self.schedulers.state_dict()}
        return AgentState(arrays=arrays, meta=meta)

    def load_training_state(self, state: AgentState) -> None:
        """Restore what :meth:`training_state` returned: the replay data, the torch generator
        (reseeded, with a warning, when it was saved on another device type), the optimisers and the
        schedulers."""
        self.data.load_arrays(
            {key[5:]: value for key, value in state.arrays.items() if key.startswith("data/")}
        )
        reseed = derive(self.seed, "torch generator on another device", self.data.size)
        restore_generator_array(self.generator, state.arrays["torch_rng"], reseed)
        load_optimizers_state(self._optimizers(), state.arrays, state.meta["optimizers"])
        self.schedulers.load_state_dict(state.meta.get("schedulers", {}))

    def _modules(self) -> dict[str, nn.Module]:
        return {name: module for name, (module, _) in self.networks.items()}

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {name: optimizer for name, (_, optimizer) in self.networks.items()}


# -- the agents ---------------------------------------------------------------------------------


@dataclass
class NeuralGreedyConfig(NetworkConfig):
    """Hyperparameters of :class:`NeuralGreedy`."""

    epsilon: float = hyperparameter(
        0.05, "probability of pulling a uniformly random arm instead of the best", low=0, high=1
    )


class NeuralGreedy(NeuralBandit):
    """Epsilon-greedy on a neural network's reward estimates.

    The point-estimate baseline of Riquelme et al. (2018) ("RMS" there, which uses no
    epsilon): the network is retrained on all data every ``training_freq`` rounds and the arm
    with the highest estimate is pulled, a uniformly random one with probability ``epsilon``.
    With ``dropout_decisions`` the estimates are those of a network thinned by dropout, drawn
    anew for each decision (the :class:`Dropout` preset).
    """

    Config = NeuralGreedyConfig

    def __init__(self, env: Any, config: NeuralGreedyConfig, seed: int) -> None:
        super().__init__(env, config, seed)
        self.network = self.new_network()
        self.optimizer = self.new_optimizer(self.network.parameters())
        self.networks = {"network": (self.network, self.optimizer)}

    def select(self, context: np.ndarray) -> int:
        """Round robin at first, then a uniformly random arm with probability ``epsilon``, else the
        network's best arm (the network thinned by dropout with ``dropout_decisions``)."""
        arm = self.round_robin(context)
        if arm is not None:
            return arm
        if self.rng.random() < self.config.epsilon:
            return int(self.rng.integers(self.n_arms))
        with torch.no_grad():
            return int(self.network(self.as_tensor(context), self.decision_generator).argmax())

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        """Add the round to the data and, every ``training_freq`` rounds, train the network on
        squared error."""
        self.data.add(self.check_context(context), action, reward)
        if self.training_due():
            self.train(
                self.network.parameters(),
                self.optimizer,
                squared_error(self.network, self.generator),
            )


class Dropout(NeuralGreedy):
    """The ``dropout`` preset: Thompson sampling approximated by dropout (Gal & Ghahramani
    2016), "Dropout" in Riquelme et al. (2018): the neural-greedy network trained with
    dropout 0.2 (the keep probability 0.8 of the Showdown's code) and every decision taken by
    a thinned network, no epsilon."""

    Config: ClassVar[type] = preset(
        NeuralGreedyConfig,
        "DropoutConfig",
        __doc__,
        dropout=0.2,
        dropout_decisions=True,
        epsilon=0.0,
    )


@dataclass
class NeuralLinearConfig(NetworkConfig):
    """Hyperparameters of :class:`NeuralLinear` (``training_freq`` retrains the network)."""

    lambda_prior: float = hyperparameter(
        0.25,
        "precision of the Gaussian prior on the last-layer weights, relative to the noise variance",
        low=0,
        low_open=True,
    )
    a0: float = hyperparameter(
        6.0, "shape of the inverse-gamma prior on the noise variance", low=0, low_open=True
    )
    b0: float = hyperparameter(
        6.0, "scale of the inverse-gamma prior on the noise variance", low=0, low_open=True
    )


class NeuralLinear(NeuralBandit):
    """Thompson sampling with a Bayesian linear regression on a network's last hidden layer.

    Riquelme et al. (2018), section 3 ("NeuralLinear"): the network learns a representation
    ``z(x)`` by predicting all arms' rewards; per arm, an exact normal-inverse-gamma
    regression of the reward on ``z(x)`` gives the posterior that Thompson sampling draws
    from. Between retrainings (every ``training_freq`` rounds) the posteriors are updated
    incrementally; after one, they are recomputed from all data on the new representation.
    """

    Config = NeuralLinearConfig

    def memory_estimate(self) -> dict[str, tuple[int, str]]:
        """The network's parts, and a regression per arm on the last hidden layer."""
        parts = super().memory_estimate()
        hidden = self.config.hidden_sizes
        features = hidden[-1] if hidden else self.context_dim
        parts[f"linear regressions of {self.n_arms:,} arms on {features:,} features"] = (
            regressions_estimate(self.n_arms, features)[0],
            "lower the last of hidden_sizes (the regressions' features)",
        )
        return parts

    def __init__(self, env: Any, config: NeuralLinearConfig, seed: int) -> None:
        super().__init__(env, config, seed)
        self.network = self.new_network()
        self.optimizer = self.new_optimizer(self.network.parameters())
        self.networks = {"network": (self.network, self.optimizer)}
        self.posterior = NormalInverseGammaRegressions(
            self.n_arms, self.network.head.in_features, config.lambda_prior, config.a0, config.b0
        )

    def representation(
        self, contexts: torch.Tensor, generator: torch.Generator | None = None
    ) -> np.ndarray:
        """Last-layer features ``(b, h)`` float64 of contexts ``(b, d)`` (with dropout when
        ``generator`` is given)."""
        with torch.no_grad():
            return self.network.features(contexts, generator).cpu().double().numpy()

    def select(self, context: np.ndarray) -> int:
        """Round robin at first, then the arm whose reward, drawn from its posterior regression on
        the network's last-layer features, is highest."""
        arm = self.round_robin(context)
        if arm is not None:
            return arm
        z = self.representation(self.as_tensor(context), self.decision_generator)[0]
        return int(np.argmax(self.posterior.sample_values(z, self.rng)))

    def greedy(self, context: np.ndarray) -> int:
        """The arm whose posterior mean reward on the network's last-layer features is highest."""
        z = self.representation(self.as_tensor(context))[0]
        return int(np.argmax(self.posterior.mean_values(z)))

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        """Add the round to the data and to the pulled arm's regression; every ``training_freq``
        rounds instead, train the network and refit every regression from all data on the new
        features."""
        context = self.check_context(context)
        self.data.add(context, action, reward)
        if not self.training_due():
            z = self.representation(self.as_tensor(context))[0]
            self.posterior.update(int(action), z, float(reward), self.rng)
            return
        self.train(
            self.network.parameters(), self.optimizer, squared_error(self.network, self.generator)
        )
        contexts, _, _ = self.data.tensors(self.device)
        n = self.data.size
        actions, rewards = self.data.actions[:n], self.data.rewards[:n]
        self.posterior.refit(self.representation(contexts), actions, rewards)

    def learned_state(self) -> AgentState:
        """The network, and the regressions' arrays under ``posterior/``."""
        state = super().learned_state()
        for name, value in self.posterior.arrays().items():
            state.arrays[f"posterior/{name}"] = value.copy()
        return state

    def load_learned_state(self, state: AgentState) -> None:
        """Restore the network and the regressions that :meth:`learned_state` saved."""
        super().load_learned_state(state)
        prefix = "posterior/"
        self.posterior.load_arrays(
            {k[len(prefix) :]: v for k, v in state.arrays.items() if k.startswith(prefix)}
        )


class BayesianLinear(nn.Module):
    """A dense layer ``(b, n_in) -> (b, n_out)`` with factorised Gaussian weights.

    ``weight ~ N(mu, sigma^2)`` elementwise with ``sigma = exp(rho)``, prior ``N(0, 2 / n_in)``;
    the bias is a point estimate, as in the Showdown's BBB. Means start as ``N(0, 0.05^2)``
    and ``rho`` as ``N(-5, 0.05^2)``: nearly deterministic weights at first, which the paper's
    code chose so that optimisation starts close to a MAP fit. The layer lives on
    ``generator``'s device.
    """

    def __init__(self, n_in: int, n_out: int, generator: torch.Generator) -> None:
        super().__init__()
        device = generator.device
        self.weight_mu = nn.Parameter(
            0.05 * torch.randn(n_in, n_out, generator=generator, device=device)
        )
        self.weight_rho = nn.Parameter(
            -5.0 + 0.05 * torch.randn(n_in, n_out, generator=generator, device=device)
        )
        self.bias = nn.Parameter(0.05 * torch.randn(n_out, generator=generator, device=device))
        self.prior_std = math.sqrt(2.0 / n_in)

    def forward(self, x: torch.Tensor, noise: torch.Tensor | None = None) -> torch.Tensor:
        """With ``noise`` ``(n_in, n_out)``: the layer for one weight draw; without: the mean."""
        weight = self.weight_mu
        if noise is not None:
            weight = weight + self.weight_rho.exp() * noise
        return x @ weight + self.bias

    def local_forward(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Pre-activations with independent weights per row (local reparameterisation,
        Kingma et al. 2015): exact Gaussian outputs with much less gradient noise."""
        mean = x @ self.weight_mu + self.bias
        variance = x.square() @ (2.0 * self.weight_rho).exp()
        noise = torch.randn(mean.shape, generator=generator, device=mean.device)
        return mean + (variance + 1e-6).sqrt() * noise

    def kl(self) -> torch.Tensor:
        """KL(q(weight) || prior), summed over the weights."""
        sigma2 = (2.0 * self.weight_rho).exp()
        prior2 = self.prior_std**2
        ratio = sigma2 / prior2
        return 0.5 * (self.weight_mu.square() / prior2 + ratio - 1.0 - ratio.log()).sum()


class VariationalNetwork(nn.Module):
    """:class:`RewardNetwork` with :class:`BayesianLinear` layers: ``(b, d) -> (b, k)``.

    ``dropout`` drops hidden units after their activation in :meth:`local_forward` (training)
    and in :meth:`forward` when ``thinned``, the masks drawn from the generator.
    """

    def __init__(
        self,
        context_dim: int,
        hidden_sizes: Iterable[int],
        n_arms: int,
        generator: torch.Generator,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        sizes = [context_dim, *hidden_sizes, n_arms]
        self.layers = nn.ModuleList(
            BayesianLinear(a, b, generator) for a, b in itertools.pairwise(sizes)
        )
        self.dropout = dropout

    def forward(
        self,
        contexts: torch.Tensor,
        generator: torch.Generator | None = None,
        thinned: bool = False,
    ) -> torch.Tensor:
        """With ``generator``: one weight draw for the whole batch (and, ``thinned``, one of
        dropout masks); without: the mean weights."""
        x = contexts
        drop = thinned and generator is not None and self.dropout > 0.0
        for index, layer in enumerate(self.layers):
            noise = None
            if generator is not None:
                weight = layer.weight_mu
                noise = torch.randn(weight.shape, generator=generator, device=weight.device)
            x = layer(x, noise)
            if index < len(self.layers) - 1:
                x = torch.relu(x)
                if drop:
                    x = drop_units(x, self.dropout, generator)
        return x

    def local_forward(self, contexts: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Outputs ``(b, k)`` for contexts ``(b, d)`` by the local reparameterisation
        (:meth:`BayesianLinear.local_forward`, independent weights per row), with dropout after each
        hidden activation when ``dropout`` is above 0: the training pass."""
        x = contexts
        for index, layer in enumerate(self.layers):
            x = layer.local_forward(x, generator)
            if index < len(self.layers) - 1:
                x = torch.relu(x)
                if self.dropout > 0.0:
                    x = drop_units(x, self.dropout, generator)
        return x

    def kl(self) -> torch.Tensor:
        """KL(q || prior) of all the layers' weights, summed."""
        zero = torch.zeros((), device=self.layers[0].weight_mu.device)
        return sum((layer.kl() for layer in self.layers), zero)


@dataclass
class VariationalConfig(NetworkConfig):
    """Hyperparameters of :class:`Variational`.

    Adam at a constant rate, as in the paper's code, but 0.01 rather than its 0.1, which left
    twice the regret on Statlog (see the CHANGELOG).
    """

    initial_lr: float = hyperparameter(
        0.01, "learning rate at the start of every training", low=0, low_open=True
    )
    lr_decay: float = hyperparameter(
        0.0, "learning rate after s optimiser steps: initial_lr / (1 + lr_decay * s)", low=0
    )
    network: str = hyperparameter(
        "mlp",
        "mlp only: the Bayes-by-backprop layers are built here (hidden_sizes, ReLU)",
        imports_code=True,
    )
    optimizer: str = hyperparameter(
        "adam",
        "adam (torch's), or rmsprop (the Showdown code's: decay 0.9, mean squares starting "
        "at 1), adamw, sgd, a torch.optim class or 'package.module:Class'; the learning-rate "
        "decay counts the optimiser's own steps, so one that keeps no step count (sgd) "
        "restarts it at every training",
        imports_code=True,
    )
    noise_sigma: float = hyperparameter(
        0.1,
        "standard deviation of the Gaussian reward noise in the likelihood",
        low=0,
        low_open=True,
    )


class Variational(NeuralBandit):
    """Thompson sampling with a Bayes-by-backprop network (Blundell et al. 2015).

    As "BBB" in Riquelme et al. (2018), section 3: a mean-field Gaussian posterior over the
    weights is fitted by maximising the evidence lower bound
    ``E_q[log p(rewards | weights)] - KL(q || prior)`` (per datum: the likelihood of the
    minibatch averaged, the KL divided by the number of rounds so far), with the local
    reparameterisation trick. Each decision draws one set of weights from ``q`` and pulls the
    arm that network rates highest; :meth:`greedy` uses the mean weights.
    """

    Config = VariationalConfig
    passes_per_step = 2  # the means and the variances of the local reparameterisation

    def __init__(self, env: Any, config: VariationalConfig, seed: int) -> None:
        if config.network != "mlp":
            raise ConfigError(
                f"variational builds its own Bayes-by-backprop layers and cannot take a "
                f"network factory: network must be 'mlp', got {config.network!r}"
            )
        super().__init__(env, config, seed)
        self.network = VariationalNetwork(
            self.context_dim, config.hidden_sizes, self.n_arms, self.generator, config.dropout
        )
        self.optimizer = self.new_optimizer(self.network.parameters())
        self.networks = {"network": (self.network, self.optimizer)}

    def select(self, context: np.ndarray) -> int:
        """Round robin at first, then the best arm of one weight draw from ``q`` (thinned by dropout
        with ``dropout_decisions``)."""
        arm = self.round_robin(context)
        if arm is not None:
            return arm
        with torch.no_grad():
            x = self.as_tensor(context)
            thinned = self.config.dropout_decisions
            return int(self.network(x, self.generator, thinned).argmax())

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        """Add the round to the data and, every ``training_freq`` rounds, train on
        :meth:`negative_elbo`."""
        self.data.add(self.check_context(context), action, reward)
        if self.training_due():
            self.train(self.network.parameters(), self.optimizer, self.negative_elbo)

    def negative_elbo(
        self, contexts: torch.Tensor, arms: torch.Tensor, rewards: torch.Tensor
    ) -> torch.Tensor:
        """Minus the evidence lower bound per datum, estimated on one minibatch."""
        predicted = self.network.local_forward(contexts, self.generator)
        predicted = predicted.gather(1, arms[:, None]).squeeze(1)
        sigma = self.config.noise_sigma
        log_likelihood = (
            -0.5 * math.log(2.0 * math.pi)
            - math.log(sigma)
            - (rewards - predicted).square() / (2.0 * sigma**2)
        )
        return -log_likelihood.mean() + self.network.kl() / self.data.size


@dataclass
class BootstrapConfig(NetworkConfig):
    """Hyperparameters of :class:`Bootstrap`."""

    n_networks: int = hyperparameter(3, "networks in the ensemble (q in the paper)", low=1)
    inclusion: float = hyperparameter(
        0.95,
        "probability that a round enters each network's data (p)",
        low=0,
        high=1,
        low_open=True,
    )


class Bootstrap(NeuralBandit):
    """Thompson sampling with a bootstrapped ensemble (Osband et al. 2016; "BootRMS" in
    Riquelme et al. 2018, section 3).

    Each of ``n_networks`` networks trains on its own subsample of the rounds: every round
    enters each network's data independently with probability ``inclusion`` (the first round
    enters all). A decision draws one network uniformly and pulls its best arm, a cheap
    approximate posterior draw. :meth:`greedy` averages the networks.
    """

    Config = BootstrapConfig

    def __init__(self, env: Any, config: BootstrapConfig, seed: int) -> None:
        super().__init__(env, config, seed, n_masks=config.n_networks)
        self.ensemble = [self.new_network(i) for i in range(config.n_networks)]
        self.optimizers = [self.new_optimizer(net.parameters()) for net in self.ensemble]
        self.networks = {
            f"network{i}": pair
            for i, pair in enumerate(zip(self.ensemble, self.optimizers, strict=True))
        }

    def select(self, context: np.ndarray) -> int:
        """Round robin at first, then the best arm of one network of the ensemble drawn uniformly
        (thinned by dropout with ``dropout_decisions``)."""
        arm = self.round_robin(context)
        if arm is not None:
            return arm
        network = self.ensemble[int(self.rng.integers(len(self.ensemble)))]
        with torch.no_grad():
            return int(network(self.as_tensor(context), self.decision_generator).argmax())

    def greedy(self, context: np.ndarray) -> int:
        """The arm whose estimate, averaged over the ensemble, is highest."""
        x = self.as_tensor(context)
        with torch.no_grad():
            return int(torch.stack([network(x) for network in self.ensemble]).mean(0).argmax())

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        """Add the round with its mask (each network's data takes it with probability ``inclusion``;
        the first round goes to all) and, every ``training_freq`` rounds, train each network on its
        own rows."""
        mask = self.rng.random(len(self.ensemble)) < self.config.inclusion
        if self.data.size == 0:
            mask[:] = True
        self.data.add(self.check_context(context), action, reward, mask)
        if not self.training_due():
            return
        masks = self.data.masks[: self.data.size]
        for index, (network, optimizer) in enumerate(
            zip(self.ensemble, self.optimizers, strict=True)
        ):
            rows = torch.from_numpy(np.flatnonzero(masks[:, index])).to(self.device)
            self.train(
                network.parameters(), optimizer, squared_error(network, self.generator), rows
            )


@dataclass
class ParamNoiseConfig(NetworkConfig):
    """Hyperparameters of :class:`ParamNoise` (defaults: Riquelme et al. 2018)."""

    noise_std: float = hyperparameter(
        0.05, "initial standard deviation of the weight noise", low=0, low_open=True
    )
    kl_epsilon: float = hyperparameter(
        0.1,
        "initial epsilon of the KL target -log(1 - epsilon + epsilon / arms); decays by 0.99 "
        "per training",
        low=0,
        high=1,
        low_open=True,
    )
    kl_samples: int = hyperparameter(
        300, "contexts drawn from the data to measure the KL after each training", low=1
    )


class ParamNoise(NeuralBandit):
    """Exploration by Gaussian noise on the network weights (Plappert et al. 2018), as in
    Riquelme et al. (2018), section 3 ("ParamNoise").

    Each decision adds ``N(0, noise_std^2)`` to every weight and pulls the perturbed network's
    best arm. After each training the scale adapts: on ``kl_samples`` past contexts, the KL
    divergence between the softmax of the clean and of a perturbed network's outputs is
    compared with ``delta = -log(1 - epsilon + epsilon / arms)``, the KL between a greedy
    policy and its epsilon-greedy version: below it ``noise_std`` grows by 1%, above it
    shrinks by 1%; ``epsilon`` itself decays by 1% per training.
    """

    Config = ParamNoiseConfig

    def __init__(self, env: Any, config: ParamNoiseConfig, seed: int) -> None:
        super().__init__(env, config, seed)
        self.network = self.new_network()
        self.optimizer = self.new_optimizer(self.network.parameters())
        self.networks = {"network": (self.network, self.optimizer)}
        self.noise_std = config.noise_std
        self.kl_epsilon = config.kl_epsilon

    def perturbed(self, contexts: torch.Tensor, thinned: bool = False) -> torch.Tensor:
        """Outputs ``(b, k)`` for contexts ``(b, d)`` of the network with one draw of noise
        (and, ``thinned``, of dropout masks)."""
        generator, scale = self.generator, self.noise_std
        weights = {
            name: value + scale * torch.randn(value.shape, generator=generator, device=value.device)
            for name, value in self.network.named_parameters()
        }
        return functional_call(self.network, weights, (contexts, generator if thinned else None))

    def select(self, context: np.ndarray) -> int:
        """Round robin at first, then the best arm of the network with one draw of weight noise
        (and, with ``dropout_decisions``, of dropout masks)."""
        arm = self.round_robin(context)
        if arm is not None:
            return arm
        with torch.no_grad():
            thinned = self.config.dropout_decisions
            return int(self.perturbed(self.as_tensor(context), thinned).argmax())

    def update(self, context: np.ndarray, action: int, reward: float) -> None:
        """Add the round to the data and, every ``training_freq`` rounds, train the network, then
        :meth:`adapt_noise`."""
        self.data.add(self.check_context(context), action, reward)
        if self.training_due():
            self.train(
                self.network.parameters(),
                self.optimizer,
                squared_error(self.network, self.generator),
            )
            self.adapt_noise()

    def adapt_noise(self) -> None:
        """Grow ``noise_std`` by 1% if the KL between the clean and a perturbed network's softmax,
        on ``kl_samples`` past contexts, is below the target ``delta``, else shrink it by 1%;
        ``kl_epsilon`` then decays by 1%."""
        contexts, _, _ = self.data.tensors(self.device)
        rows = torch.randint(
            self.data.size, (self.config.kl_samples,), generator=self.generator, device=self.device
        )
        with torch.no_grad():
            clean = F.log_softmax(self.network(contexts[rows]), dim=1)
            noisy = F.log_softmax(self.perturbed(contexts[rows]), dim=1)
        kl = float((clean.exp() * (clean - noisy)).sum(1).mean())
        epsilon = self.kl_epsilon
        target = -math.log(1.0 - epsilon + epsilon / self.n_arms)
        self.noise_std = self.noise_std * 1.01 if kl < target else self.noise_std / 1.01
        self.kl_epsilon = epsilon * 0.99

    def training_state(self) -> AgentState:
        """The neural agents' training state, and the adapted ``noise_std`` and ``kl_epsilon``."""
        state = super().training_state()
        state.meta["noise"] = {"noise_std": self.noise_std, "kl_epsilon": self.kl_epsilon}
        return state

    def load_training_state(self, state: AgentState) -> None:
        """Restore the training state, with the adapted ``noise_std`` and ``kl_epsilon``."""
        super().load_training_state(state)
        self.noise_std = state.meta["noise"]["noise_std"]
        self.kl_epsilon = state.meta["noise"]["kl_epsilon"]
