"""Environment wrappers named on the command line or in a config, recorded with the run.

A run's wrappers are a list of entries ``{"name": ..., "kwargs": {...}, "training_only":
bool}``, applied in order to the environment ``gymnasium.make`` builds. A name is one of:

- a preset that an installed distribution publishes under the ``rlx.wrappers`` entry-point
  group (``atari`` from rlx-envs): a list of entries, and the keyword arguments the base
  environment needs (Atari's preprocessing wants the emulator's own frame skip off);
- a class of ``gymnasium.wrappers`` (``ClipReward``, ``FrameStackObservation``, ...);
- ``package.module:Class``, which imports code: a saved run that names one loads only when
  the user trusts it (:mod:`rlx.trust`).

Training environments get every entry; evaluation environments leave out the
``training_only`` ones (reward clipping, episodic life), so that an evaluation reports the
game's own score. An ``evaluation_only`` entry is the reverse (the ``atari`` preset's FIRE
after a lost life, which keeps a greedy policy that never learned to serve from standing still
until the time limit). The wrappers end up in the environment's spec (gymnasium records each
wrapper's constructor arguments), which is how vector environments and copies rebuild the
same stack.
"""

from __future__ import annotations

import collections.abc
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rlx.config import load_setting
from rlx.errors import ConfigError, RlxError, UnknownNameError, did_you_mean

#: The entry-point group under which distributions publish wrapper presets.
PRESET_GROUP = "rlx.wrappers"


def _presets() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {point.name: point for point in entry_points(group=PRESET_GROUP)}


def _gymnasium_wrapper_names() -> list[str]:
    """The wrapper names ``gymnasium.wrappers`` exports (read without importing the optional
    ones, which need extra packages)."""
    import gymnasium.wrappers as wrappers

    return [name for name in getattr(wrappers, "__all__", []) if name[:1].isupper()]


#: What the arguments of gymnasium's wrappers name, as rlx's own components declare it in
#: ``trust_arguments`` (:mod:`rlx.trust`): a saved run may give RecordVideo its folder and
#: file prefix only with trust. Every wrapper gymnasium exports is listed, so that a new one
#: is looked at before a saved run may name it (a test holds the list to gymnasium's).
GYMNASIUM_TRUST_ARGUMENTS: dict[str, dict[str, str]] = {
    "RecordVideo": {"video_folder": "destination", "name_prefix": "destination"},
    **{
        name: {}
        for name in (
            "AtariPreprocessing", "DelayObservation", "DtypeObservation",
            "DiscretizeObservation", "FilterObservation", "FlattenObservation",
            "FrameStackObservation", "GrayscaleObservation", "TransformObservation",
            "MaxAndSkipObservation", "NormalizeObservation", "AddRenderObservation",
            "ResizeObservation", "ReshapeObservation", "RescaleObservation",
            "TimeAwareObservation", "ClipAction", "DiscretizeAction", "TransformAction",
            "RescaleAction", "StickyAction", "RepeatAction", "ClipReward", "TransformReward",
            "NormalizeReward", "TimeLimit", "Autoreset", "PassiveEnvChecker", "OrderEnforcing",
            "RecordEpisodeStatistics", "AddWhiteNoise", "ObstructView", "RenderCollection",
            "HumanRendering", "ArrayConversion", "JaxToNumpy", "JaxToTorch", "NumpyToTorch",
        )
    },
}  # fmt: skip


def declared_for(name: str) -> dict[str, str] | None:
    """What the arguments of the wrapper ``name`` name (see :data:`GYMNASIUM_TRUST_ARGUMENTS`):
    a preset's ``trust_arguments``, gymnasium's from the table; None when nothing is declared
    (a ``module:Class``, or a gymnasium wrapper newer than the table)."""
    point = _presets().get(name)
    if point is not None:
        declared = getattr(point.load(), "trust_arguments", None)
        return dict(declared) if isinstance(declared, Mapping) else None
    return GYMNASIUM_TRUST_ARGUMENTS.get(name)


def imports_code(name: str) -> bool:
    """Whether the wrapper name is a ``module:Class`` target (not a preset or gymnasium's)."""
    return ":" in name


