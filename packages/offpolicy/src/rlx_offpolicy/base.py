"""What DQN, DDPG, TD3 and SAC share: the vector environment, the replay buffer, the loop.

One learning iteration (:meth:`OffPolicyAgent.step`) takes ``train_freq`` steps of every
environment, storing each transition in the :class:`~rlx.replay.ReplayBuffer`,
then, once ``learning_starts`` steps have been taken, makes ``gradient_steps`` updates on
minibatches drawn from it (the update-to-data ratio is ``gradient_steps / (train_freq *
n_envs)``). Before ``learning_starts`` the actions are uniformly random (warm-up). Around
that this class owns:

- a :class:`rlx.vector.VectorRunner` (``n_envs`` environments, NEXT_STEP autoreset);
- actions: Discrete ones as ``int64`` indices, Box ones stored in ``[-1, 1]`` (what tanh
  actors output) and rescaled to the space's bounds for the environment;
- checkpoints: the policy part (the networks acting needs) and the resume part (target
  networks, critics, optimisers, the replay buffer, the environments, RNGs);
- a stop with a clear message when a loss is not finite.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlx.agents import Saveable
from rlx.config import hyperparameter, load_setting
from rlx.errors import ConfigError, SpaceError
from rlx.memory import array_nbytes, check_allocations, environments_nbytes, mlp_nbytes
from rlx.nn.layers import ObservationEncoder, combined_factory, is_image_space
from rlx.nn.optim import FiniteGuard, Schedulers, apply_gradients, settings_optimizer
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
from rlx.normalization import ObservationNormalizer, RunningMeanStd
from rlx.observations import coder_for, input_size
from rlx.protocols import AgentState, Buffer, Iteration
from rlx.replay import ReplayBuffer
from rlx.schedules import linear as linear_schedule
from rlx.seeding import agent_generator, derive, generator_state, restore_generator
from rlx.spaces import observation_batch
from rlx.vector import VectorRunner
from rlx_offpolicy.frames import FrameReplayBuffer, PrioritizedFrameReplayBuffer
from rlx_offpolicy.hindsight import HindsightReplayBuffer
from rlx_offpolicy.prioritized import Prioritized, PrioritizedReplayBuffer


@dataclass
class OffPolicyConfig:
    """Hyperparameters every off-policy agent has; each algorithm sets its own defaults."""

    n_envs: int = hyperparameter(1, "environments stepped together (gymnasium make_vec)", low=1)
    vectorization: str = hyperparameter(
        "auto",
        "auto (gymnasium's vectorised env for 3 copies or more when there is one, else sync), "
        "sync or async",
        choices=("auto", "sync", "async"),
    )
    buffer_size: int = hyperparameter(
        1_000_000, "replay buffer capacity in transitions, all environments together", low=1
    )
    learning_starts: int = hyperparameter(
        100, "environment steps of uniformly random actions before learning starts", low=0
    )
    batch_size: int = hyperparameter(256, "transitions per minibatch", low=1)
    gamma: float = hyperparameter(0.99, "discount factor", low=0, high=1, search=(0.9, 0.9999))
    train_freq: int = hyperparameter(
        1, "steps of every environment between two trainings (one learning iteration)", low=1
    )
    gradient_steps: int = hyperparameter(1, "minibatch updates per training", low=1)
    learning_rate: float = hyperparameter(
        3e-4, "optimiser step size", low=0, low_open=True, search=(1e-5, 1e-2)
    )
    max_grad_norm: float | None = hyperparameter(
        None, "clip gradients to this global norm (None: no clipping)", low=0, low_open=True
    )
    her_goals: int = hyperparameter(
        0,
        "hindsight experience replay: goals relabelled per real one (k of the 'future' "
        "strategy; 0: off); needs Dict observations with achieved_goal and desired_goal "
        "and the environment's compute_reward",
        low=0,
    )
    prioritized: bool = hyperparameter(
        False,
        "prioritized experience replay, proportional (Schaul et al. 2016): the TD loss of each "
        "transition weighted by its importance-sampling weight, priorities its |TD error|",
    )
    priority_alpha: float = hyperparameter(
        0.6, "prioritized replay: priorities are (|TD error| + eps)^alpha (0: uniform)", low=0
    )
    priority_beta: float = hyperparameter(
        0.4,
        "prioritized replay: initial importance-sampling exponent, rising linearly to 1 "
        "over the training budget",
        low=0,
        high=1,
    )
    priority_eps: float = hyperparameter(
        1e-6, "prioritized replay: added to |TD error| so no priority is 0", low=0, low_open=True
    )
    replay_buffer_class: str | None = hyperparameter(
        None,
        "a replay buffer class of yours, 'package.module:Class' (None: the built-in one), "
        "built as Class(capacity, n_envs, observation_shape, observation_dtype, action_shape, "
        "action_dtype), with alpha= and eps= when prioritized; it needs add, sample and "
        "__len__ (rlx.protocols.Buffer), state and load (checkpoints), and update_priorities "
        "when prioritized; subclassing rlx.replay.ReplayBuffer gives them all",
        imports_code=True,
    )
    normalize_observations: bool = hyperparameter(
        False,
        "standardise vector observations with running statistics (the buffer keeps them raw; "
        "batches use the statistics of the moment; saved with the policy)",
    )
    clip_observations: float = hyperparameter(
        10.0, "normalised observations are clipped to +-this", low=0, low_open=True
    )
    reward_scale: float = hyperparameter(
        1.0,
        "rewards in the learning targets are multiplied by this (garage's reward_scale; the "
        "buffer keeps them raw)",
        low=0,
        low_open=True,
    )
    normalize_rewards: bool = hyperparameter(
        False,
        "divide rewards in the learning targets by the running standard deviation of the "
        "rewards collected (no mean subtracted: that would change the optimum where episodes "
        "end early); the buffer keeps them raw; saved with the policy",
    )
    network: str = hyperparameter(
        "auto",
        "auto (cnn for image observations, combined for Dict observations holding images: a "
        "CNN per image, else mlp), mlp, cnn, combined, or 'package.module:factory' "
        "returning a torch feature module, called with the observation and action spaces",
        imports_code=True,
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
    lr_scheduler: str | None = hyperparameter(
        None,
        "a torch.optim.lr_scheduler class (StepLR, CosineAnnealingLR, ExponentialLR, ...) "
        "stepped after every update of each optimiser (None: constant step sizes)",
    )
    lr_scheduler_kwargs: dict[str, Any] = hyperparameter(
        {}, "keyword arguments of the scheduler, a JSON object on the command line"
    )
    network_kwargs: dict[str, Any] = hyperparameter(
        {}, "keyword arguments of the network factory, a JSON object on the command line"
    )
    encoders: dict[str, Any] = hyperparameter(
        {},
        "Dict observations: their own encoders of some keys, {key: 'package.module:factory'}; "
        "factory(space) returns a torch module from (batch, *shape) to (batch, features), "
        "concatenated with the other keys (a CNN per image key by default)",
        imports_code=True,
    )
    hidden_sizes: tuple[int, ...] = hyperparameter((256, 256), "hidden layers of the networks")
    activation: str = hyperparameter(
        "relu", "activation of the networks", choices=("relu", "tanh", "elu")
    )
    device: str = hyperparameter(
        "cpu",
        "torch device: cpu, cuda, or auto (cuda when present for a CNN or for networks and "
        "minibatches of at least 1e7 multiply-adds a forward pass, else cpu)",
    )
    torch_threads: int = hyperparameter(
        1, "torch CPU threads (0: leave torch's default); small networks are fastest on one", low=0
    )

    def __post_init__(self) -> None:
        if not self.hidden_sizes or any(size < 1 for size in self.hidden_sizes):
            raise ValueError(f"hidden_sizes must be positive layer sizes, got {self.hidden_sizes}")
        if self.batch_size > self.buffer_size:
            raise ConfigError(
                f"batch_size = {self.batch_size} is larger than buffer_size = "
                f"{self.buffer_size}; lower batch_size or raise buffer_size"
            )


@dataclass
class ActorCriticConfig(OffPolicyConfig):
    """What the actor-critic agents (DDPG, TD3, SAC) add: layer sizes and a step size for
    each network. Their warm-up is one minibatch (Stable-Baselines3's 100 steps is below
    their batch of 256, and learning waits for a whole minibatch anyway)."""

    learning_starts: int = hyperparameter(
        256, "environment steps of uniformly random actions before learning starts", low=0
    )
    actor_hidden_sizes: tuple[int, ...] | None = hyperparameter(
        None, "hidden layers of the actor's MLP (None: hidden_sizes)"
    )
    critic_hidden_sizes: tuple[int, ...] | None = hyperparameter(
        None, "hidden layers of each critic's MLP (None: hidden_sizes)"
    )
    actor_learning_rate: float | None = hyperparameter(
        None, "the actor's step size (None: learning_rate)", low=0, low_open=True
    )
    critic_learning_rate: float | None = hyperparameter(
        None, "the critics' step size (None: learning_rate)", low=0, low_open=True
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("actor_hidden_sizes", "critic_hidden_sizes"):
            sizes = getattr(self, name)
            if sizes is not None and (not sizes or any(size < 1 for size in sizes)):
                raise ValueError(f"{name} must be positive layer sizes, got {sizes}")

    def layer_sizes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The actor's and each critic's hidden layers."""
        actor, critic = self.actor_hidden_sizes, self.critic_hidden_sizes
        return (
            tuple(self.hidden_sizes if actor is None else actor),
            tuple(self.hidden_sizes if critic is None else critic),
        )

    def step_sizes(self) -> tuple[float, float]:
        """The actor's and the critics' learning rates."""
        actor, critic = self.actor_learning_rate, self.critic_learning_rate
        return (
            self.learning_rate if actor is None else actor,
            self.learning_rate if critic is None else critic,
        )


