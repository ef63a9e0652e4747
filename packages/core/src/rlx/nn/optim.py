"""Optimisers and gradient steps for flat parameter vectors, and torch optimisers by name.

A torch family keeps a network's weights in a few contiguous vectors
(:func:`flatten_parameters`): each layer's parameter stays a leaf tensor whose storage is a
slice of a vector, and whose gradient is a slice of the vector's gradient. An optimiser step
is then a few tensor operations per vector; torch's own optimisers spend most of a step on
bookkeeping that pays off only for many tensors. :class:`Adam` and :class:`RMSprop` keep the
part of :class:`torch.optim.Optimizer` that the agents use (``param_groups``, ``state_dict``
in torch's format, learning-rate changes), with the papers' update rules:

- Adam: Kingma & Ba (2015), "Adam: A Method for Stochastic Optimization", Algorithm 1;
- RMSprop: Tieleman & Hinton (2012), lecture 6.5, with torch's placement of ``eps``
  (outside the square root), as Stable-Baselines3's A2C uses it.

The gradients of flattened parameters must be zeroed in place, never set to None: a layer
whose gradient is None gets a fresh one at the next backward, outside the vector, and the
vector's optimiser would silently stop moving it. :func:`apply_gradients` zeroes in place
whatever the optimiser and checks the views before it steps.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from rlx.config import load_setting
from rlx.errors import ConfigError, TrainingError, did_you_mean


class FlatOptimizer:
    """What the agents use of :class:`torch.optim.Optimizer`, for a few flat tensors.

    ``param_groups`` (one group; its ``"lr"`` may be changed between steps), ``state``,
    ``zero_grad`` (always in place), and ``state_dict`` / ``load_state_dict`` in torch's
    format, so :func:`rlx.nn.state.optimizer_state` checkpoints it. Not subclassing torch's
    class saves its per-step hooks and bookkeeping, half the cost of a step at these sizes.
    """

    def __init__(self, params: Iterable[torch.Tensor], **defaults: Any) -> None:
        self.param_groups = [{"params": list(params), **defaults}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Zero the gradients in place (``set_to_none`` is ignored: see the module docstring)."""
        for p in self.param_groups[0]["params"]:
            if p.grad is not None:
                p.grad.zero_()

    def state_dict(self) -> dict[str, Any]:
        """The per-parameter state (keyed by the parameter's index) and the group's settings, in
        torch's layout."""
        params = self.param_groups[0]["params"]
        settings = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        return {
            "state": {i: dict(self.state[p]) for i, p in enumerate(params) if p in self.state},
            "param_groups": [{**settings, "params": list(range(len(params)))}],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take back what :meth:`state_dict` returned: the group's settings and each parameter's
        state, moved to the parameter's device (the step count stays on the CPU)."""
        params = self.param_groups[0]["params"]
        saved = state_dict["param_groups"][0]
        self.param_groups[0].update({k: v for k, v in saved.items() if k != "params"})
        if isinstance(self.param_groups[0].get("betas"), list):
            self.param_groups[0]["betas"] = tuple(self.param_groups[0]["betas"])
        # The step count stays on the CPU (reading it costs no device synchronisation).
        self.state = {
            params[int(i)]: {
                k: v.to(params[int(i)].device) if k != "step" else v.cpu()
                for k, v in values.items()
            }
            for i, values in state_dict["state"].items()
        }


class Adam(FlatOptimizer):
    """Adam with bias correction (Kingma & Ba 2015, Algorithm 1) on flat vectors."""

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 3e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-5,
    ) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps)

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        """The step count (on the CPU) and the two moments of ``p``, made at its first step."""
        state = self.state.get(p)
        if state is None:
            state = self.state[p] = {
                "step": torch.zeros((), dtype=torch.float64),
                "exp_avg": torch.zeros_like(p),
                "exp_avg_sq": torch.zeros_like(p),
            }
        return state

    @torch.no_grad()
    def step(self, finite: torch.Tensor | None = None) -> None:
        """One Adam step; with ``finite`` (a 0-d bool tensor on the parameters' device) the
        step leaves parameters and moments as they were where it is false, without reading it
        on the host (see :class:`FiniteGuard`)."""
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        if finite is not None:
            return self._masked_step(finite)
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self._state(p)
            t = float(state["step"]) + 1.0
            state["step"].fill_(t)
            adam_update_(p, state, t, group["lr"], beta1, beta2, group["eps"])

    def _masked_step(self, finite: torch.Tensor) -> None:
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self._state(p)
            t = float(state["step"]) + 1.0
            state["step"].fill_(t)
            m, v, g = state["exp_avg"], state["exp_avg_sq"], p.grad
            with subnormals_flushed():
                new_m = torch.lerp(m, g, 1.0 - beta1)
                new_v = torch.addcmul(v * beta2, g, g, value=1.0 - beta2)
                denominator = root(new_v / (1.0 - beta2**t)).add_(group["eps"])
                update = new_m.div(denominator).mul_(-group["lr"] / (1.0 - beta1**t))
                m.copy_(torch.where(finite, new_m, m))
                v.copy_(torch.where(finite, new_v, v))
                p.add_(torch.where(finite, update, torch.zeros((), device=p.device)))


