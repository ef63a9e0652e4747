"""Evaluating a whole population: blocks of environments, one batched forward pass per step.

The population is cut into blocks of ``block_size`` consecutive members. Each block is one
vector of environments reset from its own seed: gymnasium's vectorised implementation of the
environment when it registers one (``vectorization="vector"``, CartPole for example), else one
environment per member stepped while its episode lasts (``"sync"``). Every step runs the
policies of all members still playing in one batched forward pass; an episode that ends is
masked out. Because a block's episodes depend only on its seed, any split of the blocks over
worker processes or Ray actors plays exactly the same episodes as one process.

Worker processes and Ray actors ignore SIGINT. A terminal's Ctrl-C reaches the whole process
group; the main process alone acts on it (the trainer finishes the generation and saves), and
a worker that died of it would end the run with an error instead.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np

from rlx.errors import ConfigError, RlxError, TrainingError
from rlx.executors.ray import connect_ray, lost_worker_errors
from rlx.vector import info_numbers
from rlx_es.core import Population
from rlx_es.policy import PopulationPolicy, VirtualBatchNorm, build_network_policy
from rlx_es.rollouts import RolloutPolicy

logger = logging.getLogger(__name__)

#: behaviour(final observation, final info) -> behaviour characterisation (d,)
Behaviour = Callable[[np.ndarray, dict[str, Any]], np.ndarray]


class MissingBehaviourError(RlxError):
    """A novelty algorithm found no behaviour characterisation for an episode."""


@dataclass
class EvaluatorSettings:
    """Everything a worker needs to rebuild the environments and the policy (picklable)."""

    env_spec: Any
    observation_space: gymnasium.Space
    action_space: gymnasium.Space
    hidden_sizes: tuple[int, ...]
    block_size: int
    vectorization: str = "auto"
    max_episode_steps: int = 1000
    normalizer_mean: np.ndarray | None = None
    normalizer_std: np.ndarray | None = None
    behaviour_source: str | None = None
    behaviour_key: str = "bc"
    behaviour: Behaviour | None = None
    agent_name: str = "this agent"
    #: Where the population's forward pass runs: ``cpu`` or a CUDA device (backend local, or
    #: ``cuda`` in Ray actors given GPUs by ``gpus_per_worker``).
    device: str = "cpu"
    #: ``mlp`` or a user's ``"package.module:factory"``, rebuilt under ``network_seed``.
    network: str = "mlp"
    network_seed: int = 0
    network_kwargs: dict[str, Any] = field(default_factory=dict)
    #: A user's ``"package.module:Class"`` with ``rollout(policy)``: members play it instead of
    #: environments (:mod:`rlx_es.rollouts`); empty for environments.
    rollout: str = ""
    rollout_kwargs: dict[str, Any] = field(default_factory=dict)
    #: The built-in policy's layers add a bias; Box actions are tanh-squashed (else clipped).
    bias: bool = True
    squash: bool = True
    #: The built-in policy's hidden activation (a name of rlx.nn.layers.ACTIVATIONS).
    activation: str = "tanh"
    #: Gather the statistics of the observations the members act on (ARS-V2's normaliser).
    state_statistics: bool = False

    def policy(self) -> PopulationPolicy | RolloutPolicy:
        """The population policy these settings describe, on ``device``: the MLP, or the user's
        network rebuilt under ``network_seed``, with the virtual-batch-norm statistics; with a
        ``rollout``, the user's module and rollout object."""
        if self.rollout:
            return RolloutPolicy(
                self.network,
                self.rollout,
                self.network_seed,
                self.network_kwargs,
                self.rollout_kwargs,
            )
        normalizer = None
        if self.normalizer_mean is not None:
            normalizer = VirtualBatchNorm(dim=len(self.normalizer_mean))
            normalizer.mean, normalizer.std = self.normalizer_mean, self.normalizer_std
        if self.network != "mlp":
            return build_network_policy(
                self.network,
                self.observation_space,
                self.action_space,
                self.network_seed,
                normalizer,
                self.device,
                network_kwargs=self.network_kwargs,
                squash=self.squash,
            )
        return PopulationPolicy(
            self.observation_space,
            self.action_space,
            self.hidden_sizes,
            normalizer,
            self.device,
            bias=self.bias,
            squash=self.squash,
            activation=self.activation,
        )

    def uses_vector_env(self) -> bool:
        """Whether a block runs as one gymnasium vectorised environment: ``vectorization`` is auto
        or vector, the spec registers a vector entry point, and neither a behaviour callable nor
        additional wrappers are given. ``vector`` without a vector entry point is an
        :class:`~rlx.errors.RlxError`."""
        vector_entry = getattr(self.env_spec, "vector_entry_point", None)
        if self.vectorization == "vector" and vector_entry is None:
            raise RlxError(
                f"vectorization=vector: {self.env_spec.id} registers no vectorised "
                "implementation (vector_entry_point); use vectorization=sync or auto"
            )
        return (
            self.vectorization in ("auto", "vector")
            and vector_entry is not None
            and self.behaviour is None
            and not getattr(self.env_spec, "additional_wrappers", ())
        )