def normalize(entries: Iterable[Any]) -> tuple[dict[str, Any], ...]:
    """Entries as ``{"name", "kwargs", "training_only"}`` dicts (with ``"evaluation_only":
    True`` where set); a bare string is a name."""
    result = []
    for entry in entries:
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ConfigError(
                f"a wrapper is a name or a table with name, kwargs and training_only; got {entry!r}"
            )
        unknown = sorted(set(entry) - {"name", "kwargs", "training_only", "evaluation_only"})
        if unknown:
            raise ConfigError(
                f"wrapper {entry['name']!r}: unknown key {unknown[0]!r} (name, kwargs, "
                "training_only, evaluation_only)"
            )
        kwargs = entry.get("kwargs") or {}
        if not isinstance(kwargs, Mapping):
            raise ConfigError(f"wrapper {entry['name']!r}: kwargs must be a table, got {kwargs!r}")
        normalized = {
            "name": entry["name"],
            "kwargs": dict(kwargs),
            "training_only": bool(entry.get("training_only", False)),
        }
        if entry.get("evaluation_only"):
            if normalized["training_only"]:
                raise ConfigError(
                    f"wrapper {entry['name']!r} is training_only and evaluation_only: pick one"
                )
            normalized["evaluation_only"] = True
        result.append(normalized)
    return tuple(result)


def parse(text: str, training_only: bool = False, option: str = "--wrapper") -> dict[str, Any]:
    """``"Name,key=value,key=value"`` from the command line; values are read as JSON when
    they parse (numbers, booleans, lists), else kept as strings. ``option`` names the
    command-line option in error messages (``--logger`` reads the same syntax)."""
    # A comma starts a new assignment only before "key=": list values keep theirs.
    name, *assignments = [part.strip() for part in re.split(r",(?=\s*[A-Za-z_]\w*\s*=)", text)]
    if "," in name:
        raise ConfigError(
            f"{option} {text!r}: expected Name,key=value,...; {name.split(',', 1)[1]!r} has no '='"
        )
    kwargs: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key:
            raise ConfigError(
                f"{option} {text!r}: expected Name,key=value,...; {assignment!r} has no '='"
            )
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return {"name": name, "kwargs": kwargs, "training_only": training_only}


