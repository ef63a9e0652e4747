"""Adam and RMSprop for the flat parameter vector of a policy, a few tensor operations a step.

The policies keep all their weights in one contiguous vector, and their gradients in
another (:meth:`rlx_onpolicy.policies.ActorCritic.flatten_parameters`), so an optimiser
step is five operations on one tensor. torch's own optimisers spend most of a step on
bookkeeping that pays off only for many tensors (about 75 microseconds against 40 here, even
fused, over thousands of steps a run). These are :class:`torch.optim.Optimizer`
subclasses, so ``param_groups``, ``state_dict`` and learning-rate changes work as usual;
the update rules are the papers':

- Adam: Kingma & Ba (2015), "Adam: A Method for Stochastic Optimization", Algorithm 1;
- RMSprop: Tieleman & Hinton (2012), lecture 6.5, with torch's placement of ``eps``
  (outside the square root), as Stable-Baselines3's A2C uses it.

``zero_grad`` zeroes the gradients in place (never sets them to None): the layers'
gradients are views into the flat gradient.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


class _FlatOptimizer(torch.optim.Optimizer):
    def zero_grad(self, set_to_none: bool = False) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.zero_()


class Adam(_FlatOptimizer):
    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 3e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-5,
    ) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})

    @torch.no_grad()
    def step(self, closure: None = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float64)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                t = float(state["step"])
                m, v, g = state["exp_avg"], state["exp_avg_sq"], p.grad
                m.lerp_(g, 1.0 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
                denominator = (v / (1.0 - beta2**t)).sqrt_().add_(group["eps"])
                p.addcdiv_(m, denominator, value=-group["lr"] / (1.0 - beta1**t))


class RMSprop(_FlatOptimizer):
    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 7e-4,
        alpha: float = 0.99,
        eps: float = 1e-5,
    ) -> None:
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps})

    @torch.no_grad()
    def step(self, closure: None = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float64)
                    state["square_avg"] = torch.zeros_like(p)
                state["step"] += 1
                v, g = state["square_avg"], p.grad
                v.mul_(group["alpha"]).addcmul_(g, g, value=1.0 - group["alpha"])
                p.addcdiv_(g, v.sqrt().add_(group["eps"]), value=-group["lr"])


def clip_grad_norm(parameters: list[torch.Tensor], max_norm: float) -> float:
    """Scale the gradients so that their global norm is at most ``max_norm``; return the norm."""
    grads = [p.grad for p in parameters if p.grad is not None]
    norms = [torch.linalg.vector_norm(g) for g in grads]
    norm = norms[0] if len(norms) == 1 else torch.linalg.vector_norm(torch.stack(norms))
    scale = (max_norm / (norm + 1e-6)).clamp_(max=1.0)
    for g in grads:
        g.mul_(scale)
    total = float(norm)
    return total if math.isfinite(total) else math.inf
