"""Observations of any supported space as flat float32 vectors, for the deep agents.

The deep families were written for ``Box`` observations. An :class:`ObservationCoder` lets
them take Discrete, MultiDiscrete, MultiBinary, Dict and Tuple observations too, in two steps:

- :meth:`~ObservationCoder.pack` turns a batch of observations (as a vector environment or
  :func:`rlx.spaces.observation_batch` gives them: an array, or a dict/tuple of arrays) into
  one row of bytes per observation holding every leaf's raw values in its own storage (a
  Discrete leaf is one int32, an image one byte per pixel, a float Box its float32 values).
  Packed rows are what replay buffers store and what checkpoints save: compact (Taxi's 500
  states take 4 bytes, not 500 floats) and per key.
- :meth:`~ObservationCoder.encode` turns packed rows into what a network reads: Discrete
  leaves one-hot, MultiDiscrete leaves one-hot per component, the rest as they are. The
  torch twin is :class:`rlx.nn.layers.ObservationEncoder`.

A leaf that is an image (a 3-d ``uint8`` Box inside a Dict or Tuple) keeps its pixels in the
encoded row; :attr:`ObservationCoder.images` says where, for a network that runs a CNN on
each (:class:`rlx.nn.layers.CombinedExtractor`). HER reads the goal leaves of packed rows
through :meth:`~ObservationCoder.columns`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from rlx.errors import SpaceError

#: What :class:`ObservationCoder` takes, for messages and ``rlx info``.
SUPPORTED = "Box, Discrete, MultiDiscrete, MultiBinary, and Dict or Tuple of these"


@dataclass(frozen=True)
class Leaf:
    """One leaf of an observation space: its key path (``"observation"``, ``"0.image"``), its
    kind, the bytes it takes in a packed row (as ``dtype``: see :class:`ObservationCoder`)
    and the columns it takes in an encoded row."""

    key: str
    path: tuple[Any, ...]
    space: Any
    kind: str  # "box", "image", "discrete" (Discrete and MultiDiscrete) or "binary"
    dtype: np.dtype  # how the packed row stores it
    packed: slice  # bytes of a packed row
    encoded: slice  # columns of an encoded row
    shape: tuple[int, ...]


def is_image(space: Any) -> bool:
    """A 3-d ``uint8`` Box: frames, channels first or last."""
    return isinstance(space, spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def _storage(leaf: Any) -> tuple[str, np.dtype, int]:
    """A leaf's kind, the dtype a packed row stores its values in, and its encoded width."""
    size = int(math.prod(leaf.shape))
    if isinstance(leaf, spaces.Discrete):
        return "discrete", np.dtype(np.int32), int(leaf.n)
    if isinstance(leaf, spaces.MultiDiscrete):
        return "discrete", np.dtype(np.int32), int(leaf.nvec.sum())
    if isinstance(leaf, spaces.MultiBinary):
        return "binary", np.dtype(np.uint8), size
    if leaf.dtype == np.uint8:  # image frames and other bytes keep their size
        return ("image" if is_image(leaf) else "box"), np.dtype(np.uint8), size
    return "box", np.dtype(np.float32), size


