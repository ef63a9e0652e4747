"""rlx.nn.stacked: K networks in the rows of one tensor, each row trained as its own network.

Every check compares a row of the stack with the same network trained alone by the flat
optimisers of rlx.nn.optim, which the single runs use.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rlx.nn import optim, stacked
from rlx.nn.layers import MLP, tanh


def _networks(k: int) -> list[MLP]:
    nets = []
    for seed in range(k):
        torch.manual_seed(seed)
        nets.append(MLP([3, 8, 2], "tanh"))
    return nets


def _loss(net: MLP, x: torch.Tensor) -> torch.Tensor:
    return net(x).square().mean()


@pytest.mark.parametrize(
    ("flat", "stacked_cls", "kwargs"),
    [(optim.Adam, stacked.Adam, {"lr": 1e-2}), (optim.RMSprop, stacked.RMSprop, {"lr": 1e-2})],
)
def test_each_row_follows_its_own_network(flat, stacked_cls, kwargs) -> None:
    """Three networks stepped alone and the same three stacked end equal (to 1e-6 after
    20 steps), with per-row gradient clipping; the networks' own layers see the stack."""
    k, steps = 3, 20
    inputs = [torch.randn(16, 3, generator=torch.Generator().manual_seed(s)) for s in range(k)]
    alone = _networks(k)
    vectors = [optim.flatten_parameters(list(net.parameters())) for net in alone]
    optimizers = [flat([v], **kwargs) for v in vectors]
    for _ in range(steps):
        for net, vector, optimizer, x in zip(alone, vectors, optimizers, inputs, strict=True):
            optim.apply_gradients(_loss(net, x), optimizer, [vector], max_grad_norm=0.5)

    together = _networks(k)
    own = [optim.flatten_parameters(list(net.parameters())) for net in together]
    stack = stacked.stack_rows(own)
    members = [flat([v], **kwargs) for v in own]
    optimizer = stacked.stack_optimizer(members, {id(v): stack for v in own})
    for _ in range(steps):
        losses = torch.stack([_loss(net, x) for net, x in zip(together, inputs, strict=True)])
        stacked.apply_gradients(losses, optimizer, [stack], 0.5, np.ones(k, dtype=bool))
    for net_alone, net_together in zip(alone, together, strict=True):
        for a, b in zip(net_alone.parameters(), net_together.parameters(), strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    # each member's optimiser state is a view of its row of the stack's (what each seed's
    # checkpoint saves)
    for row, member in enumerate(members):
        state = member.state[own[row]]
        assert float(state["step"]) == steps
        for name, value in state.items():
            assert value.data_ptr() == optimizer.state[stack][name][row].data_ptr()


def test_rows_left_out_do_not_move() -> None:
    """A row outside ``rows`` keeps its weights, moments and step count; a row whose loss is
    not finite never touches the others."""
    nets = _networks(3)
    own = [optim.flatten_parameters(list(net.parameters())) for net in nets]
    stack = stacked.stack_rows(own)
    optimizer = stacked.stack_optimizer(
        [optim.Adam([v], lr=1e-2) for v in own], {id(v): stack for v in own}
    )
    x = torch.randn(8, 3)
    before = stack.detach().clone()
    losses = torch.stack([_loss(net, x) for net in nets])
    losses = losses * torch.tensor([1.0, float("nan"), 1.0])
    rows = np.array([True, False, True])
    stacked.apply_gradients(losses, optimizer, [stack], None, rows)
    assert torch.equal(stack[1], before[1])
    assert not torch.equal(stack[0], before[0]) and not torch.equal(stack[2], before[2])
    state = optimizer.state[stack]
    assert state["step"].tolist() == [1.0, 0.0, 1.0]
    assert torch.isfinite(stack).all()


def test_stacked_mlp_is_k_mlps() -> None:
    """rlx.nn.stacked.mlp of K stacked nn.Linear layers (weights transposed to inputs-first)
    against each of the K networks run alone."""
    torch.manual_seed(0)
    networks = [
        nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
        for _ in range(4)
    ]
    x = torch.randn(4, 7, 3)
    linears = [[m for m in net if isinstance(m, nn.Linear)] for net in networks]
    layers = [
        (
            torch.stack([net[i].weight for net in linears]).transpose(1, 2),
            torch.stack([net[i].bias for net in linears]).unsqueeze(1),
        )
        for i in range(3)
    ]
    expected = torch.stack([networks[k](x[k]) for k in range(4)])
    torch.testing.assert_close(stacked.mlp(x, layers, torch.relu), expected)


def test_tanh_through_the_sigmoid_is_tanh() -> None:
    """rlx.nn.layers.tanh (the sigmoid form on large CPU tensors) against torch.tanh: values
    within 2e-7 and the same gradient."""
    x = torch.linspace(-12, 12, 50_001, requires_grad=True)
    y = tanh(x)
    torch.testing.assert_close(y, torch.tanh(x), atol=2e-7, rtol=0)
    (gradient,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(gradient, 1 - torch.tanh(x).detach() ** 2, atol=1e-6, rtol=0)
