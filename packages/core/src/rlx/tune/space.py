"""Search spaces: the dimensions an agent's hyperparameter declarations give by default,
and what a TOML space file narrows, widens within the declared range, or fixes."""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlx.checkpoint import is_number
from rlx.errors import ConfigError, RlxError, did_you_mean

#: Settings about how a run executes rather than what it learns: never searched by default.
_EXECUTION = frozenset(
    {
        "device",
        "torch_threads",
        "vectorization",
        "backend",
        "address",
        "workers",
        "seed",
        "behaviour_source",
        "behaviour_key",
        "history",
    }
)


#: Why a declared hyperparameter is left out of the default space, as ``rlx tune`` prints it.
SKIP_REASONS = {
    "code": "they import code",
    "execution": "they say how a run executes, not what it learns",
    "environment": "their valid values depend on the environment",
    "size": "sizes and lengths, which make trials bigger",
    "unbounded": "no finite declared range",
    "type": "not a number, switch or choice",
}


SPACE_FILE_KEY = "default_space"


@dataclass(frozen=True)
class Dimension:
    """One hyperparameter of the search: a float or int range, choices, or a fixed value."""

    name: str
    kind: str  # "float", "int", "choice" or "fixed"
    low: float | None = None
    high: float | None = None
    #: The declared range excludes ``low`` (a step size that must be positive).
    low_open: bool = False
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()
    value: Any = None
    source: str = "declared"

    def sample(self, trial: Any) -> Any:
        """This dimension's value for an Optuna trial."""
        if self.kind == "fixed":
            return self.value
        assert (self.low is not None and self.high is not None) or self.kind == "choice"
        if self.kind == "float":
            assert self.low is not None
            low = math.nextafter(self.low, math.inf) if self.low_open else self.low
            return trial.suggest_float(self.name, low, self.high, log=self.log, step=self.step)
        if self.kind == "int":
            step = int(self.step) if self.step else 1
            assert self.low is not None and self.high is not None
            low = int(self.low) + 1 if self.low_open else int(self.low)
            return trial.suggest_int(self.name, low, int(self.high), log=self.log, step=step)
        encoded = [_encode(choice) for choice in self.choices]
        return self.choices[encoded.index(trial.suggest_categorical(self.name, encoded))]

    def text(self) -> str:
        """The range, the choices or the value, as ``rlx tune`` prints it."""
        if self.kind == "fixed":
            return f"= {_show(self.value)}"
        if self.kind == "choice":
            return "{" + ", ".join(_show(choice) for choice in self.choices) + "}"
        scale = " log" if self.log else ""
        step = f" step {_show(self.step)}" if self.step else ""
        left = "(" if self.low_open else "["
        return f"{left}{_show(self.low)}, {_show(self.high)}]{scale}{step}"

    def to_json(self) -> dict[str, Any]:
        """The dimension as JSON values (tuples as lists), part of a study's identity."""
        return json.loads(json.dumps(dataclasses.asdict(self)))


@dataclass
class Space:
    """The dimensions of a search, in the agent's declaration order, and what was left out."""

    agent: str
    dimensions: list[Dimension]
    #: reason (a key of :data:`SKIP_REASONS`) -> hyperparameter names not searched
    skipped: dict[str, list[str]] = field(default_factory=dict)

    @property
    def searched(self) -> list[Dimension]:
        """The dimensions the search samples: all but the fixed ones."""
        return [d for d in self.dimensions if d.kind != "fixed"]

    @property
    def fixed(self) -> dict[str, Any]:
        """The fixed hyperparameters and their values."""
        return {d.name: d.value for d in self.dimensions if d.kind == "fixed"}

    def sample(self, trial: Any) -> dict[str, Any]:
        """The hyperparameters of one trial: sampled ones and fixed ones."""
        return {d.name: d.sample(trial) for d in self.dimensions}

    def to_json(self) -> list[dict[str, Any]]:
        """Every dimension's :meth:`Dimension.to_json`, in declaration order."""
        return [d.to_json() for d in self.dimensions]


def _encode(choice: Any) -> Any:
    """A value Optuna can store as a categorical choice: scalars as they are, a tuple, a list
    or a table (hidden sizes, say) as its JSON text."""
    if choice is None or isinstance(choice, (bool, int, float, str)):
        return choice
    return json.dumps(choice)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return json.dumps(value) if isinstance(value, dict) else str(value)


