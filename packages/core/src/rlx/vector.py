"""Vector environments and the bookkeeping that runs on between learning iterations.

:func:`make_vector_env` builds ``n`` copies of an environment with gymnasium's ``make_vec``.
:class:`VectorRunner` steps them and owns what lives across iterations: the last
observations, which environments reset at the next step, the returns and lengths of the
unfinished episodes, and exact snapshots of all of it (:mod:`rlx.envstate`). It knows
nothing of buffers: a rollout or replay buffer stores what :meth:`VectorRunner.step` returns.

gymnasium's default ``NEXT_STEP`` autoreset: the step that ends an episode returns the
episode's final observation, and the next call to ``step`` only resets that environment
(reward 0, the action ignored). That reset step is no transition: :meth:`VectorRunner.step`
reports it with ``valid = False`` and leaves it out of the step count and the episode
statistics. The final observation of a truncated episode is therefore the observation its
last transition returned, the bootstrap a truncated step needs.

The worker processes of ``async`` vector environments ignore SIGINT: a terminal's Ctrl-C
reaches the whole process group, and only the main process should act on it (the trainer
finishes the iteration and saves).
"""

from __future__ import annotations

import functools
import signal
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlx import envstate
from rlx.errors import ConfigError, SpaceError
from rlx.seeding import derive

#: What to pass instead of an environment that cannot be copied, in the errors that say so.
PASS_INSTEAD = (
    "pass an environment id (rlx.make(name, 'Env-v0')), a gymnasium.vector.VectorEnv of "
    "your environments, or n_envs=1 (your environment itself is then stepped)"
)

#: Environments :func:`rlx.make` made from an id, which copies made from their spec reproduce.
_made_from_id: weakref.WeakSet[Any] = weakref.WeakSet()
#: The runner that steps each environment given as it is (one runner at a time).
_claims: weakref.WeakKeyDictionary[Any, weakref.ref[Any]] = weakref.WeakKeyDictionary()


def mark_made_from_id(env: Any) -> None:
    """Note that rlx made ``env`` from its id: its vector environments are built from its spec
    as they always were (gymnasium's vectorised implementations included), even with one copy."""
    _made_from_id.add(env)


class GivenVectorEnv:
    """Stands for a ``gymnasium.vector.VectorEnv`` given to :func:`rlx.make`: the agent sees one
    environment's spaces and ``spec``, and its :class:`VectorRunner` steps :attr:`vector`
    itself. Stepping this stand-in is an error; closing it leaves the vector open (the
    caller's)."""

    def __init__(self, vector: Any) -> None:
        self.vector = vector
        self.observation_space = vector.single_observation_space
        self.action_space = vector.single_action_space
        self.metadata = dict(getattr(vector, "metadata", None) or {})
        self.render_mode = getattr(vector, "render_mode", None)
        self.spec = single_spec(getattr(vector, "spec", None))

    @property
    def num_envs(self) -> int:
        """The number of environments of the vector environment."""
        return int(self.vector.num_envs)

    @property
    def unwrapped(self) -> Any:
        """The stand-in itself: there is no single environment under it."""
        return self

    @property
    def name(self) -> str:
        """The environment's id, or else the class name of its first environment."""
        if self.spec is not None:
            return str(self.spec.id)
        envs = getattr(self.vector.unwrapped, "envs", None)
        return type((envs[0] if envs else self.vector).unwrapped).__name__

    def single_copy(self) -> Any:
        """One fresh environment like the vector's (to evaluate on): made from the spec, or a
        deep copy of a synchronous vector environment's first one."""
        import copy

        import gymnasium as gym

        if self.spec is not None:
            return gym.make(self.spec)
        envs = getattr(self.vector.unwrapped, "envs", None)
        if envs:
            return copy.deepcopy(envs[0])
        raise ConfigError(
            f"cannot make an evaluation environment from {type(self.vector).__name__}, which "
            "has no spec and keeps its environments in other processes: give the trainer one "
            "(Trainer(agent, eval_env=...)) or pass an environment id"
        )

    def reset(self, **kwargs: Any) -> Any:
        """A :class:`~rlx.errors.ConfigError`: the runner resets the vector environment itself,
        never this stand-in."""
        raise ConfigError(_STANDS_FOR)

    def step(self, action: Any) -> Any:
        """A :class:`~rlx.errors.ConfigError`: the runner steps the vector environment itself,
        never this stand-in."""
        raise ConfigError(_STANDS_FOR)

    def close(self) -> None:
        """Nothing: the vector environment is the caller's to close."""

    def __repr__(self) -> str:
        return f"GivenVectorEnv({self.vector!r})"