class ObservationCoder:
    """Packs observations of ``space`` into flat byte rows and encodes packed rows for a
    network (see the module docstring). Each leaf keeps its own storage in a packed row:
    bytes for uint8 Boxes (images) and MultiBinary, int32 for Discrete and MultiDiscrete,
    float32 for other Boxes; so a Dict with an 84x84 image key stores one byte per pixel.
    Refuses a space with a leaf it cannot encode (Text, Graph, Sequence, ...) with one
    :class:`~rlx.errors.SpaceError` naming it."""

    def __init__(self, space: Any) -> None:
        self.space = space
        self.leaves: list[Leaf] = []
        packed = encoded = 0
        for path, leaf in _leaves(space, ()):
            kind, dtype, width = _storage(leaf)
            values = 1 if isinstance(leaf, spaces.Discrete) else int(math.prod(leaf.shape))
            size = values * dtype.itemsize
            self.leaves.append(
                Leaf(
                    ".".join(str(part) for part in path),
                    path,
                    leaf,
                    kind,
                    dtype,
                    slice(packed, packed + size),
                    slice(encoded, encoded + width),
                    tuple(leaf.shape),
                )
            )
            packed, encoded = packed + size, encoded + width
        #: Bytes of a packed row, and values of an encoded row.
        self.packed_size, self.encoded_size = packed, encoded
        #: Per discrete leaf: the lowest value and one past the highest of each component, and
        #: the encoded column of each component's value 0 (computed once: ``pack`` and
        #: ``encode`` run at every environment step).
        self._discrete: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for leaf in self.leaves:
            if leaf.kind == "discrete":
                low, high = _bounds(leaf.space)
                offsets = leaf.encoded.start + np.concatenate([[0], np.cumsum(high - low)[:-1]])
                self._discrete[leaf.key] = (low, high, offsets - low)
        #: ``(encoded slice, shape)`` of each image leaf, in order.
        self.images = [(leaf.encoded, leaf.shape) for leaf in self.leaves if leaf.kind == "image"]
        #: The Box that packed rows fill (bytes), and the Box of encoded rows (what networks see).
        self.packed_space = spaces.Box(0, 255, (packed,), np.uint8)
        self.encoded_space = spaces.Box(-np.inf, np.inf, (encoded,), np.float32)

    def __repr__(self) -> str:
        return (
            f"ObservationCoder({self.space}: {self.packed_size} packed bytes, "
            f"{self.encoded_size} encoded values)"
        )

    def pack(self, observations: Any) -> np.ndarray:
        """A batch of observations (leading axis ``n`` on every leaf) as ``(n, packed_size)``
        byte rows; a leaf of the wrong shape, or a discrete value outside its space, is a
        :class:`SpaceError` naming the key."""
        first = np.asarray(_lookup(observations, self.leaves[0].path))
        n = int(first.shape[0]) if first.ndim > 0 else 0
        rows = np.empty((n, self.packed_size), np.uint8)
        for leaf in self.leaves:
            value = np.asarray(_lookup(observations, leaf.path))
            if value.shape != (n, *leaf.shape):
                where = f" key {leaf.key!r}" if leaf.key else ""
                raise SpaceError(
                    f"observation{where} has shape {value.shape[1:] if value.ndim else ()} "
                    f"(batch of {n}), the observation space {leaf.space} says {leaf.shape}"
                )
            flat = value.reshape(n, -1)
            if leaf.kind == "discrete":
                self._check(leaf, flat)
            stored = np.ascontiguousarray(flat, dtype=leaf.dtype)
            rows[:, leaf.packed] = stored.view(np.uint8).reshape(n, -1)
        return rows

    def _check(self, leaf: Leaf, values: np.ndarray) -> None:
        """Refuse discrete values outside their leaf's space (they would set another leaf's
        one-hot column), naming the key."""
        low, high, _ = self._discrete[leaf.key]
        outside = (values < low) | (values >= high) | (values % 1 != 0)
        if outside.any():
            value = values[outside][0]
            raise SpaceError(
                f"observation value {value}{' of key ' + repr(leaf.key) if leaf.key else ''} "
                f"is outside the observation space {leaf.space}"
            )

    def values(self, packed: np.ndarray, leaf: Leaf) -> np.ndarray:
        """A leaf's values in packed rows ``(n, packed_size)``: ``(n, values)`` of its
        storage dtype."""
        return np.ascontiguousarray(packed[:, leaf.packed]).view(leaf.dtype)

    def encode(self, packed: np.ndarray) -> np.ndarray:
        """Packed rows ``(n, packed_size)`` as encoded rows ``(n, encoded_size)`` of float32:
        one-hot for discrete leaves (:meth:`pack` checked their values)."""
        out = np.zeros((packed.shape[0], self.encoded_size), np.float32)
        for leaf in self.leaves:
            values = self.values(packed, leaf)
            if leaf.kind != "discrete":
                out[:, leaf.encoded] = values
                continue
            columns = self.one_hot_offsets(leaf) + values.astype(np.int64)
            np.put_along_axis(out, columns, 1.0, axis=1)
        return out

    def one_hot_offsets(self, leaf: Leaf) -> np.ndarray:
        """For each component of a discrete leaf, the encoded column of value 0: its one-hot
        column is this plus its value."""
        return self._discrete[leaf.key][2]

    def leaf(self, key: str) -> Leaf:
        """The leaf ``key`` (a top-level Dict key such as ``"desired_goal"``)."""
        for leaf in self.leaves:
            if leaf.key == key:
                return leaf
        raise SpaceError(
            f"the observation space {self.space} has no key {key!r} "
            f"(it has {', '.join(repr(leaf.key) for leaf in self.leaves)})"
        )

    def columns(self, key: str) -> slice:
        """The bytes of leaf ``key`` in a packed row."""
        return self.leaf(key).packed

    def unpack(self, packed: np.ndarray, key: str) -> np.ndarray:
        """Leaf ``key`` of packed rows, in its own shape and dtype ``(n, *shape)``."""
        leaf = self.leaf(key)
        values = self.values(packed, leaf).reshape(len(packed), *leaf.shape)
        return values.astype(leaf.space.dtype) if leaf.space.dtype is not None else values


