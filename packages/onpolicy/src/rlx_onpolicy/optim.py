"""Adam and RMSprop for the flat parameter vector of a policy, a few tensor operations a step.

The policies keep their weights in two contiguous vectors (actor, critic), and their
gradients in two more (:meth:`~rlx_onpolicy.policies.ActorCritic.flatten_parameters`), so
an optimiser step is a few operations per vector. torch's own optimisers spend most of a step on
bookkeeping that pays off only for many tensors (120 microseconds a step against 80 here,
over thousands of steps a run). These keep the part of :class:`torch.optim.Optimizer` that
the agents use (``param_groups``, ``state_dict`` in torch's format, learning-rate
changes); the update rules are the papers':

- Adam: Kingma & Ba (2015), "Adam: A Method for Stochastic Optimization", Algorithm 1;
- RMSprop: Tieleman & Hinton (2012), lecture 6.5, with torch's placement of ``eps``
  (outside the square root), as Stable-Baselines3's A2C uses it.

``zero_grad`` zeroes the gradients in place (never sets them to None): the layers'
gradients are views into the flat gradient.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch


class FlatOptimizer:
    """What the agents use of :class:`torch.optim.Optimizer`, for a few flat tensors.

    ``param_groups`` (one group; its ``"lr"`` may be changed between steps), ``state``,
    ``zero_grad`` (in place), and ``state_dict`` / ``load_state_dict`` in torch's format, so
    :func:`rlx.nn.optimizer_state` checkpoints it. Not subclassing torch's class saves its
    per-step hooks and bookkeeping, half the cost of a step at these sizes.
    """

    def __init__(self, params: Iterable[torch.Tensor], **defaults: Any) -> None:
        self.param_groups = [{"params": list(params), **defaults}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = False) -> None:
        for p in self.param_groups[0]["params"]:
            if p.grad is not None:
                p.grad.zero_()

    def state_dict(self) -> dict[str, Any]:
        params = self.param_groups[0]["params"]
        settings = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        return {
            "state": {i: dict(self.state[p]) for i, p in enumerate(params) if p in self.state},
            "param_groups": [{**settings, "params": list(range(len(params)))}],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        params = self.param_groups[0]["params"]
        saved = state_dict["param_groups"][0]
        self.param_groups[0].update({k: v for k, v in saved.items() if k != "params"})
        if isinstance(self.param_groups[0].get("betas"), list):
            self.param_groups[0]["betas"] = tuple(self.param_groups[0]["betas"])
        self.state = {
            params[int(i)]: {k: v.to(params[int(i)].device) for k, v in values.items()}
            for i, values in state_dict["state"].items()
        }


class Adam(FlatOptimizer):
    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 3e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-5,
    ) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps)

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state.get(p)
            if state is None:
                state = self.state[p] = {
                    "step": torch.zeros((), dtype=torch.float64),
                    "exp_avg": torch.zeros_like(p),
                    "exp_avg_sq": torch.zeros_like(p),
                }
            t = float(state["step"]) + 1.0
            state["step"].fill_(t)
            m, v, g = state["exp_avg"], state["exp_avg_sq"], p.grad
            m.lerp_(g, 1.0 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
            denominator = (v / (1.0 - beta2**t)).sqrt_().add_(group["eps"])
            p.addcdiv_(m, denominator, value=-group["lr"] / (1.0 - beta1**t))


class RMSprop(FlatOptimizer):
    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 7e-4,
        alpha: float = 0.99,
        eps: float = 1e-5,
    ) -> None:
        super().__init__(params, lr=lr, alpha=alpha, eps=eps)

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state.get(p)
            if state is None:
                state = self.state[p] = {
                    "step": torch.zeros((), dtype=torch.float64),
                    "square_avg": torch.zeros_like(p),
                }
            state["step"].add_(1.0)
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
