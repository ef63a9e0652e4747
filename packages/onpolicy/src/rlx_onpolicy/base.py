"""What VPG, A2C and PPO share: vector environments, the policy, sampling and checkpoints.

One learning iteration (:meth:`OnPolicyAgent.step`) collects ``n_steps`` steps from each of
``n_envs`` environments with the current policy, computes GAE(lambda) advantages, and hands
the rollout to the algorithm's :meth:`OnPolicyAgent.update`. Around that this class owns:

- a :class:`~rlx_onpolicy.sampler.Sampler`: the vector environment, built from ``env.spec``
  with ``gymnasium.make_vec`` (``sync``, ``async``, or ``auto``: gymnasium's own vectorised
  implementation for three copies or more when the environment has one, such as CartPole,
  else ``sync``), running observation and reward normalisation, and the rollout buffer;
- the optimisers (rlx's flat Adam by default, or any torch optimiser by name with its
  arguments; one for the whole policy, or one for the actor and one for the critic when
  they have their own step sizes), linear learning-rate schedules over ``schedule_steps``
  (by default the trainer's step budget) or a torch learning-rate scheduler stepped after
  every optimiser step, gradient-norm clipping, the device;
- checkpoints: the policy part (networks, observation normalisers) and what exact resume
  needs on top (optimisers, schedulers, RNGs, reward normaliser, and the environments in
  the middle of their episodes, :mod:`rlx.envstate`);
- a stop with a clear message when a loss is not finite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx import schedules
from rlx.agents import Saveable
from rlx.config import hyperparameter
from rlx.errors import ConfigError
from rlx.memory import (
    array_nbytes,
    check_allocations,
    environments_nbytes,
    mlp_nbytes,
    space_nbytes,
)
from rlx.nn.distributions import action_distribution
from rlx.nn.layers import combined_factory, is_image_space
from rlx.nn.optim import (
    FiniteGuard,
    FlatOptimizer,
    Schedulers,
    apply_gradients,
    settings_optimizer,
)
from rlx.nn.state import (
    generator_array,
    host_scalars,
    load_modules_state,
    load_optimizers_state,
    mlp_work,
    modules_state,
    optimizers_state,
    resolve_device,
    restore_generator_array,
    set_torch_threads,
)
from rlx.normalization import RunningMeanStd
from rlx.observations import coder_for
from rlx.protocols import AgentState, Iteration
from rlx.seeding import agent_generator, derive, generator_state, restore_generator
from rlx.spaces import observation_batch
from rlx_onpolicy.masks import apply_masks, checked_masks, mask_widths
from rlx_onpolicy.policies import ActorCritic, build_actor_critic
from rlx_onpolicy.rollout import RolloutBuffer
from rlx_onpolicy.sampler import Sampler, exploration_log_std


@dataclass
class OnPolicyConfig:
    """Hyperparameters every on-policy agent has; each algorithm sets its own defaults."""

    n_envs: int = hyperparameter(8, "environments stepped together (gymnasium make_vec)", low=1)
    n_steps: int = hyperparameter(256, "steps per environment per rollout", low=1)
    vectorization: str = hyperparameter(
        "auto",
        "auto (gymnasium's vectorised env for 3 copies or more when there is one, else sync), "
        "sync or async",
        choices=("auto", "sync", "async"),
    )
    gamma: float = hyperparameter(0.99, "discount factor", low=0, high=1, search=(0.9, 0.9999))
    gae_lambda: float = hyperparameter(
        0.95, "GAE lambda (1: Monte Carlo advantages)", low=0, high=1, search=(0.8, 1.0)
    )
    learning_rate: float = hyperparameter(
        3e-4, "optimiser step size", low=0, low_open=True, search=(1e-5, 1e-2)
    )
    actor_learning_rate: float | None = hyperparameter(
        None,
        "the actor's step size (None: learning_rate); when it or critic_learning_rate is set, "
        "PPO and A2C give the actor and the critic an optimiser each",
        low=0,
        low_open=True,
    )
    critic_learning_rate: float | None = hyperparameter(
        None, "the critic's step size (None: learning_rate)", low=0, low_open=True
    )
    optimizer: str = hyperparameter(
        "adam",
        "adam (rlx's flat Adam, the fastest here), a torch.optim class (SGD, AdamW, RAdam, "
        "...) or 'package.module:Class'",
        imports_code=True,
    )
    optimizer_kwargs: dict[str, Any] = hyperparameter(
        {}, "keyword arguments of the optimiser, a JSON object on the command line"
    )
    lr_schedule: str = hyperparameter(
        "constant",
        "constant, or linear: decays to 0 over schedule_steps",
        choices=("constant", "linear"),
    )
    lr_scheduler: str | None = hyperparameter(
        None,
        "a torch.optim.lr_scheduler class (StepLR, CosineAnnealingLR, ExponentialLR, ...) "
        "stepped after every step of each optimiser (None: lr_schedule sets the step sizes)",
    )
    lr_scheduler_kwargs: dict[str, Any] = hyperparameter(
        {}, "keyword arguments of the scheduler, a JSON object on the command line"
    )
    schedule_steps: int | None = hyperparameter(
        None,
        "environment steps of the linear schedules (default: the trainer's step budget)",
        low=1,
    )
    max_grad_norm: float | None = hyperparameter(
        0.5,
        "clip gradients to this global norm (None: no clipping)",
        low=0,
        low_open=True,
        search=(0.3, 5.0),
    )
    ent_coef: float = hyperparameter(0.0, "weight of the entropy bonus", low=0, search=(1e-8, 0.1))
    vf_coef: float = hyperparameter(0.5, "weight of the value loss", low=0, search=(0.2, 1.0))
    normalize_observations: bool = hyperparameter(
        False, "standardise observations with running statistics (saved in checkpoints)"
    )
    normalize_rewards: bool = hyperparameter(
        False, "scale rewards by the running std of the discounted return"
    )
    clip_observations: float = hyperparameter(
        10.0, "normalised observations are clipped to +-this", low=0, low_open=True
    )
    clip_rewards: float = hyperparameter(
        10.0, "normalised rewards are clipped to +-this", low=0, low_open=True
    )
    policy: str = hyperparameter(
        "auto",
        "auto (cnn for images, combined for Dict observations holding images, else mlp), mlp, "
        "cnn, combined, or 'package.module:factory' returning a torch feature module",
        imports_code=True,
    )
    policy_kwargs: dict[str, Any] = hyperparameter(
        {}, "keyword arguments of the policy and critic_policy factories, a JSON object"
    )
    encoders: dict[str, Any] = hyperparameter(
        {},
        "Dict observations: their own encoders of some keys, {key: 'package.module:factory'}; "
        "factory(space) returns a torch module from (batch, *shape) to (batch, features), "
        "concatenated with the other keys (a CNN per image key by default)",
        imports_code=True,
    )
    critic_policy: str | None = hyperparameter(
        None,
        "'package.module:factory' returning a torch feature module for the critic alone "
        "(None: the critic of policy)",
        imports_code=True,
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (64, 64), "hidden layers of the mlp policy's actor and critic"
    )
    actor_hidden_sizes: tuple[int, ...] | None = hyperparameter(
        None, "hidden layers of the mlp policy's actor (None: hidden_sizes)"
    )
    critic_hidden_sizes: tuple[int, ...] | None = hyperparameter(
        None, "hidden layers of the mlp policy's critic (None: hidden_sizes)"
    )
    activation: str = hyperparameter(
        "tanh", "activation of the mlp policy", choices=("tanh", "relu", "elu")
    )
    log_std_init: float = hyperparameter(0.0, "initial log standard deviation (Box actions)")
    ortho_init: bool = hyperparameter(True, "orthogonal initialisation of the built-in policies")
    device: str = hyperparameter(
        "auto",
        "torch device: auto (cuda when present for a CNN or for networks and minibatches of "
        "at least 1e7 multiply-adds a forward pass, else cpu), cpu, cuda",
    )
    torch_threads: int = hyperparameter(
        1, "torch CPU threads (0: leave torch's default); small networks are fastest on one", low=0
    )

    def __post_init__(self) -> None:
        for name in ("hidden_sizes", "actor_hidden_sizes", "critic_hidden_sizes"):
            sizes = getattr(self, name)
            if sizes is not None and (not sizes or any(size < 1 for size in sizes)):
                raise ValueError(f"{name} must be positive layer sizes, got {sizes}")
        if self.lr_scheduler is not None and self.lr_schedule != "constant":
            raise ConfigError(
                f"lr_schedule={self.lr_schedule} and lr_scheduler={self.lr_scheduler} both set "
                "the learning rate; keep one (lr_schedule=constant leaves it to the scheduler)"
            )

    def step_sizes(self) -> tuple[float, float]:
        """The actor's and the critic's learning rates."""
        actor, critic = self.actor_learning_rate, self.critic_learning_rate
        return (
            self.learning_rate if actor is None else actor,
            self.learning_rate if critic is None else critic,
        )

    def layer_sizes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The hidden layers of the mlp policy's actor and critic."""
        actor, critic = self.actor_hidden_sizes, self.critic_hidden_sizes
        return (
            tuple(self.hidden_sizes if actor is None else actor),
            tuple(self.hidden_sizes if critic is None else critic),
        )


