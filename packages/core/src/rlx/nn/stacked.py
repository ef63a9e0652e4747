"""K copies of one network trained as one computation: parameters stacked on a seed axis.

K agents of one configuration (the seeds of a group) have networks of the same shapes. Their
flat parameter vectors (:func:`rlx.nn.optim.flatten_parameters`) become the rows of one
``(K, P)`` tensor (:func:`stack_rows`): each agent's vector and layers turn into views of its
row, so acting, evaluating and saving an agent work as before, while a learner runs the K
networks together:

- a layer of all K is one batched matrix product (:func:`mlp`, ``torch.baddbmm``);
- one backward pass of the sum of the K per-seed losses gives each row its own gradient (no
  row's loss depends on another row, so nothing mixes);
- one optimiser step moves every row (:class:`Adam`, :class:`RMSprop`: the flat optimisers'
  update rules, with a step count and a learning rate per row, and a mask of the rows that
  step, since one seed may have a minibatch fewer than another, or have stopped).

:func:`apply_gradients` is the batched :func:`rlx.nn.optim.apply_gradients`: backward, a
gradient-norm clip per row, the step. Compute per operation is spent once for all K, which
is what makes many small networks fast on a CPU.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from rlx.config import to_dict
from rlx.errors import NotBatchable, TrainingError
from rlx.nn.optim import CPU_FUSED_ADAM, FlatOptimizer, root, subnormals_flushed
from rlx.protocols import Iteration


def stack_rows(vectors: Sequence[nn.Parameter], grad: bool = True) -> nn.Parameter:
    """One ``(K, P)`` parameter whose row ``k`` is ``vectors[k]``, with its gradient (none
    and no ``requires_grad`` with ``grad=False``: target networks).

    Each vector (made by :func:`rlx.nn.optim.flatten_parameters`) and the layers it holds
    become views of their row, their gradients views of the row's gradient: what the stack's
    optimiser does, each agent sees.
    """
    stack = torch.stack([vector.detach() for vector in vectors])
    gradient = torch.zeros_like(stack) if grad else None
    for k, vector in enumerate(vectors):
        views, offset = [], 0
        for parameter, _ in getattr(vector, "flat_views", ()):
            n = parameter.numel()
            parameter.data = stack[k, offset : offset + n].view_as(parameter)
            if gradient is not None:
                parameter.grad = gradient[k, offset : offset + n].view_as(parameter)
                views.append((parameter, parameter.grad.data_ptr()))
            offset += n
        vector.data = stack[k]
        if gradient is not None:
            vector.grad = gradient[k]
            vector.flat_views = tuple(views)  # type: ignore[attr-defined]
    result = nn.Parameter(stack, requires_grad=grad)
    result.grad = gradient
    return result


def row_offset(vector: torch.Tensor, parameter: torch.Tensor) -> int:
    """Where ``parameter`` (one of the layers ``vector`` holds) starts inside the vector."""
    return (parameter.data_ptr() - vector.data_ptr()) // parameter.element_size()


def stacked_view(stack: torch.Tensor, offset: int, shape: Sequence[int]) -> torch.Tensor:
    """``(K, *shape)``: the parameter at ``offset`` of every row of ``stack`` (a view)."""
    n = int(np.prod(shape)) if len(shape) else 1
    return stack[:, offset : offset + n].view(stack.shape[0], *shape)


def stacked_parameter(stack: torch.Tensor, offset: int, shape: Sequence[int]) -> nn.Parameter:
    """A leaf ``(K, *shape)`` on the memory of ``stack`` at ``offset`` of every row, whose
    gradient is the same view of the stack's gradient: backward accumulates into the stack's
    gradient in place, where a view taken in the forward pass would cost a stack-sized
    tensor per layer in the backward pass (:func:`rlx.nn.optim.flatten_parameters` does
    the same for one vector)."""
    if stack.grad is None:
        raise ValueError("the stack has no gradient tensor: make it with stack_rows")
    parameter = nn.Parameter(stacked_view(stack.detach(), offset, shape))
    parameter.grad = stacked_view(stack.grad, offset, shape)
    return parameter


#: Whether a :class:`StackedModule`'s forward pass is being mapped over the rows now.
_MAPPING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "rlx_stacked_mapping", default=False
)


def mapping() -> bool:
    """Whether the code running is a :class:`StackedModule`'s forward pass, mapped over the
    rows by ``torch.func.vmap``: a layer whose autograd Function has a twin for vmap
    (:class:`rlx.nn.renorm.MappedRenormTraining`) takes it there, and its faster one
    elsewhere."""
    return _MAPPING.get()


class StackedModule:
    """``module`` for every row at once: its parameters become ``(K, *shape)`` views of the
    stack's rows (leaves with gradients when the stack has them) and its forward pass is
    mapped over them and over the inputs' leading axis (``torch.func.vmap`` of
    ``functional_call``), so any network batches, the user's included, without code of its
    own. ``module`` is one of the K (its buffers are shared, unless :meth:`stack_buffers`;
    its training mode is every row's)."""

    def __init__(self, module: nn.Module, stack: torch.Tensor, vector: torch.Tensor) -> None:
        self.module = module
        make = stacked_parameter if stack.grad is not None else stacked_view
        self.parameters = {
            name: make(stack, row_offset(vector, parameter), tuple(parameter.shape))
            for name, parameter in module.named_parameters()
        }
        #: The names of the module's buffers that are stacked (:meth:`stack_buffers`).
        self.buffer_names: list[str] = []

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        def one(parameters: dict[str, torch.Tensor], *args: Any) -> Any:
            return torch.func.functional_call(self.module, parameters, args, kwargs)

        token = _MAPPING.set(True)
        try:
            return torch.func.vmap(one)(self.parameters, *inputs)
        finally:
            _MAPPING.reset(token)

    def stack_buffers(self, modules: Sequence[nn.Module]) -> None:
        """Map the K ``modules``' own buffers (NoisyNet's noise, batch normalisation's running
        statistics) over the seed axis with the parameters, instead of sharing the first's:
        each buffer becomes a view of its row of a stack, so what a seed draws into its own
        network's buffers, and acts with, is what its row learns with."""
        for name, _ in modules[0].named_buffers():
            buffers = [module.get_buffer(name) for module in modules]
            stack = torch.stack([buffer.detach() for buffer in buffers])
            for k, buffer in enumerate(buffers):
                buffer.data = stack[k]
            self.parameters[name] = stack  # functional_call takes buffers with the parameters
            self.buffer_names.append(name)

    def train(self, mode: bool = True) -> StackedModule:
        """Training mode for every row (the forward pass runs the first agent's module)."""
        self.module.train(mode)
        return self

    def eval(self) -> StackedModule:
        """Evaluation mode for every row."""
        return self.train(False)

    @contextlib.contextmanager
    def buffers_kept(self, rows: np.ndarray | None) -> Iterator[None]:
        """Within the block, what a pass writes into the stacked buffers (CrossQ's running
        statistics) stays in the rows where ``rows`` ``(K,)`` is true only: the others get
        their buffers back after it, as their single runs, which take no such pass, have
        them. ``None``: every row keeps what it writes."""
        if rows is None or rows.all() or not self.buffer_names:
            yield
            return
        saved = {name: self.parameters[name].clone() for name in self.buffer_names}
        try:
            yield
        finally:
            keep = torch.from_numpy(np.asarray(rows, dtype=bool))
            for name, before in saved.items():
                stack = self.parameters[name]
                stack.copy_(torch.where(keep.view(-1, *[1] * (stack.ndim - 1)), stack, before))


def mlp(
    x: torch.Tensor,
    layers: Sequence[tuple[torch.Tensor, torch.Tensor]],
    activation: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """K multilayer perceptrons at once: ``x`` ``(K, B, in)`` through ``layers``, each a
    weight ``(K, in, out)`` and a bias ``(K, 1, out)``, with ``activation`` between layers
    (not after the last). Each layer of all K is one ``torch.baddbmm``. The stacked rows of
    ``nn.Linear`` layers (``(K, out, in)`` weights) enter as ``weight.transpose(1, 2)`` and
    ``bias.unsqueeze(1)``; the critic ensemble's and the ES populations' layers as they are."""
    last = len(layers) - 1
    for index, (weight, bias) in enumerate(layers):
        x = torch.baddbmm(bias, x, weight)
        if index < last:
            x = activation(x)
    return x


def numpy_linear_stack(
    layers: Sequence[tuple[np.ndarray, np.ndarray]], activation: Callable[[np.ndarray], Any]
) -> Callable[[np.ndarray], np.ndarray]:
    """A NumPy forward pass of K networks, ``(K, n, in) -> (K, n, out)``, through ``layers``
    (weights ``(K, out, in)`` and biases ``(K, out)``, views of the stacks, so every update
    is seen), the activation after all but the last: the rollouts' twin of
    :func:`rlx.nn.layers.numpy_linear_stack`."""
    weights = [(w.transpose(0, 2, 1), b[:, None, :]) for w, b in layers]

    def forward(x: np.ndarray) -> np.ndarray:
        for w, b in weights[:-1]:
            x = activation(np.matmul(x, w) + b)
        w, b = weights[-1]
        return np.matmul(x, w) + b

    return forward


class _Stacked(FlatOptimizer):
    """What the stacked optimisers share: one step count per row, a learning rate that is a
    number or one per row (a ``(K, 1)`` tensor, e.g. K linear schedules at different step
    counts), and the masked update of some rows only."""

    def _lr(self) -> Any:
        lr = self.param_groups[0]["lr"]
        return lr if isinstance(lr, float | int) else torch.as_tensor(lr, dtype=torch.float32)

    @staticmethod
    def _count(state: dict[str, torch.Tensor], rows: torch.Tensor | None) -> torch.Tensor:
        """Advance the step count of the rows that step; returns the counts ``(K, 1)``."""
        step = state["step"]
        step += 1.0 if rows is None else rows.to(step.dtype)
        return step[:, None]

    @staticmethod
    def _write(target: torch.Tensor, new: torch.Tensor, rows: torch.Tensor | None) -> None:
        target.copy_(new if rows is None else torch.where(rows[:, None], new, target))

    def share_state(self, members: Sequence[FlatOptimizer], index: dict[int, int]) -> None:
        """Take the state of ``members`` (the K agents' own optimisers, same class), row by
        row, then make theirs views of the stack's: their checkpoints see every step.
        ``index[id(vector)]`` is the position in this optimiser of the stack holding that
        member's parameter."""
        stacks = self.param_groups[0]["params"]
        for k, member in enumerate(members):
            for parameter in member.param_groups[0]["params"]:
                stack = stacks[index[id(parameter)]]
                state = self._state(stack)
                for name, value in member.state.get(parameter, {}).items():
                    state[name][k] = value
                member.state[parameter] = {name: value[k] for name, value in state.items()}

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def step(self, rows: torch.Tensor | None = None) -> None:
        raise NotImplementedError


class Adam(_Stacked):
    """Adam (Kingma & Ba 2015, Algorithm 1) on ``(K, P)`` stacks: row ``k`` follows the
    update of :class:`rlx.nn.optim.Adam` on agent ``k``'s vector."""

    def __init__(
        self,
        params: Sequence[torch.Tensor],
        lr: Any = 3e-4,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-5,
    ) -> None:
        super().__init__(params, lr=lr, betas=tuple(betas), eps=eps)
        #: Per stack: its tensors and their rows (views), for :meth:`_fused_rows`.
        self._rows: dict[torch.Tensor, tuple[tuple, list[tuple[torch.Tensor, ...]]]] = {}

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        state = self.state.get(p)
        if state is None:
            state = self.state[p] = {
                "step": torch.zeros(p.shape[0], dtype=torch.float64),
                "exp_avg": torch.zeros_like(p),
                "exp_avg_sq": torch.zeros_like(p),
            }
        return state

    @torch.no_grad()
    def step(self, rows: torch.Tensor | None = None) -> None:
        """One step of every row, or of the rows where ``rows`` (``(K,)`` bool) is true.

        A row's arithmetic is the same whichever other rows step, and at whatever counts:
        an update that depended on them (one path when every row steps at one count, another
        otherwise) would round a seed differently once the others stop, or when a group's
        seeds resume at different counts, and the seed would leave its uninterrupted run.
        """
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            state = self._state(p)
            if p.device.type == "cpu" and CPU_FUSED_ADAM:
                self._fused_rows(p, state, rows)
                continue
            lr = self._lr()
            t = self._count(state, rows)
            m, v, g = state["exp_avg"], state["exp_avg_sq"], p.grad
            with subnormals_flushed():  # as the flat Adam's step
                new_m = torch.lerp(m, g, 1.0 - beta1)
                new_v = torch.addcmul(v * beta2, g, g, value=1.0 - beta2)
                denominator = root(new_v / (1.0 - beta2**t).float()).add_(group["eps"])
                step_size = lr / (1.0 - beta1**t).float()
                update = new_m.div(denominator).mul_(step_size)
                self._write(m, new_m, rows)
                self._write(v, new_v, rows)
                self._write(p, p - update, rows)

    def _fused_rows(self, p: torch.Tensor, state: dict[str, torch.Tensor], rows: Any) -> None:
        """The rows that step, each one tensor of torch's fused CPU Adam (the kernel of
        :func:`rlx.nn.optim.adam_update_`), so each is updated as the flat Adam updates an
        agent's vector, at its own count and rate; one call for the rows of one rate."""
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        grad = p.grad
        assert grad is not None
        whole = (p, grad, state["exp_avg"], state["exp_avg_sq"], state["step"])
        cached = self._rows.get(p)
        if cached is None or any(a is not b for a, b in zip(cached[0], whole, strict=True)):
            cached = self._rows[p] = (whole, [t.unbind() for t in whole])
        views = cached[1]
        self._count(state, rows)
        seeds, lr = p.shape[0], group["lr"]
        rates = (
            [float(lr)] * seeds
            if isinstance(lr, float | int)  # else one per row, e.g. K linear schedules
            else np.broadcast_to(np.asarray(lr, dtype=np.float64).reshape(-1), seeds).tolist()
        )
        chosen = range(seeds) if rows is None else torch.nonzero(rows).flatten().tolist()
        by_rate: dict[float, list[int]] = {}
        for k in chosen:
            by_rate.setdefault(rates[k], []).append(k)
        with subnormals_flushed():
            for rate, ks in by_rate.items():
                every = len(ks) == seeds  # (the rows' views as they are)
                params, grads, ms, vs, counts = (
                    view if every else [view[k] for k in ks] for view in views
                )
                torch._fused_adam_(
                    params, grads, ms, vs, [], counts, lr=rate, beta1=beta1, beta2=beta2,
                    weight_decay=0.0, eps=group["eps"], amsgrad=False, maximize=False,
                )  # fmt: skip


class RMSprop(_Stacked):
    """RMSprop (Tieleman & Hinton 2012) on ``(K, P)`` stacks, row ``k`` following
    :class:`rlx.nn.optim.RMSprop` on agent ``k``'s vector."""

    def __init__(
        self, params: Sequence[torch.Tensor], lr: Any = 7e-4, alpha: float = 0.99, eps: float = 1e-5
    ) -> None:
        super().__init__(params, lr=lr, alpha=alpha, eps=eps)

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        state = self.state.get(p)
        if state is None:
            state = self.state[p] = {
                "step": torch.zeros(p.shape[0], dtype=torch.float64),
                "square_avg": torch.zeros_like(p),
            }
        return state

    @torch.no_grad()
    def step(self, rows: torch.Tensor | None = None) -> None:
        """One step of every row, or of the rows where ``rows`` is true."""
        group = self.param_groups[0]
        lr = self._lr()
        for p in group["params"]:
            state = self._state(p)
            self._count(state, rows)
            v, g = state["square_avg"], p.grad
            new_v = torch.addcmul(v * group["alpha"], g, g, value=1.0 - group["alpha"])
            update = g.div(root(new_v).add_(group["eps"])).mul_(lr)
            self._write(v, new_v, rows)
            self._write(p, p - update, rows)


#: The stacked twin of each flat optimiser class.
STACKED: dict[str, type[_Stacked]] = {"Adam": Adam, "RMSprop": RMSprop}


def stack_optimizer(members: Sequence[Any], stacks: dict[int, torch.Tensor]) -> _Stacked:
    """The stacked optimiser of K agents' flat optimisers (``members``, one class, one
    parameter list each): its parameters are the stacks (``stacks[id(vector)]`` holds a
    member's ``vector``), its settings the first member's, its state theirs."""
    first = members[0]
    cls = STACKED[type(first).__name__]
    params = [stacks[id(p)] for p in first.param_groups[0]["params"]]
    settings = {k: v for k, v in first.param_groups[0].items() if k != "params"}
    optimizer = cls(params, **settings)
    index = {}
    for member in members:
        for position, parameter in enumerate(member.param_groups[0]["params"]):
            index[id(parameter)] = position
    optimizer.share_state(members, index)
    return optimizer


def can_stack(optimizer: Any) -> bool:
    """Whether ``optimizer`` is a flat one with a stacked twin (torch's own are not)."""
    return type(optimizer).__name__ in STACKED and isinstance(optimizer, FlatOptimizer)


def apply_gradients(
    losses: torch.Tensor,
    optimizer: _Stacked,
    stacks: Sequence[torch.Tensor],
    max_grad_norm: float | None,
    rows: np.ndarray,
) -> torch.Tensor:
    """One gradient step of the rows in ``rows`` (``(K,)`` bool) on their losses ``(K,)``:
    backward of their sum, each row's gradient clipped to ``max_grad_norm`` on its own, the
    step. Returns each row's gradient norm before clipping (zeros when not clipping). The
    caller has left out the rows whose loss is not finite."""
    mask = torch.from_numpy(rows)
    optimizer.zero_grad()
    with warnings.catch_warnings():  # the stacked leaves' gradients are strided views, as meant
        warnings.filterwarnings("ignore", message="grad and param do not obey")
        torch.where(mask, losses, torch.zeros((), dtype=losses.dtype)).sum().backward()
    if max_grad_norm is None:
        norm = torch.zeros(len(rows))
    else:
        grads = [stack.grad for stack in stacks]
        norms = [torch.linalg.vector_norm(g, dim=1) for g in grads if g is not None]
        norm = norms[0] if len(norms) == 1 else torch.linalg.vector_norm(torch.stack(norms), dim=0)
        scale = (max_grad_norm / (norm + 1e-6)).clamp_(max=1.0)[:, None]
        for g in grads:
            if g is not None:
                g.mul_(scale)
    optimizer.step(None if rows.all() else mask)
    return norm


def row_value(value: Any, k: int, rows: int) -> float:
    """Row ``k``'s number of a learner's metric: one number per row, or one for all."""
    if isinstance(value, torch.Tensor):
        value = value.detach().reshape(-1).tolist()
    if isinstance(value, list | tuple | np.ndarray):
        flat = np.asarray(value, dtype=float).reshape(-1)
        return float(flat[k] if len(flat) == rows else flat[0])
    return float(value)


class SeedBatch:
    """What the families' seed batches share (:class:`rlx.protocols.SeedBatch`): K agents,
    the seeds still training (``active``), each agent's outcome of the current round, and
    the batched gradient step that fails a seed whose loss is not finite, alone.

    A family's batch computes a round in :meth:`round` for the active seeds and hands each
    its outcome with :meth:`outcome`; each agent's ``step`` returns :meth:`iteration`.
    """

    def __init__(self, agents: Sequence[Any]) -> None:
        self.agents = list(agents)
        self.index = {id(agent): k for k, agent in enumerate(self.agents)}
        self.active = np.ones(len(self.agents), dtype=bool)
        #: The seeds that learn in the current gradient step (None: every active one).
        self.rows: np.ndarray | None = None
        self.pending: dict[int, Any] = {}
        self.failures: dict[int, str] = {}
        for agent in self.agents:
            agent.batch = self

    def leave(self, agent: Any) -> None:
        """``agent`` stops training: later rounds leave it alone."""
        k = self.index[id(agent)]
        self.active[k] = False
        self.pending.pop(k, None)
        agent.batch = None

    def iteration(self, agent: Any) -> Iteration:
        """``agent``'s iteration of the current round (computing the round at its first
        call); raises the agent's own TrainingError when its loss stopped being finite."""
        k = self.index[id(agent)]
        if k not in self.pending:
            self.round([k for k in range(len(self.agents)) if self.active[k]])
        outcome = self.pending.pop(k)
        if isinstance(outcome, Exception):
            raise outcome
        return cast(Iteration, outcome)

    def round(self, seats: list[int]) -> None:
        """Compute one iteration of the seeds ``seats`` and give each its :meth:`outcome`."""
        raise NotImplementedError

    def outcome(
        self, k: int, steps: int, returns: list[float], lengths: list[int], metrics: Any
    ) -> None:
        """Seed ``k``'s iteration of this round (``metrics`` the learner's, one number per
        seed or one for all), or its TrainingError."""
        if k in self.failures:
            self.pending[k] = TrainingError(self.failures.pop(k))
            return
        values = {name: row_value(value, k, len(self.agents)) for name, value in metrics.items()}
        self.pending[k] = Iteration(steps, returns, lengths, values)

    def apply_gradients(
        self,
        losses: torch.Tensor,
        optimizer: Any,
        stacks: Sequence[torch.Tensor],
        max_grad_norm: float | None,
        advice: str,
        rows: np.ndarray | None = None,
    ) -> torch.Tensor:
        """One batched gradient step (:func:`apply_gradients`) of the active seeds in ``rows``
        (by default :attr:`rows`): a seed whose loss is not finite fails, with the message
        its single run gives (the agent's ``where_in_training()`` and ``advice``), and steps
        no more."""
        chosen = self.rows if rows is None else rows
        rows = self.active.copy() if chosen is None else chosen & self.active
        finite = torch.isfinite(losses.detach()).numpy()
        for k in np.flatnonzero(rows & ~finite):
            loss = float(losses[k].detach())
            self.failures[int(k)] = (
                f"{self.agents[k].where_in_training()}the loss became {loss}; the update was "
                f"not applied. {advice}"
            )
            self.active[k] = False
        rows = rows & finite
        if not rows.any():
            return torch.zeros(len(self.agents))
        return apply_gradients(losses, optimizer, stacks, max_grad_norm, rows)


def check_batchable(agents: Sequence[Any], batched: str) -> None:
    """What every family's seed batch needs of its K agents, else :class:`NotBatchable`:
    a class with a batched update (``batched_update``; ``batched`` names those that have
    one), one class and one settings for all, the CPU, no torch scheduler, and rlx's flat
    optimisers (which have stacked twins)."""
    if not agents:
        raise NotBatchable("no agents to batch")
    first = agents[0]
    if not getattr(type(first), "batched_update", False):
        raise NotBatchable(f"{type(first).__name__} has no batched update ({batched} have)")
    if any(type(agent) is not type(first) for agent in agents):
        raise NotBatchable("the agents are not all of one class")
    settings = to_dict(first.config)
    if any(to_dict(agent.config) != settings for agent in agents):
        raise NotBatchable("the seeds' settings differ")
    if first.device.type != "cpu":
        raise NotBatchable(f"seeds are batched on the CPU only (device {first.device})")
    if first.schedulers:
        raise NotBatchable("lr_scheduler is not batched (lr_schedule=linear is)")
    if not all(can_stack(optimizer) for optimizer in first.optimizers.values()):
        raise NotBatchable(
            f"optimizer {first.config.optimizer!r} is not batched (rlx's flat ones are)"
        )
