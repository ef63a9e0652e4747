"""estorch's shape of the API: a user's policy module and rollout class trained by the ES
agents without a gymnasium environment, through the Trainer, run directory and exact resume."""

from __future__ import annotations

import csv
import json
import textwrap

import gymnasium
import numpy as np
import pytest
import torch

import rlx
from rlx.errors import ConfigError, RlxError, UntrustedCodeError
from rlx.evaluation import evaluate
from rlx.testing import check_agent
from rlx_es.evaluation import MissingBehaviourError
from rlx_es.rollouts import ROLLOUT_ENV_ID

USER_MODULE = "rlx_es_test_rollouts"


@pytest.fixture
def user(tmp_path, monkeypatch):
    """The user's module: a policy class and rollout classes, as an estorch user writes them."""
    (tmp_path / f"{USER_MODULE}.py").write_text(
        textwrap.dedent(
            """
            import gymnasium
            import numpy as np
            import torch
            from torch import nn

            class Policy(nn.Module):
                def __init__(self, n_inputs=3, n_outputs=3):
                    super().__init__()
                    self.layer = nn.Linear(n_inputs, n_outputs)

                def forward(self, x):
                    return self.layer(x)

            class Target:
                # Minus the squared distance of the policy's output, on a random input
                # (drawn from NumPy's global generator, which rlx seeds), to a target.
                def __init__(self, target=(0.5, -0.3, 0.8)):
                    self.target = torch.tensor(target)
                    self.calls = 0

                def rollout(self, policy):
                    self.calls += 1
                    x = torch.from_numpy(np.random.uniform(0.5, 1.5, size=3)).float()
                    return -float(((policy(x) - self.target) ** 2).sum())

            class TargetWithBehaviour(Target):
                # For the novelty agents: the policy's output at a fixed input is the behaviour.
                def rollout(self, policy):
                    behaviour = policy(torch.ones(3))
                    return super().rollout(policy), behaviour

            class CartPole:
                # A hand-written episode loop; the seed keyword resets the environment.
                def __init__(self):
                    self.env = gymnasium.make("CartPole-v1")

                def rollout(self, policy, seed):
                    observation, _ = self.env.reset(seed=seed)
                    total, done = 0.0, False
                    while not done:
                        logits = policy(torch.as_tensor(observation))
                        observation, reward, terminated, truncated, _ = self.env.step(
                            int(logits.argmax())
                        )
                        total, done = total + reward, terminated or truncated
                    return total

            class NoRollout:
                pass

            class Words:
                def rollout(self, policy):
                    return "far"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module(USER_MODULE)
    return module


def _target(name: str = "openai-es", seed: int = 0, **settings) -> rlx.Agent:
    base = {
        "network": f"{USER_MODULE}:Policy",
        "rollout": f"{USER_MODULE}:Target",
        "population_size": 16,
        "sigma": 0.05,
        "learning_rate": 0.05,
        "weight_decay": 0.0,
    }
    return rlx.make(name, ROLLOUT_ENV_ID, seed=seed, **{**base, **settings})


def test_openai_es_learns_a_users_rollout_without_an_environment(user):
    agent = _target()
    assert agent.policy.n_params == 12  # Linear(3, 3): the module's parameters are searched
    first = agent.step()
    assert first.env_steps == 16 and len(first.episode_returns) == 16  # one step a rollout
    assert first.metrics["return_mean"] < -2, first.metrics
    for _ in range(59):
        agent.step()
    # The centre's rollouts, as the trainer evaluates them (-3.2 at the start; -0.12 here).
    result = evaluate(agent, gymnasium.make(ROLLOUT_ENV_ID), episodes=10)
    assert result.mean_return > -0.25, result
    # The trained policy is the user's module, a copy to keep.
    policy = agent.policy_module()
    assert isinstance(policy, user.Policy)
    with torch.no_grad():
        out = policy(torch.ones(3))
    np.testing.assert_allclose(out.numpy(), [0.5, -0.3, 0.8], atol=0.15)
    agent.step()
    assert policy is not agent.policy.module and agent.policy_module() is not policy


def test_a_novelty_agent_learns_from_returns_and_behaviours(user):
    agent = _target(
        "nsra-es",
        seed=1,
        rollout=f"{USER_MODULE}:TargetWithBehaviour",
        meta_population_size=2,
        initial_weight=1.0,
    )
    for _ in range(60):
        iteration = agent.step()
    assert iteration.metrics["archive_size"] == 62  # two first centres, one a generation
    best = max(agent.centre_returns)
    assert best > -0.05, agent.centre_returns


def test_a_novelty_agent_needs_a_behaviour_from_the_rollout(user):
    agent = _target("ns-es")
    with pytest.raises(MissingBehaviourError, match=r"return \(return, behaviour\)"):
        agent.step()


def test_a_hand_written_cartpole_loop_is_learned_and_seeded_by_its_seed_keyword(user):
    agent = _target(
        rollout=f"{USER_MODULE}:CartPole",
        network_kwargs={"n_inputs": 4, "n_outputs": 2},
        population_size=32,
        sigma=0.3,
        learning_rate=0.1,
    )
    for _ in range(30):
        agent.step()
    # The centre balances the pole (random play: about 20; 337 here).
    result = evaluate(agent, gymnasium.make(ROLLOUT_ENV_ID), episodes=10)
    assert result.mean_return >= 195, result


def test_it_trains_through_the_trainer_records_by_name_and_resumes_exactly(user, tmp_path):
    def settings():
        return dict(network=user.Policy, rollout=user.Target, population_size=8)

    straight = rlx.Trainer(
        _target(**settings()),
        run_dir=tmp_path / "straight",
        iterations=6,
        eval_every=16,
        eval_episodes=2,
        checkpoint_every=24,
        verbose=False,
        progress=False,
    )
    straight.fit()
    config = json.loads((tmp_path / "straight" / "config.json").read_text())
    assert config["env"] == ROLLOUT_ENV_ID
    assert config["hyperparameters"]["rollout"] == f"{USER_MODULE}:Target"
    assert config["hyperparameters"]["network"] == f"{USER_MODULE}:Policy"
    rows = list(csv.DictReader((tmp_path / "straight" / "metrics.csv").open()))
    evaluations = [float(r["eval/return_mean"]) for r in rows if r.get("eval/return_mean")]
    assert evaluations and all(e <= 0 for e in evaluations)  # the centre's rollouts
    with pytest.raises(UntrustedCodeError, match="code that loading would import"):
        rlx.load(tmp_path / "straight" / "best")
    loaded = rlx.load(tmp_path / "straight", trust_code=True)
    seeds = np.array([[11], [12]])
    np.testing.assert_array_equal(loaded.act(seeds), straight.agent.act(seeds))

    stopped = rlx.Trainer(
        _target(**settings()),
        run_dir=tmp_path / "stopped",
        iterations=3,
        eval_every=16,
        eval_episodes=2,
        checkpoint_every=24,
        verbose=False,
        progress=False,
    )
    stopped.fit()
    with pytest.raises(UntrustedCodeError, match="sets network="):
        rlx.Trainer.resume(tmp_path / "stopped", iterations=6)
    resumed = rlx.Trainer.resume(tmp_path / "stopped", trust_code=True, iterations=6)
    resumed.config.verbose = False
    resumed.fit()
    np.testing.assert_array_equal(
        resumed.agent.strategy.mean, straight.agent.strategy.mean
    )  # the same centre after the same generations

    def metrics(run):
        rows = list(csv.DictReader((tmp_path / run / "metrics.csv").open()))
        drop = {"time/elapsed", "time/steps_per_second", "time/iterations_per_second"}
        return [
            {k: v for k, v in r.items() if not k.startswith("time/") and k not in drop}
            for r in rows
        ]

    assert metrics("stopped") == metrics("straight")


def test_the_process_backend_plays_the_same_rollouts(user):
    returns = {}
    for backend in ("local", "process"):
        agent = _target(population_size=8, block_size=2, backend=backend, workers=2, seed=5)
        returns[backend] = [agent.step().episode_returns for _ in range(2)]
        agent.close()
    assert returns["local"] == returns["process"]


@pytest.mark.parametrize(
    ("name", "rollout"),
    [("openai-es", "Target"), ("cma-es", "Target"), ("nsr-es", "TargetWithBehaviour")],
)
def test_the_agent_keeps_the_contract(user, name, rollout):
    check_agent(
        name,
        ROLLOUT_ENV_ID,
        seed=2,
        iterations=2,
        network=f"{USER_MODULE}:Policy",
        rollout=f"{USER_MODULE}:{rollout}",
        population_size=8,
    )


def test_bad_settings_are_one_config_error(user):
    with pytest.raises(ConfigError, match=r"has no 'Targt'.*Did you mean: Target"):
        _target(rollout=f"{USER_MODULE}:Targt")
    with pytest.raises(ConfigError, match=r"rollout must be 'package\.module:Class'"):
        _target(rollout="Target")
    with pytest.raises(ConfigError, match=r"set network='package\.module:Class'"):
        _target(network="mlp")
    with pytest.raises(ConfigError, match="must be a class with a method rollout"):
        _target(rollout=f"{USER_MODULE}:NoRollout")
    with pytest.raises(ConfigError, match="rejected its arguments"):
        _target(rollout_kwargs={"goal": 1})
    with pytest.raises(ConfigError, match="train it on env rlx/Rollout-v0, not CartPole-v1"):
        rlx.make(
            "openai-es",
            "CartPole-v1",
            network=f"{USER_MODULE}:Policy",
            rollout=f"{USER_MODULE}:Target",
        )
    with pytest.raises(ConfigError, match=r"set rollout='package\.module:Class'"):
        rlx.make("openai-es", ROLLOUT_ENV_ID)
    with pytest.raises(ConfigError, match="virtual_batch_norm"):
        _target(virtual_batch_norm=True)
    with pytest.raises(ConfigError, match="device=cuda"):
        _target(device="cuda")
    with pytest.raises(RlxError, match="must return the return, a number"):
        _target(rollout=f"{USER_MODULE}:Words").step()
    with pytest.raises(RlxError, match="policy_module"):
        rlx.make("openai-es", "CartPole-v1", population_size=4).policy_module()


def test_a_misspelt_rollout_on_the_command_line_is_exit_2_with_a_suggestion(
    user, rlx_cli, tmp_path
):
    code, _, err = rlx_cli(
        "run",
        "openai-es",
        "--env",
        ROLLOUT_ENV_ID,
        "--set",
        f"network={USER_MODULE}:Policy",
        "--set",
        f"rollout={USER_MODULE}:Targt",
        "--set",
        "population_size=8",
        "--iterations",
        "2",
        "--out",
        str(tmp_path / "r"),
    )
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Did you mean: Target" in lines[0], err


def test_the_command_line_trains_a_users_rollout(user, rlx_cli, tmp_path):
    code, _, err = rlx_cli(
        "run",
        "openai-es",
        "--env",
        ROLLOUT_ENV_ID,
        "--set",
        f"network={USER_MODULE}:Policy",
        "--set",
        f"rollout={USER_MODULE}:Target",
        "--set",
        "population_size=8",
        "--iterations",
        "3",
        "--eval-episodes",
        "2",
        "--out",
        str(tmp_path / "r"),
    )
    assert code == 0, err
    assert (tmp_path / "r" / "final").is_dir() and (tmp_path / "r" / "metrics.csv").is_file()
