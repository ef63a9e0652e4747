"""The one trust check of a saved run's or group's record (config.json, group.json, a seed's
config.json): its identity, and the recorded callbacks and loggers of its trainer settings,
each held to what the component declares of its arguments (:mod:`rlx.trust`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rlx.errors import UntrustedCodeError
from rlx.trust import OPT_IN, check_arguments, check_identity, declared_arguments


def check_settings(settings: Mapping[str, Any], source: str, given: Iterable[str] = ()) -> None:
    """Refuse recorded trainer settings whose callbacks or loggers would import code, make an
    unregistered environment or send the run's data outside it; the keys in ``given`` were
    given again by the user (``--callback``, ``--logger``) and replace the recorded ones."""
    from rlx.callbacks import BUILT_IN
    from rlx.callbacks import normalize as normalize_callbacks
    from rlx.errors import RlxError
    from rlx.loggers import normalize as normalize_loggers

    if "callbacks" not in given:
        for entry in normalize_callbacks(settings.get("callbacks") or ()):
            name = entry["name"]
            if ":" in name:
                raise UntrustedCodeError(
                    f"{source} names the callback {name!r}, code that loading would import. "
                    + OPT_IN
                )
            if name in BUILT_IN:
                declared = declared_arguments(BUILT_IN[name])
                check_arguments(f"the callback {name!r}", declared, entry["kwargs"], source)
    if "loggers" not in given:
        from rlx.discovery import get_registry

        for entry in normalize_loggers(settings.get("loggers") or ()):
            try:
                cls = get_registry().logger(entry["name"]).load()
            except RlxError:
                continue  # an unknown logger: building it says so, and imports nothing
            try:
                check_arguments(
                    f"the logger {entry['name']!r}", declared_arguments(cls), entry["kwargs"],
                    source,
                )  # fmt: skip
            except UntrustedCodeError as exc:
                raise UntrustedCodeError(
                    f"{exc}; or give the loggers again with --logger (loggers=... in "
                    "Python), which replace the recorded ones"
                ) from None


def check_record(record: Mapping[str, Any], source: str, given: Iterable[str] = ()) -> None:
    """The one check of a saved run's or group's record (config.json, group.json): its
    identity (:func:`check_identity`) and its trainer settings (:func:`check_settings`)."""
    from rlx.protocols import RunIdentity

    seed = record.get("seed", (record.get("seeds") or [0])[0])
    check_identity(RunIdentity.from_json({**record, "seed": seed}), source)
    settings = record.get("trainer", record.get("settings")) or {}
    if isinstance(settings, Mapping):
        check_settings(settings, source, given)