def _bounds(space: Any) -> tuple[np.ndarray, np.ndarray]:
    """The lowest value and one past the highest of each component of a Discrete or
    MultiDiscrete space."""
    if isinstance(space, spaces.Discrete):
        return np.array([int(space.start)]), np.array([int(space.start + space.n)])
    start = space.start.ravel().astype(np.int64)
    return start, start + space.nvec.ravel().astype(np.int64)


def coder_for(space: Any) -> ObservationCoder | None:
    """The :class:`ObservationCoder` of ``space``, or None for a Box (the families' own path:
    images to a CNN, vectors of any shape flattened)."""
    return None if isinstance(space, spaces.Box) else ObservationCoder(space)


def mismatch(space: Any, observation: Any) -> str | None:
    """Where one ``observation`` does not fit the shapes of ``space``: ``"key 'goal' has shape
    (3,), the space says (15,)"``; None when every leaf fits (values are not checked)."""
    try:
        leaves = _leaves(space, ())
    except SpaceError:
        return None
    for path, leaf in leaves:
        where = f"key {'.'.join(str(part) for part in path)!r} " if path else ""
        try:
            value = _lookup(observation, path)
        except (SpaceError, KeyError, IndexError, TypeError):
            return f"{where or 'a key '}is missing from the observation"
        shape = np.shape(value)
        if shape != tuple(leaf.shape):
            return f"{where}has shape {shape}, the space says {tuple(leaf.shape)}"
    return None


def input_size(space: Any) -> int:
    """How many values a network reads for one observation of ``space``: a Box's flattened
    size, or the encoded row's."""
    coder = coder_for(space)
    return int(math.prod(space.shape)) if coder is None else coder.encoded_size


def _leaves(space: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        items = space.spaces.items() if isinstance(space, spaces.Dict) else enumerate(space.spaces)
        return [leaf for key, sub in items for leaf in _leaves(sub, (*path, key))]
    if isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        return [(path, space)]
    where = f" (key {'.'.join(str(part) for part in path)!r})" if path else ""
    raise SpaceError(
        f"observation space {space}{where} is not supported by the deep agents; they take "
        f"{SUPPORTED}"
    )


def _lookup(observations: Any, path: tuple[Any, ...]) -> Any:
    value = observations
    for part in path:
        if isinstance(value, dict) and part not in value:
            raise SpaceError(
                f"observation has no key {part!r} (it has {sorted(value)}); the observation "
                "space declares it"
            )
        value = value[part]
    return value


class EncodedObservations(gymnasium.ObservationWrapper, gymnasium.utils.RecordConstructorArgs):
    """An environment whose observations are its :class:`ObservationCoder`'s encoded rows (a
    flat float32 Box), for agents that build and step their own environments from a spec
    (the evolution strategies): :func:`encoded_spec` adds it to that spec."""

    def __init__(self, env: Any) -> None:
        gymnasium.utils.RecordConstructorArgs.__init__(self)
        gymnasium.ObservationWrapper.__init__(self, env)
        self.coder = ObservationCoder(env.observation_space)
        self.observation_space = self.coder.encoded_space

    def observation(self, observation: Any) -> np.ndarray:
        return self.coder.encode(self.coder.pack(_one_batch(observation)))[0]


def encoded_spec(spec: Any) -> Any:
    """``spec`` (a gymnasium ``EnvSpec``) with :class:`EncodedObservations` as its last
    wrapper: ``gymnasium.make`` of it gives encoded observations wherever it runs."""
    import dataclasses

    from gymnasium.envs.registration import WrapperSpec

    wrapper = WrapperSpec("EncodedObservations", f"{__name__}:EncodedObservations", {})
    return dataclasses.replace(spec, additional_wrappers=(*spec.additional_wrappers, wrapper))


def _one_batch(observation: Any) -> Any:
    if isinstance(observation, dict):
        return {key: _one_batch(value) for key, value in observation.items()}
    if isinstance(observation, tuple):
        return tuple(_one_batch(value) for value in observation)
    return np.asarray(observation)[None]
