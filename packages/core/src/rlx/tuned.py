"""Tuned settings: per (agent, environment) pair, the hyperparameters that are known to work,
shipped by the agents' family as data.

A family names its file in each agent's spec (:class:`rlx.AgentSpec` ``tuned``, a
``"package:file.toml"`` resource of the distribution). The file holds one table per agent
and environment id, in the layout of an ``rlx run --config`` file less agent, env and
seed::

    [ppo."CartPole-v1"]
    source = "rl-baselines3-zoo, hyperparams/ppo.yml"   # where the numbers come from
    untranslated = ["policy_kwargs.log_std_init"]      # the source's knobs rlx lacks
    wrappers = []                                      # wrapper presets it implies
    trainer = {steps = 100_000}                        # the budget: the default --steps
    [ppo."CartPole-v1".hyperparameters]
    n_envs = 8
    learning_rate = 1e-3

Reading a file imports nothing but the family's package (no torch); the family's tests check
every entry against its agent's hyperparameters (:func:`check_file`), so a typo never reaches
a user's run.
"""

from __future__ import annotations

import importlib.resources
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from rlx.errors import ConfigError, UnknownNameError, did_you_mean

#: The keys of an entry; ``source`` is required.
ENTRY_KEYS = ("source", "untranslated", "wrappers", "trainer", "env_kwargs", "hyperparameters")
#: Trainer settings an entry may give (the budget).
TRAINER_KEYS = ("steps",)


@dataclass(frozen=True)
class Tuned:
    """The tuned settings of ``agent`` on ``env``."""

    agent: str
    env: str
    source: str
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    trainer: dict[str, Any] = field(default_factory=dict)
    wrappers: tuple[str, ...] = ()
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    untranslated: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """What a run's config.json records of them."""
        return {
            "source": self.source,
            "hyperparameters": dict(self.hyperparameters),
            "trainer": dict(self.trainer),
            "wrappers": list(self.wrappers),
            "env_kwargs": dict(self.env_kwargs),
        }


def read_file(resource: str) -> dict[str, dict[str, Tuned]]:
    """The entries of a tuned-settings file, ``"package:file.toml"``: agent -> env -> entry.
    A malformed file raises :class:`~rlx.errors.ConfigError` naming the entry."""
    return _read(resource)


@cache
def _read(resource: str) -> dict[str, dict[str, Tuned]]:
    package, _, name = resource.partition(":")
    if not package or not name:
        raise ConfigError(f"tuned settings {resource!r}: expected 'package:file.toml'")
    try:
        text = importlib.resources.files(package).joinpath(name).read_text(encoding="utf-8")
    except (ModuleNotFoundError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"tuned settings {resource} are unreadable: {exc}") from exc
    return parse(text, resource)


def parse(text: str, resource: str) -> dict[str, dict[str, Tuned]]:
    """The entries of a tuned-settings file's ``text`` (``resource`` names it in errors)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"tuned settings {resource} are unreadable: {exc}") from exc
    entries: dict[str, dict[str, Tuned]] = {}
    for agent, envs in data.items():
        if not isinstance(envs, dict):
            raise ConfigError(f"{resource}: {agent} must be a table of environments")
        for env, entry in envs.items():
            entries.setdefault(agent, {})[env] = _entry(resource, agent, env, entry)
    return entries


def _entry(resource: str, agent: str, env: str, entry: Any) -> Tuned:
    where = f"{resource} [{agent}.{env!r}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}; an entry has {', '.join(ENTRY_KEYS)}"
            + did_you_mean(unknown[0], ENTRY_KEYS)
        )
    if not isinstance(entry.get("source"), str) or not entry["source"].strip():
        raise ConfigError(f"{where}: source (where the numbers come from) is required")
    for key in ("hyperparameters", "trainer", "env_kwargs"):
        if not isinstance(entry.get(key, {}), dict):
            raise ConfigError(f"{where}: {key} must be a table")
    for key in ("wrappers", "untranslated"):
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: {key} must be an array of strings")
    trainer = entry.get("trainer", {})
    extra = sorted(set(trainer) - set(TRAINER_KEYS))
    if extra:
        raise ConfigError(f"{where}: trainer takes {', '.join(TRAINER_KEYS)}, not {extra[0]!r}")
    return Tuned(
        agent=agent,
        env=env,
        source=entry["source"],
        hyperparameters=dict(entry.get("hyperparameters", {})),
        trainer=dict(trainer),
        wrappers=tuple(entry.get("wrappers", [])),
        env_kwargs=dict(entry.get("env_kwargs", {})),
        untranslated=tuple(entry.get("untranslated", [])),
    )


def find(agent: str, env: str) -> Tuned | None:
    """The tuned settings of ``agent`` on ``env``, or None when its family has none (and
    for an agent named as ``module:Class``, which no family ships)."""
    from rlx.discovery import agent_spec

    if ":" in agent:
        return None

    resource = getattr(agent_spec(agent), "tuned", None)
    if not resource:
        return None
    return read_file(resource).get(agent, {}).get(env)


def entries(agent: str | None = None, env: str | None = None) -> list[Tuned]:
    """Every installed agent's tuned settings, of ``agent`` and/or on ``env`` only."""
    from rlx.discovery import get_registry

    found: list[Tuned] = []
    for spec in get_registry().agents.values():
        if (agent is not None and spec.name != agent) or not getattr(spec, "tuned", None):
            continue
        for entry in read_file(spec.tuned).get(spec.name, {}).values():
            if env is None or entry.env == env:
                found.append(entry)
    return sorted(found, key=lambda e: (e.agent, e.env))