@dataclass
class StateStatistics:
    """The count, mean and sum of squared deviations ``m2`` (per dimension, float64) of a
    set of observations; sets merge exactly (Chan, Golub & LeVeque 1979), so shards of a
    generation and generations of a run add up to the statistics of all their states.
    With no observation the mean is 0 and the standard deviation 1."""

    count: float
    mean: np.ndarray
    m2: np.ndarray

    @staticmethod
    def empty(dim: int) -> StateStatistics:
        """The statistics of no observation, ``dim`` wide."""
        return StateStatistics(0.0, np.zeros(dim), np.zeros(dim))

    def merged(self, other: StateStatistics) -> StateStatistics:
        """The statistics of both sets together."""
        total = self.count + other.count
        if other.count == 0:
            return StateStatistics(self.count, self.mean.copy(), self.m2.copy())
        if self.count == 0:
            return StateStatistics(other.count, other.mean.copy(), other.m2.copy())
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / total)
        m2 = self.m2 + other.m2 + delta**2 * (self.count * other.count / total)
        return StateStatistics(total, mean, m2)

    @property
    def std(self) -> np.ndarray:
        """The standard deviation of each dimension (ones before any observation)."""
        if self.count == 0:
            return np.ones_like(self.mean)
        return np.sqrt(np.maximum(self.m2, 0.0) / self.count)


class _StateAccumulator:
    """Sums of an episode batch's observations, shifted by the first step's mean (so that
    the variance does not cancel catastrophically when the mean is large)."""

    def __init__(self) -> None:
        self.count = 0
        self.shift = self.total = self.squares = np.zeros(0)

    def add(self, observations: np.ndarray) -> None:
        x = observations.astype(np.float64)
        if self.count == 0:
            self.shift = x.mean(axis=0)
            self.total = np.zeros_like(self.shift)
            self.squares = np.zeros_like(self.shift)
        x -= self.shift
        self.total += x.sum(axis=0)
        self.squares += (x * x).sum(axis=0)
        self.count += x.shape[0]

    def statistics(self, dim: int) -> StateStatistics:
        if self.count == 0:
            return StateStatistics.empty(dim)
        offset = self.total / self.count
        m2 = np.maximum(self.squares - self.total * offset, 0.0)
        return StateStatistics(float(self.count), self.shift + offset, m2)


@dataclass
class Episodes:
    """One episode per member: ``returns`` ``(m,)`` float64, ``lengths`` ``(m,)`` int64,
    for novelty algorithms ``behaviours`` ``(m, d)`` float64, when the settings ask for
    them, the :class:`StateStatistics` of every observation the members acted on, and the
    numbers of each member's final ``info`` (:func:`rlx.vector.info_numbers`: the success
    rate and ``info_keywords`` the trainer logs; none from the user's rollouts)."""

    returns: np.ndarray
    lengths: np.ndarray
    behaviours: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)
    states: StateStatistics | None = None
    infos: list[dict[str, float]] = field(default_factory=list)

    @staticmethod
    def concatenate(parts: list[Episodes]) -> Episodes:
        """The episodes of several shards as one, in order (behaviours, notes and state
        statistics included)."""
        behaviours = None
        if parts and parts[0].behaviours is not None:
            behaviours = np.concatenate([p.behaviours for p in parts])
        states = None
        for part in parts:
            if part.states is not None:
                states = part.states if states is None else states.merged(part.states)
        return Episodes(
            np.concatenate([p.returns for p in parts]),
            np.concatenate([p.lengths for p in parts]),
            behaviours,
            [note for p in parts for note in p.notes],
            states,
            [info for p in parts for info in p.infos],
        )


def member_seeds(block_seed: int, count: int) -> list[int]:
    """Seeds of the ``count`` per-member environments of a sync block."""
    state = np.random.SeedSequence([block_seed, 0xE5]).generate_state(count, dtype=np.uint32)
    return [int(s) for s in state]


