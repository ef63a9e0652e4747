"""rlx.nn: the NumPy twins of the forward pass and of the action distributions, the
flat-parameter invariant behind the optimisers, optimisers and networks by name, and
torch state to checkpoint arrays and back."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gymnasium as gym  # noqa: E402
from torch import nn  # noqa: E402

from rlx.errors import ConfigError  # noqa: E402
from rlx.nn.distributions import (  # noqa: E402
    Categorical,
    DiagonalGaussian,
    MultiCategorical,
    categorical_numpy,
    gumbel_max,
)
from rlx.nn.layers import (  # noqa: E402
    MLP,
    NoisyLinear,
    load_network,
    numpy_linear_stack,
    reset_noise,
)
from rlx.nn.optim import (  # noqa: E402
    Adam,
    RMSprop,
    apply_gradients,
    check_flat_gradients,
    clip_grad_norm,
    flatten_parameters,
    make_optimizer,
)
from rlx.nn.state import (  # noqa: E402
    load_modules_state,
    load_optimizer_state,
    load_optimizers_state,
    modules_state,
    optimizer_state,
    optimizers_state,
    set_torch_threads,
)

N_SAMPLES = 20_000


def mlp_with_head(activation: str, seed: int = 0) -> tuple[MLP, nn.Linear]:
    torch.manual_seed(seed)
    return MLP([5, 16, 16], activation), nn.Linear(16, 3)


def flat_net(seed: int = 0) -> tuple[nn.Sequential, nn.Parameter]:
    """A small network whose parameters live in one flat vector."""
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    return net, flatten_parameters(list(net.parameters()))


def loss_of(net: nn.Module, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(16, 4, generator=generator)
    target = torch.randn(16, 2, generator=generator)
    return (net(x) - target).square().mean()


# --- NumPy twins against torch ------------------------------------------------------------


@pytest.mark.parametrize("activation", ["tanh", "relu", "elu"])
def test_numpy_forward_pass_equals_the_torch_forward_pass(activation):
    mlp, head = mlp_with_head(activation)
    forward = numpy_linear_stack([*mlp.layers, head], activation)
    x = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    original = x.copy()
    with torch.no_grad():
        expected = head(mlp(torch.from_numpy(x))).numpy()
    out = forward(x)
    assert out.shape == (4, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(x, original)  # the in-place activations spare the input


def test_numpy_forward_pass_sees_in_place_weight_updates():
    mlp, head = mlp_with_head("tanh")
    forward = numpy_linear_stack([*mlp.layers, head], "tanh")
    with torch.no_grad():
        for layer in [*mlp.layers, head]:
            layer.weight.mul_(0.5).add_(0.1)
            layer.bias.add_(0.2)
    x = np.random.default_rng(1).normal(size=(3, 5)).astype(np.float32)
    with torch.no_grad():
        expected = head(mlp(torch.from_numpy(x))).numpy()
    np.testing.assert_allclose(forward(x), expected, rtol=1e-6, atol=1e-6)


def gaussian() -> DiagonalGaussian:
    return DiagonalGaussian(gym.spaces.Box(-2.0, 2.0, (3,), np.float32))


LOG_STD = np.array([0.3, -0.5, 0.1], np.float32)


def reference_log_prob(dist, params: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """The same log-probabilities from ``torch.distributions``."""
    if isinstance(dist, DiagonalGaussian):
        normal = torch.distributions.Normal(params, torch.from_numpy(LOG_STD).exp())
        return normal.log_prob(actions).sum(-1)
    nvec = dist.nvec if isinstance(dist, MultiCategorical) else [dist.param_dim]
    parts = torch.split(params, nvec, dim=-1)
    columns = actions.reshape(len(actions), -1)
    return sum(
        torch.distributions.Categorical(logits=logits).log_prob(columns[:, i])
        for i, logits in enumerate(parts)
    )


@pytest.mark.parametrize(
    "dist",
    [Categorical(5), MultiCategorical([3, 2, 4]), gaussian()],
    ids=["categorical", "multicategorical", "gaussian"],
)
def test_numpy_sampler_log_probs_equal_torch_log_probs(dist):
    rng = np.random.default_rng(0)
    params = (2.0 * rng.normal(size=(64, dist.param_dim))).astype(np.float32)
    log_std = LOG_STD if dist.has_log_std else None
    actions, log_prob = dist.sample_numpy(params, log_std, rng)
    assert log_prob.shape == (64,) and log_prob.dtype == np.float32

    torch_params = torch.from_numpy(params)
    torch_actions = torch.from_numpy(actions)
    torch_log_std = None if log_std is None else torch.from_numpy(log_std)
    ours, _ = dist.log_prob_entropy(torch_params, torch_log_std, torch_actions)
    np.testing.assert_allclose(log_prob, ours.numpy(), rtol=1e-5, atol=1e-5)
    reference = reference_log_prob(dist, torch_params, torch_actions)
    np.testing.assert_allclose(log_prob, reference.numpy(), rtol=1e-5, atol=1e-5)


def test_numpy_multicategorical_actions_lie_in_each_component_range():
    dist = MultiCategorical([3, 2, 4])
    params = np.zeros((1000, dist.param_dim), np.float32)
    actions, _ = dist.sample_numpy(params, None, np.random.default_rng(0))
    assert actions.shape == (1000, 3)
    for i, n in enumerate([3, 2, 4]):
        assert set(np.unique(actions[:, i])) == set(range(n))


def test_numpy_and_torch_categorical_samplers_draw_from_the_softmax():
    logits = np.array([0.5, -1.0, 1.5, 0.0], np.float32)
    probabilities = np.exp(logits) / np.exp(logits).sum()
    batch = np.broadcast_to(logits, (N_SAMPLES, 4)).copy()

    numpy_actions, _ = categorical_numpy(batch, np.random.default_rng(0))
    torch_actions, torch_log_prob = Categorical(4).sample(
        torch.from_numpy(batch), None, torch.Generator().manual_seed(0)
    )
    # 0.015 is over four standard errors of a frequency at 20,000 samples.
    for actions in (numpy_actions, torch_actions.numpy()):
        frequencies = np.bincount(actions, minlength=4) / N_SAMPLES
        np.testing.assert_allclose(frequencies, probabilities, rtol=0, atol=0.015)
    np.testing.assert_allclose(
        torch_log_prob.numpy(), np.log(probabilities)[torch_actions], rtol=1e-6
    )


def test_numpy_and_torch_gaussian_samplers_draw_from_the_gaussian():
    dist = gaussian()
    mean = np.array([0.5, -1.0, 0.0], np.float32)
    params = np.broadcast_to(mean, (N_SAMPLES, 3)).copy()
    numpy_actions, _ = dist.sample_numpy(params, LOG_STD, np.random.default_rng(0))
    torch_actions, _ = dist.sample(
        torch.from_numpy(params), torch.from_numpy(LOG_STD), torch.Generator().manual_seed(0)
    )
    # Standard errors at 20,000 samples: about 0.01 for the mean, 0.006 for the deviation.
    for actions in (numpy_actions, torch_actions.numpy()):
        assert actions.dtype == np.float32
        np.testing.assert_allclose(actions.mean(0), mean, rtol=0, atol=0.03)
        np.testing.assert_allclose(actions.std(0), np.exp(LOG_STD), rtol=0, atol=0.03)


def test_torch_sampler_log_probs_equal_log_prob_entropy():
    generator = torch.Generator().manual_seed(0)
    for dist in (Categorical(5), MultiCategorical([3, 2, 4]), gaussian()):
        params = torch.randn(32, dist.param_dim, generator=generator)
        log_std = torch.from_numpy(LOG_STD) if dist.has_log_std else None
        actions, log_prob = dist.sample(params, log_std, generator)
        again, _ = dist.log_prob_entropy(params, log_std, actions, entropy=False)
        torch.testing.assert_close(log_prob, again, rtol=1e-5, atol=1e-5)


def test_mode_is_the_most_likely_action():
    params = torch.tensor([[0.1, 2.0, -1.0, 3.0, 0.5, 0.0, 1.0, 0.2, 1.5]])
    assert Categorical(9).mode(params).tolist() == [3]
    assert MultiCategorical([3, 2, 4]).mode(params).tolist() == [[1, 0, 3]]
    torch.testing.assert_close(gaussian().mode(params[:, :3]), params[:, :3])


# --- The flat-parameter invariant -----------------------------------------------------------


def test_flattened_layers_are_views_of_the_vector_and_its_gradient():
    net, vector = flat_net()
    assert vector.numel() == sum(p.numel() for p in net.parameters())
    offset = 0
    for parameter in net.parameters():
        n = parameter.numel()
        assert parameter.is_leaf and parameter.requires_grad
        size = vector.element_size()
        assert parameter.data_ptr() == vector.data_ptr() + offset * size
        assert parameter.grad.data_ptr() == vector.grad.data_ptr() + offset * size
        torch.testing.assert_close(parameter.detach().reshape(-1), vector[offset : offset + n])
        offset += n
    assert not vector.grad.any()

    loss_of(net).backward()
    assert vector.grad.abs().sum() > 0  # backward wrote into the flat gradient
    expected = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
    torch.testing.assert_close(vector.grad, expected, rtol=0, atol=0)
    with torch.no_grad():
        vector.add_(1.0)  # and changing the vector changes the layers
    torch.testing.assert_close(
        torch.cat([p.detach().reshape(-1) for p in net.parameters()]), vector.detach()
    )


def test_check_flat_gradients_passes_on_a_freshly_flattened_vector():
    _, vector = flat_net()
    check_flat_gradients([vector])


def test_apply_gradients_with_a_standard_torch_optimiser_moves_the_layers_every_step():
    net, vector = flat_net()
    optimizer = torch.optim.Adam([vector], lr=1e-2)
    losses = []
    for _ in range(5):
        before = [p.detach().clone() for p in net.parameters()]
        loss = loss_of(net)
        losses.append(loss.item())
        assert apply_gradients(loss, optimizer, [vector], max_grad_norm=None) == 0.0
        for old, new in zip(before, net.parameters(), strict=True):
            assert not torch.equal(old, new.detach())
        check_flat_gradients([vector])
    assert losses[-1] < losses[0]


def test_module_zero_grad_set_to_none_is_caught_before_the_step():
    net, vector = flat_net()
    optimizer = torch.optim.Adam([vector], lr=1e-2)
    apply_gradients(loss_of(net), optimizer, [vector], max_grad_norm=None)
    net.zero_grad()  # set_to_none=True by default: the layers lose their gradient views
    before = vector.detach().clone()
    with pytest.raises(RuntimeError, match="set_to_none"):
        apply_gradients(loss_of(net), optimizer, [vector], max_grad_norm=None)
    torch.testing.assert_close(vector.detach(), before, rtol=0, atol=0)  # nothing stepped
    with pytest.raises(RuntimeError, match="set_to_none"):
        check_flat_gradients([vector])


def test_torch_optimiser_zero_grad_set_to_none_is_caught_before_the_step():
    net, vector = flat_net()
    optimizer = torch.optim.Adam([vector], lr=1e-2)
    apply_gradients(loss_of(net), optimizer, [vector], max_grad_norm=None)
    optimizer.zero_grad()  # set_to_none=True by default: the vector loses its gradient
    assert vector.grad is None
    with pytest.raises(RuntimeError, match="set_to_none"):
        apply_gradients(loss_of(net), optimizer, [vector], max_grad_norm=None)


def test_clip_grad_norm_returns_the_norm_before_clipping_and_clips_to_max_norm():
    generator = torch.Generator().manual_seed(0)
    parameters = [nn.Parameter(torch.zeros(n)) for n in (7, 3)]
    for p in parameters:
        p.grad = 10.0 * torch.randn(p.shape, generator=generator)
    norm = torch.linalg.vector_norm(torch.cat([p.grad for p in parameters])).item()
    assert clip_grad_norm(parameters, 1.0) == pytest.approx(norm, rel=1e-6)
    after = torch.linalg.vector_norm(torch.cat([p.grad for p in parameters])).item()
    assert after == pytest.approx(1.0, rel=1e-5)

    # A gradient already within the bound is left alone.
    single = [nn.Parameter(torch.zeros(2))]
    single[0].grad = torch.tensor([0.3, 0.4])
    assert clip_grad_norm(single, 1.0) == pytest.approx(0.5)
    torch.testing.assert_close(single[0].grad, torch.tensor([0.3, 0.4]))


def test_apply_gradients_returns_the_norm_before_clipping():
    net, vector = flat_net()
    optimizer = Adam([vector], lr=1e-3)
    loss = 1e3 * loss_of(net)
    norm = apply_gradients(loss, optimizer, [vector], max_grad_norm=0.5)
    assert norm > 0.5
    assert torch.linalg.vector_norm(vector.grad).item() == pytest.approx(0.5, rel=1e-5)


# --- Optimisers by name -----------------------------------------------------------------------


def params() -> list[nn.Parameter]:
    return [nn.Parameter(torch.zeros(3))]


def test_make_optimizer_by_short_name():
    adam = make_optimizer("adam", params(), 1e-3)
    assert type(adam) is torch.optim.Adam and adam.param_groups[0]["lr"] == 1e-3
    sgd = make_optimizer("sgd", params(), 0.1)
    assert type(sgd) is torch.optim.SGD and sgd.param_groups[0]["momentum"] == 0.9
    plain = make_optimizer("sgd", params(), 0.1, momentum=0.0)
    assert plain.param_groups[0]["momentum"] == 0.0


def test_make_optimizer_by_torch_class_name_or_import_target():
    nadam = make_optimizer("NAdam", params(), 2e-3, betas=(0.8, 0.9))
    assert type(nadam) is torch.optim.NAdam and nadam.param_groups[0]["betas"] == (0.8, 0.9)
    adagrad = make_optimizer("torch.optim:Adagrad", params(), 1e-2)
    assert type(adagrad) is torch.optim.Adagrad and adagrad.param_groups[0]["lr"] == 1e-2


def test_unknown_optimizer_suggests_the_closest_names():
    with pytest.raises(ConfigError, match=r"unknown optimizer 'adm'.*Did you mean: .*adam"):
        make_optimizer("adm", params(), 1e-3)
    with pytest.raises(ConfigError, match="cannot load optimizer"):
        make_optimizer("torch.optim:NoSuchOptimizer", params(), 1e-3)


@pytest.mark.parametrize("name", ["NAdam", "torch.optim:Adagrad"])
def test_bad_optimizer_keyword_is_a_config_error(name):
    with pytest.raises(ConfigError, match="rejected its arguments"):
        make_optimizer(name, params(), 1e-3, bogus=1)


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_bad_keyword_to_a_short_named_optimizer_is_a_config_error(name):
    with pytest.raises(ConfigError, match="rejected its arguments"):
        make_optimizer(name, params(), 1e-3, bogus=1)


# --- Networks by name -----------------------------------------------------------------------


@pytest.fixture
def nets_module(tmp_path, monkeypatch):
    (tmp_path / "rlx_test_nets.py").write_text(
        textwrap.dedent(
            """
            from torch import nn

            def body(n_in, n_out=4):
                return nn.Linear(n_in, n_out)

            def not_a_module(n_in):
                return {"n_in": n_in}
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "rlx_test_nets"