#: Arguments that ``gymnasium.make_vec`` records in a vector environment's spec: they are
#: the vector's, not its environments'.
_VECTOR_KWARGS = ("num_envs", "vectorization_mode", "vector_kwargs", "wrappers")


def single_spec(spec: Any) -> Any:
    """The spec of one environment of a vector environment made by ``gymnasium.make_vec``
    from ``spec`` (its own): the vector's arguments removed, and for a vectorised
    implementation (``vector_entry_point``) only the arguments the environment is registered
    with, since the others are the vector class's."""
    if spec is None or not any(key in spec.kwargs for key in _VECTOR_KWARGS):
        return spec
    import dataclasses

    import gymnasium as gym

    kwargs = {k: v for k, v in spec.kwargs.items() if k not in _VECTOR_KWARGS}
    if spec.kwargs.get("vectorization_mode") == "vector_entry_point":
        registered = gym.registry.get(spec.id)
        known = registered.kwargs if registered is not None else {}
        kwargs = {k: v for k, v in kwargs.items() if k in known}
    return dataclasses.replace(spec, kwargs=kwargs)


_STANDS_FOR = (
    "this agent was given a vector environment: its runner steps that one, and agent.env only "
    "stands for it"
)


def make_vector_env(env: Any, n_envs: int, vectorization: str) -> Any:
    """``n_envs`` copies of ``env`` (from its spec) with gymnasium's NEXT_STEP autoreset.

    ``vectorization`` is ``auto`` (gymnasium's own vectorised implementation when the
    environment has one, such as CartPole, and no wrappers, else ``sync``), ``sync`` or
    ``async`` (worker processes that ignore SIGINT). Wrappers recorded in ``env.spec`` are
    applied to every copy. An environment whose spec cannot make such copies (no spec, an
    entry point that fails, a wrapper that does not record its arguments, copies with other
    spaces) is one :class:`ConfigError` saying what to pass instead.
    """
    import gymnasium as gym

    if env.spec is None or env.spec.entry_point is None:
        raise ConfigError(
            f"{n_envs} copies of {type(env.unwrapped).__name__} cannot be made: vector "
            "environments are built from env.spec, and it has none (it was not made with "
            f"gymnasium.make); {PASS_INSTEAD}"
        )
    if vectorization == "auto" and env.spec.additional_wrappers:
        vectorization = "sync"  # a vectorised implementation takes no wrappers
    try:
        vector = _make_vec(env, n_envs, vectorization)
    except ValueError as exc:
        if "RecordConstructorArgs" not in str(exc):
            raise
        raise ConfigError(
            f"{exc} Vector environments rebuild every wrapper from the environment's spec: make "
            "it inherit gymnasium.utils.RecordConstructorArgs (as gymnasium's own wrappers do), "
            f"or {PASS_INSTEAD}"
        ) from None
    except (gym.error.Error, ImportError, AttributeError) as exc:
        raise ConfigError(
            f"{n_envs} copies of {env.spec.id} cannot be made from its spec "
            f"({type(exc).__name__}: {exc}); {PASS_INSTEAD}"
        ) from exc
    autoreset = vector.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if autoreset != gym.vector.AutoresetMode.NEXT_STEP:
        vector.close()
        raise ConfigError(
            f"rlx needs vector environments with NEXT_STEP autoreset, got {autoreset}"
        )
    for role in ("observation", "action"):
        theirs, ours = getattr(vector, f"single_{role}_space"), getattr(env, f"{role}_space")
        if theirs != ours:
            vector.close()
            raise ConfigError(
                f"copies of {env.spec.id} made from its spec have the {role} space {theirs}, "
                f"the environment given has {ours} (changed after it was made?); {PASS_INSTEAD}"
            )
    return vector