class _SyncBlock:
    """One environment per member; only members still playing are stepped."""

    def __init__(self, settings: EvaluatorSettings, size: int) -> None:
        self.envs = [gymnasium.make(settings.env_spec) for _ in range(size)]
        self.size = size

    def reset(self, seed: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
        results = [
            env.reset(seed=s)
            for env, s in zip(self.envs, member_seeds(seed, self.size), strict=True)
        ]
        return np.stack([np.asarray(o, dtype=np.float32).ravel() for o, _ in results]), [
            i for _, i in results
        ]

    def step(
        self,
        actions: np.ndarray,
        alive: np.ndarray,
        observations: np.ndarray,
        rewards: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any] | None],
        start: int,
    ) -> None:
        for i in np.flatnonzero(alive):
            observation, reward, terminated, truncated, info = self.envs[i].step(actions[i])
            observations[i] = np.asarray(observation, dtype=np.float32).ravel()
            rewards[i] = reward
            done[i] = terminated or truncated
            infos[start + i] = info


class _VectorBlock:
    """gymnasium's vectorised implementation of the environment for a whole block."""

    def __init__(self, settings: EvaluatorSettings, size: int) -> None:
        self.env = gymnasium.make_vec(
            settings.env_spec, num_envs=size, vectorization_mode="vector_entry_point"
        )
        self.size = size

    def reset(self, seed: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
        observations, _ = self.env.reset(seed=seed)
        return np.asarray(observations, dtype=np.float32).reshape(self.size, -1), [
            {} for _ in range(self.size)
        ]

    def step(
        self,
        actions: np.ndarray,
        alive: np.ndarray,
        observations: np.ndarray,
        rewards: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any] | None],
        start: int,
    ) -> None:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        observations[alive] = np.asarray(obs, dtype=np.float32).reshape(self.size, -1)[alive]
        rewards[alive] = np.asarray(reward)[alive]
        done[alive] = (np.asarray(terminated) | np.asarray(truncated))[alive]
        if info:
            for i in np.flatnonzero(alive):
                infos[start + i] = {
                    key: value[i]
                    for key, value in info.items()
                    if not key.startswith("_") and info.get(f"_{key}", alive)[i]
                }