@dataclass
class PolicyGradientConfig(OnPolicyConfig):
    """Hyperparameters VPG, A2C and PPO share on top of :class:`OnPolicyConfig`: the
    statistics of the advantages, noise on the actions, rollouts of whole episodes."""

    advantage_statistics: str = hyperparameter(
        "batch",
        "what normalize_advantage standardises with: batch (the mean and std of each "
        "minibatch, of each update for A2C and VPG) or running (of every advantage so far, "
        "updated once a rollout, saved for resume: Pyrado's RunningStandardizer)",
        choices=("batch", "running"),
    )
    action_noise: str = hyperparameter(
        "none",
        "exploration noise on the sampled Box actions in training: none, or gaussian "
        "(N(0, action_noise_std^2) per action dimension, counted in the actions' "
        "log-probabilities: the policy trained is the policy with its noise)",
        choices=("none", "gaussian"),
        searched=False,
    )
    action_noise_std: float | None = hyperparameter(
        None,
        "standard deviation of action_noise=gaussian, in the action's units (None: 0.1)",
        low=0,
        low_open=True,
    )
    min_episodes: int | None = hyperparameter(
        None,
        "collect each rollout until at least this many episodes have ended, counted over the "
        "n_envs environments, in whole steps of all of them (Pyrado's min_rollouts; None: "
        "n_steps steps); n_steps then only sizes the first buffer, which grows as needed",
        low=1,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.action_noise_std is not None and self.action_noise == "none":
            raise ConfigError(
                f"action_noise_std={self.action_noise_std} is the scale of action_noise, which "
                "is none: set action_noise=gaussian too, or drop action_noise_std"
            )
        if self.advantage_statistics == "running" and not getattr(
            self, "normalize_advantage", False
        ):
            raise ConfigError(
                "advantage_statistics=running says how advantages are standardised; set "
                "normalize_advantage=true too, or drop advantage_statistics"
            )


@dataclass
class ActorCriticConfig(PolicyGradientConfig):
    """Hyperparameters A2C and PPO share on top of :class:`PolicyGradientConfig`: how the
    critic is trained."""

    critic_epochs: int | None = hyperparameter(
        None,
        "fit the critic apart from the policy: passes of its own over each rollout, on the "
        "returns, with its own optimiser; the policy's loss then has no value term (None: "
        "one loss, the value term weighted by vf_coef); needs separate actor and critic "
        "networks",
        low=1,
    )
    critic_batch_size: int | None = hyperparameter(
        None, "minibatch of the critic's passes of critic_epochs (None: the whole rollout)", low=1
    )
    action_masks: bool = hyperparameter(
        False,
        "act on valid actions only: the environment's action_masks() (one bool per action, "
        "sb3-contrib's convention), or else the info's action_mask of every reset and step, "
        "masks the logits in acting, in the update's log-probabilities and entropy, and in "
        "evaluation (Discrete and MultiDiscrete actions)",
        searched=False,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.critic_batch_size is not None and self.critic_epochs is None:
            raise ConfigError(
                f"critic_batch_size={self.critic_batch_size} is the minibatch of the critic's "
                "own passes: set critic_epochs too, or drop critic_batch_size"
            )


class OnPolicyAgent(Saveable):
    """Base class of the on-policy agents; subclasses set ``Config`` and :meth:`update`."""

    Config: ClassVar[type] = OnPolicyConfig
    #: One iteration is n_steps * n_envs environment steps: evaluate and log every 10k.
    trainer_defaults: ClassVar[dict[str, Any]] = {"eval_every": 10_000, "log_every": 2_000}
    #: Whether :meth:`update` takes a seed batch's stacked tensors (:meth:`seed_batch`).
    batched_update: ClassVar[bool] = False

    def __init__(self, env: Any, config: Any, seed: int) -> None:
        self.env = env
        self.config = config
        self.seed = seed
        c = config
        #: Packs and encodes observations that are not a Box (Discrete, Dict, ...), or None.
        self.coder = coder_for(env.observation_space)
        #: The Box the policy reads: the environment's, or the coder's encoded rows.
        self.input_space = env.observation_space if self.coder is None else self.coder.encoded_space
        check_allocations(self.memory_estimate(env))
        set_torch_threads(c.torch_threads)
        self.device = self.choose_device(self.input_space)
        self.distribution = action_distribution(env.action_space)
        if getattr(c, "action_noise", "none") != "none" and not self.distribution.has_log_std:
            raise ConfigError(
                f"action_noise={c.action_noise} adds noise to continuous (Box) actions; "
                f"{env.action_space} is not one: drop action_noise (ent_coef keeps a "
                "policy over discrete actions exploring)"
            )
        #: Whether acting and the updates keep to the valid actions (``action_masks``);
        #: :func:`rlx.evaluate` then passes the environment's masks to :meth:`act`.
        self.takes_action_masks = bool(getattr(c, "action_masks", False))
        self.rng = agent_generator(seed)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(agent_generator(seed, 1).integers(2**62)))
        self.eval_generator = torch.Generator(device=self.device)
        self.sample_rng = agent_generator(seed, 2)
        self.schedule_steps = c.schedule_steps
        self.env_steps = 0
        self.updates = 0
        #: The seed batch this agent trains in (:meth:`seed_batch`), or None.
        self.batch: Any = None
        #: Non-finite losses on a CUDA device, raised at the end of the iteration.
        self.guard = FiniteGuard()
        #: The running mean and variance of the advantages (``advantage_statistics=running``).
        self.advantage_stats = (
            RunningMeanStd(()) if getattr(c, "advantage_statistics", "batch") == "running" else None
        )
        self.build()
        #: One learning-rate scheduler per optimiser (by the optimiser's name), or none.
        self.schedulers = Schedulers(c.lr_scheduler, c.lr_scheduler_kwargs, self.optimizers)
        self._samplers = self.new_samplers()
        self.sampler = next(iter(self._samplers.values()))
        self.buffer = self.sampler.buffer

    # -- what an algorithm provides -----------------------------------------------------------

    def build(self) -> None:
        """Create ``self.policy`` (an :class:`ActorCritic`) and ``self.optimizers``."""
        self.policy = self.new_policy()
        self.optimizers = self.new_optimizers(eps=1e-5)

    def update(self) -> dict[str, float]:
        """Learn from ``self.buffer`` (advantages computed); return metrics to log."""
        raise NotImplementedError

    # -- building -----------------------------------------------------------------------------

    def memory_estimate(self, env: Any) -> dict[str, tuple[int, str]]:
        """Bytes of what building this agent allocates, and what lowers them, from the
        settings alone (checked before anything is built, see :mod:`rlx.memory`): the
        environments, the rollout buffer (with its flattened copy and GAE's temporaries in an
        update), the MLP policy's networks with their optimiser state and a minibatch's
        activations. SVPG has ``n_particles`` of each."""
        c = self.config
        copies = int(getattr(c, "n_particles", 1))
        each = f" for each of {copies:,} particles" if copies > 1 else ""
        image = is_image_space(self.input_space)
        observation = array_nbytes(self.input_space.shape, 1 if image else 4)
        rollout = RolloutBuffer.nbytes_for(
            c.n_steps, c.n_envs, observation, space_nbytes(env.action_space)
        )
        rollout_name = f"a rollout of {c.n_steps:,} steps (n_steps) of {c.n_envs:,} environments"
        parts = {
            f"{c.n_envs:,} environment{'s' if c.n_envs != 1 else ''} (n_envs){each}": (
                copies * environments_nbytes(env, c.n_envs, c.vectorization),
                "lower n_envs",
            ),
            rollout_name + each: (copies * 2 * rollout, "lower n_steps or n_envs"),
        }
        if c.policy in ("auto", "mlp") and not image:
            space = env.action_space
            if isinstance(space, gym.spaces.Discrete):
                n_out = int(space.n)
            elif isinstance(space, gym.spaces.MultiDiscrete):
                n_out = sum(int(n) for n in space.nvec.ravel())
            else:
                n_out = array_nbytes(space.shape, 1)
            n_in = array_nbytes(self.input_space.shape, 1)
            actor, critic = c.layer_sizes()
            mlps = ([n_in, *actor, n_out], [n_in, *critic, 1])
            parts[f"actor {list(actor)} and critic {list(critic)} networks{each}"] = (
                copies * sum(mlp_nbytes(sizes) for sizes in mlps),
                "lower hidden_sizes",
            )
            rollout_steps = c.n_steps * c.n_envs
            batch = min(getattr(c, "batch_size", rollout_steps), rollout_steps)
            activations = copies * sum(mlp_nbytes(sizes, batch, copies=0) for sizes in mlps)
            if batch < rollout_steps:
                parts[f"minibatches of {batch:,} steps (batch_size){each}"] = (
                    activations,
                    "lower batch_size",
                )
            else:  # the whole rollout is the batch
                total, hint = parts[rollout_name + each]
                parts[rollout_name + each] = (total + activations, hint)
        if copies > 1:
            parts = {
                name: (nbytes, f"{hint} or n_particles") for name, (nbytes, hint) in parts.items()
            }
        return parts

    def new_optimizer(
        self, parameters: list[torch.Tensor], learning_rate: float, **defaults: Any
    ) -> Any:
        """The optimiser of some flat parameter vectors: rlx's flat Adam (``defaults`` are the
        algorithm's own Adam settings, ``optimizer_kwargs`` override them), or the torch
        optimiser ``optimizer`` names with ``optimizer_kwargs``."""
        c = self.config
        return settings_optimizer(
            c.optimizer, c.optimizer_kwargs, parameters, learning_rate, **defaults
        )

    def new_optimizers(self, **defaults: Any) -> dict[str, Any]:
        """``{"optimizer": ...}`` over the whole policy, or, when ``actor_learning_rate``,
        ``critic_learning_rate`` or ``critic_epochs`` is set, ``{"actor": ..., "critic": ...}``
        over its two vectors (see :meth:`policy_optimizer`)."""
        c = self.config
        if self.separate_critic() and self.policy.critic_body is None:
            raise ConfigError(
                f"critic_epochs={c.critic_epochs} trains the critic apart from the policy, "
                f"which needs separate actor and critic networks; policy={c.policy} shares one "
                "body: give the critic its own (critic_policy='package.module:factory'), use "
                "policy=mlp, or drop critic_epochs"
            )
        joint = c.actor_learning_rate is None and c.critic_learning_rate is None
        if joint and not self.separate_critic():
            return {
                "optimizer": self.new_optimizer(self.policy.vectors(), c.learning_rate, **defaults)
            }
        actor, critic = c.step_sizes()
        return {
            "actor": self.new_optimizer([self.policy.actor_vector], actor, **defaults),
            "critic": self.new_optimizer([self.policy.critic_vector], critic, **defaults),
        }

    def policy_optimizer(self) -> Any:
        """What one step on the whole policy's loss steps: the optimiser, or the actor's and
        the critic's together."""
        if "optimizer" in self.optimizers:
            return self.optimizers["optimizer"]
        members = [self.optimizers["actor"], self.optimizers["critic"]]
        if all(isinstance(optimizer, FlatOptimizer) for optimizer in members):
            return FlatJointOptimizer(members)
        return JointOptimizer(members)

    def training_log_std(self) -> torch.Tensor | None:
        """The log standard deviations the losses see: the policy's, widened by
        ``action_noise`` (:func:`rlx_onpolicy.sampler.exploration_log_std`); None for discrete
        actions."""
        return exploration_log_std(self.policy.log_std, self.config)

    def separate_critic(self) -> bool:
        """Whether the critic is fitted by passes of its own (``critic_epochs``, A2C and PPO)
        and the policy's loss has no value term."""
        return getattr(self.config, "critic_epochs", None) is not None

    def actor_step(self) -> tuple[Any, list[torch.Tensor]]:
        """The optimiser and the parameter vectors that a step on the policy's loss moves: the
        whole policy's (:meth:`policy_optimizer`), or the actor's alone when the critic is
        fitted apart (:meth:`fit_critic`)."""
        if self.separate_critic():
            return self.optimizers["actor"], self.policy.vectors()[:1]
        return self.policy_optimizer(), self.policy.vectors()

    def fit_critic(self, data: dict[str, Any]) -> Any:
        """``critic_epochs`` passes over the rollout ``data`` in minibatches of
        ``critic_batch_size`` (drawn from ``self.rng``), each a step of the critic's optimiser
        on the squared error to the GAE returns (with PPO's ``clip_range_vf`` around the
        rollout's values when set); the advantages were computed before, with the critic of the
        rollout. Returns the mean value loss of the last pass (per seed in a seed batch)."""
        c = self.config
        size = c.critic_batch_size or data["values"].shape[-1]
        clip = getattr(c, "clip_range_vf", None)
        optimizer, critic = self.optimizers["critic"], self.policy.vectors()[1:]
        total: Any = 0.0
        count: Any = 0.0
        for epoch in range(c.critic_epochs):
            for batch in self.buffer.minibatches(data, size, self.rng):
                weights, rows = batch.get("weights"), batch.get("rows")
                values = self.policy.values(batch["observations"])
                if clip is not None:
                    old = batch["values"]
                    values = old + (values - old).clamp(-clip, clip)
                loss = mean((batch["returns"] - values).square(), weights)
                self.apply_gradients(loss, optimizer, critic, rows)
                if epoch == c.critic_epochs - 1:
                    weight = 1.0 if rows is None else torch.from_numpy(rows).to(loss)
                    total = total + loss.detach() * weight
                    count = count + weight
        if isinstance(count, torch.Tensor):  # per seed: a seed may have had no minibatch
            count = count.clamp(min=1.0)
        return total / count

    def running_advantages(
        self,
        advantages: torch.Tensor,
        weights: torch.Tensor | None = None,
        rows: np.ndarray | None = None,
    ) -> torch.Tensor:
        """``advantages`` standardised with the running mean and std of every advantage so far
        (``advantage_statistics=running``), after merging them into those statistics. A seed
        batch's ``(K, N)`` advantages update each seed's own statistics with its real entries
        (``weights``), for the ``rows`` that learn."""
        values = advantages.detach().cpu().numpy().astype(np.float64)
        if weights is None:
            stats = self.advantage_stats
            stats.update(values)
            return (advantages - float(stats.mean)) / (float(np.sqrt(stats.var)) + 1e-8)
        counts = weights.sum(-1).cpu().numpy().astype(int)
        means, stds = np.zeros(len(values)), np.ones(len(values))
        for k, agent in enumerate(self.batch.agents):
            stats = agent.advantage_stats
            if rows is None or rows[k]:
                stats.update(values[k, : counts[k]])
            means[k], stds[k] = stats.mean, np.sqrt(stats.var)
        mean_ = torch.as_tensor(means, dtype=advantages.dtype, device=advantages.device)
        std = torch.as_tensor(stds, dtype=advantages.dtype, device=advantages.device)
        return (advantages - mean_[:, None]) / (std[:, None] + 1e-8)

    def new_policy(self) -> ActorCritic:
        """A new :class:`~rlx_onpolicy.policies.ActorCritic` of the configured architecture, its
        weights drawn under a seed from ``self.rng``, on ``self.device`` with its parameters
        flattened."""
        c = self.config
        actor_sizes, critic_sizes = c.layer_sizes()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.rng.integers(2**62)))
            policy = build_actor_critic(
                self.input_space,
                self.env.action_space,
                self.distribution,
                c.policy,
                actor_sizes,
                c.activation,
                c.log_std_init,
                c.ortho_init,
                critic_hidden_sizes=critic_sizes,
                critic_policy=c.critic_policy,
                policy_kwargs=c.policy_kwargs,
                combined=combined_factory(self.coder, c.encoders),
            )
        policy.to(self.device).flatten_parameters()
        return policy

    def set_training_budget(self, steps: int | None) -> None:
        """Called by the trainer: the step budget sets the length of linear schedules."""
        if self.config.schedule_steps is None and steps is not None:
            self.schedule_steps = int(steps)

    def scheduled(self, value: float, schedule: str) -> Any:
        """``value``, or under a linear schedule its decay to 0 over ``schedule_steps``; for
        a seed batch's learner (``env_steps`` one count per seed) a ``(K, 1)`` tensor."""
        if schedule != "linear":
            return value
        if isinstance(self.env_steps, np.ndarray):
            values = schedules.linear(self.env_steps, value, 0.0, self.schedule_steps)
            values = np.broadcast_to(values, self.env_steps.shape)  # a number without a budget
            return torch.tensor(values, dtype=torch.float32, device=self.device)[:, None]
        return schedules.linear(self.env_steps, value, 0.0, self.schedule_steps)

    # -- acting -------------------------------------------------------------------------------

    @torch.no_grad()
    def act(self, observation: Any, deterministic: bool = True, action_masks: Any = None) -> Any:
        """The policy's action (greedy when ``deterministic``): one for one observation, ``n``
        (leading axis ``n``) for a batch ``(n, *obs_shape)``, in one forward pass; with
        ``action_masks`` (one bool per action, a row per observation) among the valid actions
        only (:mod:`rlx_onpolicy.masks`)."""
        batch = observation_batch(self.env.observation_space, observation)
        observations = batch.observations
        if self.coder is not None:
            observations = self.coder.pack(observations)
        inputs = self.sampler.preprocess(observations, update=False)
        params = self.acting_params(torch.as_tensor(inputs, device=self.device))
        if action_masks is not None:
            masks = checked_masks(action_masks, len(params), mask_widths(self.distribution))
            params = apply_masks(params, torch.as_tensor(masks, device=self.device))
        if deterministic:
            action = self.distribution.mode(params)
        else:
            action, _ = self.distribution.sample(params, self.policy.log_std, self.eval_generator)
        actions = self.distribution.to_env(action.cpu().numpy())
        if batch.single and isinstance(self.env.action_space, gym.spaces.Discrete):
            return int(actions[0])
        return batch.result(actions)

    def acting_params(self, inputs: torch.Tensor) -> torch.Tensor:
        """The distribution's parameters for a batch of policy inputs (what :meth:`act` reads;
        recurrent PPO carries its cell state through them)."""
        return self.policy(inputs)[0]

    def seed_evaluation(self, seed: int) -> None:
        """Reseed the generator that ``act(deterministic=False)`` draws from, so that an evaluation
        episode depends on its seed alone."""
        self.eval_generator.manual_seed(seed)

    # -- one iteration --------------------------------------------------------------------------

    def learning_rates(self) -> dict[str, float]:
        """The initial learning rate of each optimiser in ``self.optimizers``."""
        c = self.config
        actor, critic = c.step_sizes()
        rates = {"optimizer": c.learning_rate, "actor": actor, "critic": critic}
        return {name: rates[name] for name in self.optimizers}

    def step(self) -> Iteration:
        """Collect a rollout, then update; schedules use the steps done so far (as SB3 does).
        An agent in a seed batch gets its part of the batch's round instead."""
        if self.batch is not None:
            return self.batch.iteration(self)
        returns, lengths, steps = self.collect()
        self.env_steps += steps
        self.apply_learning_rates()
        metrics = self.update()
        self.updates += 1
        self.guard.check()
        metrics = host_scalars(metrics)
        metrics["learning_rate"] = float(next(iter(self.optimizers.values())).param_groups[0]["lr"])
        return Iteration(steps, returns, lengths, metrics)

    def collect(self) -> tuple[list[float], list[int], int]:
        """Fill the buffer with a rollout of the policy
        (:meth:`~rlx_onpolicy.sampler.Sampler.collect`); returns the episodes finished and the
        steps taken."""
        return self.sampler.collect(self.policy, self.generator, self.sample_rng)

    def apply_learning_rates(self) -> None:
        """Set the step sizes that ``lr_schedule`` gives; a scheduler, when there is one,
        is in charge of them instead."""
        if self.schedulers:
            return
        for name, learning_rate in self.learning_rates().items():
            for group in self.optimizers[name].param_groups:
                group["lr"] = self.scheduled(learning_rate, self.config.lr_schedule)

    # -- shared pieces of the updates -------------------------------------------------------------

    def apply_gradients(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        parameters: Any,
        rows: np.ndarray | None = None,
    ) -> Any:
        """Backward, clip, step (:func:`rlx.nn.optim.apply_gradients`), then the optimiser's
        scheduler if any; returns the norm (a 0-d tensor on CUDA, where nothing is read on
        the host before the iteration ends). A seed batch's learner passes one loss per seed
        and the ``rows`` (seeds) that have data in this minibatch."""
        if loss.ndim == 1:
            return self.batch.apply_gradients(loss, optimizer, parameters, rows)
        norm = apply_gradients(
            loss,
            optimizer,
            parameters,
            self.config.max_grad_norm,
            where=self.where_in_training(),
            advice=NON_FINITE_ADVICE,
            guard=self.guard,
        )
        self.schedulers.step(getattr(optimizer, "members", (optimizer,)))
        return norm

    def where_in_training(self) -> str:
        """The start of a training error's message: which agent, update and step."""
        return (
            f"{type(self).__name__}, update {self.updates + 1} (after {self.env_steps} "
            "environment steps): "
        )

    @classmethod
    def seed_batch(cls, agents: Sequence[OnPolicyAgent]) -> Any:
        """Link K agents of this class (one seed each, the same settings) into one batched
        computation (:class:`rlx_onpolicy.batched.SeedBatch`), or raise
        :class:`~rlx.errors.NotBatchable` saying why they cannot be."""
        from rlx_onpolicy.batched import SeedBatch

        return SeedBatch(agents)

    # -- checkpoints --------------------------------------------------------------------------

    def networks(self) -> dict[str, nn.Module]:
        """The modules whose weights :meth:`policy_state` saves, by name: the policy."""
        return {"policy": self.policy}

    def policy_state(self) -> AgentState:
        """The networks and observation normalisers: what acting needs."""
        arrays = modules_state(self.networks())
        for name, sampler in self.samplers().items():
            arrays.update(sampler.policy_arrays(name))
        return AgentState(arrays=arrays)

    def load_policy_state(self, state: AgentState) -> None:
        """Restore the networks and the observation normalisers' statistics that
        :meth:`policy_state` saved."""
        load_modules_state(self.networks(), state.arrays)
        for name, sampler in self.samplers().items():
            sampler.load_policy_arrays(state.arrays, name)

    def resume_state(self) -> AgentState:
        """Optimisers, schedulers, RNGs, counters, reward normalisers, the advantages' running
        statistics (``advantage_statistics=running``) and the environments' snapshots."""
        arrays, optimizers = optimizers_state(self.optimizers)
        arrays["torch_rng"] = generator_array(self.generator)
        meta: dict[str, Any] = {
            "env_steps": self.env_steps,
            "updates": self.updates,
            "rng": generator_state(self.rng),
            "sample_rng": generator_state(self.sample_rng),
            "optimizers": optimizers,
            "schedulers": self.schedulers.state_dict(),
        }
        for name, sampler in self.samplers().items():
            sampler_arrays, meta[name] = sampler.state(name)
            arrays.update(sampler_arrays)
        if self.advantage_stats is not None:
            arrays.update(self.advantage_stats.arrays("advantage_stats"))
        return AgentState(arrays=arrays, meta=meta)

    def load_resume_state(self, state: AgentState) -> None:
        """Restore what :meth:`resume_state` returned (the torch generator is reseeded, with a
        warning, when it was saved on another device type); asynchronous environments restart their
        episodes from a seed derived from the update count."""
        arrays, meta = state.arrays, state.meta
        self.env_steps, self.updates = int(meta["env_steps"]), int(meta["updates"])
        restore_generator(self.rng, meta["rng"])
        restore_generator(self.sample_rng, meta["sample_rng"])
        reseed = derive(self.seed, "torch generator on another device", self.updates)
        restore_generator_array(self.generator, arrays["torch_rng"], reseed)
        load_optimizers_state(self.optimizers, arrays, meta["optimizers"])
        self.schedulers.load_state_dict(meta["schedulers"])
        restart_seed = derive(self.seed, "restart episodes", self.updates)
        for name, sampler in self.samplers().items():
            sampler.load(arrays, meta[name], name, seed=restart_seed)
        if self.advantage_stats is not None:
            self.advantage_stats.load(arrays, "advantage_stats")

    def choose_device(self, observation_space: Any) -> torch.device:
        """The ``device`` setting resolved; ``auto`` weighs the CNN or the actor and critic
        MLPs on one minibatch (:func:`rlx.nn.state.resolve_device`)."""
        c = self.config
        image = c.policy == "cnn" or (c.policy == "auto" and is_image_space(observation_space))
        work = 0
        if c.policy in ("auto", "mlp") and not image:
            minibatch = getattr(c, "batch_size", c.n_steps * c.n_envs)
            n_in = int(np.prod(observation_space.shape))
            work = sum(mlp_work(minibatch, [n_in, *sizes]) for sizes in c.layer_sizes())
        return resolve_device(c.device, image=image, work=work)

    def new_samplers(self) -> dict[str, Sampler]:
        """The samplers by checkpoint name; the first is ``self.sampler``."""
        return {
            "sampler": Sampler(self.env, self.config, self.distribution, self.device, self.seed)
        }

    def samplers(self) -> dict[str, Sampler]:
        """The samplers by checkpoint name, as :meth:`new_samplers` made them."""
        return self._samplers

    def close(self) -> None:
        """Release every sampler's environments (the worker processes of asynchronous ones); the
        next rollout reopens them."""
        for sampler in self.samplers().values():
            sampler.close()