NON_FINITE_ADVICE = "Lower learning_rate or set max_grad_norm"

#: The methods of :class:`rlx.protocols.Buffer`, which a user's replay buffer class needs.
BUFFER_METHODS = tuple(
    name
    for name, value in vars(Buffer).items()
    if callable(value) and (name == "__len__" or not name.startswith("_"))
)


def twin_priority_errors(errors: torch.Tensor) -> torch.Tensor:
    """The TD errors that set prioritized-replay priorities from twin critics' ``errors``
    ``(..., critics, batch)``: the mean of their absolute values.

    Both critics regress on one target with the same weights, and their squared errors are
    summed in one loss: the mean ``|delta|`` follows the part of that loss a transition
    still carries, and one critic's passing outlier moves it half as far as it would the
    larger of the two (the rule of Fujimoto et al. 2020's LAP, which would then replay that
    critic's noise). With one critic it is that critic's ``|delta|``.
    """
    return errors.detach().abs().mean(-2)


class OffPolicyAgent(Saveable):
    """Base class of the off-policy agents; subclasses set ``Config``, ``ACTIONS`` and the
    methods under "what an algorithm provides"."""

    Config: ClassVar[type] = OffPolicyConfig
    #: The action space classes the algorithm handles, for the error message.
    ACTIONS: ClassVar[tuple[type, ...]] = (gym.spaces.Discrete, gym.spaces.Box)
    trainer_defaults: ClassVar[dict[str, Any]] = {"eval_every": 5_000, "log_every": 1_000}
    #: Whether :meth:`update` takes a seed batch's stacked tensors (:meth:`seed_batch`).
    batched_update: ClassVar[bool] = False

    def __init__(self, env: Any, config: Any, seed: int) -> None:
        self.env = env
        self.config = c = config
        self.seed = seed
        self.check_spaces(env)
        #: Packs and encodes observations that are not a Box (Discrete, Dict, ...), or None.
        self.coder = coder_for(env.observation_space)
        #: The Box the networks read: the environment's, or the coder's encoded rows.
        self.input_space = env.observation_space if self.coder is None else self.coder.encoded_space
        self.obs_dim = int(np.prod(self.input_space.shape))
        #: Builds the extractor of Dict observations holding images or given encoders, or None.
        self.combined = combined_factory(self.coder, c.encoders)
        set_torch_threads(c.torch_threads)
        self.device = self.choose_device(env)
        space = env.action_space
        self.discrete = isinstance(space, gym.spaces.Discrete)
        if self.discrete:
            self.n_actions = int(space.n)
            action_shape: tuple[int, ...] = ()
        else:
            self.action_low = space.low.astype(np.float32)
            self.action_high = space.high.astype(np.float32)
            action_shape = (int(np.prod(space.shape)),)
        self.action_shape = action_shape
        #: uint8 frames (kept as they are: the CNN scales them) rather than float vectors.
        self.image = is_image_space(env.observation_space)
        if c.normalize_observations and self.coder is not None:
            raise ConfigError(
                f"normalize_observations standardises Box observations; {env.observation_space} "
                "is not one: drop normalize_observations"
            )
        #: Running statistics of vector observations, or None.
        self.obs_normalizer = (
            ObservationNormalizer(env.observation_space.shape, c.clip_observations)
            if c.normalize_observations and not self.image
            else None
        )
        #: Running mean and variance of the rewards collected (``normalize_rewards``), or None.
        self.reward_stats = RunningMeanStd(()) if c.normalize_rewards else None
        self.rng = agent_generator(seed)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(derive(seed, "torch generator"))
        stored_space = env.observation_space if self.coder is None else self.coder.packed_space
        buffer_layout = (
            c.buffer_size,
            c.n_envs,
            tuple(stored_space.shape),
            # Frames and packed rows are bytes.
            np.dtype(np.uint8 if self.image or self.coder is not None else np.float32),
            action_shape,
            # Discrete actions in the smallest integer type that holds them (uint8 for Atari).
            np.min_scalar_type(self.n_actions - 1) if self.discrete else np.dtype(np.float32),
        )
        check_allocations(self.memory_estimate(env, buffer_layout))
        self.learning_starts = c.learning_starts
        if c.learning_starts < c.batch_size:
            # A minibatch needs batch_size transitions: learning waits for them.
            self.learning_starts = c.batch_size
            warnings.warn(
                f"{type(self).__name__}: learning_starts = {c.learning_starts} is smaller than "
                f"batch_size = {c.batch_size}; learning starts after {c.batch_size} steps",
                stacklevel=2,
            )
        self.runner = VectorRunner(
            env, c.n_envs, c.vectorization, seed, None if self.coder is None else self.coder.pack
        )
        self.buffer = self.new_buffer(*buffer_layout)
        if isinstance(self.buffer, ReplayBuffer):  # what a restored buffer's actions must fit
            self.buffer.action_bounds = (0, self.n_actions - 1) if self.discrete else (-1.0, 1.0)
        self.env_steps = 0
        self.updates = 0
        #: The trainer's step budget (schedules over it: prioritized replay's beta, ...).
        self.budget: int | None = None
        #: The seed batch this agent trains in (:mod:`rlx_offpolicy.batched`), or None.
        self.batch: Any = None
        #: Non-finite losses on a CUDA device, raised at the end of the iteration.
        self.guard = FiniteGuard()
        #: Encodes packed minibatches on the device (one-hot), or None.
        self.encoder = (
            None if self.coder is None else ObservationEncoder(self.coder).to(self.device)
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive(seed, "initial weights"))
            self.build()
        #: One learning-rate scheduler per optimiser (by the optimiser's name), or none.
        self.schedulers = Schedulers(c.lr_scheduler, c.lr_scheduler_kwargs, self.optimizers)

    def choose_device(self, env: Any) -> torch.device:
        """The ``device`` setting resolved; ``auto`` weighs the CNN, or the MLPs of one
        update (three networks on a minibatch: the critics and the actor, or DQN's online
        network twice and its target) (:func:`rlx.nn.state.resolve_device`)."""
        c = self.config
        image = c.network == "cnn" or (
            c.network == "auto" and is_image_space(env.observation_space)
        )
        work = 0
        if c.network in ("auto", "mlp") and not image:
            action_dim = int(np.prod(env.action_space.shape or (1,)))
            sizes = [input_size(env.observation_space) + action_dim, *c.hidden_sizes]
            work = mlp_work(c.batch_size, sizes, networks=3)
        return resolve_device(c.device, image=image, work=work)

    def memory_estimate(self, env: Any, buffer_layout: tuple) -> dict[str, tuple[int, str]]:
        """Bytes of what building this agent allocates, and what lowers them, before anything
        is built (see :mod:`rlx.memory`): the environments, the replay buffer (``buffer_layout``
        is :meth:`new_buffer`'s arguments), a minibatch and its copies, and the MLPs (four
        networks with their optimiser state: the online ones and their targets)."""
        c = self.config
        capacity, n_envs, observation_shape, observation_dtype = buffer_layout[:4]
        transitions = max(1, capacity // n_envs) * n_envs
        # A user's buffer class that does not say what it allocates counts nothing here.
        nbytes_for = getattr(self.buffer_class(), "nbytes_for", None)
        buffer = int(nbytes_for(*buffer_layout)) if nbytes_for is not None else 0
        observation = array_nbytes(observation_shape, observation_dtype.itemsize)
        action_dim = 1 if self.discrete else array_nbytes(self.action_shape, 1)
        n_out = self.n_actions * int(getattr(c, "atoms", 1)) if self.discrete else action_dim
        layers = c.layer_sizes() if hasattr(c, "layer_sizes") else (tuple(c.hidden_sizes),)
        mlps = [[self.obs_dim + action_dim, *sizes, n_out] for sizes in layers]
        mlp = not self.image and c.network in ("auto", "mlp")
        activations = max(mlp_nbytes(sizes, c.batch_size, copies=0) for sizes in mlps)
        parts = {
            f"{c.n_envs:,} environment{'s' if c.n_envs != 1 else ''} (n_envs)": (
                environments_nbytes(env, c.n_envs, c.vectorization),
                "lower n_envs",
            ),
            f"a replay buffer of {transitions:,} transitions (buffer_size {c.buffer_size:,}, "
            f"n_envs {c.n_envs:,})": (
                buffer,
                "lower buffer_size" if capacity >= n_envs else "lower n_envs",
            ),
            f"minibatches of {c.batch_size:,} transitions (batch_size)": (
                3 * c.batch_size * (2 * observation + 4 * action_dim + 16)
                + (4 * activations if mlp else 0),
                "lower batch_size",
            ),
        }
        if mlp:
            shown = " and ".join(str(list(sizes)) for sizes in layers)
            parts[f"networks of hidden sizes {shown}"] = (
                4 * max(mlp_nbytes(sizes) for sizes in mlps),
                "lower hidden_sizes",
            )
        return parts

    def buffer_class(self) -> type[ReplayBuffer]:
        """The class of the replay buffer :meth:`new_buffer` builds: hindsight relabelling,
        or for stacks of image frames ``(stack, H, W)`` a :class:`FrameReplayBuffer`, which
        stores each frame once, else a plain one; prioritized when asked; or the user's
        ``replay_buffer_class``."""
        c = self.config
        if c.replay_buffer_class:
            return self.user_buffer_class()
        if c.her_goals:
            return HindsightReplayBuffer
        if self.frame_stacks:
            return PrioritizedFrameReplayBuffer if c.prioritized else FrameReplayBuffer
        return PrioritizedReplayBuffer if c.prioritized else ReplayBuffer

    def new_buffer(
        self,
        capacity: int,
        n_envs: int,
        observation_shape: tuple[int, ...],
        observation_dtype: np.dtype,
        action_shape: tuple[int, ...],
        action_dtype: np.dtype,
    ) -> ReplayBuffer:
        """The replay buffer of :meth:`buffer_class` (built before :meth:`build`)."""
        c = self.config
        layout = (
            capacity,
            n_envs,
            observation_shape,
            observation_dtype,
            action_shape,
            action_dtype,
        )
        cls = self.buffer_class()
        if c.her_goals:
            return HindsightReplayBuffer(
                *layout,
                coder=self.coder,
                compute_reward=self.env.unwrapped.compute_reward,
                goals=c.her_goals,
            )
        priorities = dict(alpha=c.priority_alpha, eps=c.priority_eps) if c.prioritized else {}
        if c.replay_buffer_class:
            try:
                return cls(*layout, **priorities)
            except TypeError as exc:
                arguments = "capacity, n_envs, observation_shape, observation_dtype, " + (
                    "action_shape, action_dtype" + (", alpha=, eps=" if priorities else "")
                )
                raise ConfigError(
                    f"replay_buffer_class {c.replay_buffer_class!r} could not be built as "
                    f"Class({arguments}): {exc}"
                ) from exc
        if issubclass(cls, Prioritized):
            return cls(*layout, **priorities)
        return cls(*layout)

    def user_buffer_class(self) -> type:
        """The user's ``replay_buffer_class``, imported and checked before anything is built:
        a class with the methods of :class:`rlx.protocols.Buffer` and those the agent also
        calls (``state`` and ``load`` for checkpoints, ``update_priorities`` when
        prioritized); what it lacks is one :class:`~rlx.errors.ConfigError` naming it all."""
        c = self.config
        target = c.replay_buffer_class
        cls = load_setting(target, "replay_buffer_class")
        if not isinstance(cls, type):
            raise ConfigError(
                f"replay_buffer_class {target!r} is a {type(cls).__name__}, not a class"
            )
        if c.her_goals:
            raise ConfigError(
                "her_goals relabels goals in rlx's hindsight buffer; drop replay_buffer_class "
                "or her_goals"
            )
        needed = dict.fromkeys(BUFFER_METHODS, "rlx.protocols.Buffer")
        needed.update(state="checkpoints", load="checkpoints")
        if c.prioritized:
            needed["update_priorities"] = "prioritized"
        missing = [
            f"{name} ({why})"
            for name, why in needed.items()
            if not callable(getattr(cls, name, None))
        ]
        if missing:
            base = (
                "rlx_offpolicy.prioritized.PrioritizedReplayBuffer"
                if c.prioritized
                else "rlx.replay.ReplayBuffer"
            )
            raise ConfigError(
                f"replay_buffer_class {target!r} lacks what the agent calls: "
                f"{', '.join(missing)}. Subclass {base} to inherit them"
            )
        return cls

    @property
    def frame_stacks(self) -> bool:
        """Whether observations are stacks of image frames, channels first ``(k, H, W)``."""
        shape = self.env.observation_space.shape
        return self.image and shape[0] <= 4 < shape[1]

    def check_spaces(self, env: Any) -> None:
        """Refuse, with one SpaceError, an observation space the coder cannot encode, an action
        space of the wrong kind or unbounded, and hindsight replay without goal keys."""
        coder = coder_for(env.observation_space)  # a SpaceError naming a leaf it cannot encode
        if self.config.her_goals:
            self.check_hindsight(env, coder)
        space = env.action_space
        if not isinstance(space, self.ACTIONS):
            names = " and ".join(cls.__name__ for cls in self.ACTIONS)
            raise SpaceError(
                f"{type(self).__name__} handles {names} action spaces, not {space}"
                + ("; use sac, td3 or ddpg" if isinstance(space, gym.spaces.Box) else "")
                + ("; use dqn" if isinstance(space, gym.spaces.Discrete) else "")
            )
        if isinstance(space, gym.spaces.Box) and not (
            np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))
        ):
            raise SpaceError(
                f"the Box action space {space} has infinite bounds; give it finite ones "
                "(e.g. gymnasium's RescaleAction)"
            )

    def check_hindsight(self, env: Any, coder: Any) -> None:
        """Refuse ``her_goals`` where hindsight replay cannot work, saying why."""
        c, name = self.config, type(self).__name__
        keys = {leaf.path[0] for leaf in coder.leaves if leaf.path} if coder is not None else set()
        if (
            not isinstance(env.observation_space, gym.spaces.Dict)
            or not {
                "achieved_goal",
                "desired_goal",
            }
            <= keys
        ):
            raise ConfigError(
                f"her_goals needs Dict observations with 'achieved_goal' and 'desired_goal' "
                f"keys (goal-conditioned tasks such as rlx/BitFlipping-v0); got "
                f"{env.observation_space}. Drop her_goals"
            )
        if not callable(getattr(env.unwrapped, "compute_reward", None)):
            raise ConfigError(
                "her_goals recomputes rewards with the environment's compute_reward(achieved_goal, "
                f"desired_goal, info), which {type(env.unwrapped).__name__} does not have"
            )
        achieved, desired = coder.leaf("achieved_goal"), coder.leaf("desired_goal")
        if achieved.space != desired.space:
            raise ConfigError(
                f"her_goals puts achieved goals in the place of desired ones, so the two keys "
                f"need one space; got {achieved.space} and {desired.space}"
            )
        if getattr(c, "prioritized", False) or getattr(c, "n_step", 1) > 1:
            raise ConfigError(
                f"{name}: her_goals samples uniformly with one-step targets; drop prioritized "
                "replay or n_step"
            )

    # -- what an algorithm provides ---------------------------------------------------------

    def build(self) -> None:
        """Create the networks and ``self.optimizers`` (under a seeded torch RNG)."""
        raise NotImplementedError

    def bind_acting(self) -> None:
        """Make the acting pass that reads the networks' memory (a NumPy twin on the CPU):
        after :meth:`build`, and again when a seed batch moves the weights into its stacks."""

    def explore(self, observations: np.ndarray) -> np.ndarray:
        """Training actions for a batch of observations ``(n_envs, *obs_shape)``."""
        raise NotImplementedError

    def greedy(self, observations: np.ndarray) -> np.ndarray:
        """The policy's greedy actions for a batch of observations."""
        raise NotImplementedError

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """One gradient update on a minibatch; returns metrics to log."""
        raise NotImplementedError

    def policy_modules(self) -> dict[str, nn.Module]:
        """The networks acting needs (saved in ``best/``)."""
        raise NotImplementedError

    def training_modules(self) -> dict[str, nn.Module]:
        """The networks only learning needs (targets, critics): part of the resume state."""
        return {}

    #: Extra scalars of the resume state (SAC's entropy coefficient, ...): attribute names.
    resume_scalars: ClassVar[tuple[str, ...]] = ()

    # -- one iteration ------------------------------------------------------------------------

    def step(self) -> Iteration:
        """``train_freq`` steps of every environment, then ``gradient_steps`` updates. An
        agent in a seed batch gets its part of the batch's round instead."""
        if self.batch is not None:
            return self.batch.iteration(self)
        steps = self.collect()
        metrics: dict[str, float] = {}
        if self.ready_to_learn():
            for _ in range(self.config.gradient_steps):
                metrics = self.update(self.sample())
                self.updates += 1
            self.guard.check()
            metrics = host_scalars(metrics)
        returns, lengths = self.runner.pop_finished()
        return Iteration(steps, returns, lengths, metrics)

    def ready_to_learn(self) -> bool:
        """Whether this iteration trains: past the warm-up, with a minibatch in the buffer."""
        return self.env_steps >= self.learning_starts and len(self.buffer) >= self.config.batch_size

    def collect(self) -> int:
        """``train_freq`` steps of every environment into the buffer; the valid steps."""
        c, runner, buffer = self.config, self.runner, self.buffer
        steps = 0
        for _ in range(c.train_freq):
            observations = runner.observations
            if self.obs_normalizer is not None:
                self.obs_normalizer.stats.update(np.asarray(observations, np.float64))
            if self.env_steps < self.learning_starts:
                actions = self.random_actions()
            else:
                actions = self.explore(self.as_input(observations))
            step = runner.step(self.to_env(actions))
            if self.reward_stats is not None and step.valid.any():
                self.reward_stats.update(step.rewards[step.valid])
            buffer.add(
                observations,
                actions,
                step.rewards,
                step.next_observations,
                step.terminated,
                step.done,
                step.valid,
            )
            valid = int(step.valid.sum())
            self.env_steps += valid
            steps += valid
        return steps

    def sample(self) -> dict[str, torch.Tensor]:
        """A minibatch from the replay buffer, as tensors on the agent's device, with
        ``n_step``-step returns where the algorithm has them; prioritized, it also holds the
        importance-sampling ``weights`` and the leaves drawn, ``indices`` (on the CPU: they
        only go back to the buffer, :meth:`update_priorities`)."""
        c = self.config
        n_step = getattr(c, "n_step", 1)
        if not c.prioritized:
            return self.to_tensors(self.buffer.sample(c.batch_size, self.rng, c.gamma, n_step))
        buffer: Any = self.buffer  # a Prioritized one
        batch = buffer.sample(c.batch_size, self.rng, c.gamma, n_step, beta=self.importance_beta)
        indices = batch.pop("indices")
        tensors = self.to_tensors(batch)
        tensors["indices"] = torch.from_numpy(indices)
        return tensors

    def set_training_budget(self, steps: int | None) -> None:
        """The trainer's step budget sizes the schedules over it (the rise of prioritized
        replay's importance-sampling exponent, DQN's epsilon decay)."""
        self.budget = steps

    @property
    def importance_beta(self) -> float:
        """Prioritized replay's importance-sampling exponent: ``priority_beta`` at the start,
        1 at the end of the training budget (``priority_beta`` throughout without one)."""
        return linear_schedule(self.env_steps, self.config.priority_beta, 1.0, self.budget)

    @staticmethod
    def weighted_mean(losses: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The mean of per-transition ``losses`` over the last axis (one mean per seed in a
        seed batch), each weighted by its importance-sampling weight when the batch was
        drawn by priority."""
        weights = batch.get("weights")
        if weights is None:
            return losses.mean(-1)
        if losses.ndim > weights.ndim:  # (..., critics, batch): one row per critic
            weights = weights.unsqueeze(-2)
        return (losses * weights).mean(-1)

    def update_priorities(self, batch: dict[str, torch.Tensor], td_errors: torch.Tensor) -> None:
        """Give the transitions of a batch drawn by priority their new ``|td_errors|``
        (those of the networks the batch was drawn for); nothing for a uniform batch."""
        if "indices" in batch:
            buffer: Any = self.buffer  # a Prioritized one
            buffer.update_priorities(batch["indices"].numpy(), td_errors.detach().cpu().numpy())

    def to_tensors(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """A sampled batch as tensors on the agent's device (Discrete actions as int64),
        observations normalised with the current statistics when asked, rewards scaled
        (:meth:`reward_factor`)."""
        if self.obs_normalizer is not None:
            for name in ("observations", "next_observations"):
                batch[name] = self.obs_normalizer(batch[name], update=False)
        factor = self.reward_factor()
        if factor != 1.0:
            # Linear, so n-step sums and relabelled (hindsight) rewards scale alike.
            batch["rewards"] = (batch["rewards"] * factor).astype(np.float32)
        tensors = {
            name: torch.as_tensor(value).to(self.device, non_blocking=True)
            for name, value in batch.items()
        }
        if self.encoder is not None:
            for name in ("observations", "next_observations"):
                tensors[name] = self.encoder(tensors[name])
        if self.discrete:
            tensors["actions"] = tensors["actions"].long()
        return tensors

    def reward_factor(self) -> float:
        """What the stored (raw) rewards are multiplied by in a minibatch: ``reward_scale``,
        divided by the running standard deviation of the rewards with ``normalize_rewards``.

        It only divides, never subtracts the mean (Pyrado's standardisation does): a positive
        factor leaves the optimal policy as it is, while shifting every reward by a constant
        changes what an episode that terminates early is worth (rewards shifted below zero
        make terminating early a gain, shifted above zero a loss), and so the optimum of
        every task whose episodes can end before the time limit.
        """
        factor = self.config.reward_scale
        if self.reward_stats is not None:
            factor /= float(np.sqrt(self.reward_stats.var + 1e-8))
        return factor

    def flatten(self, x: torch.Tensor) -> torch.Tensor:
        """Observations ``(..., *observation_shape)`` as the vectors an MLP takes; a seed
        batch's have a leading seed axis."""
        return x.flatten(x.ndim - len(self.input_space.shape))

    def normal_noise(self, shape: tuple[int, ...]) -> torch.Tensor:
        """Standard normal noise from the agent's torch generator; a seed batch's learner
        (``generator`` one per seed) draws each seed's from its own."""
        if isinstance(self.generator, list):
            return torch.stack(
                [torch.randn(shape[1:], generator=g, device=self.device) for g in self.generator]
            )
        return torch.randn(shape, generator=self.generator, device=self.device)

    def as_input(self, observations: Any) -> np.ndarray:
        """Observations as the networks take them: float32 vectors (normalised when asked;
        packed rows encoded), or uint8 frames."""
        if self.coder is not None:
            return self.coder.encode(np.asarray(observations))
        if self.obs_normalizer is not None:
            return self.obs_normalizer(np.asarray(observations), update=False)
        return np.asarray(observations, np.uint8 if self.image else np.float32)

    def random_actions(self) -> np.ndarray:
        """Uniformly random actions for the warm-up (Box actions in ``[-1, 1]``)."""
        n = self.config.n_envs
        if self.discrete:
            return self.rng.integers(self.n_actions, size=n)
        return self.rng.uniform(-1.0, 1.0, size=(n, *self.action_shape)).astype(np.float32)

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        """Stored actions -> what the environment accepts (Box: ``[-1, 1]`` to the bounds)."""
        if self.discrete:
            return actions
        scaled = self.action_low + (np.clip(actions, -1.0, 1.0) + 1.0) * 0.5 * (
            self.action_high - self.action_low
        )
        return scaled.reshape((-1, *self.env.action_space.shape))

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """The greedy action (exploration only in training): one for one observation, ``n``
        (leading axis ``n``) for a batch ``(n, *obs_shape)``, in one forward pass."""
        batch = observation_batch(self.env.observation_space, observation)
        observations = batch.observations
        if self.coder is not None:
            observations = self.coder.pack(observations)
        actions = self.to_env(self.greedy(self.as_input(observations)))
        if batch.single and self.discrete:
            return int(actions[0])
        return batch.result(actions)

    def new_optimizer(self, parameter: torch.Tensor, learning_rate: float, **defaults: Any) -> Any:
        """The optimiser of one flat parameter vector: rlx's flat Adam (``defaults`` are the
        algorithm's own Adam settings, ``optimizer_kwargs`` override them), or the torch
        optimiser ``optimizer`` names with ``optimizer_kwargs``."""
        c = self.config
        return settings_optimizer(
            c.optimizer, c.optimizer_kwargs, [parameter], learning_rate, **defaults
        )

    def gradient_step(
        self, loss: torch.Tensor, optimizer: Any, parameters: list, rows: Any = None
    ) -> Any:
        """Backward, clip, step (:func:`rlx.nn.optim.apply_gradients`), then the optimiser's
        scheduler if any; returns the norm (a 0-d tensor on CUDA, where nothing is read on
        the host before the iteration ends). A seed batch's learner passes one loss per seed
        (and steps the learning seeds in ``rows`` only, when given)."""
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
        self.schedulers.step((optimizer,))
        return norm

    def where_in_training(self) -> str:
        """The start of a training error's message: which agent, update and step."""
        return (
            f"{type(self).__name__}, update {self.updates + 1} (after {self.env_steps} "
            "environment steps): "
        )

    @classmethod
    def seed_batch(cls, agents: Any) -> Any:
        """Link K agents of this class (one seed each, the same settings) into one batched
        computation (:class:`rlx_offpolicy.batched.SeedBatch`), or raise
        :class:`~rlx.errors.NotBatchable` saying why they cannot be."""
        from rlx_offpolicy.batched import SeedBatch

        return SeedBatch(agents)

    # -- checkpoints --------------------------------------------------------------------------

    def policy_state(self) -> AgentState:
        """The acting networks, and the observation and reward statistics when normalising
        (the reward statistics only shape learning targets: acting never reads them)."""
        arrays = modules_state(self.policy_modules())
        if self.obs_normalizer is not None:
            arrays.update(self.obs_normalizer.stats.arrays("obs_norm"))
        if self.reward_stats is not None:
            arrays.update(self.reward_stats.arrays("reward_norm"))
        return AgentState(arrays=arrays)

    def load_policy_state(self, state: AgentState) -> None:
        """The acting networks; their target copies start from them (a warm start from
        another run's policy), until the resume state, when there is one, puts back its own."""
        load_modules_state(self.policy_modules(), state.arrays)
        if self.obs_normalizer is not None:
            self.obs_normalizer.stats.load(state.arrays, "obs_norm")
        if self.reward_stats is not None:
            self.reward_stats.load(state.arrays, "reward_norm")
        self.sync_policy_targets()

    def sync_policy_targets(self) -> None:
        """Copy the acting networks into their target networks, if they have any."""

    def resume_state(self) -> AgentState:
        """Target networks, critics, optimisers, the replay buffer, environments, RNGs."""
        arrays, optimizers = optimizers_state(self.optimizers)
        arrays.update(modules_state(self.training_modules()))
        arrays.update(self.buffer.state("buffer"))
        runner_arrays, runner_meta = self.runner.state("runner")
        arrays.update(runner_arrays)
        arrays["torch_rng"] = generator_array(self.generator)
        meta = {
            "env_steps": self.env_steps,
            "updates": self.updates,
            "rng": generator_state(self.rng),
            "optimizers": optimizers,
            "runner": runner_meta,
            "scalars": {name: getattr(self, name) for name in self.resume_scalars},
            "schedulers": self.schedulers.state_dict(),
        }
        return AgentState(arrays=arrays, meta=meta)

    def load_resume_state(self, state: AgentState) -> None:
        """Restore counters, random streams, networks, optimisers, the replay buffer and the
        environments' episodes, so training goes on as if it had never stopped."""
        arrays, meta = state.arrays, state.meta
        self.env_steps, self.updates = int(meta["env_steps"]), int(meta["updates"])
        restore_generator(self.rng, meta["rng"])
        reseed = derive(self.seed, "torch generator on another device", self.updates)
        restore_generator_array(self.generator, arrays["torch_rng"], reseed)
        load_optimizers_state(self.optimizers, arrays, meta["optimizers"])
        load_modules_state(self.training_modules(), arrays)
        self.buffer.load(arrays, "buffer")
        restart = derive(self.seed, "restart episodes", self.updates)
        self.runner.load(arrays, meta["runner"], "runner", seed=restart)
        for name, value in meta["scalars"].items():
            setattr(self, name, value)
        self.schedulers.load_state_dict(meta["schedulers"])

    def close(self) -> None:
        """Close the training environments."""
        self.runner.close()
