"""Batch renormalisation (Ioffe 2017) and an MLP normalised with it, for CrossQ's networks.

Ioffe (2017), "Batch Renormalization: Towards Reducing Minibatch Dependence in
Batch-Normalized Models", NeurIPS, Algorithm 1. In training, with the minibatch's mean
``mu_B`` and standard deviation ``sigma_B = sqrt(var_B + eps)`` and the running ones ``mu``
and ``sigma = sqrt(var + eps)``::

    r = stop_gradient(clip(sigma_B / sigma, 1 / r_max, r_max))
    d = stop_gradient(clip((mu_B - mu) / sigma, -d_max, d_max))
    x^ = (x - mu_B) / sigma_B * r + d,      y = scale * x^ + bias
    mu <- mu + momentum (mu_B - mu),        var <- var + momentum (var_B - var)

During the first ``warmup_steps`` training passes ``r = 1`` and ``d = 0``: plain batch
normalisation, while the running statistics settle. In evaluation ``x^ = (x - mu) / sigma``.
``var_B`` is the biased variance of the batch. The statistics may be kept per member of a
stacked ensemble (``members``): ``x`` is then ``(*members, batch, features)`` and each
member normalises its own rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from rlx.errors import ConfigError
from rlx.nn import stacked
from rlx.nn.layers import ACTIVATIONS


class BatchRenorm(nn.Module):
    """Batch renormalisation of ``features`` values over the batch axis (the one before the
    last), with running statistics and an affine map of its own per member of ``members``.

    The running mean and variance and the count of training passes are buffers, so a
    module's ``state_dict`` (and so a checkpoint) holds them with the parameters.
    """

    running_mean: torch.Tensor
    running_var: torch.Tensor
    steps: torch.Tensor

    def __init__(
        self,
        features: int,
        members: tuple[int, ...] = (),
        momentum: float = 0.01,
        eps: float = 1e-3,
        warmup_steps: int = 100_000,
        r_max: float = 3.0,
        d_max: float = 5.0,
    ) -> None:
        super().__init__()
        shape = (*members, 1, features)
        self.register_buffer("running_mean", torch.zeros(shape))
        self.register_buffer("running_var", torch.ones(shape))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.scale = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape))
        self.momentum, self.eps, self.warmup_steps = momentum, eps, warmup_steps
        self.r_max, self.d_max = r_max, d_max

    def forward(self, x: torch.Tensor, frozen: bool = False) -> torch.Tensor:
        """``x`` ``(*members, batch, features)`` normalised; in training mode the batch's
        statistics also move the running ones. ``frozen=True`` uses the affine map as
        constants (no gradient reaches ``scale`` and ``bias``)."""
        running_mean, running_var = self.running_mean, self.running_var
        scale: torch.Tensor = self.scale
        bias: torch.Tensor = self.bias
        if frozen:
            scale, bias = scale.detach(), bias.detach()
        if not self.training:
            factor = scale * (running_var + self.eps).rsqrt()
            return torch.addcmul(bias - running_mean * factor, x, factor)
        # The batch's statistics (their gradient is RenormTraining's). The variance is the
        # mean square less the squared mean: two reductions and one product over the batch,
        # where centring first takes two more full-size passes (torch.var_mean and
        # torch.linalg.vector_norm over this non-contiguous axis are slower still on the
        # CPU). Its rounding, about 1e-7 of the mean square, is far below ``eps``.
        mapped = stacked.mapping()
        with torch.no_grad():
            mean = x.mean(-2, keepdim=True)
            var = (x * x).mean(-2, keepdim=True).sub_(mean * mean).clamp(min=0.0)
            inverse_std = (var + self.eps).rsqrt()
            r: torch.Tensor | None = None
            d: torch.Tensor | None = None
            # In the warm-up r = 1 and d = 0: plain batch normalisation, which skips them.
            # On the CPU the count is read here (a seed batch's rows may differ: each row
            # selects its own there), elsewhere it stays on the device.
            renorm = self.steps > self.warmup_steps
            if mapped or x.device.type != "cpu" or bool(renorm):
                running_inverse_std = (running_var + self.eps).rsqrt()
                r = (running_inverse_std / inverse_std).clamp(1.0 / self.r_max, self.r_max)
                d = ((mean - running_mean) * running_inverse_std).clamp(-self.d_max, self.d_max)
                r = torch.where(renorm, r, torch.ones_like(r))
                d = torch.where(renorm, d, torch.zeros_like(d))
            running_mean.add_(mean - running_mean, alpha=self.momentum)
            running_var.add_(var - running_var, alpha=self.momentum)
            self.steps.add_(1)
        training = MappedRenormTraining if mapped else RenormTraining
        return training.apply(x, mean, inverse_std, r, d, scale, bias)

    def extra_repr(self) -> str:
        """The settings, in the module's printout."""
        return (
            f"features={int(self.running_mean.shape[-1])}, momentum={self.momentum}, "
            f"eps={self.eps}, warmup_steps={self.warmup_steps}"
        )


