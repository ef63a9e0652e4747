"""The gym side of every strategy: policies, population evaluation, backends, checkpoints.

:class:`ESAgent` turns a :class:`rlx_es.core.Strategy` over flat parameter vectors into an
rlx agent: one :meth:`~ESAgent.step` is one generation (ask, evaluate every member for one
episode, tell). Randomness: the initial weights and the virtual-batch-norm reference batch come
from ``agent_generator(seed, 1)``; each generation's noise seed and environment seeds from
``self.rng`` (``agent_generator(seed)``), which is saved with the strategy's state, so a
resumed run continues exactly. Acting is deterministic and draws nothing.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium
import numpy as np
import torch

from rlx.agents import Saveable
from rlx.config import hyperparameter
from rlx.errors import ConfigError, RlxError
from rlx.memory import WORKER_PROCESS_BYTES, check_allocations, environments_nbytes
from rlx.nn.state import mlp_work, resolve_device, set_torch_threads
from rlx.observations import coder_for, encoded_spec
from rlx.protocols import AgentState, Iteration
from rlx.seeding import agent_generator, generator_state, restore_generator
from rlx.spaces import observation_batch
from rlx_es.core import Population, Strategy
from rlx_es.evaluation import (
    Behaviour,
    Episodes,
    EvaluatorSettings,
    LocalBackend,
    auto_block_size,
    make_backend,
)
from rlx_es.policy import (
    NetworkPolicy,
    PopulationPolicy,
    VirtualBatchNorm,
    build_network_policy,
    collect_reference_batch,
)
from rlx_es.rollouts import ROLLOUT_ENV_ID, RolloutPolicy

logger = logging.getLogger(__name__)


@dataclass
class ESEvaluationConfig:
    """Hyperparameters every gym agent of rlx-es has: the policy and how members are evaluated
    (:class:`ESConfig` adds the population size; ARS sizes its population by ``n_delta``)."""

    network: str = hyperparameter(
        "mlp",
        "mlp: the built-in tanh MLP of hidden_sizes; or 'package.module:factory' called as "
        "factory(observation_space, action_space), returning a torch module mapping "
        "(batch, *obs_shape) to the MLP's outputs (one per action, or per action dimension); "
        "with rollout set, the policy module's 'package.module:Class', built as "
        "Class(**network_kwargs)",
        imports_code=True,
    )
    network_kwargs: dict[str, Any] = hyperparameter(
        {}, "keyword arguments of the network factory, a JSON object on the command line"
    )
    rollout: str = hyperparameter(
        "",
        "'package.module:Class' built as Class(**rollout_kwargs), whose rollout(policy) plays "
        "the network module and returns its return, or (return, behaviour) for the novelty "
        "agents: members play it instead of an environment (env rlx/Rollout-v0); empty: the "
        "environment's episodes",
        imports_code=True,
    )
    rollout_kwargs: dict[str, Any] = hyperparameter(
        {}, "keyword arguments of the rollout class, a JSON object on the command line"
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (32, 32), "units of each tanh hidden layer of the policy (empty: linear policy)"
    )
    virtual_batch_norm: bool = hyperparameter(
        False, "normalise observations by a reference batch gathered once with random actions"
    )
    reference_batch_size: int = hyperparameter(
        256, "observations in the virtual-batch-norm reference batch", low=2
    )
    block_size: int = hyperparameter(
        0,
        "members per vector of environments; episodes depend only on each block's seed. 0: "
        "the whole population in one block, one per worker with backend process or ray (on "
        "CartPole at populations 1,024 and 4,096, 1.6x faster than blocks of 128)",
        low=0,
    )
    vectorization: str = hyperparameter(
        "auto",
        "auto: gymnasium's vectorised env when registered, else one env per member (sync)",
        choices=("auto", "sync", "vector"),
    )
    max_episode_steps: int = hyperparameter(
        1000, "episode cap when the environment has no time limit of its own", low=1
    )
    backend: str = hyperparameter(
        "local",
        "local: batched in this process; process: worker processes; ray: Ray actors",
        choices=("local", "process", "ray"),
    )
    workers: int = hyperparameter(
        2,
        "worker processes or Ray actors (backend process or ray), one CPU each, one shard of "
        "blocks each; Ray actors lost are replaced and their members evaluated again",
        low=1,
    )
    address: str = hyperparameter(
        "",
        "Ray cluster (backend ray): auto (RAY_ADDRESS or the cluster `ray start` runs here), "
        "host:port, or ray://host:10001 (Ray Client); empty starts Ray on this machine unless "
        "RAY_ADDRESS or `ray start` gives a cluster",
    )
    gpus_per_worker: float = hyperparameter(
        0.0,
        "GPUs of each Ray actor (backend ray), which then evaluates its shard on cuda; "
        "fractions below 1 share a GPU (0.25: four actors on one). 0: actors use their CPU",
        low=0,
        searched=False,
    )
    torch_threads: int = hyperparameter(
        1, "torch threads of this process (0: leave torch's setting); workers always use 1", low=0
    )
    device: str = hyperparameter(
        "cpu",
        "torch device of the population's forward pass (backend local): cpu, cuda, or auto "
        "(cuda when present for populations and networks of at least 1e7 multiply-adds a "
        "forward pass, else cpu)",
    )

    def __post_init__(self) -> None:
        if any(size < 1 for size in self.hidden_sizes):
            raise ValueError(f"hidden_sizes must be positive layer sizes, got {self.hidden_sizes}")
        if self.gpus_per_worker > 0 and self.backend != "ray":
            raise ValueError(
                f"gpus_per_worker={self.gpus_per_worker:g} gives GPUs to Ray actors, but "
                f"backend={self.backend} starts none: set backend=ray, or use device=cuda "
                "for a GPU in this process with backend=local"
            )
        if self.gpus_per_worker > 1 and not float(self.gpus_per_worker).is_integer():
            raise ValueError(
                f"gpus_per_worker={self.gpus_per_worker:g}: Ray shares a GPU only in fractions "
                "below 1; above 1 give a whole number of GPUs"
            )
        if self.rollout:
            module, sep, attribute = self.rollout.partition(":")
            if not (sep and module and attribute):
                raise ValueError(f"rollout must be 'package.module:Class', got {self.rollout!r}")
            if self.network == "mlp":
                raise ValueError(
                    f"rollout={self.rollout} plays a policy module of yours: set "
                    "network='package.module:Class' (built as Class(**network_kwargs))"
                )
            if self.virtual_batch_norm:
                raise ValueError(
                    "virtual_batch_norm gathers observations from an environment, which a "
                    "rollout run has not: put an rlx.nn.layers.VirtualBatchNorm in the network"
                )


@dataclass
class ESConfig(ESEvaluationConfig):
    """The evaluation settings and the number of members a generation evaluates."""

    population_size: int = hyperparameter(256, "members evaluated per generation", low=2)


class ESAgent(Saveable):
    """Base of the gym agents: subclasses set ``Config`` and build their strategy.

    ``behaviour`` (keyword only): a callable ``(final_obs, final_info) -> (d,)`` giving the
    behaviour characterisation of an episode, for the novelty algorithms.
    """

    Config: ClassVar[type] = ESConfig
    name: ClassVar[str] = "es"
    needs_behaviour: ClassVar[bool] = False
    #: One generation plays hundreds of episodes: evaluate and log less often than per-step agents.
    trainer_defaults: ClassVar[dict[str, Any]] = {
        "steps": 5_000_000,
        "eval_every": 100_000,
        "log_every": 20_000,
        "checkpoint_every": 500_000,
    }

    def __init__(
        self,
        env: gymnasium.Env,
        config: Any = None,
        seed: int = 0,
        *,
        behaviour: Behaviour | None = None,
    ) -> None:
        self.env = env
        self.config = config if config is not None else self.Config()
        self.seed = seed
        if env.spec is None:
            raise RlxError(
                f"{self.name} builds its own environments from env.spec; "
                "pass an environment made with gymnasium.make"
            )
        if bool(self.config.rollout) != (env.spec.id == ROLLOUT_ENV_ID):
            raise ConfigError(
                f"rollout={self.config.rollout} plays your rollouts instead of an environment: "
                f"train it on env {ROLLOUT_ENV_ID}, not {env.spec.id}"
                if self.config.rollout
                else f"{ROLLOUT_ENV_ID} is the environment of a run of your own rollouts: set "
                "rollout='package.module:Class' (with rollout(policy)) and "
                "network='package.module:Class' (the policy module)"
            )
        #: Packs and encodes observations that are not a Box (Discrete, Dict, ...), or None.
        self.coder = coder_for(env.observation_space)
        #: The spec the evaluators make their environments from; it encodes such observations.
        env_spec = env.spec if self.coder is None else encoded_spec(env.spec)
        #: The Box the policy reads: the environment's, or the coder's encoded rows.
        self.input_space = env.observation_space if self.coder is None else self.coder.encoded_space
        self.rng = agent_generator(seed)
        init_rng = agent_generator(seed, 1)
        normalizer = None
        if self.config.virtual_batch_norm:
            normalizer = VirtualBatchNorm(
                collect_reference_batch(env_spec, self.config.reference_batch_size, init_rng)
            )
        network_seed = 0
        options = self.policy_options()
        self.policy: Any
        if self.config.rollout:
            network_seed = int(init_rng.integers(2**31))
            self.policy = RolloutPolicy(
                self.config.network,
                self.config.rollout,
                network_seed,
                self.config.network_kwargs,
                self.config.rollout_kwargs,
            )
        elif self.config.network == "mlp":
            self.policy = PopulationPolicy(
                self.input_space,
                env.action_space,
                tuple(self.config.hidden_sizes),
                normalizer,
                bias=options["bias"],
                squash=options["squash"],
                activation=options["activation"],
            )
        else:
            network_seed = int(init_rng.integers(2**31))
            self.policy = build_network_policy(
                self.config.network,
                self.input_space,
                env.action_space,
                network_seed,
                normalizer,
                network_kwargs=self.config.network_kwargs,
                squash=options["squash"],
            )
        spec_steps = env.spec.max_episode_steps
        self.settings = EvaluatorSettings(
            env_spec=env_spec,
            observation_space=self.input_space,
            action_space=env.action_space,
            hidden_sizes=tuple(self.config.hidden_sizes),
            network=self.config.network,
            network_seed=network_seed,
            network_kwargs=dict(self.config.network_kwargs),
            block_size=self.config.block_size,
            vectorization=self.config.vectorization,
            max_episode_steps=spec_steps or self.config.max_episode_steps,
            normalizer_mean=None if normalizer is None else normalizer.mean,
            normalizer_std=None if normalizer is None else normalizer.std,
            behaviour_source=self.behaviour_source(),
            behaviour_key=getattr(self.config, "behaviour_key", "bc"),
            behaviour=behaviour,
            agent_name=self.name,
            rollout=self.config.rollout,
            rollout_kwargs=dict(self.config.rollout_kwargs),
            bias=options["bias"],
            squash=options["squash"],
            activation=options["activation"],
        )
        self.settings.uses_vector_env()  # refuses vectorization=vector early when impossible
        check_allocations(self.memory_estimate(self.policy.n_params))
        self.strategy = self.build_strategy(self.policy.initial_parameters(init_rng))
        self._backend: Any = None
        self._sized_for = 0
        self.fit_blocks()
        self.device = self.choose_device()
        self.settings.device = str(self.device)
        self.generation = 0
        self.best_return = -math.inf
        self.best_parameters = self.strategy.mean.copy()
        self._acting: tuple[int, Any] | None = None
        #: Parameters from load_policy_state, acted on until training moves on.
        self._loaded_policy: np.ndarray | None = None
        self._noted: set[str] = set()
        #: The last generation's population (its description: centre, scale and noise seed),
        #: or None before the first generation of this process; not saved in checkpoints.
        self.last_population: Population | None = None

    # -- what subclasses provide ------------------------------------------------------------

    def memory_estimate(self, n_params: int) -> dict[str, tuple[int, str]]:
        """Bytes of what a generation allocates, and what lowers them, before the strategy is
        built (see :mod:`rlx.memory`): the population's noise, parameters and float32 weights
        (about three float64 copies of ``population_size * n_params``), and one environment
        per member (worker processes on top with backend process or ray). Strategies add
        their own state."""
        c = self.config
        size = self.largest_population(n_params)
        mode = "auto" if self.settings.uses_vector_env() else "sync"
        environments = environments_nbytes(self.env, size, mode)
        if c.backend != "local":
            environments += c.workers * WORKER_PROCESS_BYTES
        return {
            f"a population of {size:,} members (population_size) of {n_params:,} parameters": (
                3 * size * n_params * 8,
                "lower population_size or hidden_sizes",
            ),
            f"{size:,} environments, one per member": (
                environments,
                "lower population_size",
            ),
        }

    def largest_population(self, n_params: int) -> int:
        """The most members a generation of this run may have (the strategy is not built yet)."""
        return int(self.population_size)

    def policy_options(self) -> dict[str, Any]:
        """How the built-in policy is shaped: ``bias`` (its layers add a searched bias),
        ``squash`` (Box actions are ``tanh`` outputs scaled to the bounds; else the outputs
        clipped to them) and the hidden ``activation``. Here biases, squashing and tanh;
        ARS's linear policy has neither bias nor squashing, its MLP ReLU layers."""
        return {"bias": True, "squash": True, "activation": "tanh"}

    def build_strategy(self, initial: np.ndarray) -> Strategy:
        """The strategy that searches from ``initial``, the policy's initial flat parameters
        ``(n_params,)`` float64; the constructor calls it once."""
        raise NotImplementedError

    def behaviour_source(self) -> str | None:
        """Where the behaviour characterisation of an episode comes from (``auto``, ``info`` or
        ``final_observation``), or None for an agent that needs none."""
        return None

    def choose_device(self) -> torch.device:
        """Where the population's forward pass runs: the ``device`` setting resolved; ``auto``
        weighs one step of the whole population (:func:`rlx.nn.state.resolve_device`).
        This is the driver's device: worker processes run on their CPU and Ray actors where
        ``gpus_per_worker`` puts them, so other backends take cpu or auto."""
        c = self.config
        if c.rollout:
            if c.device not in ("cpu", "auto"):
                raise ConfigError(
                    f"device={c.device}: a rollout run plays your policy module where your "
                    "rollout puts it (the agent keeps its parameters on the CPU); use device=cpu"
                )
            return torch.device("cpu")
        if c.backend != "local":
            if c.device == "auto":
                return torch.device("cpu")
            try:
                kind = torch.device(c.device).type
            except RuntimeError:
                kind = "cpu"  # not a device name: resolve_device says so
            if kind != "cpu":
                gpus = ", and gpus_per_worker=1 (or 0.5) for actors on GPUs" * (c.backend == "ray")
                raise ConfigError(
                    f"device={c.device} runs the population on this process's GPU, which "
                    f"backend={c.backend} does not use: its workers evaluate in processes of their "
                    "own. Use backend=local with a GPU, or device=cpu (or auto) with "
                    f"backend={c.backend}{gpus}"
                )
            return resolve_device(c.device)
        if isinstance(self.policy, NetworkPolicy):
            # A user's network: at least one multiply-add per parameter and member.
            work = self.population_size * self.policy.n_params
            return resolve_device(c.device, image=len(self.policy.obs_shape) == 3, work=work)
        sizes = [self.policy.obs_dim, *self.config.hidden_sizes, self.policy.n_outputs]
        return resolve_device(c.device, work=mlp_work(self.population_size, sizes))

    # -- evaluation -------------------------------------------------------------------------

    def fit_blocks(self) -> None:
        """Size the blocks (``block_size=0``) and the backend to the strategy's population;
        when it changed (CMA-ES doubles it at an IPOP restart) the backend is rebuilt at the
        next evaluation."""
        size = self.population_size
        if size == self._sized_for:
            return
        parallel = self.config.workers if self.config.backend != "local" else 1
        self.settings.block_size = self.config.block_size or auto_block_size(size, parallel)
        self._sized_for = size
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    @property
    def backend(self) -> Any:
        """The evaluation backend of the ``backend`` setting, made on first use (:meth:`fit_blocks`
        closes it when the population size changes)."""
        if self._backend is None:
            # Small batched matrix products: more threads than cores only adds contention.
            set_torch_threads(self.config.torch_threads)
            self._backend = make_backend(
                self.settings,
                self.population_size,
                self.config.backend,
                self.config.workers,
                self.config.address,
                self.config.gpus_per_worker,
            )
        return self._backend

    @property
    def population_size(self) -> int:
        """Members per generation: the ``population_size`` setting."""
        return self.config.population_size

    def evaluate_population(self, population: Population, backend: Any = None) -> Episodes:
        """One episode per member, environments seeded from ``self.rng``."""
        backend = backend or self.backend
        n_blocks = -(-population.size // self.settings.block_size)
        block_seeds = self.rng.integers(2**31, size=n_blocks)
        episodes = backend.evaluate(self.population_message(population), block_seeds)
        for note in episodes.notes:
            if note not in self._noted:
                self._noted.add(note)
                logger.warning(
                    "%s: %s reports no info[%r]; using the final observation as the behaviour "
                    "(set behaviour_source=info to require one)",
                    self.name,
                    self.env.spec.id,
                    self.settings.behaviour_key,
                )
        return episodes

    def population_message(self, population: Population) -> dict[str, Any]:
        """What the evaluators receive for a generation: the population's description and
        the observation normaliser the members play under (its mean and standard deviation,
        or None), which ARS-V2 changes every generation."""
        normalizer = self.policy.normalizer
        statistics = None if normalizer is None else (normalizer.mean, normalizer.std)
        return {**population.to_message(), "normalizer": statistics}

    def local_backend(self, size: int) -> LocalBackend:
        """An in-process evaluator for ``size`` members (centres of a meta-population)."""
        return LocalBackend(self.settings, size)

    def population_parameters(self) -> np.ndarray | None:
        """The parameters of every member of the last generation, ``(population, n_params)``
        float64 (estorch's ``population_parameters``), rebuilt from the population's
        description, or None before the first generation since the agent was built or loaded.

        They are not kept in checkpoints (a resumed run has none until its next generation):
        the population is a centre, a scale and a noise seed, so no matrix is held between
        calls and each call builds one."""
        return None if self.last_population is None else self.last_population.parameters()

    def _track_best(self, population: Population, episodes: Episodes) -> None:
        best = int(np.argmax(episodes.returns))
        if episodes.returns[best] > self.best_return:
            self.best_return = float(episodes.returns[best])
            self.best_parameters = population.parameters(np.array([best]))[0]

    def step(self) -> Iteration:
        """One generation: ask, evaluate every member for one episode, tell."""
        population = self.strategy.ask(int(self.rng.integers(2**31)))
        episodes = self.evaluate_population(population)
        metrics = self.learn(population, episodes)
        self._track_best(population, episodes)
        self.last_population = population
        self.generation += 1
        self.fit_blocks()
        self._loaded_policy = None
        return self._iteration(episodes, metrics)

    def learn(self, population: Population, episodes: Episodes) -> dict[str, float]:
        """Tell the strategy the generation's returns; its metrics (ARS adds the alive bonus
        offset and updates its state statistics here)."""
        return self.strategy.tell(population, episodes.returns)

    def _iteration(self, episodes: Episodes, metrics: dict[str, float]) -> Iteration:
        return Iteration(
            env_steps=int(episodes.lengths.sum()),
            episode_returns=[float(r) for r in episodes.returns],
            episode_lengths=[int(n) for n in episodes.lengths],
            episode_infos=episodes.infos,
            metrics={
                "generation": float(self.generation),
                "return_max": float(episodes.returns.max()),
                "return_mean": float(episodes.returns.mean()),
                "best_return": float(self.best_return),
                **{k: float(v) for k, v in metrics.items()},
            },
        )

    # -- acting -----------------------------------------------------------------------------

    def deployed_parameters(self) -> np.ndarray:
        """The parameters ``act`` uses: the strategy's centre (mean)."""
        return self.strategy.mean

    def act(self, observation: Any, deterministic: bool = True) -> Any:
        """The centre policy's action (ES policies are deterministic): one for one
        observation, ``n`` (leading axis ``n``) for a batch ``(n, *obs_shape)``, in one
        forward pass of ``n`` copies of the centre. A rollout run's observation is a seed
        (``rlx/Rollout-v0``) and its action the return of the centre's rollout under it."""
        batch = observation_batch(self.env.observation_space, observation)
        if self.config.rollout:  # rlx/Rollout-v0: the observation is a rollout's seed
            parameters = self._acting_parameters()
            returns = [
                self.policy.play(parameters, int(seed))[0]
                for seed in np.asarray(batch.observations).reshape(-1)
            ]
            return batch.result(np.array(returns, dtype=np.float64).reshape(-1, 1))
        if self._acting is None or self._acting[0] != self.generation:
            self._acting = (self.generation, self.policy.bind(self._acting_parameters()[None]))
        layers = self._acting[1]
        if batch.size > 1:  # the one bound member, gathered n times where it lives
            layers = self.policy.select(layers, np.zeros(batch.size, dtype=np.int64))
        observations = batch.observations
        if self.coder is not None:
            observations = self.coder.encode(self.coder.pack(observations))
        actions = self.policy.actions(layers, observations)
        if batch.single and self.policy.discrete:
            return int(actions[0])
        return batch.result(actions)

    def _acting_parameters(self) -> np.ndarray:
        """What ``act`` plays: the parameters a checkpoint loaded, else the deployed ones."""
        return self.deployed_parameters() if self._loaded_policy is None else self._loaded_policy

    def policy_module(self) -> torch.nn.Module:
        """A copy of the user's policy module (the ``network`` of a rollout run) with the
        parameters ``act`` uses: the trained policy, estorch's ``policy``. A run of the
        built-in MLP has no such module: an :class:`~rlx.errors.RlxError` says so."""
        if not self.config.rollout:
            raise RlxError(
                f"this {self.name} run evolves a population policy, not a module of yours: "
                "policy_module() is for runs with rollout set"
            )
        return self.policy.module_copy(self._acting_parameters())

    # -- checkpoints ------------------------------------------------------------------------

    def strategy_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The search state (a novelty agent adds its meta-population and archive)."""
        return self.strategy.state()

    def load_strategy_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Restore what :meth:`strategy_state` returned."""
        self.strategy.load_state(arrays, meta)

    def policy_state(self) -> AgentState:
        """The deployed parameters and the virtual-batch-norm statistics: what acting needs."""
        arrays = {"parameters": np.asarray(self.deployed_parameters(), dtype=np.float64).copy()}
        normalizer = self.policy.normalizer
        if normalizer is not None:
            arrays["normalizer/mean"] = normalizer.mean.copy()
            arrays["normalizer/std"] = normalizer.std.copy()
        return AgentState(arrays=arrays)

    def load_policy_state(self, state: AgentState) -> None:
        """Act with the saved parameters (and virtual-batch-norm statistics) until the next training
        step; the strategy is left as it is."""
        self._loaded_policy = np.array(state.arrays["parameters"])
        normalizer = self.policy.normalizer
        if normalizer is not None:
            normalizer.mean = np.array(state.arrays["normalizer/mean"])
            normalizer.std = np.array(state.arrays["normalizer/std"])
        self._acting = None

    def resume_state(self) -> AgentState:
        """The search state, the best member so far, the generation count and the RNG."""
        arrays, meta = self.strategy_state()
        arrays = {f"strategy/{k}": v for k, v in arrays.items()}
        arrays["best_parameters"] = np.asarray(self.best_parameters, dtype=np.float64)
        return AgentState(
            arrays=arrays,
            meta={
                "strategy": meta,
                "generation": self.generation,
                "best_return": None if math.isinf(self.best_return) else self.best_return,
                "rng": generator_state(self.rng),
            },
        )

    def load_resume_state(self, state: AgentState) -> None:
        """Restore what :meth:`resume_state` returned; acting goes back to the strategy's
        parameters, and the blocks and backend fit the restored population size."""
        prefix = "strategy/"
        self.load_strategy_state(
            {k[len(prefix) :]: v for k, v in state.arrays.items() if k.startswith(prefix)},
            state.meta["strategy"],
        )
        self.best_parameters = np.array(state.arrays["best_parameters"])
        best = state.meta["best_return"]
        self.best_return = -math.inf if best is None else float(best)
        self.generation = int(state.meta["generation"])
        restore_generator(self.rng, state.meta["rng"])
        self.last_population = None
        self._loaded_policy = None
        self._acting = None
        self.fit_blocks()

    def close(self) -> None:
        """Stop worker processes or Ray actors."""
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to clean
            pass