def _base_type(tp: Any) -> Any:
    """``tp`` without ``| None``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        if len(options) == 1:
            return _base_type(options[0])
    return tp


def _is_execution(name: str) -> bool:
    return name in _EXECUTION or name.endswith(("_seed", "_path", "_dir", "_file", "_device"))


def _is_size(name: str) -> bool:
    return name.startswith(("n_", "num_")) or name.endswith(
        ("_size", "_sizes", "_envs", "_steps", "_workers")
    )


def _declared(name: str, metadata: Mapping[str, Any], tp: Any) -> tuple[Dimension | None, str]:
    """The default dimension of a declared hyperparameter, or None and why it is left out."""
    if metadata.get("imports_code"):
        return None, "code"
    if metadata.get("searched") is False:
        return None, "environment"
    if _is_execution(name):
        return None, "execution"
    base = _base_type(tp)
    search = metadata.get("search")
    if search is not None and base in (int, float):
        # The declaration says where good values lie: searched even for a size.
        low, high = search
        log = bool(metadata.get("log")) or (low > 0 and high / low >= 100)
        kind = "int" if base is int else "float"
        return Dimension(name, kind, low=low, high=high, log=log), ""
    if _is_size(name):
        return None, "size"
    choices = metadata.get("choices")
    if choices is not None and len(choices) > 1:
        dimension = Dimension(name, "choice", choices=tuple(choices))
    elif base is bool:
        dimension = Dimension(name, "choice", choices=(False, True))
    elif base in (int, float):
        low, high = metadata.get("low"), metadata.get("high")
        if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
            return None, "unbounded"
        log = bool(metadata.get("log")) or (low > 0 and high / low >= 100)
        low_open = bool(metadata.get("low_open"))
        if low >= high or (log and low <= 0) or (base is int and low_open and low + 1 > high):
            return None, "unbounded"
        kind = "int" if base is int else "float"
        dimension = Dimension(name, kind, low=low, high=high, low_open=low_open, log=log)
    else:
        return None, "type"
    return dimension, ""


def _checked(where: str, name: str, value: Any, metadata: Mapping[str, Any], tp: Any) -> Any:
    """``value`` parsed to the declared type and inside the declared range, or a ConfigError."""
    from rlx.config import _check_range, _coerce

    try:
        parsed = _coerce(name, value, tp)
        _check_range(name, parsed, metadata)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return parsed


def _range_dimension(
    where: str, name: str, table: Mapping[str, Any], metadata: Mapping[str, Any], base: Any
) -> Dimension:
    """A ``{low = .., high = .., log = .., step = ..}`` entry of a space file, checked against
    the declaration."""
    from rlx.config import _check_range

    unknown = sorted(set(table) - {"low", "high", "log", "step"})
    if unknown:
        raise ConfigError(
            f"{where}: {name} has an unknown key {unknown[0]!r}; a range is "
            "{low = .., high = .., log = true|false, step = ..}"
        )
    if "low" not in table or "high" not in table:
        raise ConfigError(f"{where}: the range of {name} needs both low and high")
    low, high = table["low"], table["high"]
    log, step = table.get("log", False), table.get("step")
    if not (is_number(low) and is_number(high)):
        raise ConfigError(f"{where}: {name}'s low and high must be numbers, got {low!r}, {high!r}")
    if base is int and not (float(low).is_integer() and float(high).is_integer()):
        raise ConfigError(f"{where}: {name} is an integer; give integer low and high")
    if not low < high:
        raise ConfigError(f"{where}: {name}'s low ({low}) must be below its high ({high})")
    if not isinstance(log, bool):
        raise ConfigError(f"{where}: {name}'s log must be true or false, got {log!r}")
    if step is not None and not (is_number(step) and step > 0):
        raise ConfigError(f"{where}: {name}'s step must be a positive number, got {step!r}")
    if step is not None and base is int and not float(step).is_integer():
        raise ConfigError(f"{where}: {name} is an integer; give an integer step")
    if log and step is not None:
        raise ConfigError(f"{where}: {name} takes log = true or a step, not both")
    if log and low <= 0:
        raise ConfigError(f"{where}: {name} on a log scale needs low > 0, got {low}")
    for bound in (low, high):
        try:
            _check_range(name, bound, metadata)
        except ConfigError as exc:
            raise ConfigError(
                f"{where}: {name} = {{low = {low}, high = {high}}} leaves the declared range: {exc}"
            ) from None
    if base is int:
        low, high = int(low), int(high)
        step = int(step) if step is not None else None
    else:
        low, high = float(low), float(high)
        step = float(step) if step is not None else None
    kind = "int" if base is int else "float"
    return Dimension(name, kind, low=low, high=high, log=log, step=step, source="space file")


def _file_dimension(
    where: str, name: str, raw: Any, metadata: Mapping[str, Any], tp: Any
) -> Dimension:
    """One entry of a space file: a range (table), choices (array) or a fixed value."""
    base = _base_type(tp)
    origin = typing.get_origin(base)
    structured = origin in (tuple, list, dict) or base is dict
    if isinstance(raw, dict) and base in (int, float):
        return _range_dimension(where, name, raw, metadata, base)
    if isinstance(raw, dict) and not structured:
        raise ConfigError(
            f"{where}: {name} is not a number, so it takes no range; give choices "
            f"[a, b, ...] or one value"
        )
    # For a tuple setting (hidden_sizes) an array of arrays is the choices and one array a
    # value; for a scalar setting an array is the choices.
    is_choices = isinstance(raw, list) and (
        not structured or (bool(raw) and all(isinstance(item, (list, dict)) for item in raw))
    )
    if not is_choices:
        value = _checked(where, name, raw, metadata, tp)
        return Dimension(name, "fixed", value=value, source="space file")
    if not raw:
        raise ConfigError(f"{where}: {name} = [] gives no choices")
    choices: list[Any] = []
    for item in raw:
        value = _checked(where, name, item, metadata, tp)
        if value not in choices:
            choices.append(value)
    if len(choices) == 1:
        return Dimension(name, "fixed", value=choices[0], source="space file")
    return Dimension(name, "choice", choices=tuple(choices), source="space file")


def read_space_file(path: str | Path) -> dict[str, Any]:
    """The entries of a TOML space file (names as ``rlx info AGENT`` lists them)."""
    import tomllib

    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"space file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"space file {path} is unreadable: {exc}") from None
    return data


def build_space(
    agent: str, entries: Mapping[str, Any] | None = None, where: str = "space file"
) -> Space:
    """The search space of ``agent``: its declared default space, with ``entries`` (what a
    space file holds) replacing or adding dimensions. Bad entries are one ConfigError."""
    from rlx.api import agent_spec

    config_cls = agent_spec(agent).load().Config
    entries = {key.replace("-", "_"): value for key, value in dict(entries or {}).items()}
    use_defaults = entries.pop(SPACE_FILE_KEY, True)
    if not isinstance(use_defaults, bool):
        raise ConfigError(f"{where}: {SPACE_FILE_KEY} must be true or false")
    fields = {f.name: f for f in dataclasses.fields(config_cls) if f.init}
    for key in entries:
        if key not in fields:
            raise ConfigError(
                f"{where}: {agent} has no hyperparameter {key!r}.{did_you_mean(key, fields)} "
                f"'rlx info {agent}' lists them."
            )
    hints = typing.get_type_hints(config_cls)
    dimensions: list[Dimension] = []
    skipped: dict[str, list[str]] = {}
    for name, f in fields.items():
        if name in entries:
            dimensions.append(_file_dimension(where, name, entries[name], f.metadata, hints[name]))
        elif use_defaults:
            dimension, reason = _declared(name, f.metadata, hints[name])
            if dimension is None:
                skipped.setdefault(reason, []).append(name)
            else:
                dimensions.append(dimension)
    space = Space(agent, dimensions, skipped)
    from rlx.config import build_config

    try:  # fixed values that do not go together fail now, not in every trial
        build_config(config_cls, space.fixed)
    except RlxError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return space


def _dimension_from_json(document: Mapping[str, Any]) -> Dimension:
    values = dict(document)
    values["choices"] = tuple(values.get("choices") or ())
    return Dimension(**values)