def _renorm_output(
    x: torch.Tensor,
    mean: torch.Tensor,
    inverse_std: torch.Tensor,
    r: torch.Tensor | None,
    d: torch.Tensor | None,
    scale: torch.Tensor,
    bias: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:class:`RenormTraining`'s output and ``factor = scale r / sigma_B`` (``r`` and ``d``
    None: 1 and 0, batch normalisation)."""
    factor = inverse_std * scale if r is None else inverse_std * r * scale
    shift = bias if d is None else torch.addcmul(bias, d, scale)
    return torch.addcmul(shift - mean * factor, x, factor), factor


def _renorm_gradients(
    ctx: Any, grad: torch.Tensor, shapes: tuple[torch.Size, torch.Size]
) -> tuple[torch.Tensor | None, ...]:
    """:class:`RenormTraining`'s gradients of ``x``, ``scale`` and ``bias`` (none for the
    statistics), from the tensors ``ctx`` saved."""
    x, mean, inverse_std, r, d, factor = ctx.saved_tensors
    n = x.shape[-2]
    sum_grad = grad.sum(-2, keepdim=True)
    sum_grad_centered = (grad * x).sum(-2, keepdim=True).sub_(mean * sum_grad)
    grad_x = grad_scale = grad_bias = None
    if ctx.needs_input_grad[0]:
        slope = factor * inverse_std.square() * sum_grad_centered / -n
        offset = (factor * sum_grad / -n).sub_(mean * slope)
        grad_x = torch.addcmul(offset, x, slope).addcmul_(grad, factor)
    if ctx.needs_input_grad[5]:
        grad_scale = inverse_std * sum_grad_centered
        if r is not None:
            grad_scale = grad_scale * r
        if d is not None:
            grad_scale = grad_scale.addcmul_(d, sum_grad)
        grad_scale = grad_scale.sum_to_size(shapes[0])
    if ctx.needs_input_grad[6]:
        grad_bias = sum_grad.sum_to_size(shapes[1])
    return grad_x, None, None, None, None, grad_scale, grad_bias


class RenormTraining(torch.autograd.Function):
    """A training pass of :class:`BatchRenorm` given the batch's statistics, with its
    gradient written out: ``y = x a + (scale d + bias - mu_B a)``, ``a = scale r / sigma_B``.

    With ``r`` and ``d`` constants, the gradient is batch normalisation's scaled by ``r``:
    ``dx = a (dy - mean(dy) - (x - mu_B) mean(dy (x - mu_B)) / sigma_B^2)``, ``d scale =
    sum(dy ((x - mu_B) r / sigma_B + d))`` and ``d bias = sum(dy)``, the sums and means over
    the batch axis, with ``sum(dy (x - mu_B)) = sum(dy x) - mu_B sum(dy)``: no centred copy
    of ``x`` is made or kept (``x`` itself is, which the activation before already holds).
    Two reductions and two fused passes over the batch, where autograd's graph through the
    statistics takes about ten (half of CrossQ's update on the CPU).

    Written with ``ctx`` in ``forward``: the form ``torch.func`` needs (``setup_context``)
    costs some 35 microseconds more per call, binding its arguments by signature.
    :class:`MappedRenormTraining` is the twin for ``torch.func.vmap``.
    """

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        mean: torch.Tensor,
        inverse_std: torch.Tensor,
        r: torch.Tensor | None,
        d: torch.Tensor | None,
        scale: torch.Tensor,
        bias: torch.Tensor,
    ) -> torch.Tensor:
        """``y`` from ``x`` and the batch's mean and inverse standard deviation (``r`` and
        ``d`` None in the warm-up)."""
        y, factor = _renorm_output(x, mean, inverse_std, r, d, scale, bias)
        ctx.save_for_backward(x, mean, inverse_std, r, d, factor)
        ctx.shapes = scale.shape, bias.shape
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """The gradients of ``x``, ``scale`` and ``bias``; none for the statistics."""
        return _renorm_gradients(ctx, grad, ctx.shapes)


class MappedRenormTraining(torch.autograd.Function):
    """:class:`RenormTraining` for ``torch.func.vmap`` (a seed batch's stacked networks,
    :class:`rlx.nn.stacked.StackedModule`): its vmap rule moves the mapped axis in front and
    runs :class:`RenormTraining` once over all the rows, since every statistic broadcasts
    over leading axes."""

    @staticmethod
    def forward(
        x: torch.Tensor,
        mean: torch.Tensor,
        inverse_std: torch.Tensor,
        r: torch.Tensor,
        d: torch.Tensor,
        scale: torch.Tensor,
        bias: torch.Tensor,
    ) -> torch.Tensor:
        """``y``, as :class:`RenormTraining`'s."""
        return _renorm_output(x, mean, inverse_std, r, d, scale, bias)[0]

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        """Saves what the backward pass reads."""
        x, mean, inverse_std, r, d, scale, bias = inputs
        ctx.save_for_backward(x, mean, inverse_std, r, d, inverse_std * r * scale)
        ctx.shapes = scale.shape, bias.shape

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """As :class:`RenormTraining`'s."""
        return _renorm_gradients(ctx, grad, ctx.shapes)

    @staticmethod
    def vmap(
        info: Any, in_dims: tuple[int | None, ...], *inputs: torch.Tensor
    ) -> tuple[torch.Tensor, int]:
        """One :class:`RenormTraining` pass over every row, the mapped axis in front."""
        leading = [
            t.movedim(dim, 0) if dim is not None else t.expand(info.batch_size, *t.shape)
            for t, dim in zip(inputs, in_dims, strict=True)
        ]
        return RenormTraining.apply(*leading), 0


