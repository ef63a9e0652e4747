"""Observations of any supported space as flat float32 vectors, for the deep agents.

The deep families were written for ``Box`` observations. An :class:`ObservationCoder` lets
them take Discrete, MultiDiscrete, MultiBinary, Dict and Tuple observations too, in two steps:

- :meth:`~ObservationCoder.pack` turns a batch of observations (as a vector environment or
  :func:`rlx.spaces.observation_batch` gives them: an array, or a dict/tuple of arrays) into
  one float32 row per observation holding every leaf's raw values: a Discrete leaf is one
  number, a Box leaf its flattened values. Packed rows are what replay buffers store and
  what checkpoints save: compact (Taxi's 500 states take one number, not 500) and lossless
  for integers below 2**24.
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
    """One leaf of an observation space: its key path (``"observation"``, ``"0.image"``),
    where its values lie in a packed row and in an encoded row, and its kind."""

    key: str
    path: tuple[Any, ...]
    space: Any
    kind: str  # "box", "image", "discrete" (Discrete and MultiDiscrete) or "binary"
    packed: slice
    encoded: slice
    shape: tuple[int, ...]


def is_image(space: Any) -> bool:
    """A 3-d ``uint8`` Box: frames, channels first or last."""
    return isinstance(space, spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


class ObservationCoder:
    """Packs observations of ``space`` into flat float32 rows and encodes packed rows for a
    network (see the module docstring). Refuses a space with a leaf it cannot encode
    (Text, Graph, Sequence, ...) with one :class:`~rlx.errors.SpaceError` naming it."""

    def __init__(self, space: Any) -> None:
        self.space = space
        self.leaves: list[Leaf] = []
        packed = encoded = 0
        for path, leaf in _leaves(space, ()):
            size = int(math.prod(leaf.shape))
            if isinstance(leaf, spaces.Discrete):
                kind, width = "discrete", int(leaf.n)
                size = 1
            elif isinstance(leaf, spaces.MultiDiscrete):
                kind, width = "discrete", int(leaf.nvec.sum())
            elif isinstance(leaf, spaces.MultiBinary):
                kind, width = "binary", size
            else:
                kind, width = ("image" if is_image(leaf) else "box"), size
            self.leaves.append(
                Leaf(
                    ".".join(str(part) for part in path),
                    path,
                    leaf,
                    kind,
                    slice(packed, packed + size),
                    slice(encoded, encoded + width),
                    tuple(leaf.shape),
                )
            )
            packed, encoded = packed + size, encoded + width
        #: Values in a packed row, and in an encoded row.
        self.packed_size, self.encoded_size = packed, encoded
        #: ``(encoded slice, shape)`` of each image leaf, in order.
        self.images = [(leaf.encoded, leaf.shape) for leaf in self.leaves if leaf.kind == "image"]
        # Encoding as index arithmetic: continuous columns are copied, each discrete column
        # sets a 1 at its base offset plus its value.
        copy_src: list[int] = []
        copy_dst: list[int] = []
        hot_src: list[int] = []
        hot_base: list[int] = []
        hot_low: list[int] = []
        hot_high: list[int] = []
        for leaf in self.leaves:
            if leaf.kind != "discrete":
                copy_src += range(leaf.packed.start, leaf.packed.stop)
                copy_dst += range(leaf.encoded.start, leaf.encoded.stop)
                continue
            space = leaf.space
            if isinstance(space, spaces.Discrete):
                sizes, starts = [int(space.n)], [int(space.start)]
            else:
                sizes, starts = space.nvec.ravel().tolist(), space.start.ravel().tolist()
            offset = leaf.encoded.start
            for column, (n, start) in enumerate(zip(sizes, starts, strict=True)):
                hot_src.append(leaf.packed.start + column)
                hot_base.append(offset - start)
                hot_low.append(start)
                hot_high.append(start + n)
                offset += n
        self.copy_src = np.array(copy_src, np.int64)
        self.copy_dst = np.array(copy_dst, np.int64)
        self.hot_src = np.array(hot_src, np.int64)
        self.hot_base = np.array(hot_base, np.int64)
        self.hot_low = np.array(hot_low, np.int64)
        self.hot_high = np.array(hot_high, np.int64)
        #: The Box that packed rows fill, and the Box of encoded rows (what networks see).
        self.packed_space = spaces.Box(-np.inf, np.inf, (packed,), np.float32)
        self.encoded_space = spaces.Box(-np.inf, np.inf, (encoded,), np.float32)

    def __repr__(self) -> str:
        return (
            f"ObservationCoder({self.space}: {self.packed_size} packed, "
            f"{self.encoded_size} encoded)"
        )

    def pack(self, observations: Any) -> np.ndarray:
        """A batch of observations (leading axis ``n`` on every leaf) as ``(n, packed_size)``
        float32 rows; a leaf of the wrong shape, or a discrete value outside its space, is a
        :class:`SpaceError` naming the key."""
        parts = []
        n = None
        for leaf in self.leaves:
            value = np.asarray(_lookup(observations, leaf.path))
            if n is None:
                n = value.shape[0] if value.ndim > 0 else 0
            if value.shape != (n, *leaf.shape):
                where = f" key {leaf.key!r}" if leaf.key else ""
                raise SpaceError(
                    f"observation{where} has shape {value.shape[1:] if value.ndim else ()} "
                    f"(batch of {n}), the observation space {leaf.space} says {leaf.shape}"
                )
            parts.append(value.reshape(n, -1))
        return (
            np.concatenate(parts, axis=1, dtype=np.float32)
            if len(parts) > 1
            else (parts[0].astype(np.float32))
        )

    def encode(self, packed: np.ndarray) -> np.ndarray:
        """Packed rows ``(n, packed_size)`` as encoded rows ``(n, encoded_size)``: one-hot
        for discrete leaves (:meth:`pack` checked their values)."""
        out = np.zeros((packed.shape[0], self.encoded_size), np.float32)
        out[:, self.copy_dst] = packed[:, self.copy_src]
        if len(self.hot_src):
            columns = self.hot_base + packed[:, self.hot_src].astype(np.int64)
            np.put_along_axis(out, columns, 1.0, axis=1)
        return out

    def check(self, packed: np.ndarray) -> None:
        """Refuse packed rows whose discrete values lie outside their spaces (they would set
        another leaf's one-hot column), naming the key."""
        values = packed[:, self.hot_src]
        outside = (values < self.hot_low) | (values >= self.hot_high) | (values % 1 != 0)
        if outside.any():
            row, column = np.argwhere(outside)[0]
            leaf = next(x for x in self.leaves if x.packed.stop > self.hot_src[column])
            raise SpaceError(
                f"observation value {values[row, column]:g}"
                f"{' of key ' + repr(leaf.key) if leaf.key else ''} is outside the "
                f"observation space {leaf.space}"
            )

    def columns(self, key: str) -> slice:
        """The packed columns of leaf ``key`` (a top-level Dict key such as
        ``"desired_goal"``)."""
        for leaf in self.leaves:
            if leaf.key == key:
                return leaf.packed
        raise SpaceError(
            f"the observation space {self.space} has no key {key!r} "
            f"(it has {', '.join(repr(leaf.key) for leaf in self.leaves)})"
        )

    def unpack(self, packed: np.ndarray, key: str) -> np.ndarray:
        """Leaf ``key`` of packed rows, in its own shape and dtype ``(n, *shape)``."""
        leaf = next(x for x in self.leaves if x.key == key)
        values = packed[:, self.columns(key)].reshape(len(packed), *leaf.shape)
        return values.astype(leaf.space.dtype) if leaf.space.dtype is not None else values


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
