"""The Python entry points: :func:`make`, :func:`make_env`, :func:`load` and :func:`save`."""

from __future__ import annotations

import contextvars
import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlx.discovery import (
    agent_spec,
    get_registry,
    register_atari,
    register_plugin_envs,
)
from rlx.errors import ConfigError, RlxError, SpaceError, UnknownNameError, did_you_mean
from rlx.spec import AgentSpec

if TYPE_CHECKING:
    import os

    from rlx.protocols import Agent


def make_env(
    env_id: str, wrappers: Sequence[Any] = (), training: bool = True, **kwargs: Any
) -> Any:
    """Make a gymnasium environment, including those that rlx plugins register, wrapped by
    ``wrappers`` (:mod:`rlx.wrappers`; the training-only ones only when ``training``).

    ``env_id`` may be gymnasium's ``"package.module:Env-v0"``: the module is imported (it
    registers ``Env-v0``) first, as ``gymnasium.make`` does. An unknown id raises an error with
    the closest known ids.
    """
    import gymnasium

    register_atari(env_id)
    entries: list[dict[str, Any]] = []
    if wrappers:
        from rlx.wrappers import expand

        entries, preset_kwargs = expand(wrappers)
        kwargs = {**preset_kwargs, **kwargs}

    register_plugin_envs()
    registered_id = _import_env_module(env_id)
    if registered_id not in gymnasium.registry:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                gymnasium.make(env_id)
        except gymnasium.error.DeprecatedEnv as exc:  # "Taxi-v3 is deprecated, use Taxi-v4"
            raise UnknownNameError(f"unknown environment {env_id!r}: {exc}") from exc
        except gymnasium.error.Error:
            pass
        known = list(gymnasium.registry)
        raise UnknownNameError(
            f"unknown environment {env_id!r}.{did_you_mean(env_id, known)} "
            "Run 'python -c \"import gymnasium; gymnasium.pprint_registry()\"' to see them all."
        )
    _check_env_kwargs(env_id, registered_id, kwargs)
    try:
        env = gymnasium.make(env_id, **kwargs)
    except gymnasium.error.DependencyNotInstalled as exc:
        raise RlxError(f"environment {env_id!r} needs an extra package: {exc}") from exc
    except (TypeError, ValueError, KeyError, AssertionError, gymnasium.error.Error) as exc:
        if not kwargs and not isinstance(exc, TypeError):
            raise  # no argument of the user's to blame: the environment's own fault
        detail = f"{type(exc).__name__}: {exc}" if not isinstance(exc, TypeError) else str(exc)
        raise ConfigError(
            f"environment {env_id!r} rejected its arguments {kwargs}: {detail}; check the "
            "keyword arguments it takes (--env-kwargs, [env_kwargs])"
        ) from exc
    if not entries:
        return env
    from rlx.wrappers import apply

    try:
        return apply(env, entries, training)
    except BaseException:
        env.close()
        raise


#: The annotations :func:`_check_env_kwargs` judges, with what a message calls them.
_SIMPLE_TYPES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _check_env_kwargs(env_id: str, registered_id: str, kwargs: Mapping[str, Any]) -> None:
    """Refuse a keyword argument whose type differs from the simple annotation (bool, int,
    float, str, or an optional one) of the environment's constructor or ``gymnasium.make``;
    arguments without one, or with one it cannot judge, are left to the environment."""
    import numbers
    import types
    import typing

    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    if not kwargs:
        return
    entry_point = gymnasium.registry[registered_id].entry_point
    hints: dict[str, Any] = {}
    try:
        creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
        hints.update(
            typing.get_type_hints(creator.__init__ if isinstance(creator, type) else creator)
        )
    except Exception:  # an import that fails or annotations that do not resolve: not judged
        pass
    hints.update(typing.get_type_hints(gymnasium.make))
    accepts = {
        bool: lambda v: isinstance(v, bool),
        int: lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool),
        float: lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool),
        str: lambda v: isinstance(v, str),
    }
    for key, value in kwargs.items():
        hint = hints.get(key)
        if hint is None or key in ("id", "kwargs", "return"):
            continue
        options = (
            typing.get_args(hint)
            if typing.get_origin(hint) in (typing.Union, types.UnionType)
            else (hint,)
        )
        simple = [option for option in options if option is not type(None)]
        if not simple or not all(option in accepts for option in simple):
            continue  # list[str], a class, a Literal: not judged here
        if value is None and type(None) in options:
            continue
        if any(accepts[option](value) for option in simple):
            continue
        wanted = " or ".join(_SIMPLE_TYPES[option] for option in simple)
        if type(None) in options:
            wanted += " or null"
        quoted = f" (quoted on the command line: {key}='\"{value}\"')" if simple == [str] else ""
        raise ConfigError(
            f"environment {env_id!r}: its argument {key} must be {wanted}, got {value!r}; "
            f"give it {wanted}{quoted}"
        )


