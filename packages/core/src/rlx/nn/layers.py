"""Network bodies that several families build on, and the loader of a user's own network.

- :class:`MLP`: fully connected hidden layers, each followed by an activation, with a NumPy
  twin of its forward pass (:func:`numpy_linear_stack`) for acting on the CPU;
- :class:`NoisyLinear`: a linear layer with learned factorised Gaussian noise on its weights
  (Fortunato et al. 2018), exploration for value-based agents;
- :class:`VirtualBatchNorm`: batch normalisation by a fixed reference batch (Salimans et al.
  2016), a layer to place anywhere in a network;
- :class:`NatureCNN`: the convolutional torso of Mnih et al. (2015) for 84x84 frames;
- :func:`orthogonal_`: orthogonal initialisation with a gain (Saxe et al. 2014);
- :func:`load_network`: a ``"package.module:factory"`` target turned into an ``nn.Module``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlx.config import load_setting
from rlx.errors import ConfigError


class _SigmoidTanh(torch.autograd.Function):
    """``tanh(x) = 2 sigmoid(2x) - 1``, with tanh's own backward ``g (1 - y^2)``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(x * 2.0).mul_(2.0).sub_(1.0)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """The hyperbolic tangent; on the CPU, for large tensors, through the sigmoid: torch
    2.13's CPU ``tanh`` kernel costs several times its ``sigmoid`` (870 against 110 us on
    a 16 x 256 x 64 tensor, one AVX-512 thread), which made tanh the largest cost of a
    batched PPO update (:mod:`rlx.nn.stacked`); the two differ by at most 2e-7. The
    single-network :class:`MLP` keeps ``torch.tanh``: its learning results were measured
    with it."""
    if x.device.type != "cpu" or x.numel() < 4096:
        return torch.tanh(x)
    return cast(torch.Tensor, _SigmoidTanh.apply(x))


#: Activation names accepted by :class:`MLP`, with their torch functions.
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tanh": torch.tanh,
    "relu": torch.relu,
    "elu": F.elu,
}
#: The same activations on NumPy arrays, in place where NumPy allows it.
NUMPY_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": lambda x: np.tanh(x, out=x),
    "relu": lambda x: np.maximum(x, 0, out=x),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))).astype(x.dtype),
}


class NoisyLinear(nn.Module):
    """``y = (mu_w + sigma_w * eps_w) x + mu_b + sigma_b * eps_b`` with factorised noise.

    Fortunato et al. (2018), "Noisy Networks for Exploration", section 3: ``eps_w = f(eps_out)
    f(eps_in)^T`` and ``eps_b = f(eps_out)`` with ``f(x) = sign(x) sqrt(|x|)``, ``p + q``
    normal draws per layer instead of ``p q``; ``mu`` starts uniform in ``+-1/sqrt(p)`` and
    ``sigma`` at ``sigma_0 / sqrt(p)``. The noise is redrawn by :meth:`reset_noise` only.
    In eval mode (``module.eval()``) the layer is its mean, ``mu_w x + mu_b``; ``weight``
    and ``bias`` are the means, so code that reads a plain ``nn.Linear`` reads the mean map.
    """

    input_noise: torch.Tensor
    output_noise: torch.Tensor

    def __init__(self, in_features: int, out_features: int, sigma_0: float = 0.5) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma_0 * bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma_0 * bound))
        self.register_buffer("input_noise", torch.zeros(in_features))
        self.register_buffer("output_noise", torch.zeros(out_features))

    @torch.no_grad()
    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        """Draw new ``f(eps_in)`` and ``f(eps_out)`` (from ``generator`` when given)."""
        for noise in (self.input_noise, self.output_noise):
            noise.normal_(generator=generator)
            noise.copy_(noise.sign() * noise.abs().sqrt())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return F.linear(x, self.weight, self.bias)
        # The noisy weights are formed once: one matrix product forward and two backward,
        # where applying mean and noise separately would take twice as many.
        noise = torch.outer(self.output_noise, self.input_noise)
        weight = torch.addcmul(self.weight, self.weight_sigma, noise)
        bias = torch.addcmul(self.bias, self.bias_sigma, self.output_noise)
        return F.linear(x, weight, bias)


def reset_noise(module: nn.Module, generator: torch.Generator | None = None) -> None:
    """Redraw the noise of every :class:`NoisyLinear` inside ``module``."""
    for layer in module.modules():
        if isinstance(layer, NoisyLinear):
            layer.reset_noise(generator)


class MLP(nn.Module):
    """Hidden layers ``sizes[0] -> ... -> sizes[-1]``, each followed by the activation.

    ``(batch, sizes[0]) -> (batch, sizes[-1])``. The forward pass calls the linear maps
    directly rather than through ``nn.Sequential``: module dispatch costs as much as the
    arithmetic of a 64-unit layer on a few rows. ``noisy=True`` makes every layer a
    :class:`NoisyLinear`.
    """

    def __init__(self, sizes: Sequence[int], activation: str, noisy: bool = False) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ConfigError(
                f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}"
            )
        linear = NoisyLinear if noisy else nn.Linear
        self.layers = nn.ModuleList(linear(a, b) for a, b in itertools.pairwise(sizes))
        self.noisy = noisy
        self.activation_name = activation
        self.activation = ACTIVATIONS[activation]

    @property
    def features_dim(self) -> int:
        """The width of the output, ``sizes[-1]``."""
        return int(self.layers[-1].out_features)  # type: ignore[arg-type]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.noisy:
            for layer in self.layers:
                x = self.activation(layer(x))
            return x
        for layer in cast("list[nn.Linear]", self.layers):
            x = self.activation(F.linear(x, layer.weight, layer.bias))
        return x


def numpy_linear_stack(
    layers: Sequence[nn.Linear], activation: str
) -> Callable[[np.ndarray], np.ndarray]:
    """A NumPy forward pass through ``layers``, the activation after all but the last.

    ``(batch, in) -> (batch, out)`` on the layers' own CPU weights (the arrays share memory
    with the parameters, so the function sees every update). On a few rows NumPy's matrix
    products cost a few microseconds where torch's dispatch costs tens.
    """
    act = NUMPY_ACTIVATIONS[activation]
    weights = [(layer.weight.detach().numpy().T, layer.bias.detach().numpy()) for layer in layers]
    hidden, (last_weight, last_bias) = weights[:-1], weights[-1]

    def forward(x: np.ndarray) -> np.ndarray:
        for weight, bias in hidden:
            x = x @ weight
            x += bias
            x = act(x)
        return x @ last_weight + last_bias

    return forward


class VirtualBatchNorm(nn.Module):
    """Virtual batch normalisation: features normalised by a fixed reference batch.

    Salimans, Goodfellow, Zaremba, Cheung, Radford & Chen (2016), "Improved Techniques for
    Training GANs", section 3.4: each example ``x`` is normalised with the statistics of the
    reference batch (``n`` examples) together with ``x`` itself, weight ``1 / (n + 1)``, so
    an example's output never depends on the other examples of its batch; then
    ``gamma * x_hat + beta``, learned per feature. :meth:`set_reference` takes the
    reference batch ``(n, features)`` once (its statistics are buffers, saved with the
    module); until then the layer is the identity up to its affine map.

    Convolutional feature maps ``(n, channels, *spatial)`` (``(N, C, H, W)`` after a
    ``Conv2d``) are normalised per channel, as batch normalisation does them: ``features`` is
    the number of channels, the reference statistics of a channel are taken over the
    examples and every position, and an example adds its own positions' mean with weight
    ``1 / (n + 1)``.
    """

    reference_mean: torch.Tensor
    reference_mean_square: torch.Tensor
    reference_size: torch.Tensor

    def __init__(self, features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(features))
        self.beta = nn.Parameter(torch.zeros(features))
        self.register_buffer("reference_mean", torch.zeros(features))
        self.register_buffer("reference_mean_square", torch.ones(features))
        self.register_buffer("reference_size", torch.zeros((), dtype=torch.long))

    @torch.no_grad()
    def set_reference(self, batch: torch.Tensor) -> None:
        """Take the statistics of the reference batch ``(n, features)``, or ``(n, channels,
        *spatial)`` per channel (or of the features this layer receives: pass what the
        layers before it output)."""
        batch = batch.to(self.reference_mean.device, torch.float32)
        if batch.dim() > 2:  # feature maps: one row per channel, every example and position
            values = batch.transpose(0, 1).reshape(batch.shape[1], -1)
        else:
            values = batch.reshape(len(batch), -1).T
        if len(values) != len(self.gamma):
            raise ValueError(
                f"VirtualBatchNorm({len(self.gamma)}) got a reference batch of shape "
                f"{tuple(batch.shape)}: {len(values)} features or channels"
            )
        self.reference_mean.copy_(values.mean(1))
        self.reference_mean_square.copy_(values.square().mean(1))
        self.reference_size.fill_(len(batch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(batch, features)`` or ``(batch, channels, *spatial)`` normalised."""
        spatial = x.dim() - 2
        shape = (-1, *([1] * spatial))  # a channel's statistics broadcast over its positions
        gamma, beta = self.gamma.reshape(shape), self.beta.reshape(shape)
        n = int(self.reference_size)
        if n == 0:
            return gamma * x + beta
        new = 1.0 / (n + 1)
        dims = tuple(range(2, x.dim()))
        own_mean = x.mean(dims, keepdim=True) if spatial else x
        own_mean_square = x.square().mean(dims, keepdim=True) if spatial else x.square()
        mean = (1.0 - new) * self.reference_mean.reshape(shape) + new * own_mean
        mean_square = (1.0 - new) * self.reference_mean_square.reshape(
            shape
        ) + new * own_mean_square
        variance = (mean_square - mean.square()).clamp(min=0.0)
        return gamma * (x - mean) / torch.sqrt(variance + self.eps) + beta