#: Whether torch has its fused Adam kernel for CPU tensors (from 2.4).
CPU_FUSED_ADAM = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 4)

#: The smallest positive normal float32.
SMALLEST_NORMAL = float(np.finfo(np.float32).tiny)


def root(x: torch.Tensor) -> torch.Tensor:
    """``sqrt(x)`` of a non-negative tensor, with ``x`` first raised to the smallest
    normal float32: the square roots of Adam's and RMSprop's second moments.

    Weights whose gradient stays zero (dead ReLUs') have second moments of exactly zero, and on
    some x86 CPUs torch's vectorised square root of a zero is ten times slower than of any
    other number (200 us against 20 us for 72k floats): a tenth of qr-dqn's update. The
    raised zero's root, 1.1e-19, disappears in the ``+ eps`` that follows for any ``eps``
    above 2e-12, so the step is unchanged.
    """
    return x.clamp_min(SMALLEST_NORMAL).sqrt_()


@contextlib.contextmanager
def subnormals_flushed() -> Iterator[None]:
    """Flush subnormal floats to zero in this thread's CPU arithmetic within the block, then
    restore what the thread did before (the setting is the processor's, so it must not leak
    into the user's own computations).

    Adam's first moment of a weight whose gradient stays zero (a dead ReLU's) decays below
    1.2e-38, where x86 vector instructions run 15 to 40 times slower: after 10k updates half
    of qr-dqn's moments and a third of TQC's were subnormal, and the step several times slower.
    Flushed, they are zeros, far below any weight's rounding unit.
    """
    before = bool(np.float32(1e-39) * np.float32(1.0) == 0)
    if not before:
        torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if not before:
            torch.set_flush_denormal(False)


def adam_update_(
    p: torch.Tensor,
    state: dict[str, torch.Tensor],
    t: float,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
) -> None:
    """Adam's update of ``p`` at step ``t`` in place, with its moments in ``state``
    (``exp_avg``, ``exp_avg_sq``): the flat Adam's, and the stacked one's when every row
    steps at one count (:class:`rlx.nn.stacked.Adam`).

    On the CPU it is torch's fused Adam kernel (the one behind ``torch.optim.Adam(fused=
    True)``): one pass over the vectors instead of eight, a third of the time (48 against
    160 us for 72k parameters); the same arithmetic up to rounding.
    """
    m, v, g = state["exp_avg"], state["exp_avg_sq"], p.grad
    assert g is not None
    with subnormals_flushed():
        if p.device.type == "cpu" and CPU_FUSED_ADAM:
            step = torch.full((), t, dtype=torch.float64)
            torch._fused_adam_(
                [p], [g], [m], [v], [], [step], lr=lr, beta1=beta1, beta2=beta2,
                weight_decay=0.0, eps=eps, amsgrad=False, maximize=False,
            )  # fmt: skip
            return
        m.lerp_(g, 1.0 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        denominator = root(v / (1.0 - beta2**t)).add_(eps)
        p.addcdiv_(m, denominator, value=-lr / (1.0 - beta1**t))


class RMSprop(FlatOptimizer):
    """RMSprop (Tieleman & Hinton 2012), ``eps`` outside the square root as in torch."""

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float = 7e-4,
        alpha: float = 0.99,
        eps: float = 1e-5,
    ) -> None:
        super().__init__(params, lr=lr, alpha=alpha, eps=eps)

    @torch.no_grad()
    def step(self, finite: torch.Tensor | None = None) -> None:
        """One RMSprop step; ``finite`` as in :meth:`Adam.step`."""
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
            if finite is None:
                v.mul_(group["alpha"]).addcmul_(g, g, value=1.0 - group["alpha"])
                p.addcdiv_(g, root(v).add_(group["eps"]), value=-group["lr"])
                continue
            new_v = torch.addcmul(v * group["alpha"], g, g, value=1.0 - group["alpha"])
            update = g.div(root(new_v).add_(group["eps"])).mul_(-group["lr"])
            v.copy_(torch.where(finite, new_v, v))
            p.add_(torch.where(finite, update, torch.zeros((), device=p.device)))