def _import_env_module(env_id: str) -> str:
    """Import the module of a ``"module:Env-v0"`` id and return ``Env-v0`` (a plain id is
    returned as it is); a module that fails to import, or registers no ``Env-v0``, is one
    :class:`RlxError` naming both."""
    import importlib

    import gymnasium

    module, sep, registered_id = env_id.rpartition(":")
    if not sep:
        return env_id
    if not module or not registered_id:
        raise UnknownNameError(f"environment {env_id!r}: expected an id or 'package.module:Env-v0'")
    try:
        importlib.import_module(module)
    except Exception as exc:
        raise RlxError(
            f"environment {env_id!r}: importing its module {module!r} failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if registered_id not in gymnasium.registry:
        raise UnknownNameError(
            f"environment {env_id!r}: module {module!r} was imported but registered no "
            f"environment {registered_id!r}."
            + did_you_mean(registered_id, list(gymnasium.registry))
        )
    return registered_id


def evaluation_env(agent: Any, identity: Any = None, **kwargs: Any) -> Any:
    """A fresh environment to evaluate ``agent`` on: its run's environment (``identity``, by
    default the agent's) rebuilt without the training-only wrappers (unclipped rewards, whole
    games), or a copy of its own. ``kwargs`` go to ``gymnasium.make`` (``render_mode``)."""
    identity = identity if identity is not None else getattr(agent, "identity", None)
    if identity is not None and (identity.wrappers or kwargs):
        return make_env(
            identity.env,
            wrappers=identity.wrappers,
            training=False,
            **{**identity.env_kwargs, **kwargs},
        )
    spec = getattr(agent.env, "spec", None)
    if kwargs and spec is not None:
        import gymnasium

        return gymnasium.make(spec, **kwargs)
    return copy_env(agent.env)


def copy_env(env: Any) -> Any:
    """A fresh copy of a gymnasium environment for evaluation, rebuilt from its spec if any
    (one like those of a vector environment given to :func:`make`)."""
    import copy

    import gymnasium

    from rlx.vector import GivenVectorEnv

    if isinstance(env, GivenVectorEnv):
        return env.single_copy()
    spec = getattr(env, "spec", None)
    if spec is not None:
        return gymnasium.make(spec)
    return copy.deepcopy(env)


def space_kind(space: Any) -> str:
    """The gymnasium class name that an :class:`AgentSpec` uses for ``space``."""
    import gymnasium

    for cls in type(space).__mro__:
        if cls.__module__.startswith("gymnasium.spaces"):
            return cls.__name__
    return type(space).__name__ if isinstance(space, gymnasium.Space) else "Any"


def check_spaces(spec: AgentSpec, env: Any, env_name: str) -> None:
    """Raise :class:`SpaceError` when ``spec`` cannot handle the spaces of ``env``."""
    for role, space, supported in (
        ("observation", env.observation_space, spec.observation_spaces),
        ("action", env.action_space, spec.action_spaces),
    ):
        if "Any" not in supported and space_kind(space) not in supported:
            raise SpaceError(
                f"{spec.name} cannot handle the {role} space of {env_name}, {space}: "
                f"it takes {', '.join(supported)} {role} spaces" + _alternatives(spec, env)
            )


def _alternatives(spec: AgentSpec, env: Any) -> str:
    """``"; use a or b"``: the agents of ``spec``'s family that handle both spaces of ``env``,
    or else the first of each other family that does (``""`` when none does)."""
    kinds = (space_kind(env.observation_space), space_kind(env.action_space))
    able = [
        other
        for other in get_registry().agents.values()
        if other.name != spec.name
        and all(
            kind in supported
            for kind, supported in zip(
                kinds, (other.observation_spaces, other.action_spaces), strict=True
            )
        )
    ]
    same = [other.name for other in able if other.family == spec.family]
    if same:
        return "; use " + (same[0] if len(same) == 1 else f"{', '.join(same[:-1])} or {same[-1]}")
    first: dict[str, str] = {}
    for other in able:
        first.setdefault(other.family, other.name)
    if not first:
        return ""
    names = [f"{name} ({family})" for family, name in first.items()]
    more = " and others ('rlx list' shows every agent's spaces)" if len(able) > len(first) else ""
    return "; agents of other families take it: " + ", ".join(names) + more


def _made_with(env_spec: Any) -> dict[str, Any]:
    """The keyword arguments an environment instance was made with beyond its registered
    ones (``gymnasium.make("FrozenLake-v1", is_slippery=False)``): what the run records so
    that loading it rebuilds the same environment. An argument that is not JSON cannot be
    recorded: a warning says the rebuilt one will have the registered value."""
    import json

    import gymnasium

    from rlx.spaces import SPACES_ONLY_ID

    if env_spec is None or env_spec.id == SPACES_ONLY_ID:
        return {}  # the stand-in of rlx.load(make_env=False): its spaces come from the checkpoint
    registered = gymnasium.registry.get(env_spec.id)
    defaults = registered.kwargs if registered is not None else {}
    made: dict[str, Any] = {}
    for key, value in env_spec.kwargs.items():
        if key == "render_mode" or (key in defaults and defaults[key] == value):
            continue
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            warnings.warn(
                f"{env_spec.id} was made with {key}={value!r:.60}, which a run cannot record "
                "(not JSON): a run loaded from disk rebuilds it with the registered value",
                stacklevel=3,
            )
            continue
        made[key] = value
    return made


def make(
    name: str,
    env: Any,
    seed: int = 0,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    wrappers: Sequence[Any] = (),
    **config: Any,
) -> Agent:
    """Build agent ``name`` for ``env`` with hyperparameters.

    ``env`` is an id (``"CartPole-v1"``, ``"package.module:Env-v0"``), a gymnasium
    environment or a ``gymnasium.vector.VectorEnv``. An environment is used as given: with
    ``n_envs=1`` the agent steps it itself, with more it steps copies made from its spec (one
    that cannot make them is a :class:`ConfigError`); a vector environment is the agent's
    vector environment, ``n_envs`` taken from it (agents with an ``n_envs`` setting only).
    ``config`` keys are the agent's hyperparameters (``rlx info NAME`` lists them); values
    may be strings, which are parsed to the declared types. Every random number generator
    is seeded from ``seed``. ``wrappers`` wrap an environment given by id (see
    :mod:`rlx.wrappers`). The agent's :class:`~rlx.protocols.RunIdentity` is its
    ``identity`` attribute.
    """
    from rlx.config import build_config, to_dict
    from rlx.protocols import RunIdentity
    from rlx.seeding import check_seed, seed_everything

    check_seed(seed)
    spec = agent_spec(name)
    if wrappers:
        from rlx.wrappers import normalize

        wrappers = normalize(wrappers)
        if not isinstance(env, str):
            raise ConfigError("wrappers apply to an environment given by id; wrap yours first")
    from rlx.vector import GivenVectorEnv, mark_made_from_id

    if isinstance(env, str):
        env_id, environment = env, make_env(env, wrappers=wrappers, **dict(env_kwargs or {}))
        mark_made_from_id(environment)
    elif _is_vector_env(env):
        environment = GivenVectorEnv(env)
        env_id = environment.name
    else:
        if env_kwargs:
            raise ConfigError(
                "env_kwargs apply to an environment given by id; make yours with them instead"
            )
        environment = env
        env_spec = getattr(env, "spec", None)
        env_id = env_spec.id if env_spec is not None else type(env.unwrapped).__name__
        env_kwargs = _made_with(env_spec)
    check_spaces(spec, environment, env_id)
    agent_cls = spec.load()
    config_cls = getattr(agent_cls, "Config", None)
    if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
        raise RlxError(
            f"{spec.target} is not an rlx agent: it has no Config dataclass of hyperparameters"
        )
    if isinstance(environment, GivenVectorEnv):
        config = _n_envs_of(name, config_cls, config, environment.num_envs)
    agent_config = build_config(config_cls, config)
    if (
        not isinstance(env, str)
        and getattr(agent_config, "n_envs", None) == 1
        and getattr(agent_config, "vectorization", None) == "auto"
    ):
        # The instance itself is stepped, in a synchronous vector environment: recorded so,
        # a resumed run builds the same (not gymnasium's own vectorised CartPole).
        agent_config = dataclasses.replace(agent_config, vectorization="sync")
    if (
        isinstance(env, str)
        and not _rebuilding.get()
        and getattr(agent_config, "n_envs", 3) < 3
        and getattr(agent_config, "vectorization", None) == "auto"
    ):
        # gymnasium's own vectorised implementations pay their array work whatever the count
        # (its CartPole steps one copy in 41 us, a synchronous vector of one in 16): below three
        # copies auto is sync, recorded so. A run recorded with auto is rebuilt as it was made.
        agent_config = dataclasses.replace(agent_config, vectorization="sync")
    if (
        isinstance(environment, GivenVectorEnv)
        and getattr(agent_config, "vectorization", None) == "auto"
    ):
        # A given Sync or Async vector environment is recorded as such: a run loaded or
        # resumed from disk rebuilds the same kind (its environment snapshots fit).
        import gymnasium

        kinds = {gymnasium.vector.SyncVectorEnv: "sync", gymnasium.vector.AsyncVectorEnv: "async"}
        kind = kinds.get(type(environment.vector.unwrapped))
        if kind is not None:
            agent_config = dataclasses.replace(agent_config, vectorization=kind)
    seed_everything(seed)
    environment.action_space.seed(seed)
    environment.observation_space.seed(seed)
    agent = agent_cls(environment, agent_config, seed)
    from rlx.spaces import recorded_spaces

    agent.identity = RunIdentity(
        agent=name,
        env=env_id,
        seed=seed,
        env_kwargs=dict(env_kwargs or {}),
        hyperparameters=to_dict(agent_config),
        family=spec.family,
        distribution=spec.distribution or "",
        wrappers=tuple(wrappers),
        spaces=recorded_spaces(environment),
    )
    return agent


def _is_vector_env(env: Any) -> bool:
    import gymnasium

    return isinstance(env, gymnasium.vector.VectorEnv)


def _n_envs_of(
    name: str, config_cls: type, config: dict[str, Any], num_envs: int
) -> dict[str, Any]:
    """``config`` with ``n_envs`` set to the given vector environment's ``num_envs``; an agent
    without that setting, or an ``n_envs`` that says otherwise, is one :class:`ConfigError`."""
    from rlx.config import build_config

    fields = {field.name for field in dataclasses.fields(config_cls)}
    if "n_envs" not in fields:
        raise ConfigError(
            f"{name} steps one environment and has no n_envs setting: pass it an environment "
            "id or a gymnasium environment, not a vector environment"
        )
    if "n_envs" in config:
        given = build_config(config_cls, config).n_envs
        if given != num_envs:
            raise ConfigError(
                f"n_envs = {given}, but the vector environment given has {num_envs} "
                "environments: leave n_envs out (it is taken from the vector environment)"
            )
    return {**config, "n_envs": num_envs}


#: True while :func:`make_from_identity` rebuilds a recorded run: its settings stand as recorded.
_rebuilding: contextvars.ContextVar[bool] = contextvars.ContextVar("rebuilding", default=False)


def make_from_identity(
    identity: Any,
    trust_code: bool = False,
    source: str = "",
    device: str | None = None,
    make_env: bool = True,
) -> Agent:
    """The agent a :class:`~rlx.protocols.RunIdentity` describes, freshly built.

    A record read from saved files (``source`` names them) may name only registered agents
    and environments, and no code, unless ``trust_code`` (see :mod:`rlx.trust`). ``device``
    replaces the saved ``device`` hyperparameter (a run trained on a GPU evaluated on a
    laptop, or the reverse); the agent keeps the run's identity. ``make_env=False`` builds it
    on the recorded spaces alone (:func:`load`).
    """
    if not make_env:
        return _make_without_env(identity, trust_code, source or "the saved run", device)
    if not trust_code:
        from rlx.trust import check_identity

        check_identity(identity, source or "the saved run")
    token = _rebuilding.set(True)
    try:
        agent = make(
            identity.agent,
            identity.env,
            seed=identity.seed,
            env_kwargs=dict(identity.env_kwargs),
            wrappers=[dict(entry) for entry in identity.wrappers],
            **_hyperparameters_on(identity, device),
        )
    finally:
        _rebuilding.reset(token)
    if device is not None:
        agent.identity = identity  # type: ignore[attr-defined]
    return agent


def _hyperparameters_on(identity: Any, device: str | None) -> dict[str, Any]:
    """The saved hyperparameters, the ``device`` setting replaced by ``device`` if given."""
    hyperparameters = dict(identity.hyperparameters)
    if device is not None:
        if "device" not in hyperparameters:
            if device != "cpu":
                raise ConfigError(
                    f"{identity.agent} has no device setting (it runs on the CPU); drop "
                    f"--device {device}"
                )
        else:
            hyperparameters["device"] = device
    return hyperparameters


def _make_without_env(identity: Any, trust_code: bool, source: str, device: str | None) -> Agent:
    """The agent of ``identity`` built on a :class:`~rlx.spaces.SpacesOnlyEnv` of its recorded
    spaces: its environment is neither made nor imported. An agent whose constructor steps
    its environment (an ES agent's virtual batch norm gathers observations) cannot be built so:
    a :class:`ConfigError` says so."""
    from rlx.errors import CheckpointError, EnvironmentNeededError
    from rlx.spaces import space_from_json, spaces_only_env

    if not trust_code:
        from rlx.trust import check_identity

        # Nothing the environment's id or wrappers name is made or imported here.
        check_identity(identity, source, check_env=False)
    if not identity.spaces:
        raise CheckpointError(
            f"{source} does not record its environment's spaces (written before rlx-core 0.2, "
            "or spaces other than Box, Discrete, MultiDiscrete, MultiBinary, Dict and Tuple), so "
            f"the agent cannot be built without its environment {identity.env}: load it with "
            "make_env=True"
        )
    spaces = dict(identity.spaces)
    observation_space = space_from_json(spaces.get("observation"), f"{source}: spaces.observation")
    action_space = space_from_json(spaces.get("action"), f"{source}: spaces.action")
    env = spaces_only_env(observation_space, action_space, identity.env)
    try:
        hyperparameters = _hyperparameters_on(identity, device)
        agent = make(identity.agent, env, seed=identity.seed, **hyperparameters)
    except EnvironmentNeededError:
        env.close()
        raise ConfigError(
            f"{identity.agent} cannot be built without its environment {identity.env}: its "
            "constructor steps the environment (with these hyperparameters). Load it with "
            "make_env=True, where the environment is installed"
        ) from None
    agent.identity = identity  # type: ignore[attr-defined]
    return agent


def iteration_steps(config: Any) -> tuple[int, str] | None:
    """The environment steps one learning iteration takes by an agent's hyperparameters,
    ``n_envs`` times ``n_steps`` (an on-policy rollout) or ``train_freq`` (off-policy
    collection), with the name of that second setting; None for agents whose settings do not
    say (tabular, ES, bandits)."""
    n_envs = getattr(config, "n_envs", None)
    for setting in ("n_steps", "train_freq"):
        per_env = getattr(config, setting, None)
        if isinstance(n_envs, int) and isinstance(per_env, int):
            return n_envs * per_env, setting
    return None


def check_iteration_budget(name: str, config: Any, steps: int | None) -> None:
    """Refuse a step budget that one learning iteration of agent ``name`` (its ``config``)
    alone exceeds: the run would take that whole iteration, many times its budget."""
    size = iteration_steps(config)
    if size is None or steps is None or size[0] <= steps:
        return
    taken, setting = size
    raise ConfigError(
        f"one iteration of {name} takes {taken:,} environment steps (n_envs {config.n_envs} x "
        f"{setting} {getattr(config, setting)}), more than the whole budget of {steps:,} "
        f"(--steps), which it would overshoot {taken / steps:,.0f}-fold; lower n_envs or "
        f"{setting}, or raise --steps"
    )


def identity_of(agent: Any) -> Any:
    """The run identity of ``agent``: the one :func:`make` gave it, or one read off the agent.

    For an agent built directly (``PPO(env, config, seed)``) the name is the registered one
    whose target is the agent's class (``"module:Class"`` when no single name has it), the
    environment its spec's id and keyword arguments, the seed its ``seed`` attribute.
    """
    from rlx.config import to_dict
    from rlx.protocols import RunIdentity
    from rlx.spaces import recorded_spaces

    identity = getattr(agent, "identity", None)
    if isinstance(identity, RunIdentity):
        return identity
    cls = type(agent)
    target = f"{cls.__module__}:{cls.__qualname__}"
    specs = [spec for spec in get_registry().agents.values() if spec.target == target]
    spec = specs[0] if len(specs) == 1 else None
    env_spec = getattr(agent.env, "spec", None)
    from rlx.vector import GivenVectorEnv

    env_name = (
        agent.env.name
        if isinstance(agent.env, GivenVectorEnv)
        else type(agent.env.unwrapped).__name__
    )
    return RunIdentity(
        agent=spec.name if spec is not None else target,
        env=env_spec.id if env_spec is not None else env_name,
        seed=int(getattr(agent, "seed", 0)),
        env_kwargs=dict(env_spec.kwargs) if env_spec is not None else {},
        hyperparameters=to_dict(agent.config),
        family=spec.family if spec is not None else "external",
        distribution=(spec.distribution or "") if spec is not None else "",
        spaces=recorded_spaces(agent.env),
    )


def load(
    path: str | Path,
    resume: bool = True,
    trust_code: bool = False,
    device: str | None = None,
    make_env: bool = True,
) -> Agent:
    """Rebuild an agent from a run directory (its newest checkpoint) or a checkpoint directory
    (``best/``, ``final/``, a periodic one, or one :func:`save` wrote).

    The policy is always restored; the resume part too (optimisers, RNGs, environments)
    when the checkpoint has one and ``resume`` is true, so training can go on from there.
    Loading never runs code: the saved run may name only registered agents and environments,
    unless ``trust_code=True`` lets it import the ``module:attr`` targets it names.
    ``device`` (cpu, cuda, auto) puts the agent on another device than the one it was
    saved from; checkpoints hold NumPy arrays, so they move between machines.

    ``make_env=False`` builds the agent for acting without making its environment, from the
    observation and action spaces the checkpoint records (read from JSON, nothing imported):
    the environment need not be installed, and only the policy is loaded (``resume`` is
    ignored). ``agent.act`` then works; training, or evaluating on ``agent.env``, needs the
    environment (an :class:`~rlx.errors.EnvironmentNeededError` says so). The environment is
    still needed to build agents whose constructor steps it (ES agents with
    ``virtual_batch_norm``: a :class:`ConfigError` says so) and for checkpoints that record no
    spaces (written before rlx-core 0.2: a :class:`~rlx.errors.CheckpointError`). With
    ``make_env=True`` the environment's spaces must equal the recorded ones.
    """
    from rlx.checkpoint import STATE_FILE

    checkpoint_path, checkpoint, identity = _read_saved(Path(path), resume and make_env)
    source = str(checkpoint_path / STATE_FILE)
    agent = make_from_identity(identity, trust_code, source, device, make_env)
    if make_env:
        _check_recorded_spaces(agent, identity, source)
    restore(agent, checkpoint, checkpoint_path)
    return agent


def _check_recorded_spaces(agent: Any, identity: Any, source: str) -> None:
    """Refuse a checkpoint whose recorded spaces are not its environment's (an edited file, or
    another version of the environment): one :class:`CheckpointError`."""
    from rlx.errors import CheckpointError
    from rlx.spaces import space_from_json

    if not identity.spaces:
        return
    for role in ("observation", "action"):
        recorded = space_from_json(identity.spaces.get(role), f"{source}: spaces.{role}")
        actual = getattr(agent.env, f"{role}_space")
        if recorded != actual:
            raise CheckpointError(
                f"{source} records the {role} space {recorded}, but its environment "
                f"{_env_text(identity)} has {actual} (another version of the environment?)"
            )


def save(agent: Agent, path: str | os.PathLike[str]) -> Path:
    """Write ``agent``'s policy part and run identity (with the observation and action spaces)
    as a checkpoint directory at ``path``: ``rlx.load(path)`` rebuilds the agent, and
    ``rlx.load(path, make_env=False)`` without making its environment.

    The directory is written atomically. An existing ``path`` is replaced only when it is an
    rlx checkpoint (nothing in it but a checkpoint's files); anything else there is refused
    with a :class:`ConfigError`, so saving never deletes files of yours.
    """
    from rlx.checkpoint import PARTS, STATE_FILE, save_checkpoint
    from rlx.errors import CheckpointError
    from rlx.spaces import recorded_spaces

    target = Path(path)
    if target.is_symlink():
        raise ConfigError(
            f"cannot save to {target}: it is a symbolic link (rlx never writes through one)"
        )
    if target.exists():
        entries = {entry.name for entry in target.iterdir()} if target.is_dir() else None
        if entries is None or STATE_FILE not in entries or entries - {STATE_FILE, *PARTS.values()}:
            raise ConfigError(
                f"cannot save to {target}: it exists and is not an rlx checkpoint; saving replaces "
                "only a checkpoint. Choose a new path"
            )
    identity = identity_of(agent)
    if identity.spaces is None:
        identity = dataclasses.replace(identity, spaces=recorded_spaces(agent.env))
    try:
        return save_checkpoint(target, agent.policy_state(), run=identity.to_json())
    except OSError as exc:
        raise CheckpointError(f"could not save to {target}: {exc.strerror or exc}") from exc


def _read_saved(path: Path, resume: bool) -> tuple[Path, Any, Any]:
    """The checkpoint of a run directory (its newest) or a checkpoint directory (``best/``,
    ``final/``, a periodic one): its path, what :func:`load_checkpoint` read, its run identity,
    checked against the run's config.json when it has one."""
    from rlx.checkpoint import STATE_FILE, load_checkpoint
    from rlx.runs import RunDirectory

    if (path / STATE_FILE).exists():
        checkpoint_path, run = path, None
        if (path.parent / "config.json").is_file():  # best/ or final/ of a run directory
            run = RunDirectory.open(path.parent)
    else:
        run = RunDirectory.open(path)
        checkpoint_path = run.latest_checkpoint()
    checkpoint = load_checkpoint(checkpoint_path, resume=resume)
    identity = checkpoint_identity(checkpoint, checkpoint_path)
    if run is not None:
        check_same_run(identity, run.read_identity(), checkpoint_path, run.config_file)
    return checkpoint_path, checkpoint, identity


def warm_start(agent: Any, source: str | Path, trust_code: bool = False) -> dict[str, Any]:
    """Start ``agent``, freshly built, from the policy of another run: a warm start.

    ``source`` is a run directory (its newest checkpoint) or a checkpoint directory (``best/``
    for the best policy). Only the policy part is loaded (networks, tables, observation
    normalisers); optimisers, replay buffers, counters and RNGs stay the new agent's own, as
    its seed made them. Unlike ``--resume`` this starts another run.

    The source must be a run of the same agent (the same registered name) on an environment
    with equal observation and action spaces, with policy arrays of the same names, shapes
    and dtypes; anything else is a :class:`ConfigError` or :class:`CheckpointError` saying
    what differs. Nothing the source names is imported unless ``trust_code`` (see
    :mod:`rlx.trust`). Returns the record of where the run started, JSON-ready, for
    ``Trainer(..., init_from=...)`` to write into the new run's config.json: the source
    ``path``, the ``checkpoint`` loaded, its ``agent``, ``env``, ``seed``, ``env_steps`` and
    the ``policy_sha256`` of its policy file.
    """
    from rlx.checkpoint import STATE_FILE
    from rlx.errors import CheckpointError

    path = Path(source)
    checkpoint_path, checkpoint, saved = _read_saved(path, resume=False)
    if not trust_code:
        from rlx.trust import check_identity

        check_identity(saved, str(checkpoint_path / STATE_FILE))
    identity = identity_of(agent)
    where = f"cannot start this {identity.agent} run from {path}"
    if saved.agent != identity.agent:
        raise ConfigError(
            f"{where}: it is a run of {saved.agent!r}, not {identity.agent!r}; a warm start "
            "needs a run of the same agent"
        )
    _check_same_spaces(agent, identity, saved, where)
    fresh = agent.policy_state().arrays
    try:
        _check_arrays("policy", checkpoint.policy.arrays, fresh, checkpoint_path, True, True)
    except CheckpointError as exc:
        raise CheckpointError(
            f"{where}: {exc} (are its hyperparameters, such as the network sizes, different?)"
        ) from exc
    _restore_part(agent, "policy", checkpoint.policy, agent.load_policy_state, checkpoint_path)
    steps = (checkpoint.document.get("trainer") or {}).get("env_steps")
    return {
        "path": str(path.resolve()),
        "checkpoint": str(checkpoint_path.resolve()),
        "agent": saved.agent,
        "env": saved.env,
        "seed": saved.seed,
        "env_steps": steps if isinstance(steps, int) and not isinstance(steps, bool) else None,
        "policy_sha256": checkpoint.document["policy"].get("sha256"),
    }


def _check_same_spaces(agent: Any, identity: Any, saved: Any, where: str) -> None:
    """Refuse a warm start between environments whose observation or action spaces differ;
    the source's environment is built from its run identity unless it is the same as
    ``identity``'s (same id, keyword arguments and wrappers)."""
    same_env = (saved.env, dict(saved.env_kwargs), list(saved.wrappers)) == (
        identity.env,
        dict(identity.env_kwargs),
        list(identity.wrappers),
    )
    if same_env:
        return
    env = make_env(
        saved.env,
        wrappers=[dict(entry) for entry in saved.wrappers],
        **dict(saved.env_kwargs),
    )
    try:
        for role in ("observation", "action"):
            theirs, ours = getattr(env, f"{role}_space"), getattr(agent.env, f"{role}_space")
            if theirs != ours:
                raise ConfigError(
                    f"{where}: its environment {_env_text(saved)} has the {role} space "
                    f"{theirs}, this run's {_env_text(identity)} has {ours}; a warm start "
                    "needs equal spaces"
                )
    finally:
        env.close()


def _env_text(identity: Any) -> str:
    """``FrozenLake-v1`` or ``FrozenLake-v1 (map_name='8x8')``: an environment for messages."""
    settings = ", ".join(f"{key}={value!r}" for key, value in identity.env_kwargs.items())
    wrapped = ", ".join(str(entry.get("name")) for entry in identity.wrappers)
    details = "; ".join(part for part in (settings, wrapped and f"wrappers {wrapped}") if part)
    return f"{identity.env} ({details})" if details else identity.env


def checkpoint_identity(checkpoint: Any, path: Path) -> Any:
    """The run identity a checkpoint records, or a :class:`CheckpointError` saying why not."""
    from rlx.checkpoint import STATE_FILE
    from rlx.errors import CheckpointError
    from rlx.protocols import RunIdentity

    run = checkpoint.document.get("run")
    if not isinstance(run, dict):
        raise CheckpointError(f"{path / STATE_FILE} does not say which agent it holds (no 'run')")
    try:
        return RunIdentity.from_json(run)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f"{path / STATE_FILE}: its 'run' record is unreadable ({type(exc).__name__}: {exc})"
        ) from exc


