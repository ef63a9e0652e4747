"""A user's own network (``network="package.module:factory"``) and optimiser keyword arguments."""

from __future__ import annotations

import textwrap

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

import rlx
from rlx.config import build_config
from rlx.errors import ConfigError
from rlx.testing import check_agent
from rlx_es.core import Population
from rlx_es.evaluation import Evaluator
from rlx_es.openai_es import OpenAIESAgent, OpenAIESConfig
from rlx_es.policy import NetworkPolicy

BRIGHTNESS_ID = "rlx-test/Brightness-v0"


class Brightness(gymnasium.Env):
    """16x16 uint8 frames, bright or dark with pixel noise: action 1 pays on a bright frame,
    action 0 on a dark one. Ten steps an episode; a random policy returns 5 on average."""

    def __init__(self, length: int = 10) -> None:
        self.observation_space = spaces.Box(0, 255, shape=(1, 16, 16), dtype=np.uint8)
        self.action_space = spaces.Discrete(2)
        self.length, self.t, self.bright = length, 0, False

    def _frame(self) -> np.ndarray:
        self.bright = bool(self.np_random.random() < 0.5)
        base = 170 if self.bright else 60
        noise = self.np_random.integers(-50, 51, size=(1, 16, 16))
        return np.clip(base + noise, 0, 255).astype(np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action):
        reward = float(int(action) == int(self.bright))
        self.t += 1
        return self._frame(), reward, False, self.t >= self.length, {}


if BRIGHTNESS_ID not in gymnasium.registry:
    gymnasium.register(BRIGHTNESS_ID, entry_point=Brightness)