class JointOptimizer:
    """Several optimisers stepped as one, after one backward pass: the actor's and the
    critic's, when each has its own step size."""

    def __init__(self, members: list[Any]) -> None:
        self.members = members

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Zero every member's gradients in place; ``set_to_none`` is ignored, as flattened
        parameters need (see :mod:`rlx.nn.optim`)."""
        for optimizer in self.members:
            optimizer.zero_grad(set_to_none=False)

    def step(self, finite: torch.Tensor | None = None) -> None:
        """Step every member, each with ``finite`` when given (see
        :class:`~rlx.nn.optim.FiniteGuard`)."""
        for optimizer in self.members:
            if finite is None:
                optimizer.step()
            else:
                optimizer.step(finite)


class FlatJointOptimizer(JointOptimizer, FlatOptimizer):
    """A :class:`JointOptimizer` of flat optimisers: a :class:`FiniteGuard` keeps its check of
    the loss on the device, as it does for one flat optimiser."""


NON_FINITE_ADVICE = (
    "Lower learning_rate, enable normalize_observations or normalize_rewards, or lower "
    "max_grad_norm"
)


def mean(x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """The mean over the last axis; with ``weights`` (a seed batch's ``(K, B)`` mask of the
    real entries of padded minibatches) the mean of each row's real entries."""
    if weights is None:
        return x.mean(-1)
    return (x * weights).sum(-1) / weights.sum(-1).clamp(min=1.0)


