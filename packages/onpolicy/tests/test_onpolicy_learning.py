"""Each agent learns its task within the issue's budget (fixed seeds, real thresholds).

The runs stop as soon as the mean deterministic evaluation return (10 episodes on fixed
seeds) reaches the threshold, so they cost only what learning costs. Multi-seed versions are
in benchmarks/onpolicy_learning.py.
"""

from __future__ import annotations

import rlx
from rlx.trainer import Trainer
from rlx.tuned import hyperparameters


def train(name, env, steps, target, eval_every, seed=0, **config):
    agent = rlx.make(name, env, seed=seed, **config)
    trainer = Trainer(
        agent,
        steps=steps,
        eval_every=eval_every,
        eval_episodes=10,
        target_return=target,
        progress=False,
        verbose=False,
        plot=False,
    )
    return trainer.fit()


def test_ppo_solves_cartpole_within_100k_steps():
    result = train(
        "ppo", "CartPole-v1", 100_000, 475, 5_000, **hyperparameters("ppo", "CartPole-v1")
    )
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= 475 and result.env_steps <= 100_000


def test_a2c_reaches_400_on_cartpole_within_300k_steps():
    result = train(
        "a2c", "CartPole-v1", 300_000, 400, 10_000, **hyperparameters("a2c", "CartPole-v1")
    )
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= 400 and result.env_steps <= 300_000


def test_vpg_reaches_300_on_cartpole_within_300k_steps():
    result = train("vpg", "CartPole-v1", 300_000, 300, 10_000)
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= 300 and result.env_steps <= 300_000


def test_ppo_reaches_minus_400_on_pendulum_within_200k_steps():
    config = hyperparameters("ppo", "Pendulum-v1")
    result = train("ppo", "Pendulum-v1", 200_000, -400, 10_000, **config)
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= -400 and result.env_steps <= 200_000


def test_svpg_with_four_particles_improves_on_cartpole():
    from rlx.api import copy_env
    from rlx.evaluation import evaluate

    agent = rlx.make("svpg", "CartPole-v1", seed=0, n_particles=4)
    before = evaluate(agent, copy_env(agent.env), episodes=10, seed=0).mean_return
    Trainer(agent, steps=60_000, eval_episodes=0, progress=False, verbose=False).fit()
    after = evaluate(agent, copy_env(agent.env), episodes=10, seed=0).mean_return
    assert after >= before + 100, (before, after)
    # The particles stay distinct policies: the kernel between them is not 1.
    assert agent.step().metrics["kernel_mean"] < 0.99


def test_ppo_with_a_critic_fitted_on_its_own_solves_cartpole_within_100k_steps():
    config = hyperparameters("ppo", "CartPole-v1")
    config.update(critic_epochs=10, critic_batch_size=64)
    result = train("ppo", "CartPole-v1", 100_000, 475, 5_000, **config)
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= 475 and result.env_steps <= 100_000


def test_ppo_with_running_advantage_statistics_solves_cartpole_within_100k_steps():
    config = hyperparameters("ppo", "CartPole-v1")
    config.update(advantage_statistics="running")
    result = train("ppo", "CartPole-v1", 100_000, 475, 5_000, **config)
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= 475 and result.env_steps <= 100_000


def test_ppo_with_rollouts_of_eight_episodes_solves_cartpole_within_100k_steps():
    config = hyperparameters("ppo", "CartPole-v1")
    config.update(min_episodes=8)
    result = train("ppo", "CartPole-v1", 100_000, 475, 5_000, **config)
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= 475 and result.env_steps <= 100_000


def test_ppo_with_gaussian_action_noise_reaches_minus_400_on_pendulum_within_200k_steps():
    config = hyperparameters("ppo", "Pendulum-v1")
    config.update(action_noise="gaussian", action_noise_std=0.3)
    result = train("ppo", "Pendulum-v1", 200_000, -400, 10_000, **config)
    assert result.stop_reason == "target", result
    assert result.final_eval.mean_return >= -400 and result.env_steps <= 200_000
