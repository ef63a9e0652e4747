"""The Python entry points: :func:`make`, :func:`make_env` and :func:`load`."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlx.discovery import get_registry
from rlx.errors import RlxError, SpaceError, UnknownNameError, did_you_mean
from rlx.spec import AgentSpec


def agent_spec(name: str) -> AgentSpec:
    """The registered spec of ``name``, or a spec for a ``"module:Class"`` target."""
    if ":" in name:
        return AgentSpec(
            name=name, target=name, family="external", summary="not installed as a plugin"
        )
    return get_registry().agent(name)


def make_env(env_id: str, **kwargs: Any) -> Any:
    """Make a gymnasium environment, including those that rlx plugins register.

    An unknown id raises an error with the closest known ids.
    """
    import gymnasium

    _register_plugin_envs()
    if env_id not in gymnasium.registry:
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
    try:
        return gymnasium.make(env_id, **kwargs)
    except gymnasium.error.DependencyNotInstalled as exc:
        raise RlxError(f"environment {env_id!r} needs an extra package: {exc}") from exc
    except TypeError as exc:
        raise RlxError(f"environment {env_id!r} rejected its arguments {kwargs}: {exc}") from exc


def _register_plugin_envs() -> None:
    import gymnasium

    for env_id, spec in get_registry().envs.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(
                env_id,
                entry_point=spec.target,
                max_episode_steps=spec.max_episode_steps,
                kwargs=dict(spec.kwargs),
            )


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
                f"it supports {' and '.join(supported)} {role} spaces"
            )


def make(
    name: str,
    env: Any,
    seed: int = 0,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    **config: Any,
) -> Any:
    """Build agent ``name`` for ``env`` (an id or a gymnasium environment) with hyperparameters.

    ``config`` keys are the agent's hyperparameters (``rlx info NAME`` lists them); values
    may be strings, which are parsed to the declared types. Every random number generator
    is seeded from ``seed``. The agent's :class:`~rlx.protocols.RunIdentity` is its
    ``identity`` attribute.
    """
    from rlx.config import build_config, to_dict
    from rlx.protocols import RunIdentity
    from rlx.seeding import seed_everything

    spec = agent_spec(name)
    if isinstance(env, str):
        env_id, environment = env, make_env(env, **dict(env_kwargs or {}))
    else:
        environment = env
        env_spec = getattr(env, "spec", None)
        env_id = env_spec.id if env_spec is not None else type(env.unwrapped).__name__
    check_spaces(spec, environment, env_id)
    agent_cls = spec.load()
    agent_config = build_config(agent_cls.Config, config)
    seed_everything(seed)
    environment.action_space.seed(seed)
    environment.observation_space.seed(seed)
    agent = agent_cls(environment, agent_config, seed)
    agent.identity = RunIdentity(
        agent=name,
        env=env_id,
        seed=seed,
        env_kwargs=dict(env_kwargs or {}),
        hyperparameters=to_dict(agent_config),
        family=spec.family,
        distribution=spec.distribution or "",
    )
    return agent


def make_from_identity(identity: Any) -> Any:
    """The agent a :class:`~rlx.protocols.RunIdentity` describes, freshly built."""
    return make(
        identity.agent,
        identity.env,
        seed=identity.seed,
        env_kwargs=dict(identity.env_kwargs),
        **dict(identity.hyperparameters),
    )


def identity_of(agent: Any) -> Any:
    """The run identity of ``agent``: the one :func:`make` gave it, or one read off the agent.

    For an agent built directly (``PPO(env, config, seed)``) the name is the registered one
    whose target is the agent's class (``"module:Class"`` when no single name has it), the
    environment its spec's id and keyword arguments, the seed its ``seed`` attribute.
    """
    from rlx.config import to_dict
    from rlx.protocols import RunIdentity

    identity = getattr(agent, "identity", None)
    if isinstance(identity, RunIdentity):
        return identity
    cls = type(agent)
    target = f"{cls.__module__}:{cls.__qualname__}"
    specs = [spec for spec in get_registry().agents.values() if spec.target == target]
    spec = specs[0] if len(specs) == 1 else None
    env_spec = getattr(agent.env, "spec", None)
    return RunIdentity(
        agent=spec.name if spec is not None else target,
        env=env_spec.id if env_spec is not None else type(agent.env.unwrapped).__name__,
        seed=int(getattr(agent, "seed", 0)),
        env_kwargs=dict(env_spec.kwargs) if env_spec is not None else {},
        hyperparameters=to_dict(agent.config),
        family=spec.family if spec is not None else "external",
        distribution=(spec.distribution or "") if spec is not None else "",
    )


def load(path: str | Path, resume: bool = True) -> Any:
    """Rebuild an agent from a run directory (its newest checkpoint) or a checkpoint directory.

    The policy is always restored; the resume part too (optimisers, RNGs, environments)
    when the checkpoint has one and ``resume`` is true, so training can go on from there.
    """
    from rlx.checkpoint import STATE_FILE, load_checkpoint
    from rlx.protocols import RunIdentity
    from rlx.runs import RunDirectory

    path = Path(path)
    checkpoint_path = (
        path if (path / STATE_FILE).exists() else RunDirectory.open(path).latest_checkpoint()
    )
    checkpoint = load_checkpoint(checkpoint_path, resume=resume)
    run = checkpoint.document.get("run")
    if not isinstance(run, dict):
        raise RlxError(f"checkpoint {checkpoint_path} does not say which agent it holds")
    try:
        identity = RunIdentity.from_json(run)
    except (KeyError, TypeError, ValueError) as exc:
        raise RlxError(
            f"checkpoint {checkpoint_path} has an unreadable run identity: {exc}"
        ) from exc
    agent = make_from_identity(identity)
    agent.load_policy_state(checkpoint.policy)
    if checkpoint.resume is not None:
        agent.load_resume_state(checkpoint.resume)
    return agent
