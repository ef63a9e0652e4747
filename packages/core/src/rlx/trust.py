"""What loading saved files may import: registered names only, unless the user trusts them.

A run directory or checkpoint names its agent, environment and hyperparameters in JSON. A
``"package.module:attr"`` there (an agent class, gymnasium's ``module:Env-v0`` syntax, a
user network) would import a module on load, and a module shipped inside a downloaded run
directory runs wherever that directory is on ``sys.path``. So loading resolves only agents
and environments that installed plugins (or gymnasium) registered, and refuses code
targets unless the caller passes ``trust_code=True`` (``--trust-code`` on the command line).

The same holds for every other recorded value that can name code, an environment or a place
outside the run: the arguments of recorded callbacks, loggers and wrappers. Each built-in
component declares which of its arguments do (``trust_arguments``, one of :data:`KINDS` per
argument). :func:`rlx.recorded.check_record` is the one check that config.json, group.json
and a seed's config.json go through before a run is built again from them (it reads the
recorded callbacks and loggers, so it lives in a module of its own, beside them).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from rlx.errors import UntrustedCodeError

OPT_IN = (
    "If you trust these files, load them with rlx.load(..., trust_code=True), "
    "rlx eval --trust-code, rlx run --resume DIR --trust-code or rlx run --init-from DIR "
    "--trust-code"
)


def check_identity(identity: Any, source: str, check_env: bool = True) -> None:
    """Refuse a saved :class:`~rlx.protocols.RunIdentity` that would import code.

    ``source`` names the file it came from, for the message; ``check_env=False`` leaves out
    the environment's id and wrappers, for a load that makes no environment.
    """
    from rlx.discovery import agent_spec, registered_env

    if ":" in identity.agent:
        raise UntrustedCodeError(
            f"{source} names the agent {identity.agent!r}, a module:Class target that loading "
            f"would import; only registered agents load by default. {OPT_IN}"
        )
    if check_env and (":" in identity.env or not registered_env(identity.env)):
        raise UntrustedCodeError(
            f"{source} names the environment {identity.env!r}, which is not a registered "
            f"environment id (a module:Env target would import code); only registered ids load "
            f"by default. {OPT_IN}"
        )
    if check_env:
        check_wrappers(identity.wrappers, source)
        if names_code(dict(identity.env_kwargs)):
            raise UntrustedCodeError(
                f"{source} gives the environment {identity.env!r} the arguments "
                f"{dict(identity.env_kwargs)!r}, which name code that loading would import. "
                f"{OPT_IN}"
            )
    config_cls = agent_spec(identity.agent).load().Config
    for field in dataclasses.fields(config_cls):
        value = identity.hyperparameters.get(field.name)
        values = value.values() if isinstance(value, dict) else [value]
        if field.metadata.get("imports_code") and any(
            isinstance(item, str) and ":" in item for item in values
        ):
            raise UntrustedCodeError(
                f"{source} sets {field.name}={value!r}, code that loading would import. {OPT_IN}"
            )


# -- arguments that name code, environments or destinations -----------------------------------

#: What a component's declared argument names (``trust_arguments``), and so what a recorded
#: value of it may do when a saved run is loaded without trust: ``env`` an environment id
#: (registered ids only), ``env_kwargs`` an environment's keyword arguments (no
#: ``module:attr`` strings), ``code`` a ``module:attr`` target (refused), ``destination`` a
#: place outside the run that data goes to or files are written in (a tracker's server,
#: database, account or folder: refused).
KINDS = ("env", "env_kwargs", "code", "destination")

_TARGET = re.compile(r"^\s*[A-Za-z_][\w.]*\s*:\s*[A-Za-z_][\w.]*\s*$")


def declared_arguments(component: Any) -> Mapping[str, str] | None:
    """The ``trust_arguments`` a callback, logger or wrapper class (or preset function)
    declares, or None when it declares none (a third party's, say)."""
    declared = getattr(component, "trust_arguments", None)
    return declared if isinstance(declared, Mapping) else None


def names_code(value: Any) -> bool:
    """Whether a JSON value holds a ``module:attr`` string anywhere (in lists and tables too)."""
    if isinstance(value, str):
        return bool(_TARGET.match(value))
    if isinstance(value, Mapping):
        return any(names_code(key) or names_code(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(names_code(item) for item in value)
    return False


def check_arguments(
    what: str, declared: Mapping[str, str] | None, kwargs: Mapping[str, Any], source: str
) -> None:
    """Refuse recorded ``kwargs`` of the component ``what`` (a callback, logger or wrapper)
    that its declaration says name code, an unregistered environment or a destination; a
    component that declares nothing may be given no recorded arguments at all."""
    from rlx.discovery import registered_env

    given = {key: value for key, value in kwargs.items() if value is not None}
    if declared is None:
        if given:
            raise UntrustedCodeError(
                f"{source} gives {what} the arguments {given!r}, and {what} does not declare "
                "which of its arguments name code or send data elsewhere. " + OPT_IN
            )
        return
    for key, value in given.items():
        kind = declared.get(key)
        if kind == "env" and (
            not isinstance(value, str) or ":" in value or not registered_env(value)
        ):
            raise UntrustedCodeError(
                f"{source} gives {what} the environment {value!r}, which is not a registered "
                f"environment id (a module:Env target would import code). {OPT_IN}"
            )
        if kind in ("env_kwargs", "code") and names_code(value):
            raise UntrustedCodeError(
                f"{source} gives {what} {key}={value!r}, which names code that loading "
                f"would import. {OPT_IN}"
            )
        if kind == "destination":
            raise UntrustedCodeError(
                f"{source} gives {what} {key}={value!r}, a place outside the run that its "
                f"data would go to. {OPT_IN}"
            )


def check_wrappers(entries: Any, source: str) -> None:
    """Refuse recorded wrapper entries that import code (``module:Class``) or whose
    arguments name code or a destination (presets and gymnasium's wrappers declare theirs)."""
    from rlx.wrappers import declared_for

    for entry in entries or ():
        name = str(entry.get("name", ""))
        if ":" in name:
            raise UntrustedCodeError(
                f"{source} wraps the environment in {name!r}, a module:Class target "
                f"that loading would import; presets and gymnasium's wrappers load by default. "
                f"{OPT_IN}"
            )
        kwargs = entry.get("kwargs") or {}
        if isinstance(kwargs, Mapping):
            check_arguments(f"the wrapper {name!r}", declared_for(name), kwargs, source)
