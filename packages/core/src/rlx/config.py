"""Hyperparameters as dataclasses: declaration, typed parsing, validation and description.

An agent declares ``Config``, a dataclass whose fields are made with :func:`hyperparameter`,
so that ``rlx info`` can show each one and bad values are refused before training starts::

    @dataclass
    class Config:
        learning_rate: float = hyperparameter(0.1, "step size of the update", low=0, high=1)
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from rlx.errors import ConfigError, UnknownNameError, did_you_mean

#: Integer settings lie in [-INT_LIMIT, INT_LIMIT): what NumPy and torch take as an int64.
INT_LIMIT = 2**63


def hyperparameter(
    default: Any,
    help: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    choices: Iterable[Any] | None = None,
    imports_code: bool = False,
    log: bool = False,
    search: tuple[float, float] | None = None,
    searched: bool = True,
) -> Any:
    """A dataclass field with a one-line meaning and an optional valid range or set of choices.

    ``low_open=True`` excludes ``low`` itself (for values that must be strictly positive).
    ``imports_code=True`` marks a setting whose ``"package.module:attr"`` values import code
    (a user's network, say): a saved run that sets one loads only when the user trusts it.
    ``log=True`` says the value is best searched on a log scale (``rlx tune``).
    ``search=(low, high)`` is the range ``rlx tune`` searches by default, where good values
    lie, inside the valid range (a learning rate valid for any positive value, say).
    ``searched=False`` keeps the setting out of that default search, for a setting whose
    valid values depend on the environment (invalid-action masks, noise on Box actions).
    """
    if search is not None:
        search = (search[0], search[1])
        inside = (low is None or search[0] > low or (search[0] == low and not low_open)) and (
            high is None or search[1] <= high
        )
        if not search[0] < search[1] or not inside:
            raise ValueError(
                f"search must be (low, high) with low < high inside the valid range, got {search}"
            )
    metadata = {
        "help": help,
        "low": low,
        "high": high,
        "low_open": low_open,
        "choices": tuple(choices) if choices is not None else None,
        "imports_code": imports_code,
        "log": log,
        "search": search,
        "searched": searched,
    }
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def preset(config_cls: type, name: str, doc: str, **defaults: Any) -> type:
    """A subclass of the config dataclass ``config_cls`` with new defaults for some fields.

    A named preset of an algorithm (``double-dqn``: DQN with ``double=True``). The
    changed defaults are kept in the class's ``preset`` mapping, which ``rlx info`` shows;
    meanings and ranges stay those of ``config_cls``.
    """
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    unknown = [key for key in defaults if key not in fields]
    if unknown:
        raise UnknownNameError(
            f"preset {name}: {config_cls.__qualname__} has no hyperparameter {unknown[0]!r}"
        )
    changed = [
        (key, fields[key].type, dataclasses.field(default=value, metadata=fields[key].metadata))
        for key, value in defaults.items()
    ]
    cls = dataclasses.make_dataclass(
        name,
        changed,
        bases=(config_cls,),
        namespace={"__doc__": doc, "preset": types.MappingProxyType(dict(defaults))},
    )
    # Annotations are strings (postponed evaluation): resolve them where the base lives.
    cls.__module__ = config_cls.__module__
    return cls


def _field_types(config_cls: type) -> dict[str, Any]:
    return typing.get_type_hints(config_cls)


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _coerce(name: str, value: Any, tp: Any) -> Any:
    """Convert ``value`` (possibly a string from the command line) to type ``tp``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in options:
                return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(name, value, option)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{name}: invalid value {value!r}")
    if origin in (tuple, list):
        args = typing.get_args(tp)
        item_tp = args[0] if args else Any
        if isinstance(value, str):
            value = [v for v in value.strip("()[] ").split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} expects a {_type_name(tp)}, got {value!r}")
        return origin(_coerce(name, v.strip() if isinstance(v, str) else v, item_tp) for v in value)
    if origin is dict or tp is dict:
        if isinstance(value, str):  # from the command line: a JSON object
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{name} expects a JSON object such as '{{\"momentum\": 0.9}}', got "
                    f"{value!r} ({exc})"
                ) from None
        if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
            raise ConfigError(f"{name} expects a table of named values, got {value!r}")
        return dict(value)
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{name} expects true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name} expects an integer, got {value!r}")
        number: Any = math.nan
        if isinstance(value, (int, float)):
            number = value
        elif isinstance(value, str):
            text = value.strip().replace("_", "")
            try:
                number = int(text)
            except ValueError:
                try:
                    number = float(text)
                except ValueError:
                    pass
        if isinstance(number, int) or (isinstance(number, float) and number.is_integer()):
            if not -INT_LIMIT <= number < INT_LIMIT:
                raise ConfigError(
                    f"{name} = {value} is out of range: integer settings are 64-bit, within "
                    f"+-{INT_LIMIT:.2e}; no size that large fits in memory, give a smaller one"
                )
            return int(number)
        raise ConfigError(f"{name} expects an integer, got {value!r}")
    if tp is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name} expects a number, got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.replace("_", ""))
            except ValueError:
                pass
        raise ConfigError(f"{name} expects a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{name} expects a string, got {value!r}")
    return value