def expand(entries: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Presets replaced by their entries; returns the entries and the environment keyword
    arguments the presets need."""
    presets = _presets()
    expanded: list[dict[str, Any]] = []
    env_kwargs: dict[str, Any] = {}
    for entry in normalize(entries):
        point = presets.get(entry["name"])
        if point is None:
            expanded.append(entry)
            continue
        preset = point.load()
        if callable(preset):
            _check_preset_keywords(entry["name"], preset, entry["kwargs"])
            try:
                settings = preset(**entry["kwargs"])
            except RlxError:
                raise
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"wrapper preset {entry['name']}: {exc}") from exc
        else:
            settings = preset
        env_kwargs.update(settings.get("env_kwargs", {}))
        for inner in normalize(settings["wrappers"]):
            inner["training_only"] = inner["training_only"] or entry["training_only"]
            expanded.append(inner)
    return expanded, env_kwargs


def _check_preset_keywords(
    name: str, preset: Callable[..., Any], kwargs: Mapping[str, Any]
) -> None:
    """Refuse a keyword the preset does not take, naming the ones it does (``atari,stak=4``
    would otherwise be Python's TypeError about a function the user never wrote)."""
    try:
        parameters = inspect.signature(preset).parameters.values()
    except (TypeError, ValueError):  # no readable signature: the preset decides
        return
    if any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters):
        return
    keywords = {
        parameter.name: parameter.default
        for parameter in parameters
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    }
    for key in kwargs:
        if key not in keywords:
            takes = ", ".join(
                keyword if default is inspect.Parameter.empty else f"{keyword}={default!r}"
                for keyword, default in keywords.items()
            )
            raise ConfigError(
                f"wrapper preset {name} has no keyword {key!r}.{did_you_mean(key, keywords)} "
                f"Its keywords: {takes or 'none'}"
            )


def resolve(name: str) -> type:
    """The wrapper class a name stands for (see the module docstring)."""
    if imports_code(name):
        cls = load_setting(name, "wrapper")
        if not isinstance(cls, type):
            raise ConfigError(f"wrapper {name!r} is not a class")
        import gymnasium

        if not issubclass(cls, gymnasium.Wrapper):
            raise ConfigError(
                f"wrapper {name!r} is not a gymnasium.Wrapper: a module:Class wrapper must "
                "subclass gymnasium.Wrapper (or ObservationWrapper, ActionWrapper, RewardWrapper)"
            )
        return cls
    import gymnasium
    import gymnasium.wrappers as wrappers

    known = _gymnasium_wrapper_names()
    if name in known:
        try:
            cls = getattr(wrappers, name)
        except ImportError as exc:
            raise ConfigError(f"gymnasium's wrapper {name} needs an extra package: {exc}") from exc
        if isinstance(cls, type) and issubclass(cls, gymnasium.Wrapper):
            return cls
    candidates = [*known, *_presets()]
    raise UnknownNameError(
        f"unknown wrapper {name!r}.{did_you_mean(name, candidates)} Wrappers are presets "
        f"({', '.join(sorted(_presets())) or 'none installed'}), gymnasium.wrappers classes, "
        "or package.module:Class"
    )


def apply(env: Any, entries: Sequence[Mapping[str, Any]], training: bool) -> Any:
    """``env`` wrapped by each (expanded) entry in order; training-only entries only when
    ``training``, evaluation-only ones only when not. Arguments that do not fit the wrapper's
    signature or annotations, and a constructor that raises, are one :class:`ConfigError`
    naming the wrapper."""
    import gymnasium

    for entry in entries:
        if entry["training_only"] and not training:
            continue
        if entry.get("evaluation_only") and training:
            continue
        name, kwargs = entry["name"], entry["kwargs"]
        cls = resolve(name)
        try:
            signature: inspect.Signature | None = inspect.signature(cls)
        except (TypeError, ValueError):  # no readable signature: the constructor decides
            signature = None
        if signature is not None:
            try:
                signature.bind(env, **kwargs)
            except TypeError as exc:
                raise ConfigError(
                    f"wrapper {name} does not take {kwargs}: {exc}. Its arguments: {signature}"
                ) from None
            _check_annotations(name, cls, signature, kwargs)
        try:
            env = cls(env, **kwargs)
        except gymnasium.error.DependencyNotInstalled as exc:
            raise RlxError(f"wrapper {name} needs an extra package: {exc}") from exc
        except RlxError:
            raise
        except Exception as exc:  # any constructor error is about the arguments it was given
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ConfigError(
                f"wrapper {name} with {kwargs} failed: {reason or type(exc).__name__}"
            ) from exc
    return env


def _check_annotations(
    name: str, cls: type, signature: inspect.Signature, kwargs: Mapping[str, Any]
) -> None:
    """Refuse a keyword argument whose value does not fit the constructor's annotation
    (``ClipReward,min_reward=abc`` would otherwise fail at the first step of training)."""
    try:  # string annotations (``from __future__ import annotations``) resolved by typing
        hints = typing.get_type_hints(cls.__init__)  # type: ignore[misc]
    except Exception:  # an annotation Python cannot resolve here: nothing to check
        hints = {}
    for key, value in kwargs.items():
        parameter = signature.parameters.get(key)
        if parameter is None or parameter.annotation is inspect.Parameter.empty:
            continue
        annotation = hints.get(key, parameter.annotation)
        if isinstance(annotation, str):
            continue
        if not _fits(value, annotation):
            shown = parameter.annotation
            if not isinstance(shown, str):
                shown = inspect.formatannotation(shown)
            raise ConfigError(f"wrapper {name}: {key} must be {shown}, got {value!r}")


def _fits(value: Any, annotation: Any) -> bool:
    """Whether ``value`` (a JSON value from the command line or a config) can be an argument
    annotated ``annotation``; True whenever the annotation says too little to tell."""
    import numpy as np

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any or isinstance(annotation, typing.TypeVar):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is typing.Literal:
        return value in args
    if annotation is None or annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, (int, float, np.number))
    if annotation is np.ndarray:  # anything numpy reads as a numeric array
        if not isinstance(value, (int, float, np.number, np.ndarray, list, tuple)):
            return False
        try:
            return np.asarray(value).dtype.kind in "biuf"
        except (TypeError, ValueError):  # ragged lists
            return False
    if isinstance(annotation, type) and issubclass(annotation, np.generic):
        return isinstance(value, (int, float, np.generic)) and np.issubdtype(
            np.asarray(value).dtype, annotation
        )
    if origin in (list, tuple, collections.abc.Sequence, typing.Sequence):
        if not isinstance(value, (list, tuple)):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(map(_fits, value, args))
        return not args or all(_fits(item, args[0]) for item in value)
    if origin is collections.abc.Callable or annotation is Callable:
        return callable(value)
    target = origin if isinstance(origin, type) else annotation
    if isinstance(target, type):
        try:
            return isinstance(value, target)
        except TypeError:  # a protocol that cannot be checked at run time
            return True
    return True