def test_load_network_calls_the_factory_with_the_arguments(nets_module):
    network = load_network(f"{nets_module}:body", 3, n_out=5)
    assert isinstance(network, nn.Linear)
    assert (network.in_features, network.out_features) == (3, 5)


@pytest.mark.parametrize("target", ["rlx_test_nets", ":body", "rlx_test_nets:"])
def test_load_network_needs_module_and_factory(nets_module, target):
    with pytest.raises(ConfigError, match=r"critic must be 'package\.module:factory'"):
        load_network(target, 3, what="critic")


@pytest.mark.parametrize("target", ["rlx_no_such_module_xyz:body", "rlx_test_nets:missing"])
def test_load_network_target_that_does_not_import(nets_module, target):
    with pytest.raises(ConfigError, match=f"cannot load network '{target}'"):
        load_network(target, 3)


def test_load_network_factory_must_return_a_module(nets_module):
    with pytest.raises(ConfigError, match=r"must return a torch\.nn\.Module, got dict"):
        load_network(f"{nets_module}:not_a_module", 3)


# --- Torch state to checkpoint arrays and back ----------------------------------------------


def build(kind: str, seed: int):
    net, vector = flat_net(seed)
    if kind == "flat":
        return net, vector, Adam([vector], lr=1e-2)
    return net, vector, torch.optim.Adam([vector], lr=1e-2, betas=(0.8, 0.95))


