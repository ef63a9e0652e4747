"""rlx.observations: every supported space packed into byte rows, per key in its own storage,
and encoded for a network, the NumPy and torch encodings equal."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from rlx.errors import SpaceError
from rlx.observations import ObservationCoder, coder_for, input_size, mismatch

SPACE = spaces.Dict(
    {
        "position": spaces.Discrete(3, start=1),
        "velocity": spaces.Box(-1.0, 1.0, (2, 2), np.float32),
        "switches": spaces.MultiDiscrete([2, 3]),
        "lights": spaces.MultiBinary(3),
        "camera": spaces.Box(0, 255, (8, 8, 1), np.uint8),
        "pair": spaces.Tuple((spaces.Discrete(2), spaces.Box(-5.0, 5.0, (1,), np.float64))),
    }
)


def batch(space, n, seed=0):
    space.seed(seed)
    samples = [space.sample() for _ in range(n)]

    def stack(values, sub):
        if isinstance(sub, spaces.Dict):
            return {key: stack([v[key] for v in values], sub[key]) for key in sub.spaces}
        if isinstance(sub, spaces.Tuple):
            return tuple(stack([v[i] for v in values], s) for i, s in enumerate(sub.spaces))
        return np.stack([np.asarray(v) for v in values])

    return stack(samples, space)


def test_each_key_keeps_its_own_storage_and_comes_back_exactly():
    coder = ObservationCoder(SPACE)
    observations = batch(SPACE, 5)
    packed = coder.pack(observations)
    # One byte per pixel and per light, 4 per Discrete value and per float.
    assert packed.dtype == np.uint8
    assert packed.shape == (5, 4 + 16 + 8 + 3 + 64 + 4 + 4)
    for key in ("position", "velocity", "switches", "lights", "camera"):
        np.testing.assert_array_equal(coder.unpack(packed, key), observations[key])
    np.testing.assert_allclose(coder.unpack(packed, "pair.1"), observations["pair"][1], 1e-6)
    assert coder.encoded_size == 3 + 4 + 5 + 3 + 64 + 2 + 1 == input_size(SPACE)


def test_encoding_is_one_hot_for_discrete_keys_and_the_same_in_torch():
    torch = pytest.importorskip("torch")
    from rlx.nn.layers import ObservationEncoder

    coder = ObservationCoder(SPACE)
    observations = batch(SPACE, 7, seed=3)
    packed = coder.pack(observations)
    encoded = coder.encode(packed)
    position = coder.leaf("position").encoded
    np.testing.assert_array_equal(encoded[:, position].argmax(1), observations["position"] - 1)
    assert (encoded[:, position].sum(1) == 1).all()
    switches = encoded[:, coder.leaf("switches").encoded]
    np.testing.assert_array_equal(switches[:, :2].argmax(1), observations["switches"][:, 0])
    np.testing.assert_array_equal(switches[:, 2:].argmax(1), observations["switches"][:, 1])
    on_device = ObservationEncoder(coder)(torch.as_tensor(packed[None]))  # a seed axis too
    np.testing.assert_array_equal(on_device[0].numpy(), encoded)


def test_bad_observations_and_spaces_name_the_key():
    coder = ObservationCoder(SPACE)
    observations = batch(SPACE, 2)
    with pytest.raises(SpaceError, match=r"key 'velocity' has shape \(3,\).*says \(2, 2\)"):
        coder.pack({**observations, "velocity": np.zeros((2, 3))})
    with pytest.raises(SpaceError, match=r"value 4 of key 'position' is outside"):
        coder.pack({**observations, "position": np.array([1, 4])})
    with pytest.raises(SpaceError, match="no key 'lights'"):
        coder.pack({k: v for k, v in observations.items() if k != "lights"})
    with pytest.raises(SpaceError, match=r"Text.*\(key 'name'\) is not supported"):
        ObservationCoder(spaces.Dict({"name": spaces.Text(4)}))
    assert coder_for(spaces.Box(-1, 1, (3,))) is None  # Boxes keep the families' own path
    one = SPACE.sample()
    assert mismatch(SPACE, one) is None
    assert mismatch(SPACE, {**one, "lights": np.zeros(4)}) == (
        "key 'lights' has shape (4,), the space says (3,)"
    )
