"""Snapshots of a vector environment in the middle of its episodes, for exact resume.

A learning iteration on vector environments usually ends in the middle of episodes, so a
checkpoint must hold where each environment is. gymnasium has no API for that, so this
module saves what the environments keep in plain attributes: on the vector environment, on
every wrapper and on the unwrapped environment, each attribute whose value is a number, a
string, ``None``, a numeric or boolean array, a list or deque of equally shaped arrays (frame
stacks) or a NumPy generator; for MuJoCo environments the simulator's ``qpos``, ``qvel``,
``act`` and time; for the Arcade Learning Environment the emulator's state with its random
generator; and the attributes of plain records of numbers that those objects hold (the
running statistics of gymnasium's ``NormalizeObservation`` and ``NormalizeReward``).
The ALE's sticky actions are not in that state (the emulator keeps the action it repeats to
itself, and ale_py can neither read nor set it): the ``atari`` wrapper preset takes them
over in :class:`rlx_envs.atari.StickyActions`, whose attributes are saved here.
That covers gymnasium's classic-control, Box2D-free toy-text, MuJoCo and Atari environments
(with their preprocessing wrappers), and any environment that keeps its state in such
attributes.

Asynchronous vector environments keep their environments in other processes: their
snapshot is empty, and a resumed run restarts the episodes (see :func:`snapshot`).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

_SCALARS = (bool, int, float, str, type(None), np.bool_, np.integer, np.floating)
#: Array kinds a checkpoint stores (booleans and numbers); others, such as the byte-string
#: map of FrozenLake and Taxi, are constants of the environment and are left as they are.
_NUMERIC = "biuf"


def _layers(env: Any) -> list[Any]:
    """An environment, its wrappers and the unwrapped environment, outermost first."""
    layers = [env]
    while hasattr(layers[-1], "env") and layers[-1].env is not layers[-1]:
        layers.append(layers[-1].env)
    return layers


def _objects(vector_env: Any) -> dict[str, Any] | None:
    """Every object whose attributes make up the state, by a stable path name."""
    if not hasattr(vector_env, "envs"):
        if hasattr(vector_env, "_state") and hasattr(vector_env, "parent_pipes"):
            return None  # AsyncVectorEnv: the environments live in worker processes
        return _with_statistics({f"v{i}": layer for i, layer in enumerate(_layers(vector_env))})
    objects = {"v": vector_env}
    for e, env in enumerate(vector_env.envs):
        for i, layer in enumerate(_layers(env)):
            objects[f"e{e}.{i}"] = layer
    return _with_statistics(objects)


def _with_statistics(objects: dict[str, Any]) -> dict[str, Any]:
    """``objects`` and, under ``path.name``, every attribute of theirs that is a plain record of
    numbers (its attributes all numeric arrays or scalars): the running statistics of
    gymnasium's ``NormalizeObservation`` and ``NormalizeReward`` wrappers (``obs_rms``,
    ``return_rms``) are such records."""
    found = dict(objects)
    for path, obj in objects.items():
        for name, value in vars(obj).items():
            if _plain_record(value):
                found[f"{path}.{name}"] = value
    return found


def _plain_record(value: Any) -> bool:
    """An object whose every attribute is a numeric array or a number (not an environment)."""
    if isinstance(value, (np.ndarray, *_SCALARS)) or not hasattr(value, "__dict__"):
        return False
    attributes = vars(value)
    return bool(attributes) and all(
        (isinstance(item, np.ndarray) and item.dtype.kind in _NUMERIC)
        or (isinstance(item, _SCALARS) and not isinstance(item, str))
        for item in attributes.values()
    )


def can_restore(vector_env: Any) -> bool:
    """Whether :func:`restore` can put this vector environment back (not an async one)."""
    return _objects(vector_env) is not None


def snapshot(vector_env: Any) -> tuple[dict[str, np.ndarray], dict[str, Any] | None]:
    """Arrays and JSON describing the environments' state; JSON is ``None`` if impossible."""
    objects = _objects(vector_env)
    if objects is None:
        return {}, None
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {}
    for path, obj in objects.items():
        for name, value in vars(obj).items():
            key = f"{path}/{name}"
            if isinstance(value, np.ndarray) and value.dtype.kind in _NUMERIC:
                arrays[key] = value.copy()
            elif isinstance(value, _SCALARS):
                meta[key] = value.item() if isinstance(value, np.generic) else value
            elif isinstance(value, np.random.Generator):
                meta[key] = {"generator": value.bit_generator.state}
            elif _array_sequence(value):
                arrays[key] = np.stack(value)
                kind = "deque" if isinstance(value, deque) else "list"
                meta[key] = {"sequence": kind, "maxlen": getattr(value, "maxlen", None)}
        ale = getattr(obj, "ale", None)
        if ale is not None and hasattr(ale, "cloneState") and "ale" in vars(obj):
            state = ale.cloneState(include_rng=True).serialize()
            arrays[f"{path}/ale.state"] = np.frombuffer(state, np.uint8).copy()
        data = getattr(obj, "data", None)
        if data is not None and hasattr(data, "qpos") and hasattr(obj, "set_state"):
            for field in ("qpos", "qvel", "act"):
                arrays[f"{path}/mujoco.{field}"] = np.array(getattr(data, field))
            meta[f"{path}/mujoco.time"] = float(data.time)
    return arrays, meta