@pytest.mark.parametrize("kind", ["torch", "flat"])
def test_module_and_optimiser_state_round_trip(kind):
    net, vector, optimizer = build(kind, seed=0)
    for step in range(3):
        apply_gradients(loss_of(net, seed=step), optimizer, [vector], max_grad_norm=None)
    arrays = modules_state({"policy": net})
    optimizer_arrays, meta = optimizers_state({"policy": optimizer})
    assert all(isinstance(a, np.ndarray) for a in [*arrays.values(), *optimizer_arrays.values()])
    meta = json.loads(json.dumps(meta))  # checkpoints keep the settings as JSON

    fresh_net, fresh_vector, fresh_optimizer = build(kind, seed=1)
    assert not torch.equal(fresh_vector, vector)
    load_modules_state({"policy": fresh_net}, arrays)
    load_optimizers_state({"policy": fresh_optimizer}, optimizer_arrays, meta)
    torch.testing.assert_close(fresh_vector.detach(), vector.detach(), rtol=0, atol=0)
    check_flat_gradients([fresh_vector])  # loading copied into the views, keeping them

    for step in range(3, 5):
        apply_gradients(loss_of(net, seed=step), optimizer, [vector], max_grad_norm=None)
        apply_gradients(
            loss_of(fresh_net, seed=step), fresh_optimizer, [fresh_vector], max_grad_norm=None
        )
        torch.testing.assert_close(fresh_vector.detach(), vector.detach(), rtol=0, atol=0)
    assert fresh_optimizer.param_groups[0]["betas"] == optimizer.param_groups[0]["betas"]


