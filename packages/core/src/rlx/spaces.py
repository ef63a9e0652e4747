"""Spaces: one observation or a batch for ``act``, spaces as JSON, an environment of spaces alone.

- :func:`observation_batch` classifies what ``agent.act`` was given against the agent's
  observation space: one observation (its shape is the space's) or a batch (one leading axis
  more), and refuses anything else with one :class:`~rlx.errors.SpaceError` naming both shapes.
  Every family's ``act`` goes through it.
- :func:`space_to_json` and :func:`space_from_json` write and read Box, Discrete,
  MultiDiscrete, MultiBinary, Dict and Tuple spaces as plain JSON; reading checks every field
  and never imports or runs anything, so a checkpoint's spaces are safe to read.
- :func:`spaces_only_env` is the stand-in environment of an agent loaded with
  ``rlx.load(path, make_env=False)``: it has the saved spaces, resets to a placeholder
  observation (constructors that start their environments work) and refuses to step with
  :class:`~rlx.errors.EnvironmentNeededError`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import gymnasium
import numpy as np
from gymnasium import spaces

from rlx.errors import CheckpointError, EnvironmentNeededError, SpaceError

#: The id of the stand-in environment of an agent loaded without its own.
SPACES_ONLY_ID = "rlx/SpacesOnly-v0"
#: Dtypes a saved space may have: numbers and booleans only.
_DTYPES = frozenset(
    [
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    ]
)
#: More elements than any observation or action space needs; a saved space above is refused
#: before NumPy allocates its bounds.
_MAX_ELEMENTS = 1 << 26
_MAX_DEPTH = 16


class ObservationBatch(NamedTuple):
    """What :func:`observation_batch` found: ``observations`` with a leading batch axis (a
    dict or tuple of such arrays for Dict and Tuple spaces, a list for other spaces), and
    whether the caller gave ``single`` observation (then ``act`` returns one action)."""

    observations: Any
    single: bool
    size: int

    def result(self, actions: Any) -> Any:
        """``actions`` (leading axis ``size``) as ``act`` returns them: the first alone for a
        single observation, all of them for a batch."""
        return actions[0] if self.single else actions


def observation_batch(space: Any, observations: Any, who: str = "act()") -> ObservationBatch:
    """Classify ``observations`` against ``space``: one observation, or a batch of them.

    One observation has the space's shape (a Box of shape ``(4,)``: ``(4,)``; Discrete: a
    scalar integer); a batch has one leading axis more (``(n, 4)``; Discrete: ``(n,)``), with
    ``n >= 1``. Dict and Tuple observations are classified leaf by leaf and must agree.
    Anything else is a :class:`SpaceError` naming the shapes ``who`` takes and the given one.
    """
    if (  # the common case of tabular agents, answered at once (it is on every step)
        type(space) is spaces.Discrete
        and isinstance(observations, (int, np.integer))
        and not isinstance(observations, bool)
        and space.start <= observations < space.start + space.n
    ):
        return ObservationBatch(np.array([observations]), True, 1)
    single, size, batched = _classify(space, observations, who, "")
    return ObservationBatch(batched, single, size)


def _classify(space: Any, value: Any, who: str, where: str) -> tuple[bool, int, Any]:
    if isinstance(space, spaces.Dict):
        if not isinstance(value, Mapping) or set(value) != set(space.spaces):
            raise SpaceError(
                f"{who} takes observations of {space}{where}: a dict with the keys "
                f"{sorted(space.spaces)}, or a batch of them; got {_describe(value)}"
            )
        parts = {
            key: _classify(sub, value[key], who, f"{where}[{key!r}]") for key, sub in space.items()
        }
        return (
            *_agree(space, parts.values(), who, where),
            {key: part[2] for key, part in parts.items()},
        )
    if isinstance(space, spaces.Tuple):
        if not isinstance(value, Sequence) or len(value) != len(space.spaces):
            raise SpaceError(
                f"{who} takes observations of {space}{where}: a tuple of {len(space.spaces)} "
                f"parts, or a batch of them; got {_describe(value)}"
            )
        items = [
            _classify(sub, part, who, f"{where}[{i}]")
            for i, (sub, part) in enumerate(zip(space.spaces, value, strict=True))
        ]
        return (*_agree(space, items, who, where), tuple(item[2] for item in items))
    if isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        return _classify_array(space, value, who, where)
    if space.contains(value):
        return True, 1, [value]
    if isinstance(value, Sequence) and value and all(space.contains(item) for item in value):
        return False, len(value), list(value)
    raise SpaceError(
        f"{who} takes one observation of {space}{where} or a sequence of them; got "
        f"{_describe(value)}"
    )


def _classify_array(space: Any, value: Any, who: str, where: str) -> tuple[bool, int, Any]:
    shape = tuple(space.shape)
    expected = (
        f"{who} takes one observation of shape {shape} or a batch of shape "
        f"{_batch_shape(shape)} for the observation space {_space_text(space)}{where}"
    )
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise SpaceError(f"{expected}; got {_describe(value)} ({exc})") from None
    if array.dtype.kind not in "biuf":
        raise SpaceError(f"{expected}; got {_describe(value)}, not numbers")
    if array.shape == shape:
        single, batch = True, array[None]
    elif array.ndim == len(shape) + 1 and array.shape[1:] == shape:
        single, batch = False, array
    else:
        raise SpaceError(f"{expected}; got shape {array.shape}")
    if batch.shape[0] == 0:
        raise SpaceError(f"{expected}; got an empty batch of shape {array.shape}")
    if isinstance(space, spaces.Discrete):
        if array.dtype.kind not in "iu":
            raise SpaceError(f"{expected} (integers); got {array.dtype} values")
        start, n = int(space.start), int(space.n)
        outside = (batch < start) | (batch >= start + n)
        if outside.any():
            raise SpaceError(
                f"{who}: observation {batch[outside][0]} is outside the observation space "
                f"{space}{where} (integers from {start} to {start + n - 1})"
            )
    return single, int(batch.shape[0]), batch


def _agree(space: Any, parts: Any, who: str, where: str) -> tuple[bool, int]:
    kinds = {(single, size) for single, size, _ in parts}
    if len(kinds) != 1:
        raise SpaceError(
            f"{who} got parts of {space}{where} that are not all one observation or all a "
            f"batch of the same size (leading axes: {sorted(size for _, size in kinds)})"
        )
    return next(iter(kinds))


def _space_text(space: Any) -> str:
    text = repr(space)
    return text if len(text) <= 80 else f"{type(space).__name__} of shape {space.shape}"


def _batch_shape(shape: tuple[int, ...]) -> str:
    return "(n, " + ", ".join(str(d) for d in shape) + ")" if shape else "(n,)"


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


# -- spaces as JSON ---------------------------------------------------------------------------


def space_to_json(space: Any) -> dict[str, Any] | None:
    """``space`` as a JSON object, or None when it is not a Box, Discrete, MultiDiscrete,
    MultiBinary, or a Dict or Tuple of those. Infinite bounds are the strings ``"inf"`` and
    ``"-inf"``; bounds equal everywhere are one number."""
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": _bounds_to_json(space.low),
            "high": _bounds_to_json(space.high),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": space.nvec.tolist(),
            "start": space.start.tolist(),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.MultiBinary):
        n: Any = space.n
        return {"type": "MultiBinary", "n": int(n) if np.ndim(n) == 0 else [int(d) for d in n]}
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        items = space.spaces.items() if isinstance(space, spaces.Dict) else enumerate(space.spaces)
        parts = [(key, space_to_json(sub)) for key, sub in items]
        if any(part is None for _, part in parts) or not all(
            isinstance(key, (str, int)) for key, _ in parts
        ):
            return None
        if isinstance(space, spaces.Dict):
            if not all(isinstance(key, str) for key, _ in parts):
                return None
            return {"type": "Dict", "spaces": [[key, part] for key, part in parts]}
        return {"type": "Tuple", "spaces": [part for _, part in parts]}
    return None


def _bounds_to_json(bounds: np.ndarray) -> Any:
    flat = bounds.ravel()
    if flat.size and (flat == flat[0]).all():
        return _number_to_json(flat[0].item())
    return [_number_to_json(value) for value in flat.tolist()]


def _number_to_json(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def space_from_json(data: Any, where: str) -> Any:
    """The gymnasium space that :func:`space_to_json` wrote; anything else in ``data`` is a
    :class:`CheckpointError` naming ``where`` (the file and field). Reads JSON values only:
    no name in ``data`` is imported or looked up outside this module."""
    return _space_from_json(data, where, 0)


def _space_from_json(data: Any, where: str, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise CheckpointError(f"{where}: spaces nested more than {_MAX_DEPTH} deep")
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise CheckpointError(
            f"{where}: a space must be a JSON object with a 'type', got {data!r:.80}"
        )
    kind = data["type"]
    try:
        if kind == "Box":
            shape = _shape(data.get("shape"), where)
            dtype = _dtype(data.get("dtype"), where)
            low = _bounds(data.get("low"), shape, dtype, where, "low")
            high = _bounds(data.get("high"), shape, dtype, where, "high")
            return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
        if kind == "Discrete":
            return spaces.Discrete(
                _integer(data.get("n"), where, "n", 1),
                start=_integer(data.get("start", 0), where, "start"),
            )
        if kind == "MultiDiscrete":
            nvec = _integer_array(data.get("nvec"), where, "nvec")
            start = _integer_array(data.get("start", np.zeros_like(nvec).tolist()), where, "start")
            if start.shape != nvec.shape or (nvec < 1).any():
                raise CheckpointError(
                    f"{where}: MultiDiscrete needs positive nvec and a start of the same shape"
                )
            return spaces.MultiDiscrete(
                nvec, dtype=_dtype(data.get("dtype", "int64"), where), start=start
            )
        if kind == "MultiBinary":
            n = data.get("n")
            if isinstance(n, list):
                return spaces.MultiBinary(list(_shape(n, where)))
            return spaces.MultiBinary(_shape([n], where)[0])
        if kind == "Dict":
            entries = data.get("spaces")
            if not isinstance(entries, list) or not all(
                isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) for e in entries
            ):
                raise CheckpointError(
                    f"{where}: a Dict space's 'spaces' must be [name, space] pairs"
                )
            return spaces.Dict(
                {key: _space_from_json(sub, f"{where}[{key!r}]", depth + 1) for key, sub in entries}
            )
        if kind == "Tuple":
            entries = data.get("spaces")
            if not isinstance(entries, list):
                raise CheckpointError(f"{where}: a Tuple space's 'spaces' must be a list")
            return spaces.Tuple(
                [_space_from_json(sub, f"{where}[{i}]", depth + 1) for i, sub in enumerate(entries)]
            )
    except (ValueError, TypeError, AssertionError, OverflowError) as exc:
        raise CheckpointError(f"{where}: not a valid {kind} space ({exc})") from None
    raise CheckpointError(
        f"{where}: unknown space type {kind!r:.60}; saved spaces are Box, Discrete, MultiDiscrete, "
        "MultiBinary, Dict or Tuple"
    )


def _integer(value: Any, where: str, name: str, low: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or abs(value) >= 2**63:
        raise CheckpointError(f"{where}: {name} must be an integer, got {value!r:.60}")
    if low is not None and value < low:
        raise CheckpointError(f"{where}: {name} must be at least {low}, got {value}")
    return value


def _shape(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > 32:
        raise CheckpointError(f"{where}: a shape must be a list of sizes, got {value!r:.60}")
    shape = tuple(_integer(d, where, "a size", 0) for d in value)
    if math.prod(shape) > _MAX_ELEMENTS:
        raise CheckpointError(f"{where}: shape {shape} has more than {_MAX_ELEMENTS:,} elements")
    return shape


def _dtype(value: Any, where: str) -> np.dtype:
    if value not in _DTYPES:
        raise CheckpointError(
            f"{where}: dtype {value!r:.40} is not one of {', '.join(sorted(_DTYPES))}"
        )
    return np.dtype(value)


def _bounds(
    value: Any, shape: tuple[int, ...], dtype: np.dtype, where: str, name: str
) -> np.ndarray:
    values = value if isinstance(value, list) else [value]
    size = math.prod(shape)
    if isinstance(value, list) and len(values) != size:
        raise CheckpointError(
            f"{where}: {name} has {len(values)} values, shape {shape} needs {size}"
        )
    numbers = []
    for item in values:
        if item in ("inf", "-inf"):
            numbers.append(float(item))
        elif isinstance(item, (int, float)) and not isinstance(item, bool) and math.isfinite(item):
            numbers.append(item)
        else:
            raise CheckpointError(
                f"{where}: {name} holds {item!r:.40}, not a finite number or 'inf'"
            )
    if dtype.kind in "biu" and not all(isinstance(number, int) for number in numbers):
        raise CheckpointError(f"{where}: {name} of a {dtype} Box must hold integers")
    array = np.array(numbers, dtype=dtype if dtype.kind in "biu" else np.float64).astype(dtype)
    return np.broadcast_to(array, shape).copy() if len(numbers) == 1 else array.reshape(shape)


def _integer_array(value: Any, where: str, name: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "iu" or array.size > _MAX_ELEMENTS or array.ndim > 32:
        raise CheckpointError(f"{where}: {name} must be a (nested) list of integers")
    return array.astype(np.int64)


def recorded_spaces(env: Any) -> dict[str, Any] | None:
    """``{"observation": ..., "action": ...}`` of ``env`` as JSON (what a run identity
    records), or None when either space has no JSON form (:func:`space_to_json`)."""
    observation = space_to_json(env.observation_space)
    action = space_to_json(env.action_space)
    if observation is None or action is None:
        return None
    return {"observation": observation, "action": action}


# -- an environment of spaces alone -------------------------------------------------------------


class SpacesOnlyEnv(gymnasium.Env):
    """Stands in for the environment of an agent loaded with ``rlx.load(path,
    make_env=False)``: the saved observation and action spaces, nothing else.

    ``reset`` returns a placeholder observation from the space (constructors that reset their
    vector environments can run); ``step`` raises :class:`EnvironmentNeededError`, so an
    agent that needs a real environment to be built, trained or evaluated says so.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's own attribute)

    def __init__(self, observation_space: Any, action_space: Any, env_id: str = "") -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.env_id = env_id
        sampler = copy.deepcopy(observation_space)
        sampler.seed(0)
        self._placeholder = sampler.sample()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return copy.deepcopy(self._placeholder), {}

    def step(self, action: Any) -> Any:
        """Refuse: an agent loaded without its environment cannot step it."""
        raise EnvironmentNeededError(
            f"this agent was loaded without its environment {self.env_id or ''} "
            "(rlx.load(..., make_env=False)): it can act on observations you give it and be "
            "saved, but stepping its environment (training, evaluating on agent.env) needs "
            "the real one: load it with make_env=True, or evaluate it with rlx.evaluate(agent, env)"
        )


def spaces_only_env(observation_space: Any, action_space: Any, env_id: str = "") -> Any:
    """A :class:`SpacesOnlyEnv` made through gymnasium with a spec of its own, so that agents
    that build vector environments from ``env.spec`` can be constructed."""
    from gymnasium.envs.registration import EnvSpec

    spec = EnvSpec(
        id=SPACES_ONLY_ID,
        entry_point=SpacesOnlyEnv,  # type: ignore[arg-type]
        kwargs={
            "observation_space": observation_space,
            "action_space": action_space,
            "env_id": env_id,
        },
        disable_env_checker=True,
    )
    return gymnasium.make(spec)