def check_same_run(saved: Any, config: Any, checkpoint: Path, config_file: Path) -> None:
    """Refuse a checkpoint whose run record differs from its run directory's config.json."""
    from rlx.errors import CheckpointError

    for field in ("agent", "env", "seed", "env_kwargs", "hyperparameters", "wrappers"):
        if getattr(saved, field) != getattr(config, field):
            raise CheckpointError(
                f"checkpoint {checkpoint} belongs to another run: its {field} is "
                f"{getattr(saved, field)!r}, but {config_file} says {getattr(config, field)!r}"
            )


def restore(agent: Any, checkpoint: Any, path: Path) -> None:
    """Load a checkpoint's parts into ``agent``; any mismatch is a :class:`CheckpointError`.

    Each saved part is first compared with the same part of the fresh agent: arrays the agent
    does not have, or lacks, and arrays of another dtype are refused, and so are non-finite
    values in a policy array that is finite in the fresh agent.
    """
    parts = [("policy", checkpoint.policy, agent.policy_state, agent.load_policy_state)]
    if checkpoint.resume is not None:
        parts.append(("resume", checkpoint.resume, agent.resume_state, agent.load_resume_state))
    for part, saved, current, load_part in parts:
        _check_arrays(part, saved.arrays, current().arrays, path, strict=part == "policy")
        _restore_part(agent, part, saved, load_part, path)