def test_set_torch_threads():
    original = torch.get_num_threads()
    try:
        set_torch_threads(0)
        assert torch.get_num_threads() == original
        set_torch_threads(1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(original)


# -- moved from rlx-onpolicy with the code they test ---------------------------------------


def test_categorical_log_probs_and_entropy_match_torch():
    logits = torch.randn(6, 5)
    actions = torch.randint(5, (6,))
    log_prob, entropy = Categorical(5).log_prob_entropy(logits, None, actions)
    reference = torch.distributions.Categorical(logits=logits)
    torch.testing.assert_close(log_prob, reference.log_prob(actions))
    torch.testing.assert_close(entropy, reference.entropy())


def test_multicategorical_sums_its_components():
    logits = torch.randn(4, 3 + 2)
    actions = torch.stack([torch.randint(3, (4,)), torch.randint(2, (4,))], 1)
    log_prob, entropy = MultiCategorical([3, 2]).log_prob_entropy(logits, None, actions)
    first = torch.distributions.Categorical(logits=logits[:, :3])
    second = torch.distributions.Categorical(logits=logits[:, 3:])
    torch.testing.assert_close(
        log_prob, first.log_prob(actions[:, 0]) + second.log_prob(actions[:, 1])
    )
    torch.testing.assert_close(entropy, first.entropy() + second.entropy())


def test_gaussian_matches_torch_and_clips_only_what_the_env_sees():
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    dist = DiagonalGaussian(space)
    mean, log_std = torch.randn(5, 2), torch.tensor([0.3, -0.7])
    actions, log_prob = dist.sample(mean, log_std, torch.Generator().manual_seed(0))
    reference = torch.distributions.Normal(mean, log_std.exp())
    torch.testing.assert_close(log_prob, reference.log_prob(actions).sum(-1))
    again, entropy = dist.log_prob_entropy(mean, log_std, actions)
    torch.testing.assert_close(again, log_prob)
    torch.testing.assert_close(entropy, reference.entropy().sum(-1))
    clipped = dist.to_env((mean * 10).numpy())
    assert clipped.min() >= -1.0 and clipped.max() <= 1.0


def test_gumbel_max_samples_the_softmax():
    probabilities = torch.tensor([0.1, 0.2, 0.7])
    logits = probabilities.log().expand(40_000, 3)
    samples = gumbel_max(logits, torch.Generator().manual_seed(3))
    frequencies = torch.bincount(samples, minlength=3).float() / len(samples)
    torch.testing.assert_close(frequencies, probabilities, atol=0.01, rtol=0)


@pytest.mark.parametrize("name", ["adam", "rmsprop"])
def test_flat_optimisers_match_torch(name):
    generator = torch.Generator().manual_seed(0)
    ours = torch.randn(50, generator=generator)
    theirs = ours.clone().requires_grad_()
    if name == "adam":
        mine = Adam([ours], lr=1e-2, eps=1e-5)
        reference = torch.optim.Adam([theirs], lr=1e-2, eps=1e-5)
    else:
        mine = RMSprop([ours], lr=1e-2, alpha=0.99, eps=1e-5)
        reference = torch.optim.RMSprop([theirs], lr=1e-2, alpha=0.99, eps=1e-5)
    for step in range(6):
        gradient = torch.randn(50, generator=generator)
        gradient[:10] = 0.0  # weights whose second moments stay exactly zero (dead units)
        ours.grad = gradient.clone()
        theirs.grad = gradient.clone()
        mine.step()
        reference.step()
        if step == 2:  # a checkpoint round trip in the middle changes nothing
            arrays, groups = optimizer_state("opt", mine)
            mine.state.clear()
            load_optimizer_state("opt", mine, arrays, groups)
    torch.testing.assert_close(ours, theirs.detach(), rtol=1e-6, atol=1e-7)


# -- noisy layers ------------------------------------------------------------------------------


def test_a_noisy_layer_is_its_mean_in_eval_mode_and_the_factorised_sum_in_training():
    torch.manual_seed(0)
    layer = NoisyLinear(5, 3, sigma_0=0.5)
    # Initialisation (Fortunato et al. 2018, section 3.2): mu in +-1/sqrt(p), sigma_0/sqrt(p).
    assert layer.weight.abs().max() <= 1 / np.sqrt(5)
    torch.testing.assert_close(layer.weight_sigma, torch.full((3, 5), 0.5 / np.sqrt(5)))
    with torch.no_grad():  # sigmas that differ from entry to entry
        layer.weight_sigma.uniform_(0.1, 1.0)
        layer.bias_sigma.uniform_(0.1, 1.0)
    layer.reset_noise(torch.Generator().manual_seed(1))
    # f(eps) = sign(eps) sqrt(|eps|) of standard normal draws, in the generator's order.
    draws = torch.randn(8, generator=torch.Generator().manual_seed(1))
    f = draws.sign() * draws.abs().sqrt()
    torch.testing.assert_close(layer.input_noise, f[:5])
    torch.testing.assert_close(layer.output_noise, f[5:])
    x = torch.randn(4, 5)
    weight = layer.weight + layer.weight_sigma * torch.outer(f[5:], f[:5])
    bias = layer.bias + layer.bias_sigma * f[5:]
    torch.testing.assert_close(layer(x), x @ weight.T + bias)
    layer.eval()
    torch.testing.assert_close(layer(x), x @ layer.weight.T + layer.bias)


def test_noise_changes_only_when_redrawn_and_gradients_reach_the_sigmas():
    torch.manual_seed(0)
    mlp = MLP([4, 8, 8], "relu", noisy=True)
    reset_noise(mlp, torch.Generator().manual_seed(2))
    x = torch.randn(3, 4)
    first = mlp(x)
    torch.testing.assert_close(mlp(x), first)
    reset_noise(mlp, torch.Generator().manual_seed(3))
    assert not torch.allclose(mlp(x), first)
    mlp(x).sum().backward()
    assert all(layer.weight_sigma.grad.abs().sum() > 0 for layer in mlp.layers)
    # A NumPy forward pass over the layers is the mean network.
    mlp.eval()
    forward = numpy_linear_stack(mlp.layers, "relu")
    np.testing.assert_allclose(
        np.maximum(forward(x.numpy()), 0), mlp(x).detach().numpy(), rtol=1e-5, atol=1e-6
    )


# -- the finite guard: no host read per minibatch on an accelerator -----------------------------


def _flat_adam_problem():
    from rlx.nn.optim import Adam, flatten_parameters

    torch.manual_seed(0)
    net = nn.Linear(3, 2)
    vector = flatten_parameters(list(net.parameters()))
    return net, vector, Adam([vector], lr=0.1)


def test_a_guarded_step_equals_the_plain_one_while_the_loss_is_finite():
    from rlx.nn.optim import FiniteGuard, apply_gradients

    runs = []
    for guard in (None, FiniteGuard(always=True)):
        net, vector, adam = _flat_adam_problem()
        x = torch.randn(8, 3, generator=torch.Generator().manual_seed(1))
        norms = []
        for _ in range(5):
            loss = net(x).pow(2).mean()
            norms.append(float(apply_gradients(loss, adam, [vector], 0.5, guard=guard)))
        if guard is not None:
            guard.check()
        runs.append((vector.detach().clone(), norms))
    torch.testing.assert_close(runs[0][0], runs[1][0])
    assert runs[0][1] == pytest.approx(runs[1][1])


@pytest.mark.parametrize("optimizer", ["adam", "rmsprop"])
def test_a_non_finite_loss_is_skipped_on_the_device_and_raised_at_the_check(optimizer):
    from rlx.errors import TrainingError
    from rlx.nn.optim import FiniteGuard, RMSprop, apply_gradients

    net, vector, adam = _flat_adam_problem()
    opt = adam if optimizer == "adam" else RMSprop([vector], lr=0.1)
    guard = FiniteGuard(always=True)
    x = torch.randn(8, 3)
    apply_gradients(net(x).pow(2).mean(), opt, [vector], None, guard=guard)
    weights = vector.detach().clone()
    moments = {k: v.clone() for k, v in opt.state[vector].items() if k != "step"}
    bad = net(x).pow(2).mean() * float("nan")
    apply_gradients(
        bad, opt, [vector], 1.0, where="Agent, update 2: ", advice="Lower it.", guard=guard
    )
    # Nothing was read on the host and nothing reached the weights or the moments.
    torch.testing.assert_close(vector.detach(), weights)
    for key, value in moments.items():
        torch.testing.assert_close(opt.state[vector][key], value)
    with pytest.raises(TrainingError, match=r"Agent, update 2: the loss became nan; .*Lower it\."):
        guard.check()
    guard.check()  # checked once: nothing pending


def test_host_scalars_reads_tensors_once_and_keeps_the_order():
    from rlx.nn.state import host_scalars

    values = {"a": torch.tensor(1.5), "b": 2, "c": torch.tensor([3.0])[0]}
    assert host_scalars(values) == {"a": 1.5, "b": 2.0, "c": 3.0}
    assert list(host_scalars(values)) == ["a", "b", "c"]


def test_a_loaded_step_count_stays_on_the_cpu():
    from rlx.nn.optim import Adam

    _, vector, adam = _flat_adam_problem()
    vector.grad.fill_(1.0)
    adam.step()
    fresh = Adam([vector], lr=0.1)
    fresh.load_state_dict(adam.state_dict())
    assert fresh.state[vector]["step"].device.type == "cpu"


# -- virtual batch normalisation ---------------------------------------------------------------


def test_virtual_batch_norm_uses_the_reference_batch_and_the_example_itself():
    from rlx.nn.layers import VirtualBatchNorm

    torch.manual_seed(0)
    layer = VirtualBatchNorm(3)
    x = torch.randn(4, 3)
    torch.testing.assert_close(layer(x), x)  # no reference yet: the affine map alone
    reference = torch.randn(10, 3) * 2 + 1
    layer.set_reference(reference)
    with torch.no_grad():
        layer.gamma.fill_(2.0)
        layer.beta.fill_(0.5)
    out = layer(x)
    for i in range(len(x)):
        # By hand: the statistics of the reference batch with the example added.
        virtual = torch.cat([reference, x[i : i + 1]])
        mean, var = virtual.mean(0), virtual.var(0, unbiased=False)
        expected = 2.0 * (x[i] - mean) / torch.sqrt(var + 1e-5) + 0.5
        torch.testing.assert_close(out[i], expected, rtol=1e-4, atol=1e-5)
    # An example's output does not depend on the rest of its batch.
    torch.testing.assert_close(layer(x[:1]), out[:1])
    # Inside any network; the reference statistics are saved with it.
    net = nn.Sequential(nn.Linear(3, 5), VirtualBatchNorm(5), nn.Tanh(), nn.Linear(5, 2))
    net[1].set_reference(net[0](reference).detach())
    copy = nn.Sequential(nn.Linear(3, 5), VirtualBatchNorm(5), nn.Tanh(), nn.Linear(5, 2))
    copy.load_state_dict(net.state_dict())
    torch.testing.assert_close(copy(x), net(x))
    net(x).sum().backward()
    assert net[1].gamma.grad is not None and net[1].beta.grad is not None


# -- batch renormalisation's written-out gradient -----------------------------------------------


def renorm_by_autograd(norm, x: torch.Tensor) -> torch.Tensor:
    """A training pass of ``norm`` as Algorithm 1 of Ioffe (2017) reads, left to autograd: the
    batch's statistics in the graph, ``r`` and ``d`` constants. Moves no running statistic."""
    mean = x.mean(-2, keepdim=True)
    sigma = ((x - mean) ** 2).mean(-2, keepdim=True).add(norm.eps).sqrt()
    with torch.no_grad():
        running_sigma = (norm.running_var + norm.eps).sqrt()
        renorm = bool(norm.steps > norm.warmup_steps)
        r = (sigma / running_sigma).clamp(1 / norm.r_max, norm.r_max) if renorm else 1.0
        d = ((mean - norm.running_mean) / running_sigma).clamp(-norm.d_max, norm.d_max)
        d = d if renorm else 0.0
    return ((x - mean) / sigma * r + d) * norm.scale + norm.bias


@pytest.mark.parametrize("members", [(), (2,)])
@pytest.mark.parametrize("renormalising", [False, True])
def test_batch_renorm_training_gradient_is_autograds_through_the_definition(members, renormalising):
    from rlx.nn.renorm import BatchRenorm

    generator = torch.Generator().manual_seed(4)
    norm = BatchRenorm(5, members, warmup_steps=3).double()
    with torch.no_grad():
        norm.scale.uniform_(0.5, 2.0, generator=generator)
        norm.bias.uniform_(-1.0, 1.0, generator=generator)
        norm.running_mean.uniform_(-1.0, 1.0, generator=generator)
        norm.running_var.uniform_(0.2, 0.5, generator=generator)  # r clips at r_max for some
        norm.steps.fill_(5 if renormalising else 0)
    shape = (*members, 64, 5)
    x = (3.0 + 2.0 * torch.randn(shape, generator=generator, dtype=torch.float64)).requires_grad_()
    weights = torch.randn(shape, generator=generator, dtype=torch.float64)

    expected = renorm_by_autograd(norm, x)
    (expected * weights).sum().backward()
    wanted = [t.grad.clone() for t in (x, norm.scale, norm.bias)]
    for t in (x, norm.scale, norm.bias):
        t.grad = None
    got = norm(x)
    (got * weights).sum().backward()

    torch.testing.assert_close(got, expected)
    for tensor, gradient in zip((x, norm.scale, norm.bias), wanted, strict=True):
        torch.testing.assert_close(tensor.grad, gradient)
    # a frozen pass: the gradient reaches x only
    norm.scale.grad = norm.bias.grad = x.grad = None
    (norm(x, frozen=True) * weights).sum().backward()
    assert norm.scale.grad is None and norm.bias.grad is None and x.grad is not None


def test_square_roots_of_zero_moments_vanish_in_eps():
    # root() raises zeros to the smallest normal float before the square root (the root of a
    # zero is slow on some CPUs); after + eps the denominator is eps exactly.
    from rlx.nn.optim import root

    moments = torch.tensor([0.0, 1e-30, 4.0])
    assert root(moments).tolist()[2] == 2.0 and float(moments[0]) == 0.0  # not in place
    for eps in (1e-5, 1e-8, 1e-11):
        denominator = root(moments).add_(eps)
        assert float(denominator[0]) == np.float32(eps)


def test_adam_steps_flush_subnormal_moments_and_leave_the_thread_as_it_was():
    # Adam's first moments of weights whose gradient stays zero decay into the subnormal
    # range, where x86 vector arithmetic is many times slower; the flat Adam's step flushes
    # them to zero, and the processor's setting is back as it was after the step.
    from rlx.nn.optim import Adam

    torch.set_flush_denormal(False)
    vector = nn.Parameter(torch.ones(8))
    optimizer = Adam([vector], lr=1e-3)
    vector.grad = torch.ones(8)
    optimizer.step()
    moments = optimizer.state[vector]["exp_avg"]
    moments.fill_(1e-39)  # a moment that has decayed into the subnormal range
    assert float(moments[0]) > 0
    vector.grad = torch.zeros(8)
    optimizer.step()
    assert float(moments[0]) == 0.0  # 0.9 * 1e-39 would be a subnormal
    assert float(torch.full((1,), 1e-39)[0] * 1.0) > 0  # the thread keeps subnormals again