def clip_grad_norm(
    parameters: Sequence[torch.Tensor], max_norm: float, as_tensor: bool = False
) -> Any:
    """Scale the gradients so that their global norm is at most ``max_norm``; return the norm
    (a float, or with ``as_tensor`` the 0-d tensor, which costs no device synchronisation)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    norms = [torch.linalg.vector_norm(g) for g in grads]
    norm = norms[0] if len(norms) == 1 else torch.linalg.vector_norm(torch.stack(norms))
    scale = (max_norm / (norm + 1e-6)).clamp_(max=1.0)
    for g in grads:
        g.mul_(scale)
    if as_tensor:
        return norm.detach()
    total = float(norm)
    return total if math.isfinite(total) else math.inf


def flatten_parameters(parameters: Sequence[nn.Parameter]) -> nn.Parameter:
    """Move ``parameters`` into one contiguous vector and return it as a parameter.

    Each parameter stays a leaf tensor, but its storage becomes a slice of the vector and its
    gradient a slice of the vector's gradient, which backward accumulates into in place; an
    optimiser of the vector then moves every layer. Call it after the module is on its
    device. :func:`check_flat_gradients` tells when a gradient was set to None since.
    """
    vector = torch.cat([p.detach().reshape(-1) for p in parameters])
    gradient = torch.zeros_like(vector)
    offset = 0
    views = []
    for parameter in parameters:
        n = parameter.numel()
        parameter.data = vector[offset : offset + n].view_as(parameter)
        parameter.grad = gradient[offset : offset + n].view_as(parameter)
        views.append((parameter, gradient.data_ptr() + offset * gradient.element_size()))
        offset += n
    flat = nn.Parameter(vector)
    flat.grad = gradient
    flat.flat_views = tuple(views)  # type: ignore[attr-defined]
    return flat


def check_flat_gradients(vectors: Iterable[torch.Tensor]) -> None:
    """Raise if a flattened vector lost its link to its layers' gradients.

    That happens when something set a gradient to None (``module.zero_grad()`` and torch's
    optimisers do by default): the next backward would write outside the vector and the step
    would silently leave those weights alone.
    """
    for vector in vectors:
        views = getattr(vector, "flat_views", None)
        if views is None:  # an ordinary parameter: nothing to check
            continue
        if vector.grad is None or any(
            p.grad is None or p.grad.data_ptr() != address for p, address in views
        ):
            raise RuntimeError(
                "a gradient of a flattened parameter vector was set to None (zero_grad() with "
                "set_to_none=True, the default of torch's optimisers and modules), so backward no "
                "longer reaches the flat gradient; zero it in place with zero_grad(set_to_none="
                "False), or step with rlx.nn.optim.apply_gradients, which does"
            )


class FiniteGuard:
    """Non-finite losses noted on the device and raised once per iteration.

    Reading a CUDA loss on the host to check it stalls the device at every minibatch. With a
    guard, :func:`apply_gradients` keeps the check on the device: the flat optimisers skip a
    step whose loss is not finite (parameters and moments stay as they were), and
    :meth:`check`, called once per learning iteration, raises the
    :class:`~rlx.errors.TrainingError` that the first such loss would have raised. On the
    CPU the check is immediate, as without a guard, unless ``always`` (for tests).
    """

    def __init__(self, always: bool = False) -> None:
        self.always = always
        self.pending: list[tuple[torch.Tensor, torch.Tensor, str, str]] = []

    def defers(self, loss: torch.Tensor, optimizer: Any) -> bool:
        """Whether the check of ``loss`` waits for :meth:`check`: for a flat optimiser, when the
        loss is not on the CPU (or ``always``)."""
        return isinstance(optimizer, FlatOptimizer) and (self.always or loss.device.type != "cpu")

    def note(self, loss: torch.Tensor, where: str, advice: str) -> torch.Tensor:
        """Note whether ``loss`` is finite, without reading it on the host, and return that 0-d bool
        tensor for the flat optimiser's step."""
        finite = torch.isfinite(loss.detach())
        self.pending.append((finite, loss.detach(), where, advice))
        return finite

    def check(self) -> None:
        """Raise for the first non-finite loss noted since the last check (one host read)."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        finite = torch.stack([flag for flag, *_ in pending]).cpu()
        if bool(finite.all()):
            return
        _, loss, where, advice = pending[int((~finite).nonzero()[0])]
        raise TrainingError(
            f"{where}the loss became {loss.item()}; that update and the later ones of its "
            f"iteration were not applied. {advice}"
        )


def apply_gradients(
    loss: torch.Tensor,
    optimizer: Any,
    parameters: Sequence[torch.Tensor],
    max_grad_norm: float | None,
    where: str = "",
    advice: str = "Lower the learning rate, normalise observations or rewards, or clip "
    "gradients harder",
    guard: FiniteGuard | None = None,
) -> Any:
    """One gradient step: refuse a non-finite loss, zero, backward, clip, step.

    Returns the gradient's global norm before clipping (0.0 when not clipping). A
    non-finite loss raises :class:`~rlx.errors.TrainingError` (its message starts with
    ``where`` and ends with ``advice``, which names the agent's own settings) before
    anything reaches the weights. With a ``guard`` on a CUDA device (and a flat optimiser)
    nothing is read on the host: the step is skipped on the device, the error waits for
    :meth:`FiniteGuard.check`, and the norm is returned as a 0-d tensor.
    """
    if guard is not None and guard.defers(loss, optimizer):
        finite = guard.note(loss, where, advice)
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        check_flat_gradients(parameters)
        norm: Any = 0.0
        if max_grad_norm is not None:
            norm = clip_grad_norm(list(parameters), max_grad_norm, as_tensor=True)
        optimizer.step(finite)
        return norm
    # One host read (torch.isfinite is four operations, a tenth of a small update's time).
    if not math.isfinite(float(loss.detach())):
        raise TrainingError(
            f"{where}the loss became {loss.item()}; the update was not applied. {advice}"
        )
    optimizer.zero_grad(set_to_none=False)
    loss.backward()
    check_flat_gradients(parameters)
    norm = 0.0
    if max_grad_norm is not None:
        norm = clip_grad_norm(parameters, max_grad_norm)
    optimizer.step()
    return norm


#: Optimisers by name, each with its defaults; any other ``torch.optim`` class name or a
#: ``"package.module:Class"`` target works too (see :func:`make_optimizer`).
OPTIMIZERS: dict[str, Callable[..., Any]] = {
    "adam": torch.optim.Adam,
    "adamw": lambda params, **kw: torch.optim.AdamW(params, **{"weight_decay": 0.0, **kw}),
    "sgd": lambda params, **kw: torch.optim.SGD(params, **{"momentum": 0.9, **kw}),
    "rmsprop": torch.optim.RMSprop,
    "adagrad": torch.optim.Adagrad,
}


def settings_optimizer(
    name: str,
    kwargs: dict[str, Any],
    parameters: Sequence[torch.Tensor],
    learning_rate: float,
    **flat_defaults: Any,
) -> Any:
    """The optimiser an agent's ``optimizer`` and ``optimizer_kwargs`` settings name: ``adam``
    is the flat :class:`Adam` (``flat_defaults``, the algorithm's own Adam settings, under
    ``kwargs``); anything else goes to :func:`make_optimizer`."""
    if name != "adam":
        return make_optimizer(name, parameters, learning_rate, **kwargs)
    try:
        return Adam(list(parameters), lr=learning_rate, **{**flat_defaults, **kwargs})
    except TypeError as exc:
        raise ConfigError(
            f"optimizer adam (betas, eps) rejected its arguments {kwargs}: {exc}"
        ) from None


def make_optimizer(
    name: str, parameters: Iterable[torch.Tensor], learning_rate: float, **kwargs: Any
) -> torch.optim.Optimizer:
    """An optimiser by name: one of :data:`OPTIMIZERS`, a ``torch.optim`` class, or
    ``"package.module:Class"``; ``kwargs`` go to its constructor.

    ``sgd`` has momentum 0.9 unless ``momentum`` is given.
    """
    build: Callable[..., torch.optim.Optimizer] = OPTIMIZERS.get(name) or _optimizer_class(name)
    try:
        return build(list(parameters), lr=learning_rate, **kwargs)
    except TypeError as exc:
        raise ConfigError(f"optimizer {name!r} rejected its arguments {kwargs}: {exc}") from exc


def _optimizer_class(name: str) -> type[torch.optim.Optimizer]:
    if ":" in name:
        cls: Any = load_setting(name, "optimizer")
        return cls
    cls = getattr(torch.optim, name, None)
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        known = sorted(
            {*OPTIMIZERS, *(n for n in dir(torch.optim) if n[0].isupper() and n != "Optimizer")}
        )
        raise ConfigError(
            f"unknown optimizer {name!r}.{did_you_mean(name, known)} Known: {', '.join(known)}"
        )
    return cls


def make_scheduler(name: str, optimizer: Any, **kwargs: Any) -> Any:
    """A ``torch.optim.lr_scheduler`` class by name (``StepLR``, ``CosineAnnealingLR``, ...)
    with its keyword arguments, on ``optimizer``; stepped once per update by its owner.

    The flat optimisers are not ``torch.optim.Optimizer`` subclasses (torch's per-step hooks
    would cost as much as the step), so a scheduler drives them through a stand-in optimiser
    that shares their parameter groups: what it writes to ``lr`` is what they read. Unknown
    names and arguments are one :class:`~rlx.errors.ConfigError`.
    """
    from torch.optim import lr_scheduler

    cls = getattr(lr_scheduler, name, None)
    base = getattr(lr_scheduler, "LRScheduler", None) or lr_scheduler._LRScheduler
    if not (isinstance(cls, type) and issubclass(cls, base)) or name.startswith("_"):
        known = sorted(
            n
            for n in dir(lr_scheduler)
            if n[0].isupper()
            and isinstance(getattr(lr_scheduler, n), type)
            and issubclass(getattr(lr_scheduler, n), base)
            and n not in ("LRScheduler", "_LRScheduler")
        )
        raise ConfigError(
            f"unknown lr_scheduler {name!r}.{did_you_mean(name, known)} Known: {', '.join(known)}"
        )
    if name == "ReduceLROnPlateau":
        raise ConfigError(
            "lr_scheduler ReduceLROnPlateau needs a metric at every step; rlx steps schedulers "
            "once per update without one: choose a schedule of the update count"
        )
    if isinstance(optimizer, FlatOptimizer):
        stand_in = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)
        stand_in.param_groups = optimizer.param_groups
        stand_in._opt_called = True  # type: ignore[attr-defined]  # the flat one steps
        optimizer = stand_in
    try:
        return cls(optimizer, **kwargs)
    except (TypeError, ValueError, KeyError) as exc:
        raise ConfigError(f"lr_scheduler {name} rejected its arguments {kwargs}: {exc}") from exc


class Schedulers:
    """One ``lr_scheduler`` (by name, with its keyword arguments) per named optimiser, or none
    when ``name`` is None; each is stepped after its optimiser's every step, and their states
    go in the resume state, so that every torch family wires schedules the same way."""

    def __init__(
        self, name: str | None, kwargs: dict[str, Any], optimizers: dict[str, Any]
    ) -> None:
        self.by_name = (
            {
                key: make_scheduler(name, optimizer, **kwargs)
                for key, optimizer in optimizers.items()
            }
            if name is not None
            else {}
        )
        self._of = {id(optimizers[key]): scheduler for key, scheduler in self.by_name.items()}

    def __bool__(self) -> bool:
        return bool(self.by_name)

    def __getitem__(self, key: str) -> Any:
        return self.by_name[key]

    def step(self, optimizers: Iterable[Any]) -> None:
        """Step the scheduler of each of ``optimizers`` that has one."""
        if not self._of:  # no schedule: nothing on the update path
            return
        for optimizer in optimizers:
            scheduler = self._of.get(id(optimizer))
            if scheduler is not None:
                scheduler.step()

    def state_dict(self) -> dict[str, Any]:
        """Each scheduler's state, by the name of its optimiser."""
        return {key: scheduler.state_dict() for key, scheduler in self.by_name.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take back what :meth:`state_dict` returned."""
        for key, scheduler in self.by_name.items():
            scheduler.load_state_dict(state[key])