def _variance(x: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """The unbiased variance over the last axis (of each row's real entries)."""
    if weights is None:
        return x.var(-1)
    n = weights.sum(-1)
    centred = x - mean(x, weights).unsqueeze(-1)
    return (centred.square() * weights).sum(-1) / (n - 1.0).clamp(min=1.0)


def explained_variance(
    predicted: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None = None
) -> Any:
    """1 - Var[target - predicted] / Var[target]: 1 is perfect, 0 no better than a constant
    (one per seed, a tensor, with a seed batch's ``weights``)."""
    if weights is not None:
        variance = _variance(target, weights)
        ratio = _variance(target - predicted, weights) / variance.clamp(min=1e-30)
        return torch.where(variance == 0, 0.0, 1.0 - ratio)
    variance = float(target.var())
    return 0.0 if variance == 0 else 1.0 - float((target - predicted).var()) / variance


def standardize(x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``(x - mean) / (std + 1e-8)``: advantages at unit scale (per seed, over its real
    entries, with a seed batch's ``weights``; a seed with one entry keeps it as it is, as
    a single run does)."""
    if weights is None:
        return (x - x.mean()) / (x.std() + 1e-8)
    scaled = (x - mean(x, weights).unsqueeze(-1)) / (_variance(x, weights).sqrt() + 1e-8).unsqueeze(
        -1
    )
    return torch.where(weights.sum(-1, keepdim=True) > 1, scaled, x)
