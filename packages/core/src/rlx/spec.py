"""Light descriptions of agents, environments and loggers that plugins register.

A spec names its implementation as a ``"module:attribute"`` string, so that listing the
registry never imports an implementation (and never imports torch).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace
from typing import Any

from rlx.errors import PluginError

#: Space kinds an agent may declare, named after the gymnasium space classes.
SPACE_KINDS = ("Discrete", "MultiDiscrete", "MultiBinary", "Box", "Dict", "Tuple", "Text", "Any")
#: The observation spaces :class:`rlx.observations.ObservationCoder` encodes for a network:
#: what the deep families declare.
ENCODED_OBSERVATIONS = ("Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple")


@dataclass(frozen=True)
class AgentSpec:
    """What ``rlx list`` shows about an agent and where ``rlx.make`` finds it.

    ``observation_spaces`` and ``action_spaces`` name the gymnasium space classes the
    agent handles (``"Any"`` for every space). ``tuned`` names the family's tuned-settings
    file, ``"package:file.toml"`` (:mod:`rlx.tuned`), or is empty. ``paper`` cites where
    the algorithm comes from (authors, year, title, venue); the documentation site puts it
    on the agent's page and refuses an agent without one.
    """

    name: str
    target: str
    family: str
    summary: str
    observation_spaces: tuple[str, ...] = ("Any",)
    action_spaces: tuple[str, ...] = ("Any",)
    distribution: str = "unknown"
    version: str = "unknown"
    tuned: str = ""
    paper: str = ""

    def __post_init__(self) -> None:
        _check_target(self.target, f"agent {self.name!r}")
        for kind in (*self.observation_spaces, *self.action_spaces):
            if kind not in SPACE_KINDS:
                raise PluginError(
                    f"agent {self.name!r} declares unknown space kind {kind!r}; "
                    f"use one of {', '.join(SPACE_KINDS)}"
                )

    def stamped(self, distribution: str, version: str) -> AgentSpec:
        """This spec with the distribution that registered it."""
        return replace(self, distribution=distribution, version=version)

    def load(self) -> Any:
        """Import and return the agent class."""
        return load_target(self.target, f"agent {self.name!r} ({self.distribution})")

    def to_dict(self) -> dict[str, Any]:
        """What ``rlx list --json`` and ``rlx info --json`` show of the agent."""
        return {
            "name": self.name,
            "family": self.family,
            "distribution": self.distribution,
            "version": self.version,
            "summary": self.summary,
            "observation_spaces": list(self.observation_spaces),
            "action_spaces": list(self.action_spaces),
            "target": self.target,
            "tuned": self.tuned,
            "paper": self.paper,
        }


@dataclass(frozen=True)
class EnvSpec:
    """An environment a plugin contributes; it is registered with gymnasium on first use.

    ``observation_space`` and ``action_space`` describe the spaces in a few words for
    ``rlx list envs`` (for example ``"Box(117,)"`` and ``"Discrete(2)"``), so that listing
    never builds an environment; ``rlx info ENV_ID`` builds it and shows the real ones.
    An environment class may also define a classmethod ``data_status()`` returning
    ``(path, exists)`` pairs: the data files it looks for, in order; ``rlx info`` shows them.
    """

    id: str
    target: str
    summary: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = None
    distribution: str = "unknown"
    version: str = "unknown"
    observation_space: str = ""
    action_space: str = ""

    def __post_init__(self) -> None:
        _check_target(self.target, f"environment {self.id!r}")

    def stamped(self, distribution: str, version: str) -> EnvSpec:
        """This spec with the distribution that registered it."""
        return replace(self, distribution=distribution, version=version)

    def to_dict(self) -> dict[str, Any]:
        """What ``rlx list envs --json`` shows of the environment."""
        return {
            "id": self.id,
            "distribution": self.distribution,
            "version": self.version,
            "summary": self.summary,
            "observation_space": self.observation_space,
            "action_space": self.action_space,
            "target": self.target,
        }


@dataclass(frozen=True)
class LoggerSpec:
    """A logger (an experiment tracker) a plugin contributes; ``rlx run --logger NAME`` uses it.

    ``target`` names a class that follows :class:`rlx.loggers.Logger`; its keyword arguments
    are the logger's options. ``extra`` is what to install when the class needs a library that
    is missing (``"rlx-core[mlflow]"``): the error then says ``pip install 'rlx-core[mlflow]'``.
    """

    name: str
    target: str
    summary: str
    extra: str = ""
    distribution: str = "unknown"
    version: str = "unknown"

    def __post_init__(self) -> None:
        _check_target(self.target, f"logger {self.name!r}")

    def stamped(self, distribution: str, version: str) -> LoggerSpec:
        """This spec with the distribution that registered it."""
        return replace(self, distribution=distribution, version=version)

    def load(self) -> Any:
        """Import and return the logger class (a missing library names the extra to install)."""
        try:
            return load_target(self.target, f"logger {self.name!r} ({self.distribution})")
        except PluginError as exc:
            if isinstance(exc.__cause__, ImportError) and self.extra:
                raise PluginError(f"{exc}; install it with: pip install '{self.extra}'") from exc
            raise

    def to_dict(self) -> dict[str, Any]:
        """What ``rlx list loggers --json`` shows of the logger."""
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "summary": self.summary,
            "extra": self.extra,
            "target": self.target,
        }


def _check_target(target: str, what: str) -> None:
    module, sep, attribute = target.partition(":")
    if not sep or not module or not attribute:
        raise PluginError(f"{what}: target {target!r} must look like 'package.module:Attribute'")


def load_target(target: str, what: str) -> Any:
    """Import ``"module:attribute"`` (the attribute may be dotted)."""
    module_name, _, attribute = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"cannot import {what} from {target!r}: {exc}") from exc
    return obj