@pytest.fixture
def nets(tmp_path, monkeypatch):
    """A module of factories importable as ``rlx_es_test_nets``."""
    (tmp_path / "rlx_es_test_nets.py").write_text(
        textwrap.dedent(
            """
            import itertools

            import numpy as np
            import torch
            from torch import nn

            def outputs(action_space):
                if hasattr(action_space, "n"):
                    return int(action_space.n)
                return int(np.prod(action_space.shape))

            class InOutLinear(nn.Module):
                # The built-in policy's layout: weight (in, out), then bias.
                def __init__(self, fan_in, fan_out):
                    super().__init__()
                    self.weight = nn.Parameter(torch.zeros(fan_in, fan_out))
                    self.bias = nn.Parameter(torch.zeros(fan_out))

                def forward(self, x):
                    return x @ self.weight + self.bias

            def builtin_mlp(observation_space, action_space, hidden=(8, 8)):
                sizes = (int(np.prod(observation_space.shape)), *hidden, outputs(action_space))
                layers = []
                for index, (a, b) in enumerate(itertools.pairwise(sizes)):
                    layers.append(InOutLinear(a, b))
                    if index < len(sizes) - 2:
                        layers.append(nn.Tanh())
                return nn.Sequential(*layers)

            def mlp(observation_space, action_space):
                n_in = int(np.prod(observation_space.shape))
                return nn.Sequential(
                    nn.Flatten(),
                    nn.Linear(n_in, 16),
                    nn.Tanh(),
                    nn.Linear(16, outputs(action_space)),
                )

            class TinyCNN(nn.Module):
                def __init__(self, action_space):
                    super().__init__()
                    self.conv = nn.Conv2d(1, 4, 4, stride=4)
                    self.head = nn.Linear(4 * 4 * 4, outputs(action_space))
                    self.register_buffer("scale", torch.tensor(1 / 255.0))

                def forward(self, x):
                    h = torch.relu(self.conv(x * self.scale))
                    return self.head(h.flatten(1))

            def cnn(observation_space, action_space):
                return TinyCNN(action_space)

            def too_wide(observation_space, action_space):
                return nn.Linear(int(np.prod(observation_space.shape)), outputs(action_space) + 3)

            def not_a_module(observation_space, action_space):
                return {"layers": 2}
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "rlx_es_test_nets"


def test_the_default_network_is_the_built_in_mlp():
    agent = rlx.make("openai-es", env="CartPole-v1", population_size=8, hidden_sizes=(4,))
    assert agent.config.network == "mlp"
    assert type(agent.policy).__name__ == "PopulationPolicy"


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_a_user_mlp_acts_exactly_like_the_built_in_one_on_the_same_parameters(nets, env_id):
    """The vmapped functional_call of a module with the built-in layout plays the same episodes
    as the built-in batched MLP, member for member."""
    results = {}
    for network in ("mlp", f"{nets}:builtin_mlp"):
        agent = OpenAIESAgent(
            gymnasium.make(env_id),
            OpenAIESConfig(
                population_size=12, hidden_sizes=(8, 8), network=network, sigma=0.3, block_size=4
            ),
            seed=0,
        )
        centre = np.random.default_rng(5).standard_normal(agent.policy.n_params) * 0.5
        population = Population(centre, 0.3, seed=11, size=12, mirrored=True)
        evaluator = Evaluator(agent.settings, 0, 12)
        episodes = evaluator.evaluate(population.to_message(), np.array([7, 8, 9]))
        observations = np.random.default_rng(1).standard_normal((12, agent.policy.obs_dim))
        bound = agent.policy.bind(population.parameters())
        results[network] = (episodes, agent.policy.actions(bound, observations))
    (built_in, built_in_actions), (user, user_actions) = results.values()
    assert len(set(built_in.lengths.tolist())) > 1 or env_id == "Pendulum-v1"
    np.testing.assert_array_equal(built_in.lengths, user.lengths)
    np.testing.assert_allclose(built_in.returns, user.returns, rtol=1e-6)
    np.testing.assert_allclose(built_in_actions, user_actions, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("factory", "env_id"), [("mlp", "CartPole-v1"), ("cnn", BRIGHTNESS_ID)])
def test_the_traced_forward_pass_matches_eager_vmap(nets, factory, env_id):
    agent = rlx.make("openai-es", env=env_id, network=f"{nets}:{factory}", population_size=8)
    policy = agent.policy
    assert policy.traced is not None
    rng = np.random.default_rng(0)
    parameters = agent.strategy.mean + 0.1 * rng.standard_normal((6, policy.n_params))
    observations = rng.integers(0, 256, size=(6, policy.obs_dim)).astype(np.float32)
    bound = policy.bind(parameters)
    x = torch.from_numpy(observations).reshape(6, 1, *policy.obs_shape)
    with torch.no_grad():
        eager = policy.vmapped({n: bound[n] for n, _ in policy.shapes}, policy.buffers, x)
    np.testing.assert_array_equal(
        policy.actions(bound, observations), eager.reshape(6, -1).argmax(1).numpy()
    )
    # Fewer members (the batch shrinks as episodes end): the same graph serves them.
    chosen = policy.select(bound, np.array([4, 1]))
    np.testing.assert_array_equal(
        policy.actions(chosen, observations[[4, 1]]), policy.actions(bound, observations)[[4, 1]]
    )


def test_an_nn_linear_mlp_runs_the_built_in_operations_at_every_step(nets):
    agent = rlx.make("openai-es", env="CartPole-v1", network=f"{nets}:mlp", population_size=8)
    step = agent.policy._step.__self__.graph
    targets = [n.target for n in step.nodes if n.op == "call_function"]
    aten = torch.ops.aten
    assert targets == [aten.baddbmm.default, aten.tanh.default, aten.baddbmm.default]


def test_a_user_network_keeps_the_agent_contract(nets):
    check_agent(
        "openai-es",
        "CartPole-v1",
        seed=1,
        iterations=2,
        network=f"{nets}:mlp",
        population_size=8,
        block_size=4,
    )


def test_a_user_network_keeps_the_contract_with_box_actions_and_virtual_batch_norm(nets):
    check_agent(
        "cem",
        "Pendulum-v1",
        seed=2,
        iterations=2,
        network=f"{nets}:mlp",
        population_size=8,
        virtual_batch_norm=True,
        reference_batch_size=16,
    )


def test_the_process_backend_rebuilds_the_same_user_network(nets):
    returns = {}
    for backend in ("local", "process"):
        agent = rlx.make(
            "openai-es",
            env="CartPole-v1",
            seed=4,
            network=f"{nets}:mlp",
            population_size=8,
            block_size=4,
            backend=backend,
            workers=2,
        )
        returns[backend] = [agent.step().episode_returns for _ in range(2)]
        agent.close()
    assert returns["local"] == returns["process"]


def test_a_cnn_policy_learns_the_brightness_task_from_uint8_frames(nets):
    agent = rlx.make(
        "openai-es",
        env=BRIGHTNESS_ID,
        seed=0,
        network=f"{nets}:cnn",
        population_size=32,
        sigma=0.05,
        learning_rate=0.05,
    )
    assert isinstance(agent.policy, NetworkPolicy)
    assert agent.policy.obs_shape == (1, 16, 16)
    means = [agent.step().metrics["return_mean"] for _ in range(12)]
    # Random play returns 5 of 10; the population's mean return climbs well above it.
    assert max(means[-3:]) >= 8.5, means
    env = gymnasium.make(BRIGHTNESS_ID)
    observation, _ = env.reset(seed=123)
    total, done = 0.0, False
    while not done:
        observation, reward, terminated, truncated, _ = env.step(agent.act(observation))
        total, done = total + reward, terminated or truncated
    assert total >= 8, total


def test_a_factory_output_of_the_wrong_width_names_the_expected_size(nets):
    with pytest.raises(ConfigError, match=r"\(batch, 2\) outputs.*gave \(2, 5\).*2 wide"):
        rlx.make("openai-es", env="CartPole-v1", network=f"{nets}:too_wide", population_size=8)


def test_a_factory_that_returns_no_module_is_a_config_error(nets):
    with pytest.raises(ConfigError, match=r"must return a torch\.nn\.Module, got dict"):
        rlx.make("openai-es", env="CartPole-v1", network=f"{nets}:not_a_module", population_size=8)


def test_a_network_target_that_does_not_import_is_a_config_error():
    with pytest.raises(ConfigError, match="cannot load network"):
        rlx.make("openai-es", env="CartPole-v1", network="rlx_no_such_module:f", population_size=8)


def test_a_user_network_is_seeded_by_the_run_seed(nets):
    def centre(seed):
        return rlx.make(
            "openai-es", env="CartPole-v1", seed=seed, network=f"{nets}:mlp", population_size=8
        ).strategy.mean

    np.testing.assert_array_equal(centre(3), centre(3))
    assert not np.array_equal(centre(3), centre(4))


def test_optimizer_kwargs_reach_the_optimiser_plain_sgd():
    config = build_config(
        OpenAIESConfig, {"optimizer": "sgd", "optimizer_kwargs": '{"momentum": 0}'}
    )
    assert config.optimizer_kwargs == {"momentum": 0}
    agent = OpenAIESAgent(gymnasium.make("CartPole-v1"), config, seed=0)
    assert isinstance(agent.strategy.optimizer, torch.optim.SGD)
    assert agent.strategy.optimizer.param_groups[0]["momentum"] == 0
    # Plain SGD: the step is the learning rate times the gradient.
    population = agent.strategy.ask(5)
    before = agent.strategy.mean.copy()
    fitness = np.arange(population.size, dtype=float)
    metrics = agent.strategy.tell(population, fitness)
    step = np.linalg.norm(agent.strategy.mean - before)
    assert metrics["update_ratio"] > 0
    from rlx_es.core import rank_transformation

    gradient = rank_transformation(fitness) @ population.noise() / population.size
    expected = config.learning_rate * np.linalg.norm(-gradient + config.weight_decay * before)
    assert step == pytest.approx(expected, rel=1e-9)


def test_default_sgd_keeps_its_momentum_and_bad_kwargs_are_a_config_error():
    agent = rlx.make("openai-es", env="CartPole-v1", population_size=8, optimizer="sgd")
    assert agent.strategy.optimizer.param_groups[0]["momentum"] == 0.9
    with pytest.raises(ConfigError, match="rejected its arguments"):
        rlx.make(
            "openai-es",
            env="CartPole-v1",
            population_size=8,
            optimizer="adam",
            optimizer_kwargs={"no_such_setting": 1},
        )


def test_a_network_that_cannot_be_traced_runs_on_eager_vmap(nets, monkeypatch):
    import rlx_es.policy

    def refuse(*args, **kwargs):
        raise RuntimeError("not traceable")

    monkeypatch.setattr(rlx_es.policy, "_simplify", refuse)
    agent = rlx.make(
        "openai-es", env=BRIGHTNESS_ID, network=f"{nets}:cnn", population_size=8, seed=1
    )
    assert agent.policy.traced is None
    iteration = agent.step()
    assert len(iteration.episode_returns) == 8
    assert agent.act(np.zeros((1, 16, 16), dtype=np.uint8)) in (0, 1)