def hyperparameters(agent: str, env: str) -> dict[str, Any]:
    """A copy of the tuned hyperparameters of ``agent`` on ``env`` (what ``rlx.make`` takes);
    :class:`~rlx.errors.UnknownNameError` when there are none."""
    entry = find(agent, env)
    if entry is None:
        envs = [e.env for e in entries(agent)]
        has = f"; {agent} has them for {', '.join(envs)}." if envs else "."
        known = [f"{e.agent} on {e.env}" for e in entries()]
        raise UnknownNameError(
            f"no tuned settings for {agent} on {env}{has}"
            + did_you_mean(f"{agent} on {env}", known)
        )
    return dict(entry.hyperparameters)


def check_file(resource: str, agents: Iterable[str] | None = None) -> int:
    """Check every entry of a tuned-settings file against its agent: the agent exists (one of
    ``agents`` when given), each hyperparameter is one of its config's, of its type and in
    its range, and the wrappers are presets or gymnasium's (never code). Returns the number
    of entries; raises the first problem. Families call it in their tests."""
    from rlx.config import build_config
    from rlx.discovery import agent_spec
    from rlx.wrappers import expand, imports_code, parse, resolve

    count = 0
    allowed = None if agents is None else set(agents)
    for agent, envs in read_file(resource).items():
        if allowed is not None and agent not in allowed:
            raise ConfigError(f"{resource}: {agent!r} is not an agent of this family")
        config_cls = agent_spec(agent).load().Config
        for env, entry in envs.items():
            try:
                build_config(config_cls, entry.hyperparameters)
                for text in entry.wrappers:
                    wrapper = parse(text)
                    if imports_code(wrapper["name"]):
                        raise ConfigError("wrappers are presets or gymnasium's, never code")
                    for inner in expand([wrapper])[0]:
                        resolve(inner["name"])
            except Exception as exc:
                raise ConfigError(f"{resource} [{agent}.{env!r}]: {exc}") from exc
            count += 1
    return count


def merge(
    agent: str,
    env: str,
    hyperparameters: Mapping[str, Any] | None = None,
    settings: Mapping[str, Any] | None = None,
    wrappers: Sequence[Any] = (),
    env_kwargs: Mapping[str, Any] | None = None,
) -> tuple[Tuned | None, dict[str, Any], dict[str, Any], list[Any], dict[str, Any]]:
    """A run's settings on top of the tuned ones of ``agent`` on ``env``: the entry (None
    when there is none), then the hyperparameters, trainer settings, wrappers and environment
    keyword arguments to make the run with. What is given wins key by key; the entry's budget
    is the default ``steps``; its wrappers come first, less those given by name already.
    Merging twice gives the same as once."""
    from rlx.wrappers import normalize

    hyperparameters, settings = dict(hyperparameters or {}), dict(settings or {})
    env_kwargs, given = dict(env_kwargs or {}), list(normalize(wrappers))
    entry = find(agent, env)
    if entry is None:
        return None, hyperparameters, settings, given, env_kwargs
    named = {wrapper["name"] for wrapper in given}
    implied = [w for w in normalize(entry.wrappers) if w["name"] not in named]
    return (
        entry,
        {**entry.hyperparameters, **hyperparameters},
        {**entry.trainer, **settings},
        [*implied, *given],
        {**entry.env_kwargs, **env_kwargs},
    )


def describe(entry: Tuned, given: Iterable[str] = ()) -> str:
    """The line ``rlx run`` prints when it starts from ``entry``: what, from where, and how
    to opt out (``given``: the hyperparameters the user set on top)."""
    keys = [key for key in entry.hyperparameters if key not in set(given)]
    budget = entry.trainer.get("steps")
    parts = ", ".join(keys) + (f"; {budget:,} steps" if budget else "")
    return (
        f"tuned settings of {entry.agent} on {entry.env} ({entry.source}): {parts}. "
        "--untuned for the agent's defaults; --set KEY=VALUE overrides one"
    )