def _given_vector_env(env: Any, n_envs: int, runner: Any) -> Any | None:
    """What ``runner`` steps of the environment given to the agent as it is, or None when it
    makes its own: a :class:`GivenVectorEnv`'s vector, or with ``n_envs == 1`` the instance the
    user made, unless another runner steps it already (then :func:`_one_copy` makes one)."""
    import gymnasium as gym

    holder = _claims.get(env) if _is_given(env, n_envs) else None
    claimed = holder is not None and holder() is not None
    if isinstance(env, GivenVectorEnv):
        if env.num_envs != n_envs:
            raise ConfigError(
                f"n_envs = {n_envs}, but the vector environment given has {env.num_envs} "
                "environments: leave n_envs out (it is taken from the vector environment)"
            )
        if claimed:
            raise ConfigError(
                "the vector environment given is stepped by another runner already: an agent "
                "that steps several (SVPG's particles) needs an environment id"
            )
        _claims[env] = weakref.ref(runner)
        return env.vector
    if not _is_given(env, n_envs) or claimed:
        return None
    _claims[env] = weakref.ref(runner)
    return gym.vector.SyncVectorEnv(
        [lambda: env], autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP
    )


def _is_given(env: Any, n_envs: int) -> bool:
    """Whether the runners of ``env`` step it as it is (or, when one already does, one copy of
    it), rather than copies made from its spec."""
    import gymnasium as gym

    if isinstance(env, GivenVectorEnv):
        return True
    return n_envs == 1 and isinstance(env, gym.Env) and env not in _made_from_id


def _one_copy(env: Any) -> Any:
    """A synchronous vector environment of one copy of the instance ``env`` (from its spec, else
    a deep copy), for a second runner of an agent given ``env`` with ``n_envs == 1``: it plays
    the same episodes as the instance would."""
    import copy

    import gymnasium as gym

    def make() -> Any:
        return gym.make(env.spec) if env.spec is not None else copy.deepcopy(env)

    return gym.vector.SyncVectorEnv([make], autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)


def _make_vec(env: Any, n_envs: int, vectorization: str) -> Any:
    import gymnasium as gym

    if vectorization == "async":
        from gymnasium.vector.async_vector_env import _async_worker

        vector = gym.make_vec(
            env.spec,
            num_envs=n_envs,
            vectorization_mode="async",
            vector_kwargs={"worker": functools.partial(_ignoring_sigint, _async_worker)},
        )
        return vector
    mode = None if vectorization == "auto" else vectorization
    return gym.make_vec(env.spec, num_envs=n_envs, vectorization_mode=mode)


def _ignoring_sigint(worker: Callable[..., None], *args: Any) -> None:
    """Run gymnasium's async ``worker`` (the process's target) with SIGINT ignored first.

    Ctrl-C is the main process's to handle; a worker that died of it mid-step would end the
    run with an error instead of a saved checkpoint. Module-level, so "spawn" can pickle it.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker(*args)


def _observation_mismatch(env: Any, space: Any, steps: int = 100) -> str | None:
    """Where a fresh copy of ``env`` (made from its spec) returns an observation that does not
    fit ``space`` within ``steps`` random steps: the key and shapes, for the message of a vector
    environment that could not stack its observations; None when it finds none."""
    import gymnasium as gym

    from rlx.observations import mismatch

    spec = getattr(env, "spec", None)
    if spec is None or spec.entry_point is None:
        return None
    try:
        probe = gym.make(spec)
    except Exception:  # a diagnosis only: the caller's error stands
        return None
    try:
        observation, _ = probe.reset(seed=0)
        for _ in range(steps):
            found = mismatch(space, observation)
            if found is not None:
                return found
            observation, _, terminated, truncated, _ = probe.step(probe.action_space.sample())
            if terminated or truncated:
                observation, _ = probe.reset()
    except Exception:
        return None
    finally:
        probe.close()
    return None


def info_numbers(info: Any) -> dict[str, float]:
    """The finite numbers (and booleans, as 0 or 1) of one environment's ``info`` dict: what
    the trainer can average over episodes (the success rate, ``info_keywords``)."""
    if not isinstance(info, dict):
        return {}
    found = {}
    for key, value in info.items():
        if isinstance(key, str) and isinstance(value, (bool, int, float, np.bool_, np.number)):
            number = float(value)
            if np.isfinite(number):
                found[key] = number
    return found


def vector_info_numbers(infos: Any, index: int) -> dict[str, float]:
    """:func:`info_numbers` of copy ``index`` in a vector environment's ``infos`` (gymnasium's
    dict of arrays, where ``_key`` says which copies set ``key``)."""
    if not isinstance(infos, dict):
        return {}
    one = {}
    for key, value in infos.items():
        if not isinstance(key, str) or key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not (np.ndim(mask) == 1 and bool(mask[index])):
            continue
        if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype != object:
            one[key] = value[index]
    return info_numbers(one)


class EpisodeReturns(list[float]):
    """The returns of finished episodes, a list of floats that also carries each episode's
    final info numbers in :attr:`infos` (``episode_infos`` of :class:`rlx.protocols.Iteration` takes
    them from here)."""

    def __init__(self, returns: Any = (), infos: Any = ()) -> None:
        super().__init__(returns)
        #: One dict per episode: the numbers of its final info (:func:`info_numbers`).
        self.infos: list[dict[str, float]] = list(infos)

    def __iadd__(self, other: Any) -> EpisodeReturns:  # type: ignore[override,misc]
        """Append ``other``'s returns and their infos (none for a plain list's): an agent that
        gathers the episodes of several runners starts from ``EpisodeReturns()``."""
        self.infos += getattr(other, "infos", None) or [{} for _ in other]
        super().__iadd__(other)
        return self


#: The entries of the latest info that a runner's state keeps: an environment's valid actions
#: (:data:`rlx.evaluation.INFO_MASK_KEY` and its flags), which acting on the restored
#: observations needs.
_SAVED_INFO_KEYS = ("action_mask", "_action_mask")


@dataclass
class VectorStep:
    """What one step of every environment gave, each array with leading axis ``n_envs``.

    ``next_observations`` are what the environments returned (a final observation where an
    episode ended); ``rewards`` are float64; ``valid`` is False for the reset steps of
    NEXT_STEP autoreset, which are no transitions.
    """

    next_observations: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray

    @property
    def done(self) -> np.ndarray:
        """Whether each environment's episode ended there: ``terminated | truncated``."""
        return self.terminated | self.truncated