class RenormMLP(nn.Module):
    """Hidden layers ``sizes[0] -> ... -> sizes[-1]``, each linear map preceded by a
    :class:`BatchRenorm` of its input and followed by the activation, and a last
    :class:`BatchRenorm` of the output: the layout of CrossQ's actor (Bhatt et al. 2024).

    ``(batch, sizes[0]) -> (batch, sizes[-1])``; ``renorm`` holds :class:`BatchRenorm`'s
    settings (``momentum``, ``eps``, ``warmup_steps``).
    """

    def __init__(self, sizes: Sequence[int], activation: str, **renorm: float) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ConfigError(
                f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}"
            )
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))
        self.norms = nn.ModuleList(BatchRenorm(size, **renorm) for size in sizes)  # type: ignore[arg-type]
        self.activation = ACTIVATIONS[activation]

    @property
    def features_dim(self) -> int:
        """The width of the output, ``sizes[-1]``."""
        return int(self.layers[-1].out_features)  # type: ignore[arg-type]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for norm, layer in zip(self.norms, self.layers, strict=False):
            x = self.activation(layer(norm(x)))
        return self.norms[-1](x)


#: The normalisation layers a user's network may hold for CrossQ (any of torch's batch norms).
NORMALIZATION_LAYERS: tuple[type[nn.Module], ...] = (BatchRenorm, nn.modules.batchnorm._BatchNorm)


def has_normalization(module: nn.Module) -> bool:
    """Whether ``module`` holds a batch normalisation layer (:data:`NORMALIZATION_LAYERS`)."""
    return any(isinstance(child, NORMALIZATION_LAYERS) for child in module.modules())
