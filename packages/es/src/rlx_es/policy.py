"""A population of MLP policies evaluated in one batched forward pass, and virtual batch norm.

Every member's weights live in one flat vector; a population is a matrix ``(m, n_params)``
that :class:`PopulationPolicy` turns into per-layer weight tensors ``(m, in, out)`` and runs
with :func:`rlx.nn.stacked.mlp` (``torch.baddbmm``): one call per layer for the whole
population. On a CUDA device the weights are uploaded once per generation and stay there;
each step uploads the observations once and downloads the actions once.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

import gymnasium
import numpy as np
import torch

from rlx.errors import ConfigError, SpaceError
from rlx.nn import stacked


class VirtualBatchNorm:
    """Observation normalisation with statistics of a fixed reference batch.

    Salimans et al. (2016, 2017): normalising by a batch chosen once at the start (instead of
    the current batch) keeps each member's output independent of the other members, which
    makes the population's evaluation reproducible and the perturbations comparable.
    ``mean`` and ``std`` have the observation's shape.
    """

    def __init__(self, reference: np.ndarray | None = None, dim: int = 0, eps: float = 1e-2):
        if reference is None:
            self.mean = np.zeros(dim, dtype=np.float32)
            self.std = np.ones(dim, dtype=np.float32)
        else:
            reference = np.asarray(reference, dtype=np.float64)
            self.mean = reference.mean(axis=0).astype(np.float32)
            self.std = np.maximum(reference.std(axis=0), eps).astype(np.float32)

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        return (observations - self.mean) / self.std


def collect_reference_batch(
    env_spec: Any, size: int, rng: np.random.Generator, max_steps: int = 1000
) -> np.ndarray:
    """``size`` observations ``(size, obs_dim)`` visited by uniformly random actions.

    The episodes and actions are seeded from ``rng``, so the batch is part of the run's seed.
    """
    env = gymnasium.make(env_spec)
    env.action_space.seed(int(rng.integers(2**31)))
    observations = []
    observation, _ = env.reset(seed=int(rng.integers(2**31)))
    for _ in range(min(size * 4, max_steps * 4)):
        observations.append(np.asarray(observation, dtype=np.float32).ravel())
        observation, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            observation, _ = env.reset(seed=int(rng.integers(2**31)))
    env.close()
    picked = rng.choice(len(observations), size=min(size, len(observations)), replace=False)
    return np.stack([observations[i] for i in np.sort(picked)])


class PopulationPolicy:
    """MLP policies ``obs -> hidden layers -> action`` for a whole population at once (tanh
    hidden layers, or another of :data:`rlx.nn.layers.ACTIVATIONS` by ``activation``).

    Discrete actions: the argmax of one output per action. Box actions: ``tanh`` outputs
    scaled to the action bounds (clipped when unbounded), or with ``squash=False`` the outputs
    themselves clipped to the bounds (ARS's linear policy ``a = M s``). ``bias=False`` leaves
    the searched biases out (every layer adds zero). Observations are flattened Box
    observations, normalised by ``normalizer`` when one is given. The forward pass runs on
    ``device``; observations come in and actions go out as NumPy arrays.
    """

    def __init__(
        self,
        observation_space: gymnasium.Space,
        action_space: gymnasium.Space,
        hidden_sizes: tuple[int, ...],
        normalizer: VirtualBatchNorm | None = None,
        device: torch.device | str = "cpu",
        bias: bool = True,
        squash: bool = True,
        activation: str = "tanh",
    ) -> None:
        from rlx.nn.layers import ACTIVATIONS

        self.device = torch.device(device)
        self.bias, self.squash = bias, squash
        self.activation = ACTIVATIONS[activation]
        if not isinstance(observation_space, gymnasium.spaces.Box):
            raise SpaceError(f"evolution strategies need Box observations, got {observation_space}")
        if isinstance(action_space, gymnasium.spaces.Discrete):
            self.discrete, out = True, int(action_space.n)
            self.action_offset = int(action_space.start)
        elif isinstance(action_space, gymnasium.spaces.Box):
            self.discrete, out = False, int(np.prod(action_space.shape))
            low = action_space.low.ravel().astype(np.float32)
            high = action_space.high.ravel().astype(np.float32)
            bounded = np.isfinite(low) & np.isfinite(high)
            self.action_low, self.action_high = low, high
            self.action_centre = np.where(bounded, (low + high) / 2, 0.0).astype(np.float32)
            self.action_radius = np.where(bounded, (high - low) / 2, 1.0).astype(np.float32)
            self.action_shape = action_space.shape
        else:
            raise SpaceError(
                f"evolution strategies need Discrete or Box actions, got {action_space}"
            )
        self.obs_dim = int(np.prod(observation_space.shape))
        self.normalizer = normalizer
        sizes = (self.obs_dim, *hidden_sizes, out)
        self.n_outputs = out
        self.layers = list(itertools.pairwise(sizes))
        self.n_params = sum(i * o + (o if bias else 0) for i, o in self.layers)

    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        """Weights ``(n_params,)`` with unit-variance rows scaled by ``1/sqrt(fan_in)``, zero biases
        (the normc-style initialisation of Salimans et al.'s reference code, output layer x0.1)."""
        chunks = []
        for index, (fan_in, fan_out) in enumerate(self.layers):
            gain = 0.1 if index == len(self.layers) - 1 else 1.0
            chunks.append(gain * rng.standard_normal(fan_in * fan_out) / np.sqrt(fan_in))
            chunks.append(np.zeros(fan_out if self.bias else 0))
        return np.concatenate(chunks)

    def bind(self, parameters: np.ndarray) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per-layer float32 weights ``(m, in, out)`` and biases ``(m, 1, out)`` of
        ``parameters`` ``(m, n_params)`` on the policy's device, made once per generation
        (one upload). Each is contiguous: ``baddbmm`` would copy strided views at every step,
        which made the forward pass of 4,096 members twice as slow on the CPU. Without
        ``bias`` the biases are zeros, not parameters."""
        flat = torch.as_tensor(parameters, dtype=torch.float32).to(self.device)
        m, layers, offset = flat.shape[0], [], 0
        for fan_in, fan_out in self.layers:
            weight = flat[:, offset : offset + fan_in * fan_out].reshape(m, fan_in, fan_out)
            offset += fan_in * fan_out
            if self.bias:
                bias = flat[:, offset : offset + fan_out].reshape(m, 1, fan_out)
                offset += fan_out
            else:
                bias = torch.zeros((m, 1, fan_out), device=self.device)
            layers.append((weight.contiguous(), bias.contiguous()))
        return layers

    def select(
        self, layers: list[tuple[torch.Tensor, torch.Tensor]], members: np.ndarray
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The rows ``members`` of bound ``layers``, gathered where they live (no upload of
        weights): what :meth:`bind` of those members' parameters gives."""
        index = torch.as_tensor(members, dtype=torch.long).to(self.device)
        return [(weight[index], bias[index]) for weight, bias in layers]

    @torch.no_grad()
    def actions(
        self, layers: list[tuple[torch.Tensor, torch.Tensor]], observations: np.ndarray
    ) -> np.ndarray:
        """Actions of every member for its own observation, ``(m, obs_dim)`` -> ``(m,)`` int64
        or ``(m, *action_shape)`` float32."""
        x = observations.reshape(observations.shape[0], -1).astype(np.float32, copy=False)
        if self.normalizer is not None:
            x = self.normalizer(x)
        h = torch.from_numpy(np.ascontiguousarray(x)).to(self.device).unsqueeze(1)
        return self.outputs_to_actions(stacked.mlp(h, layers, self.activation).squeeze(1))

    def outputs_to_actions(self, out: torch.Tensor) -> np.ndarray:
        """Actions from the outputs ``(m, n_outputs)``; one download per step: the argmax,
        the tanh outputs scaled in NumPy, or (``squash=False``) the outputs clipped."""
        if self.discrete:
            return out.argmax(dim=1).cpu().numpy() + self.action_offset
        if self.squash:
            action = self.action_centre + self.action_radius * torch.tanh(out).cpu().numpy()
        else:
            action = out.cpu().numpy()
        action = np.clip(action, self.action_low, self.action_high).astype(np.float32)
        return action.reshape(-1, *self.action_shape)


class NetworkPolicy(PopulationPolicy):
    """A population of a user's ``nn.Module`` evaluated in one batched forward pass per step.

    ``module`` maps ``(batch, *obs_shape)`` to ``(batch, n_outputs)``, the outputs of the
    built-in MLP (one per action for Discrete, one per action dimension for Box, turned into
    actions the same way). Its parameters, in ``named_parameters`` order, are the flat
    vector the strategy searches; its buffers (a :class:`rlx.nn.layers.VirtualBatchNorm`'s
    reference statistics, say) are shared by every member. :meth:`bind` stacks each member's
    parameters into one tensor per parameter ``(m, *shape)`` (one upload per generation), and
    :meth:`actions` runs ``torch.func.functional_call`` under ``torch.vmap`` over members.
    Observations reach the module with their own shape as float32 (uint8 frames keep their
    0-255 values), normalised by ``normalizer`` when one is given.
    """

    def __init__(
        self,
        module: torch.nn.Module,
        observation_space: gymnasium.Space,
        action_space: gymnasium.Space,
        normalizer: VirtualBatchNorm | None = None,
        device: torch.device | str = "cpu",
        what: str = "network",
        squash: bool = True,
    ) -> None:
        super().__init__(observation_space, action_space, (), normalizer, device, squash=squash)
        if not isinstance(module, torch.nn.Module):
            raise ConfigError(f"{what} must be a torch.nn.Module, got {type(module).__name__}")
        self.obs_shape = tuple(observation_space.shape)
        self.module = module.to(self.device).eval()
        self.shapes = [(name, tuple(p.shape)) for name, p in module.named_parameters()]
        if not self.shapes:
            raise ConfigError(f"{what} has no parameters for the strategy to search")
        self.sizes = [int(np.prod(shape)) for _, shape in self.shapes]
        self.n_params = sum(self.sizes)
        self.layers = []
        self.buffers = {name: b for name, b in module.named_buffers()}
        with torch.no_grad():
            probe = torch.zeros((2, *self.obs_shape), device=self.device)
            try:
                out = module(probe)
            except Exception as exc:
                raise ConfigError(
                    f"{what} failed on a batch of observations of shape (2, "
                    f"{', '.join(map(str, self.obs_shape))}): {exc}"
                ) from exc
        expected = (2, self.n_outputs)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != expected:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ConfigError(
                f"{what} must map (batch, *{self.obs_shape}) to (batch, {self.n_outputs}) "
                f"outputs for {action_space}, but a batch of 2 gave {got}; make its last "
                f"layer {self.n_outputs} wide"
            )

        def member(
            params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], x: torch.Tensor
        ) -> torch.Tensor:
            return torch.func.functional_call(self.module, (params, buffers), (x,))

        #: The population's forward pass ``(params, buffers, x) -> (m, 1, n_outputs)``.
        self.vmapped = torch.vmap(member, in_dims=(0, None, 0))
        self.traced = trace_population_forward(
            self.vmapped, self.shapes, self.buffers, self.obs_shape, self.device
        )
        self._prepare = self._step = None
        if self.traced is not None:
            prepare, step = _split(self.traced)
            # Flat positional inputs (no pytree), called without nn.Module's hook machinery.
            self._prepare, self._step = prepare.forward, step.forward

    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        """The module's own initial parameters ``(n_params,)`` as float64 (``rng`` unused:
        the module was built under a seed drawn from the run's seed)."""
        return np.concatenate(
            [p.detach().cpu().double().reshape(-1).numpy() for p in self.module.parameters()]
        )

    def bind(self, parameters: np.ndarray) -> dict[str, torch.Tensor]:  # type: ignore[override]
        """Each parameter of every member of ``parameters`` ``(m, n_params)``, stacked
        ``(m, *shape)`` in float32 on the policy's device (one upload), contiguous."""
        flat = torch.as_tensor(parameters, dtype=torch.float32).to(self.device)
        m, offset, stacked = flat.shape[0], 0, {}
        for (name, shape), size in zip(self.shapes, self.sizes, strict=True):
            stacked[name] = flat[:, offset : offset + size].reshape(m, *shape).contiguous()
            offset += size
        return self._prepared(stacked)

    def _prepared(self, stacked: dict[str, torch.Tensor]) -> dict[str, Any]:
        """The stacked parameters with what the traced graph computes of them once
        (``"_prepared"``), ready for :meth:`actions`."""
        if self._prepare is None:
            return stacked
        with torch.no_grad():
            prepared = self._prepare(*stacked.values(), *self.buffers.values())
        # Contiguous once per generation (a transposed nn.Linear weight, say): batched
        # products copy strided operands at every step.
        prepared = tuple(t.contiguous() if isinstance(t, torch.Tensor) else t for t in prepared)
        return {**stacked, "_prepared": prepared}

    def select(  # type: ignore[override]
        self, layers: dict[str, torch.Tensor], members: np.ndarray
    ) -> dict[str, torch.Tensor]:
        index = torch.as_tensor(members, dtype=torch.long).to(self.device)
        return self._prepared({name: layers[name][index] for name, _ in self.shapes})

    @torch.no_grad()
    def actions(  # type: ignore[override]
        self, layers: dict[str, torch.Tensor], observations: np.ndarray
    ) -> np.ndarray:
        """Actions of every member for its own observation (``(m, *obs_shape)`` or flattened
        ``(m, obs_dim)``)."""
        m = observations.shape[0]
        x = observations.reshape(m, -1).astype(np.float32, copy=False)
        if self.normalizer is not None:
            x = self.normalizer(x)
        h = torch.from_numpy(np.ascontiguousarray(x)).to(self.device)
        x = h.reshape(m, 1, *self.obs_shape)
        if self._step is not None:
            out = self._step(*layers["_prepared"], x)
        else:
            out = self.vmapped(layers, self.buffers, x)
        return self.outputs_to_actions(out.reshape(m, self.n_outputs))


#: The population size the forward pass is traced at: a number no layer is likely to have.
_TRACE_BATCH = 1009


def trace_population_forward(
    vmapped: Any,
    shapes: list[tuple[str, tuple[int, ...]]],
    buffers: dict[str, torch.Tensor],
    obs_shape: tuple[int, ...],
    device: torch.device,
) -> Any:
    """``vmapped`` as a graph of plain aten operations, or None where it cannot be made.

    Eager ``torch.vmap`` spends most of a small network's forward pass in Python: on the
    4-32-32-2 MLP of 256 members, 240 us a step against 105 us for the built-in ``baddbmm``
    policy. ``make_fx`` records the operations vmap's batching rules dispatch (once, on fake
    tensors of :data:`_TRACE_BATCH` members); the graph then loses the operations that do
    nothing at run time (an ``expand`` or ``view`` to the shape a tensor has, a
    multiplication by 1), a ``bmm`` followed by the addition of a bias becomes one
    ``baddbmm``, and the population size in shape arguments becomes the observations' first
    dimension, so the graph serves every population size. It is checked against ``vmapped``
    on a few members with random weights; any failure or difference keeps eager vmap.
    """
    try:
        from torch.fx.experimental.proxy_tensor import make_fx

        def example(m: int, fill: Any) -> tuple[Any, ...]:
            params = {name: fill((m, *shape)) for name, shape in shapes}
            return params, buffers, fill((m, 1, *obs_shape))

        def zeros(shape: tuple[int, ...]) -> torch.Tensor:
            return torch.zeros(shape, device=device)

        graph_module = make_fx(vmapped, tracing_mode="fake")(*example(_TRACE_BATCH, zeros))
        _simplify(graph_module, _TRACE_BATCH)
        generator = torch.Generator(device="cpu").manual_seed(0)

        def random(shape: tuple[int, ...]) -> torch.Tensor:
            return torch.randn(shape, generator=generator).to(device)

        for m in (3, 1):
            params, buffers, x = example(m, random)
            with torch.no_grad():
                expected = vmapped(params, buffers, x)
                got = graph_module.forward(*params.values(), *buffers.values(), x)
            if expected.shape != got.shape or not torch.allclose(
                expected, got, rtol=1e-4, atol=1e-5
            ):
                return None
        return graph_module
    except Exception:  # an operation without a batching rule or not traceable: stay eager
        return None


def _simplify(graph_module: Any, batch: int) -> None:
    """The passes of :func:`trace_population_forward`, in place."""
    aten = torch.ops.aten
    graph = graph_module.graph
    reshapes = {aten.expand.default, aten.view.default, aten._unsafe_view.default}
    reshapes.add(aten.reshape.default)

    def shape(node: Any) -> Any:
        value = node.meta.get("val") if hasattr(node, "meta") else None
        return tuple(value.shape) if isinstance(value, torch.Tensor) else None

    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        source = node.args[0] if node.args else None
        if node.target in reshapes and shape(source) is not None and shape(source) == shape(node):
            node.replace_all_uses_with(source)
            graph.erase_node(node)
        elif node.target in (aten.mul.Scalar, aten.mul.Tensor) and (
            isinstance(node.args[1], (int, float))
            and node.args[1] == 1
            and shape(source) == shape(node)
            and source.meta["val"].dtype == node.meta["val"].dtype
        ):
            node.replace_all_uses_with(source)
            graph.erase_node(node)
    for node in list(graph.nodes):
        if node.target is not aten.add.Tensor or node.kwargs or len(node.args) != 2:
            continue
        for product, bias in (node.args, node.args[::-1]):
            if (
                getattr(product, "target", None) is aten.bmm.default
                and len(product.users) == 1
                and shape(bias) is not None
                and shape(node) == shape(product)
                and torch.broadcast_shapes(shape(bias), shape(product)) == shape(product)
            ):
                with graph.inserting_before(node):
                    fused = graph.call_function(aten.baddbmm.default, (bias, *product.args))
                fused.meta["val"] = node.meta.get("val")
                node.replace_all_uses_with(fused)
                graph.erase_node(node)
                graph.erase_node(product)
                break
    # The population size read from the first parameter where it was a constant.
    with graph.inserting_after(placeholders[-1]):
        size = graph.call_function(aten.sym_size.int, (placeholders[0], 0))

    multiples = {1: size}

    def swap(argument: Any) -> Any:
        if isinstance(argument, (list, tuple)):
            return type(argument)(swap(a) for a in argument)
        if isinstance(argument, bool) or not isinstance(argument, int):
            return argument
        if argument == 0 or argument % batch:
            return argument
        # A multiple of the population size: members folded into channels (grouped conv).
        factor = argument // batch
        if factor not in multiples:
            with graph.inserting_after(size):
                multiples[factor] = graph.call_function(operator.mul, (size, factor))
        return multiples[factor]

    for node in list(graph.nodes):
        if node.op == "call_function" and node is not size and node not in multiples.values():
            node.args = swap(node.args)
    graph.lint()
    graph._codegen = torch.fx.graph.CodeGen()  # positional tensors in, one tensor out
    output = next(n for n in graph.nodes if n.op == "output")
    if isinstance(output.args[0], (list, tuple)) and len(output.args[0]) == 1:
        output.args = (output.args[0][0],)
    graph_module.recompile()


def _split(graph_module: Any) -> tuple[Any, Any]:
    """``graph_module`` (parameters, buffers, observations) cut in two: ``prepare``, what
    depends on the parameters and buffers alone (run once per generation, at :meth:`bind`),
    and ``step``, the rest, ``(*prepared, observations) -> outputs``."""
    from torch.fx import Graph, GraphModule

    graph = graph_module.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    static = set(placeholders[:-1])
    for node in graph.nodes:
        if node.op in ("call_function", "get_attr") and all(
            a in static for a in node.all_input_nodes
        ):
            static.add(node)
    boundary = [n for n in graph.nodes if n in static and any(u not in static for u in n.users)]
    prepare, env = Graph(), {}
    for node in graph.nodes:
        if node in static:
            env[node] = prepare.node_copy(node, lambda n: env[n])
    prepare.output(tuple(env[n] for n in boundary))
    step, env = Graph(), {}
    for node in boundary:
        env[node] = step.placeholder(f"{node.name}_prepared")
    for node in graph.nodes:
        if node not in static:
            env[node] = step.node_copy(node, lambda n: env[n])
    prepare.lint()
    step.lint()
    return GraphModule(graph_module, prepare), GraphModule(graph_module, step)


def build_network_policy(
    target: str,
    observation_space: gymnasium.Space,
    action_space: gymnasium.Space,
    seed: int,
    normalizer: VirtualBatchNorm | None = None,
    device: torch.device | str = "cpu",
    network_kwargs: dict[str, Any] | None = None,
    squash: bool = True,
) -> NetworkPolicy:
    """``factory(observation_space, action_space)`` of ``target`` (``"package.module:factory"``)
    built with torch's generator seeded by ``seed`` (so its initial weights and buffers are
    part of the run's seed), as a :class:`NetworkPolicy` (``squash``: Box actions as tanh
    outputs scaled to the bounds, else the outputs clipped)."""
    from rlx.nn.layers import load_network

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = load_network(
            target, observation_space, action_space, what="network", **(network_kwargs or {})
        )
    return NetworkPolicy(module, observation_space, action_space, normalizer, device, squash=squash)