class NatureCNN(nn.Module):
    """Three convolutions and a 512-unit layer (Mnih et al. 2015) over ``uint8`` frames.

    ``(batch, *shape) -> (batch, 512)``; frames may be channels first or last and are
    scaled to [0, 1].
    """

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.channels_last = shape[-1] <= 4 < shape[0]
        channels = shape[-1] if self.channels_last else shape[0]
        self.convs = nn.Sequential(
            nn.Conv2d(channels, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            probe = torch.zeros((1, *shape))
            n = self.convs(self._frames(probe)).shape[1]
        self.linear = nn.Sequential(nn.Linear(n, 512), nn.ReLU())
        self.features_dim = 512

    def _frames(self, x: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        return x.float() / 255.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.convs(self._frames(x)))


class ObservationEncoder(nn.Module):
    """The torch twin of :meth:`rlx.observations.ObservationCoder.encode`: packed byte rows
    ``(..., packed_size)`` -> encoded rows ``(..., encoded_size)`` on the rows' device, each
    leaf's bytes read as its storage dtype, one-hot for discrete leaves. It has no
    parameters (the one-hot offsets are buffers that move with ``.to(device)``), so agents
    keep it apart from the networks they save."""

    def __init__(self, coder: Any) -> None:
        super().__init__()
        self.encoded_size = coder.encoded_size
        dtypes = {"uint8": torch.uint8, "int32": torch.int32, "float32": torch.float32}
        #: ``(bytes, torch dtype, encoded columns, offsets buffer name or None)`` per leaf.
        self.parts: list[tuple[slice, torch.dtype, slice, str | None]] = []
        for i, leaf in enumerate(coder.leaves):
            name = None
            if leaf.kind == "discrete":
                name = f"offsets{i}"
                offsets = torch.as_tensor(coder.one_hot_offsets(leaf), dtype=torch.long)
                self.register_buffer(name, offsets, persistent=False)
            self.parts.append((leaf.packed, dtypes[leaf.dtype.name], leaf.encoded, name))

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        rows = packed.reshape(-1, packed.shape[-1])
        out = torch.zeros((rows.shape[0], self.encoded_size), device=rows.device)
        for stored, dtype, encoded, offsets in self.parts:
            values = rows[:, stored].contiguous().view(dtype)
            if offsets is None:
                out[:, encoded] = values.float()
            else:
                out.scatter_(1, getattr(self, offsets) + values.long(), 1.0)
        return out.reshape(*packed.shape[:-1], self.encoded_size)


class CombinedExtractor(nn.Module):
    """Features of encoded Dict or Tuple observations that hold images: a
    :class:`NatureCNN` on each image leaf (its pixels reshaped from the encoded row), the
    other encoded columns as they are, concatenated: ``(batch, encoded_size) -> (batch,
    512 * images + others)``. ``encoders`` maps a leaf's key to a module of the caller's
    choice for that leaf (``(batch, *shape) -> (batch, features)``), in place of the CNN
    for an image leaf, or applied to that leaf's encoded columns for another."""

    others: torch.Tensor

    def __init__(self, coder: Any, encoders: dict[str, nn.Module] | None = None) -> None:
        super().__init__()
        encoders = dict(encoders or {})
        self.slices: list[tuple[slice, tuple[int, ...]]] = []
        self.encoders = nn.ModuleList()
        covered: set[int] = set()
        self.features_dim = 0
        for leaf in coder.leaves:
            if leaf.kind != "image" and leaf.key not in encoders:
                continue
            width = leaf.encoded.stop - leaf.encoded.start
            shape = leaf.shape if leaf.kind in ("image", "box") else (width,)
            encoder = encoders.get(leaf.key) or NatureCNN(shape)
            with torch.no_grad():
                out = encoder(torch.zeros((2, *shape)))
            if out.ndim != 2:
                raise ConfigError(
                    f"the encoder of {leaf.key!r} must map (batch, {', '.join(map(str, shape))}) "
                    f"to (batch, features); it returned shape {tuple(out.shape)}"
                )
            self.slices.append((leaf.encoded, shape))
            self.encoders.append(encoder)
            self.features_dim += int(out.shape[1])
            covered.update(range(leaf.encoded.start, leaf.encoded.stop))
        others = [i for i in range(coder.encoded_size) if i not in covered]
        self.register_buffer("others", torch.as_tensor(others, dtype=torch.long), persistent=False)
        self.features_dim += len(others)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = [
            encoder(x[:, part].reshape(len(x), *shape))
            for (part, shape), encoder in zip(self.slices, self.encoders, strict=True)
        ]
        if len(self.others):
            parts.append(x[:, self.others])
        return torch.cat(parts, dim=1)


def combined_factory(coder: Any, encoders: dict[str, str]) -> Callable[[], nn.Module] | None:
    """What builds the :class:`CombinedExtractor` of observations that ``coder`` encodes, with
    the user's ``encoders`` (``{key: "package.module:factory"}``, ``factory(space)`` returning a
    module for that key as encoded: a Box in its shape, a Discrete one-hot); None when the
    observations need none (no image and no encoder: an MLP reads them)."""
    if encoders and coder is None:
        raise ConfigError(
            f"encoders apply to the keys of Dict or Tuple observations; drop encoders {encoders}"
        )
    if coder is None or not (coder.images or encoders):
        return None
    keys = {leaf.key: leaf for leaf in coder.leaves}
    unknown = sorted(set(encoders) - set(keys))
    if unknown:
        raise ConfigError(
            f"encoders name {unknown}, which the observation space does not have (its keys: "
            f"{sorted(keys)})"
        )

    def build() -> nn.Module:
        modules = {
            key: load_network(target, keys[key].space, what=f"encoders[{key!r}]")
            for key, target in encoders.items()
        }
        return CombinedExtractor(coder, modules)

    return build


def is_image_space(space: Any) -> bool:
    """A 3-d ``uint8`` Box: frames, channels first or last."""
    import gymnasium as gym

    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def orthogonal_(layer: nn.Module, gain: float) -> None:
    """Orthogonal weights scaled by ``gain`` and zero biases, for linear and conv layers."""
    if isinstance(layer, (nn.Linear, nn.Conv2d)):
        nn.init.orthogonal_(layer.weight, gain)
        if layer.bias is not None:
            nn.init.zeros_(layer.bias)


def load_network(target: str, *args: Any, what: str = "network", **kwargs: Any) -> nn.Module:
    """Import ``"package.module:factory"`` and return ``factory(*args, **kwargs)``.

    The result must be an ``nn.Module``; anything else, or a target that does not import, is
    a :class:`~rlx.errors.ConfigError` that names ``what`` (the hyperparameter).
    """
    factory = load_setting(target, what, "package.module:factory")
    try:
        network = factory(*args, **kwargs)
    except TypeError as exc:
        raise ConfigError(f"{what} {target!r} rejected its arguments {kwargs}: {exc}") from exc
    if not isinstance(network, nn.Module):
        raise ConfigError(
            f"{what} {target!r} must return a torch.nn.Module, got {type(network).__name__}"
        )
    return network