class VectorRunner:
    """Steps a vector environment and keeps the state that outlives one iteration.

    Finished episodes accumulate in :attr:`finished_returns` and :attr:`finished_lengths`
    until :meth:`pop_finished` takes them. :meth:`close` releases the environments (the
    worker processes of async ones) and keeps a snapshot; the next use reopens them where
    they were (async ones restart their episodes).
    """

    def __init__(
        self,
        env: Any,
        n_envs: int,
        vectorization: str,
        seed: int,
        transform: Callable[[Any], np.ndarray] | None = None,
    ) -> None:
        self.n_envs = n_envs
        #: Applied to every batch of observations the environments return (an
        #: :class:`rlx.observations.ObservationCoder`'s ``pack`` for Dict or Discrete ones).
        self.transform = transform
        self._env = env
        self._make = functools.partial(make_vector_env, env, n_envs, vectorization)
        self._reopen_seed = derive(seed, "reopen environments")
        #: The caller's own environment (an instance, a vector one), stepped as given and never
        #: closed here; None when the runner makes copies from the spec.
        self._given = _given_vector_env(env, n_envs, self)
        if self._given is None and _is_given(env, n_envs):
            self._make = functools.partial(_one_copy, env)
        self._envs: Any = self._given if self._given is not None else self._make()
        self._closed: tuple[dict[str, np.ndarray], dict[str, Any]] | None = None
        observations, infos = self._envs.reset(seed=seed)
        self.observations = self._observed(observations)
        #: The info of the latest reset or step (gymnasium's vector layout), which describes
        #: :attr:`observations`: where :func:`rlx.evaluation.action_masks` finds the valid
        #: actions of an environment that gives them in its info.
        self.infos: dict[str, Any] = infos
        self.autoreset = np.zeros(n_envs, bool)
        self.episode_returns = np.zeros(n_envs)
        self.episode_lengths = np.zeros(n_envs, np.int64)
        self.finished_returns: list[float] = []
        self.finished_lengths: list[int] = []
        #: The numbers of each finished episode's final info (:func:`vector_info_numbers`).
        self.finished_infos: list[dict[str, float]] = []

    def step(self, actions: Any) -> VectorStep:
        """Step every environment with ``actions`` (what the environments accept)."""
        try:
            next_observations, rewards, terminated, truncated, infos = self.envs.step(actions)
        except ValueError as exc:
            if "shape" not in str(exc):
                raise
            space = self.envs.single_observation_space
            found = _observation_mismatch(self._env, space)
            where = f": on a fresh copy, its {found}" if found else f" (gymnasium: {exc})"
            raise SpaceError(
                f"an environment returned an observation that does not fit its observation "
                f"space {space}{where}; gymnasium.utils.env_checker.check_env(env) checks it"
            ) from exc
        next_observations = self._observed(next_observations)
        valid = ~self.autoreset
        rewards = np.asarray(rewards, np.float64)
        self.episode_returns += rewards
        self.episode_lengths += valid
        done = terminated | truncated
        if done.any():
            for i in np.flatnonzero(done):
                self.finished_returns.append(float(self.episode_returns[i]))
                self.finished_lengths.append(int(self.episode_lengths[i]))
                self.finished_infos.append(vector_info_numbers(infos, int(i)))
            self.episode_returns[done] = 0.0
            self.episode_lengths[done] = 0
        self.autoreset = done
        self.observations = next_observations
        self.infos = infos
        return VectorStep(next_observations, rewards, terminated, truncated, valid)

    def _observed(self, observations: Any) -> Any:
        """The environments' observations, transformed, as a C-ordered array: a vector
        environment may return another layout (gymnasium's CartPoleVectorEnv, Fortran order),
        which a checkpoint gives back in C order, and a matrix product may round the two
        layouts differently; exact resume needs one."""
        if self.transform is not None:
            observations = self.transform(observations)
        if isinstance(observations, np.ndarray):
            return np.ascontiguousarray(observations)
        return observations

    def pop_finished(self) -> tuple[list[float], list[int]]:
        """Returns and lengths of the episodes finished since the last call; the returns are an
        :class:`EpisodeReturns` that carries the numbers of each episode's final info."""
        returns = EpisodeReturns(self.finished_returns, self.finished_infos)
        finished = returns, self.finished_lengths
        self.finished_returns, self.finished_lengths, self.finished_infos = [], [], []
        return finished

    # -- checkpoints ----------------------------------------------------------------------

    def state(self, prefix: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Arrays and JSON for an exact resume (the environments' snapshot included)."""
        arrays: dict[str, np.ndarray] = {
            f"{prefix}/observations": np.array(self.observations),
            f"{prefix}/autoreset": self.autoreset.copy(),
            f"{prefix}/episode_returns": self.episode_returns.copy(),
            f"{prefix}/episode_lengths": self.episode_lengths.copy(),
        }
        for key in _SAVED_INFO_KEYS:  # the valid actions of the observations, when given so
            if isinstance(self.infos.get(key), np.ndarray) and self.infos[key].dtype != object:
                arrays[f"{prefix}/infos/{key}"] = self.infos[key].copy()
        env_arrays, env_meta = envstate.snapshot(self.envs)
        arrays.update({f"{prefix}/envs/{key}": value for key, value in env_arrays.items()})
        return arrays, {"envs": env_meta}

    def load(
        self, arrays: dict[str, np.ndarray], meta: dict[str, Any], prefix: str, seed: int
    ) -> None:
        """Restore :meth:`state`; environments that cannot be restored (asynchronous ones)
        restart their episodes, reset with ``seed``."""
        if meta["envs"] is None or not envstate.can_restore(self.envs):
            observations, self.infos = self.envs.reset(seed=seed)
            self.observations = self._observed(observations)
            self.autoreset[:] = False
            self.episode_returns[:] = 0.0
            self.episode_lengths[:] = 0
            return
        marker = f"{prefix}/envs/"
        envstate.restore(
            self.envs,
            {k[len(marker) :]: v for k, v in arrays.items() if k.startswith(marker)},
            meta["envs"],
        )
        self.observations = arrays[f"{prefix}/observations"].copy()
        marker = f"{prefix}/infos/"
        self.infos = {k[len(marker) :]: v.copy() for k, v in arrays.items() if k.startswith(marker)}
        self.autoreset = arrays[f"{prefix}/autoreset"].copy()
        self.episode_returns = arrays[f"{prefix}/episode_returns"].copy()
        self.episode_lengths = arrays[f"{prefix}/episode_lengths"].copy()

    @property
    def envs(self) -> Any:
        """The vector environment, reopened where it was if :meth:`close` released it."""
        if self._envs is None:
            self._envs = self._make()
            if self._closed is not None:
                arrays, meta = self._closed
                self._closed = None
                self.load(arrays, meta, "closed", self._reopen_seed)
        return self._envs

    def close(self) -> None:
        """Release environments the runner made (a snapshot is kept for reopening them); an
        environment given as it is stays open, the caller's to close."""
        if self._envs is not None and self._given is None:
            self._closed = self.state("closed")
            self._envs.close()
            self._envs = None
