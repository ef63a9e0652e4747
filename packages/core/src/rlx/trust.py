"""What loading saved files may import: registered names only, unless the user trusts them.

A run directory or checkpoint names its agent, environment and hyperparameters in JSON. A
``"package.module:attr"`` there (an agent class, gymnasium's ``module:Env-v0`` syntax, a
user network) would import a module on load, and a module shipped inside a downloaded run
directory runs wherever that directory is on ``sys.path``. So loading resolves only agents
and environments that installed plugins (or gymnasium) registered, and refuses code
targets unless the caller passes ``trust_code=True`` (``--trust-code`` on the command line).
"""

from __future__ import annotations

import dataclasses
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
    for entry in identity.wrappers if check_env else ():
        if ":" in str(entry.get("name", "")):
            raise UntrustedCodeError(
                f"{source} wraps the environment in {entry['name']!r}, a module:Class target "
                f"that loading would import; presets and gymnasium's wrappers load by default. "
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