class Evaluator:
    """Plays one episode per member for a contiguous range of blocks of the population."""

    def __init__(self, settings: EvaluatorSettings, first_member: int, n_members: int) -> None:
        self.settings = settings
        self.first_member, self.n_members = first_member, n_members
        self.policy: Any = settings.policy()
        sizes = [
            min(settings.block_size, n_members - start)
            for start in range(0, n_members, settings.block_size)
        ]
        self.sizes = sizes
        if settings.rollout:  # the user's rollouts play no environment
            self.blocks: list[Any] = []
        else:
            block_cls = _VectorBlock if settings.uses_vector_env() else _SyncBlock
            self.blocks = [block_cls(settings, size) for size in sizes]
        self.bounds = np.cumsum([0, *sizes])
        self._fell_back = False

    def evaluate(self, population: dict[str, Any], block_seeds: np.ndarray) -> Episodes:
        """Episodes of this evaluator's members; ``block_seeds`` holds one seed per block."""
        population = dict(population)
        normalizer = population.pop("normalizer", None)
        if normalizer is not None:  # the generation's (ARS-V2's changes every generation)
            self.policy.normalizer = VirtualBatchNorm(dim=self.policy.obs_dim)
            self.policy.normalizer.mean, self.policy.normalizer.std = normalizer
        members = np.arange(self.first_member, self.first_member + self.n_members)
        parameters = Population(**population).parameters(members)
        if self.settings.rollout:
            return self._rollouts(parameters, block_seeds)
        m = self.n_members
        observations = np.empty((m, self.policy.obs_dim), dtype=np.float32)
        infos: list[dict[str, Any] | None] = [None] * m
        for block, start, stop, seed in zip(
            self.blocks, self.bounds[:-1], self.bounds[1:], block_seeds, strict=True
        ):
            observations[start:stop], infos[start:stop] = block.reset(int(seed))
        returns = np.zeros(m)
        lengths = np.zeros(m, dtype=np.int64)
        rewards = np.zeros(m)
        done = np.zeros(m, dtype=bool)
        actions: np.ndarray | None = None
        active = np.arange(m)
        bound = layers = self.policy.bind(parameters)  # the generation's one upload of weights
        states = _StateAccumulator() if self.settings.state_statistics else None
        for _ in range(self.settings.max_episode_steps):
            alive = ~done
            n_alive = int(alive.sum())
            if n_alive == 0:
                break
            if states is not None:  # the states the members act on, raw (before normalising)
                states.add(observations[alive])
            if n_alive <= len(active) // 2:
                # Fewer than half the bound members still play: drop the others from the batch.
                active = np.flatnonzero(alive)
                layers = self.policy.select(bound, active)
            chosen = self.policy.actions(layers, observations[active])
            if actions is None:
                actions = np.empty((m, *chosen.shape[1:]), dtype=chosen.dtype)
                actions[:] = chosen[0]
            actions[active] = chosen
            for block, start, stop in zip(
                self.blocks, self.bounds[:-1], self.bounds[1:], strict=True
            ):
                if alive[start:stop].any():
                    block.step(
                        actions[start:stop],
                        alive[start:stop],
                        observations[start:stop],
                        rewards[start:stop],
                        done[start:stop],
                        infos,
                        int(start),
                    )
            returns[alive] += rewards[alive]
            lengths[alive] += 1
        behaviours = None
        if self.settings.behaviour_source is not None:
            behaviours = np.stack(
                [self._behaviour(observations[i], infos[i] or {}) for i in range(m)]
            )
        notes = ["final observation as behaviour"] if self._fell_back else []
        self._fell_back = False
        statistics = None if states is None else states.statistics(self.policy.obs_dim)
        numbers = [info_numbers(info) for info in infos]
        return Episodes(returns, lengths, behaviours, notes, statistics, numbers)

    def _rollouts(self, parameters: np.ndarray, block_seeds: np.ndarray) -> Episodes:
        """One of the user's rollouts per member, in order, each under its own seed (the
        member seeds of its block, as a sync block's environments get them); one step each."""
        seeds = [
            seed
            for block_seed, size in zip(block_seeds, self.sizes, strict=True)
            for seed in member_seeds(int(block_seed), size)
        ]
        played = [self.policy.play(row, seed) for row, seed in zip(parameters, seeds, strict=True)]
        returns = np.array([r for r, _ in played], dtype=np.float64)
        behaviours = None
        if self.settings.behaviour_source is not None:
            if any(b is None for _, b in played):
                raise MissingBehaviourError(
                    f"{self.settings.agent_name} needs a behaviour characterisation for every "
                    f"rollout, but rollout {self.settings.rollout!r} returned a return alone: "
                    "return (return, behaviour) from rollout(policy), the behaviour a vector"
                )
            behaviours = np.stack([b for _, b in played])
        return Episodes(returns, np.ones(len(played), dtype=np.int64), behaviours)

    def _behaviour(self, observation: np.ndarray, info: dict[str, Any]) -> np.ndarray:
        settings = self.settings
        if settings.behaviour is not None:
            value = settings.behaviour(observation, info)
        elif settings.behaviour_key in info:
            value = info[settings.behaviour_key]
        elif settings.behaviour_source == "auto":
            self._fell_back = True
            value = observation
        elif settings.behaviour_source == "final_observation":
            value = observation
        else:
            raise MissingBehaviourError(
                f"{settings.agent_name} needs a behaviour characterisation for every episode, "
                f"but {settings.env_spec.id} reports no info[{settings.behaviour_key!r}] when an "
                "episode ends. Provide one: an environment that puts it in info (set "
                "behaviour_key=<key> for another key), wrap the environment in "
                "rlx_es.BehaviourWrapper(env, fn), pass behaviour=fn(final_obs, final_info) "
                "to the agent, or set behaviour_source=final_observation"
            )
        return np.asarray(value, dtype=np.float64).ravel()


# -- backends -------------------------------------------------------------------------------