def _check_range(name: str, value: Any, metadata: Mapping[str, Any]) -> None:
    choices = metadata.get("choices")
    if choices is not None and value not in choices:
        raise ConfigError(
            f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}."
            + did_you_mean(str(value), map(str, choices))
        )
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    low, high = metadata.get("low"), metadata.get("high")
    low_open = metadata.get("low_open", False)
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and value > high
    if too_low or too_high:
        left = "(" if low_open else "["
        interval = (
            f"{left}{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"
        )
        raise ConfigError(f"{name} must be in {interval}, got {value!r}")


def build_config(config_cls: type, overrides: Mapping[str, Any] | None = None) -> Any:
    """Instantiate ``config_cls`` from defaults and ``overrides`` (strings are parsed).

    Unknown keys, values of the wrong type and values out of range raise errors that name
    the key and what is valid.
    """
    overrides = dict(overrides or {})
    fields = {f.name: f for f in dataclasses.fields(config_cls) if f.init}
    unknown = [key for key in overrides if key not in fields]
    if unknown and not fields:
        raise UnknownNameError(
            f"{config_cls.__qualname__} has no hyperparameters; got {unknown[0]!r}"
        )
    if unknown:
        key = unknown[0]
        raise UnknownNameError(
            f"unknown hyperparameter {key!r} for {config_cls.__qualname__}."
            f"{did_you_mean(key, fields)}"
            f" Valid: {', '.join(fields)}."
        )
    hints = _field_types(config_cls)
    for key, value in overrides.items():
        if fields[key].metadata.get("imports_code") and callable(value):
            overrides[key] = import_target(key, value)
    values = {key: _coerce(key, value, hints[key]) for key, value in overrides.items()}
    try:
        config = config_cls(**values)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from exc
    for name, f in fields.items():
        _check_range(name, getattr(config, name), f.metadata)
    return config


def import_target(name: str, obj: Any) -> str:
    """``"package.module:qualname"`` of a class or function given as a setting's value (a
    network factory passed to ``rlx.make``), so that the run records a name that rebuilds
    it; an object that cannot be imported back by that name is a :class:`ConfigError`."""
    import importlib
    import sys

    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if module and module.startswith("torch.optim"):
        # torch's own optimisers and schedulers are recorded by name ("AdamW"), which loads
        # without --trust-code, as the string setting does.
        for namespace in ("torch.optim", "torch.optim.lr_scheduler"):
            if getattr(sys.modules.get(namespace), qualname, None) is obj:
                return str(qualname)
    target = f"{module}:{qualname}"
    found: Any = None
    if module and "<" not in qualname and module != "__main__":
        try:
            found = importlib.import_module(module)
            for part in qualname.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError):
            found = None
    if found is not obj:
        raise ConfigError(
            f"{name}: {obj!r} cannot be recorded with the run: a saved run names its code by "
            "import path, so give a class or function defined at the top level of an "
            f"importable module (not a lambda, a local function or __main__), or the string "
            f"'package.module:factory'"
        )
    return target


def load_setting(target: str, setting: str, example: str = "package.module:Class") -> Any:
    """The object a setting's ``"package.module:attribute"`` names (the attribute may be
    dotted), imported: the one way every setting that names a user's code loads it.

    A malformed target, a module that does not import, or a missing attribute (with the
    module's closest names) is one :class:`ConfigError` that names ``setting``. Callers check
    trust first where the target comes from saved files (:mod:`rlx.trust`).
    """
    import importlib

    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"{setting} must be '{example}', got {target!r}")
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or whatever the module raises as it imports
        raise ConfigError(f"cannot load {setting} {target!r}: {type(exc).__name__}: {exc}") from exc
    where = module_name
    for part in attribute.split("."):
        if not hasattr(found, part):
            public = [name for name in dir(found) if not name.startswith("_")]
            raise ConfigError(
                f"cannot load {setting} {target!r}: {where!r} has no {part!r}."
                + did_you_mean(part, public)
            )
        found, where = getattr(found, part), f"{where}.{part}"
    return found


def describe(config_cls: type) -> list[dict[str, Any]]:
    """Name, type, default and meaning of every hyperparameter (what ``rlx info`` prints)."""
    hints = _field_types(config_cls)
    rows = []
    for f in dataclasses.fields(config_cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        row = {
            "name": f.name,
            "type": _type_name(hints[f.name]),
            "default": default,
            "help": f.metadata.get("help", ""),
        }
        rng = _range_text(f.metadata)
        if rng:
            row["range"] = rng
        if f.metadata.get("search") is not None:
            row["search"] = list(f.metadata["search"])
        rows.append(row)
    return rows


def _range_text(metadata: Mapping[str, Any]) -> str:
    if metadata.get("choices") is not None:
        return "{" + ", ".join(map(str, metadata["choices"])) + "}"
    low, high = metadata.get("low"), metadata.get("high")
    if low is None and high is None:
        return ""
    left = "(" if metadata.get("low_open") else "["
    return f"{left}{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"


def to_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready copy of a config dataclass (tuples become lists)."""
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in dataclasses.asdict(config).items()
    }


def parse_assignments(items: Iterable[str]) -> dict[str, str]:
    """Parse ``["key=value", ...]`` from ``--set``; a malformed item is a ConfigError."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        result[key.strip().replace("-", "_")] = value.strip()
    return result