def _restore_part(agent: Any, part: str, saved: Any, load_part: Any, path: Path) -> None:
    """``load_part(saved)``, an agent's failure to take the saved state a CheckpointError."""
    from rlx.errors import CheckpointError, RlxError

    try:
        load_part(saved)
    except RlxError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise CheckpointError(
            f"checkpoint {path}: its {part} state does not fit this "
            f"{identity_of(agent).agent} agent ({type(exc).__name__}: {detail})"
        ) from exc


def _check_arrays(
    part: str,
    saved: dict[str, Any],
    fresh: dict[str, Any],
    path: Path,
    strict: bool,
    shapes: bool = False,
) -> None:
    import numpy as np

    from rlx.errors import CheckpointError

    where = f"checkpoint {path}, {part} part"
    if strict and saved.keys() != fresh.keys():
        missing, extra = sorted(fresh.keys() - saved.keys()), sorted(saved.keys() - fresh.keys())
        raise CheckpointError(
            f"{where}: its arrays do not match this agent's (missing: {', '.join(missing) or '-'}"
            f"; unexpected: {', '.join(extra) or '-'}); is it another agent's checkpoint?"
        )
    for key in sorted(saved.keys() & fresh.keys()):
        value, expected = saved[key], np.asarray(fresh[key])
        if value.dtype != expected.dtype:
            raise CheckpointError(
                f"{where}: array {key!r} has dtype {value.dtype}, this agent keeps {expected.dtype}"
            )
        if shapes and value.shape != expected.shape:
            raise CheckpointError(
                f"{where}: array {key!r} has shape {value.shape}, this agent's has {expected.shape}"
            )
        if (
            strict
            and np.issubdtype(value.dtype, np.floating)
            and np.isfinite(expected).all()
            and not np.isfinite(value).all()
        ):
            raise CheckpointError(f"{where}: array {key!r} holds NaN or infinite values")