def auto_block_size(population_size: int, workers: int = 1) -> int:
    """The block size ``block_size=0`` means: the whole population in one block, or one block
    per worker (``workers`` of a process or Ray backend), the population split evenly.

    Fewer, bigger blocks step fewer vectors of environments per step: on CartPole-v1 (2 CPU
    cores, one torch thread) a generation of 1,024 members took 245 ms in one block against
    396 ms in blocks of 128, 4,096 members 1.12 s against 1.78 s, and 16,384 members in one
    block were as fast as in four of 4,096 (3.8 s against 4.1 s), so there is no cap.
    """
    return -(-population_size // max(1, min(workers, population_size)))


def shard_bounds(n_blocks: int, workers: int) -> list[tuple[int, int]]:
    """Contiguous ranges of blocks, one per worker, as even as possible (never empty)."""
    workers = max(1, min(workers, n_blocks))
    edges = np.linspace(0, n_blocks, workers + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]


class LocalBackend:
    """Evaluates the whole population in this process (one batched forward pass per step)."""

    def __init__(self, settings: EvaluatorSettings, population_size: int) -> None:
        self.evaluator = Evaluator(settings, 0, population_size)

    def evaluate(self, population: dict[str, Any], block_seeds: np.ndarray) -> Episodes:
        """One episode per member, all in this process; ``block_seeds`` holds one seed per block."""
        return self.evaluator.evaluate(population, block_seeds)

    def close(self) -> None:
        """Close the evaluator's environments."""
        for block in self.evaluator.blocks:
            for env in getattr(block, "envs", [getattr(block, "env", None)]):
                if env is not None:
                    env.close()


def _shards(
    settings: EvaluatorSettings, population_size: int, workers: int
) -> list[tuple[int, int, int, int]]:
    """(first member, members, first block, stop block) of each worker's shard."""
    n_blocks = -(-population_size // settings.block_size)
    if workers > n_blocks:
        logger.warning(
            "%d workers but only %d blocks of %d members: using %d workers "
            "(lower block_size to use more)",
            workers,
            n_blocks,
            settings.block_size,
            n_blocks,
        )
    shards = []
    for first_block, stop_block in shard_bounds(n_blocks, workers):
        first = first_block * settings.block_size
        stop = min(stop_block * settings.block_size, population_size)
        shards.append((first, stop - first, first_block, stop_block))
    return shards


def _ignore_sigint() -> None:
    """Leave Ctrl-C to the main process: called first in every worker process and Ray actor."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """Ignore SIGINT while worker processes start, so that they inherit it ignored.

    An ignored SIGINT survives fork and exec, and Python then installs no KeyboardInterrupt
    handler, so a spawned worker is safe while it imports, before :func:`_worker_main` runs.
    A Ctrl-C in these few milliseconds of starting is lost. Only the main thread can set
    handlers; elsewhere, or under a handler Python did not install, this does nothing.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is None
    ):
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _worker_main(connection: Any, settings: EvaluatorSettings, first: int, count: int) -> None:
    """A worker process: one thread, its own environments, evaluates what it is sent."""
    _ignore_sigint()
    from rlx.nn.state import set_torch_threads

    set_torch_threads(1)
    try:
        evaluator = Evaluator(settings, first, count)
        connection.send(("ready", None))
    except Exception as exc:  # reported to the parent, which raises it
        connection.send(("error", exc))
        return
    while True:
        message = connection.recv()
        if message is None:
            return
        try:
            connection.send(("ok", evaluator.evaluate(*message)))
        except Exception as exc:
            connection.send(("error", exc))


class ProcessBackend:
    """Worker processes on this machine, each evaluating a contiguous shard of blocks.

    Workers receive the population's description (centre, scale, seed) and rebuild their
    members; they send back only returns, lengths and behaviours.
    """

    def __init__(self, settings: EvaluatorSettings, population_size: int, workers: int) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.shards = _shards(settings, population_size, workers)
        self.connections, self.processes = [], []
        for first, count, _, _ in self.shards:
            parent, child = context.Pipe()
            process = context.Process(
                target=_worker_main, args=(child, settings, first, count), daemon=True
            )
            with _children_ignore_sigint():
                process.start()
            self.connections.append(parent)
            self.processes.append(process)
        for index in range(len(self.connections)):
            status, payload = self._receive(index)
            if status == "error":
                self.close()
                raise payload

    def _receive(self, index: int) -> Any:
        """Worker ``index``'s answer; a worker that died (killed, out of memory) is one
        :class:`~rlx.errors.TrainingError` naming it, and the other workers are stopped."""
        try:
            return self.connections[index].recv()
        except (EOFError, OSError):
            process = self.processes[index]
            process.join(timeout=1)
            code = process.exitcode
            self.close()
            raise TrainingError(
                f"evaluation worker process {index} (pid {process.pid}) died with exit code "
                f"{code} ({'killed by signal ' + str(-code) if code and code < 0 else 'exit'}): "
                "the run stops here, and rlx run --resume continues from its last checkpoint "
                "(with fewer workers, or backend=local, if memory ran out)"
            ) from None

    def evaluate(self, population: dict[str, Any], block_seeds: np.ndarray) -> Episodes:
        """Send the population and each shard's block seeds to its worker, and put the workers'
        episodes together in order; a worker's error is raised once all have answered."""
        for index, (_, _, a, b) in enumerate(self.shards):
            try:
                self.connections[index].send((population, block_seeds[a:b]))
            except OSError:  # a dead worker's pipe: its receive names it
                self._receive(index)
        parts = []
        error = None
        for index in range(len(self.connections)):
            status, payload = self._receive(index)
            if status == "error":
                error = payload
            else:
                parts.append(payload)
        if error is not None:
            raise error
        return Episodes.concatenate(parts)

    def close(self) -> None:
        """Tell the workers to stop and wait for them, terminating any still alive after 5
        seconds."""
        for connection in self.connections:
            try:
                connection.send(None)
            except (BrokenPipeError, OSError):
                pass
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
        self.connections, self.processes = [], []


class _RayWorker:
    """A Ray actor that evaluates whichever shard of blocks it is sent.

    It keeps one :class:`Evaluator` (its environments) per shard it has evaluated, so that a
    shard taken over from a lost actor is built once. Episodes depend only on block seeds,
    so any actor plays any shard's episodes exactly.

    Ray already starts its workers in process groups of their own, out of a terminal's Ctrl-C;
    ignoring SIGINT keeps actors safe where they are not (the cost: ``ray.cancel`` without
    ``force`` cannot interrupt an actor's task, which rlx never does).
    """

    def __init__(self, settings: EvaluatorSettings) -> None:
        _ignore_sigint()
        from rlx.nn.state import set_torch_threads

        set_torch_threads(1)
        if settings.device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():  # a node whose torch has no CUDA build
                raise RlxError(
                    "gpus_per_worker gave this actor a GPU, but its torch sees no CUDA device "
                    "(install a CUDA build of torch on every GPU node)"
                )
        self.settings = settings
        self.evaluators: dict[tuple[int, int], Evaluator] = {}

    def evaluate(
        self, population: dict[str, Any], first: int, count: int, block_seeds: np.ndarray
    ) -> Episodes:
        evaluator = self.evaluators.get((first, count))
        if evaluator is None:
            evaluator = self.evaluators[first, count] = Evaluator(self.settings, first, count)
        return evaluator.evaluate(population, block_seeds)

    def node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()


@dataclass(eq=False)
class _Actor:
    """One Ray actor of a :class:`RayBackend` and what the backend knows of it."""

    handle: Any
    name: str
    #: The reply to a first call while the actor starts (Ray may still be placing it); None
    #: once it has answered.
    starting: Any
    node: str = ""
    #: The shard it evaluated last, given to it again first: its environments are built.
    home: int | None = None


class RayBackend:
    """Ray actors (one CPU each, and ``gpus`` GPUs, anywhere in the cluster) that survive lost
    workers. Actors given GPUs evaluate on ``cuda``: Ray makes their share visible to them.

    The population's blocks are cut into one shard per configured worker at construction
    (:func:`_shards`), whatever the actors alive later. Each generation hands the shards to
    the actors that have started, the shard each one evaluated last first; a shard whose
    actor dies (killed, its process crashed, its node gone) goes back to the queue and is
    evaluated by another actor. Shards are put together in order, so the generation equals an
    uninterrupted one. A lost actor is replaced at once: Ray starts it where a CPU is free, or
    when a node joins. Actors that Ray cannot place yet (more ``workers`` than the cluster's
    CPUs) wait the same way and take work as soon as they have started.
    """

    #: Seconds to wait for an actor to start when none is running, before stopping the run.
    start_timeout: float = 120.0
    #: How often one shard may lose its actor in one generation before the run stops.
    max_attempts: int = 3

    def __init__(
        self,
        settings: EvaluatorSettings,
        population_size: int,
        workers: int,
        address: str,
        gpus: float = 0.0,
    ) -> None:
        import ray

        connect_ray(address)
        self.ray = ray
        self.gpus = gpus
        if gpus > 0:
            _check_gpus(ray, gpus)
            settings = dataclasses.replace(settings, device="cuda")
        self.settings = settings
        self.shards = _shards(settings, population_size, workers)
        self.lost_errors = lost_worker_errors(ray)
        self.actors: list[_Actor] = []
        self._actor_options: dict[str, Any] = {
            "num_cpus": 1,
            "num_gpus": gpus,
            "max_restarts": 0,
        }
        self._actor_cls = ray.remote(_RayWorker)
        self._settings_ref = ray.put(settings)
        self._started = 0
        self._last_loss = ""
        available = ray.available_resources()
        free = int(available.get("CPU", 0))
        if gpus > 0:
            free = min(free, int(available.get("GPU", 0) / gpus + 1e-9))
        if free < len(self.shards):
            logger.warning(
                "%d Ray workers wanted but the cluster has room for %d now (free CPUs%s): the "
                "others start when resources free up or nodes join "
                "(`ray start --address=HEAD:6379`)",
                len(self.shards),
                free,
                f", and GPUs at {gpus:g} each" if gpus > 0 else "",
            )
        self._top_up(len(self.shards))
        # The first generation waits for the actors the cluster can place now, not the others.
        placeable = min(free, len(self.actors))
        if placeable:
            pings = [a.starting for a in self.actors]
            ray.wait(pings, num_returns=placeable, timeout=self.start_timeout)
        self._poll_starting()

    # -- actors -----------------------------------------------------------------------------

    def _top_up(self, allowed: int) -> int:
        """Start actors until there is one per shard, at most ``allowed``; how many started."""
        started = 0
        while len(self.actors) < len(self.shards) and started < allowed:
            handle = self._actor_cls.options(**self._actor_options).remote(self._settings_ref)
            self._started += 1
            self.actors.append(_Actor(handle, f"worker {self._started}", handle.node_id.remote()))
            started += 1
        return started

    def _drop(self, actor: _Actor) -> None:
        if actor in self.actors:
            self.actors.remove(actor)
        try:
            self.ray.kill(actor.handle)
        except Exception:  # already gone
            pass

    def _poll_starting(self) -> None:
        """Take note of actors that have started since last looked at, without waiting."""
        starting = {a.starting: a for a in self.actors if a.starting is not None}
        if starting:
            done, _ = self.ray.wait(list(starting), num_returns=len(starting), timeout=0)
            for ref in done:
                self._started_or_lost(starting[ref], ref)

    def _started_or_lost(self, actor: _Actor, ref: Any) -> None:
        try:
            actor.node = self.ray.get(ref)
            actor.starting = None
        except self.lost_errors as exc:
            if getattr(exc, "actor_init_failed", False):  # would fail on any node
                self.close()
                cause = str(exc).strip().splitlines()[-1]
                raise RlxError(
                    f"a Ray worker could not start: {cause}. Every node of the cluster needs "
                    "the packages this run uses (rlx-es, the environment's, a network "
                    "factory's), in the same versions"
                ) from None
            self._last_loss = f"{actor.name} could not start: {_first_line(exc)}"
            logger.warning("Ray %s", self._last_loss)
            self._drop(actor)

    def node_ids(self) -> list[str]:
        """The Ray node of each actor that has started."""
        self._poll_starting()
        return [a.node for a in self.actors if a.starting is None]

    # -- a generation -----------------------------------------------------------------------

    def evaluate(self, population: dict[str, Any], block_seeds: np.ndarray) -> Episodes:
        """Hand the shards to the started actors and put their episodes together in order; a shard
        whose actor is lost is queued again and the actor replaced. The run stops after
        ``max_attempts`` losses of one shard, or when no actor starts within ``start_timeout``."""
        self._top_up(len(self.shards))  # replaces actors lost earlier
        self._poll_starting()  # actors placed since (nodes that joined) take work now
        replacements = len(self.shards)  # actors that may be started during the generation
        handle = self.ray.put(population)
        queue = list(range(len(self.shards)))
        attempts = [0] * len(self.shards)
        parts: list[Episodes | None] = [None] * len(self.shards)
        running: dict[Any, tuple[_Actor, int]] = {}
        waiting_since: float | None = None
        while queue or running:
            self._dispatch(queue, running, handle, block_seeds)
            starting = {a.starting: a for a in self.actors if a.starting is not None}
            if not running:
                if not starting:
                    replacements -= self._top_up(replacements)
                    starting = {a.starting: a for a in self.actors if a.starting is not None}
                if not starting:
                    self._stop("every Ray worker was lost and no more may be started")
                waiting_since = waiting_since or time.monotonic()
                timeout = max(0.0, waiting_since + self.start_timeout - time.monotonic())
            else:
                waiting_since, timeout = None, None
            done, _ = self.ray.wait([*running, *starting], num_returns=1, timeout=timeout)
            if not done:
                self._stop(f"no Ray worker started within {self.start_timeout:.0f} s")
            for ref in done:
                if ref in starting:
                    self._started_or_lost(starting[ref], ref)
                    continue
                actor, index = running.pop(ref)
                try:
                    parts[index] = self.ray.get(ref)
                except self.ray.exceptions.RayTaskError as exc:
                    cause = exc.as_instanceof_cause()
                    if isinstance(cause, RlxError):
                        raise RlxError(str(cause).splitlines()[-1]) from None
                    raise
                except self.lost_errors as exc:
                    attempts[index] += 1
                    self._lose(actor, index, exc, attempts[index])
                    queue.append(index)
                    if replacements > 0:
                        replacements -= self._top_up(1)
        return Episodes.concatenate(parts)  # type: ignore[arg-type]

    def _dispatch(
        self,
        queue: list[int],
        running: dict[Any, tuple[_Actor, int]],
        population: Any,
        block_seeds: np.ndarray,
    ) -> None:
        """Give queued shards to idle started actors, each its last shard first."""
        busy = {id(actor) for actor, _ in running.values()}
        idle = [a for a in self.actors if a.starting is None and id(a) not in busy]
        for actor in sorted(idle, key=lambda a: a.home not in queue):
            if not queue:
                return
            index = actor.home if actor.home in queue else queue[0]
            queue.remove(index)
            actor.home = index
            first, count, a, b = self.shards[index]
            ref = actor.handle.evaluate.remote(population, first, count, block_seeds[a:b])
            running[ref] = (actor, index)

    def _lose(self, actor: _Actor, index: int, error: BaseException, attempt: int) -> None:
        first, count, _, _ = self.shards[index]
        where = f" on node {actor.node}" if actor.node else ""
        self._last_loss = f"lost {actor.name}{where}: {_first_line(error)}"
        logger.warning(
            "lost Ray %s%s (%s): its %d members (%d to %d) are evaluated again on the "
            "remaining workers",
            actor.name,
            where,
            _first_line(error),
            count,
            first,
            first + count - 1,
        )
        self._drop(actor)
        if attempt >= self.max_attempts:
            self._stop(
                f"members {first} to {first + count - 1} lost their Ray worker {attempt} times "
                "in one generation"
            )

    def _stop(self, reason: str) -> None:
        """End the generation with one message; the population stays unevaluated."""
        resources = self.ray.cluster_resources()
        free = self.ray.available_resources()
        last = f"; last: {self._last_loss}" if self._last_loss else ""
        gpus = (
            f", {resources.get('GPU', 0):g} GPUs, {free.get('GPU', 0):g} free"
            if self.gpus > 0
            else ""
        )
        raise TrainingError(
            f"{reason} (the cluster has {resources.get('CPU', 0):g} CPUs, "
            f"{free.get('CPU', 0):g} free{gpus}{last}). Add nodes "
            "(`ray start --address=HEAD:6379`) and continue the run with `rlx run --resume RUN_DIR`"
        )

    def close(self) -> None:
        """Kill every actor."""
        for actor in list(self.actors):
            self._drop(actor)
        self.actors = []


def _check_gpus(ray: Any, gpus: float) -> None:
    """Refuse ``gpus_per_worker`` that no node of the cluster can give one actor (Ray would
    wait for it forever), with the cluster's GPUs in the message."""
    try:
        per_node = [
            float(node.get("Resources", {}).get("GPU", 0))
            for node in ray.nodes()
            if node.get("Alive", True)
        ]
    except Exception:  # Ray Client may not list nodes: judge by the cluster's total
        per_node = [float(ray.cluster_resources().get("GPU", 0))]
    total, largest = sum(per_node), max(per_node, default=0.0)
    if largest < gpus:
        where = f" ({largest:g} on its largest node)" if len(per_node) > 1 and total else ""
        raise ConfigError(
            f"gpus_per_worker={gpus:g}: each Ray worker needs {gpus:g} GPUs on one node, but "
            f"the cluster has {total:g} GPUs{where}. Lower gpus_per_worker, set it to 0 for "
            "workers on CPUs, or join GPU machines (`ray start --address=HEAD:6379`)"
        )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def make_backend(
    settings: EvaluatorSettings,
    population_size: int,
    backend: str,
    workers: int,
    address: str,
    gpus_per_worker: float = 0.0,
) -> LocalBackend | ProcessBackend | RayBackend:
    """The evaluation backend named by the ``backend`` hyperparameter (``gpus_per_worker``:
    GPUs of each Ray actor)."""
    if backend == "local":
        return LocalBackend(settings, population_size)
    if backend == "process":
        return ProcessBackend(settings, population_size, workers)
    if backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise RlxError("backend=ray needs Ray: pip install 'rlx-es[ray]'") from None
        return RayBackend(settings, population_size, workers, address, gpus_per_worker)
    raise RlxError(f"unknown backend {backend!r}; use local, process or ray")