def _array_sequence(value: Any) -> bool:
    """A non-empty list or deque of numeric arrays of one shape and dtype."""
    if not isinstance(value, (list, deque)) or not value:
        return False
    first = value[0]
    return all(
        isinstance(item, np.ndarray)
        and item.dtype.kind in _NUMERIC
        and item.shape == first.shape
        and item.dtype == first.dtype
        for item in value
    )


def _kind(value: Any) -> str:
    """What a value is, as far as a snapshot may replace one by another: numbers and numeric
    arrays alike, strings, generators, sequences (frame stacks), or the value's type."""
    if value is None:
        return "None"
    if isinstance(value, np.ndarray) and value.dtype.kind in _NUMERIC:
        return "a number"
    if isinstance(value, _SCALARS):
        return "a string" if isinstance(value, str) else "a number"
    if isinstance(value, np.random.Generator):
        return "a random generator"
    if isinstance(value, (list, deque)):
        return "a sequence"
    return f"a {type(value).__name__}"


def _check_settable(objects: dict[str, Any], key: str, kind: str | None) -> None:
    """Refuse a snapshot entry that names no object of this environment, a method or property,
    or an attribute that holds another kind of value than ``kind`` (None: only the object is
    checked): a snapshot sets only the plain values :func:`snapshot` saves. Attributes this
    environment does not have yet (set later in an episode) are taken."""
    import inspect

    from rlx.errors import CheckpointError

    path, _, name = key.partition("/")
    if path not in objects:
        raise CheckpointError(
            f"the saved environment state names {path!r}, an object this environment does "
            "not have; the checkpoint was edited or belongs to another environment"
        )
    if kind is None:
        return
    obj = objects[path]
    where = f"the saved environment state sets {name!r} of {type(obj).__name__} ({path})"
    missing = object()
    current = vars(obj).get(name, missing)
    if current is missing:
        current = inspect.getattr_static(type(obj), name, missing)
        if current is missing and name.isidentifier() and not name.startswith("__"):
            return
    if callable(current) or hasattr(type(current), "__get__") or current is missing:
        raise CheckpointError(
            f"{where}, which is a method, a property or no attribute a snapshot holds; the "
            "checkpoint was edited"
        )
    if kind != "None" and _kind(current) not in ("None", kind):
        raise CheckpointError(
            f"{where} to {kind}, where this environment keeps {_kind(current)}; the "
            "checkpoint was edited or belongs to another environment"
        )


def _check_snapshot(objects: dict[str, Any], arrays: dict[str, Any], meta: dict[str, Any]) -> None:
    """:func:`_check_settable` for every attribute that :func:`restore` would set."""
    for key, value in meta.items():
        name = key.partition("/")[2]
        if name.startswith("mujoco.") or (isinstance(value, dict) and "sequence" in value):
            _check_settable(objects, key, None)
        elif isinstance(value, dict) and "generator" in value:
            _check_settable(objects, key, "a random generator")
        elif value is None or isinstance(value, _SCALARS):
            _check_settable(objects, key, _kind(value))
        else:
            from rlx.errors import CheckpointError

            raise CheckpointError(
                f"the saved environment state sets {key!r} to a {type(value).__name__}, which "
                "no snapshot holds; the checkpoint was edited"
            )
    for key in arrays:
        name = key.partition("/")[2]
        if name.startswith("mujoco.") or name == "ale.state":
            _check_settable(objects, key, None)
            continue
        sequence = meta.get(key)
        is_sequence = isinstance(sequence, dict) and "sequence" in sequence
        _check_settable(objects, key, "a sequence" if is_sequence else "a number")


def restore(vector_env: Any, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """Put the environments back into a :func:`snapshot` (of an identically built env).

    Every entry is checked first (:func:`_check_settable`): one that would set a method, a
    property or another kind of value is a :class:`~rlx.errors.CheckpointError`, raised
    before anything changes."""
    objects = _objects(vector_env)
    assert objects is not None, "cannot restore the state of an asynchronous vector env"
    _check_snapshot(objects, arrays, meta)
    for key, value in meta.items():
        path, _, name = key.partition("/")
        if name.startswith("mujoco.") or (isinstance(value, dict) and "sequence" in value):
            continue
        obj = objects[path]
        if isinstance(value, dict) and "generator" in value:
            current = getattr(obj, name, None)
            if isinstance(current, np.random.Generator):
                current.bit_generator.state = value["generator"]
            else:
                generator = np.random.default_rng()
                generator.bit_generator.state = value["generator"]
                setattr(obj, name, generator)
        else:
            setattr(obj, name, value)
    for key, value in arrays.items():
        path, _, name = key.partition("/")
        if name.startswith("mujoco."):
            continue
        if name == "ale.state":
            from ale_py import ALEState

            objects[path].ale.restoreState(ALEState(value.tobytes()))
            continue
        sequence = meta.get(key)
        if isinstance(sequence, dict) and "sequence" in sequence:
            items = [item.copy() for item in value]
            restored: Any = items
            if sequence["sequence"] == "deque":
                restored = deque(items, maxlen=sequence["maxlen"])
            setattr(objects[path], name, restored)
            continue
        setattr(objects[path], name, value.copy())
    for path, obj in objects.items():
        if f"{path}/mujoco.qpos" in arrays:
            obj.set_state(arrays[f"{path}/mujoco.qpos"], arrays[f"{path}/mujoco.qvel"])
            if arrays[f"{path}/mujoco.act"].size:
                obj.data.act[:] = arrays[f"{path}/mujoco.act"]
            obj.data.time = meta[f"{path}/mujoco.time"]
