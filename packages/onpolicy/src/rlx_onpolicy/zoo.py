"""Tuned hyperparameters for a few standard tasks (rl-baselines3-zoo's where it has them).

``rlx.make("ppo", "CartPole-v1", **zoo.hyperparameters("ppo", "CartPole-v1"))``; the tests
and benchmarks use these, so they are the settings the published numbers were measured with.
"""

from __future__ import annotations

from typing import Any

from rlx.errors import UnknownNameError, did_you_mean

_SETTINGS: dict[tuple[str, str], dict[str, Any]] = {
    # rl-baselines3-zoo, hyperparams/ppo.yml (lin_1e-3 and lin_0.2 are the linear schedules).
    ("ppo", "CartPole-v1"): dict(
        n_envs=8,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=1e-3,
        lr_schedule="linear",
        clip_range=0.2,
        clip_schedule="linear",
    ),
    # CleanRL's ppo_atari (8 environments of 128 steps, 4 minibatches, 4 epochs, clip 0.1,
    # learning rate 2.5e-4 annealed linearly), on frames from the atari wrapper preset
    # (--wrapper atari).
    **{
        ("ppo", game): dict(
            n_envs=8,
            n_steps=128,
            batch_size=256,
            n_epochs=4,
            learning_rate=2.5e-4,
            lr_schedule="linear",
            clip_range=0.1,
            ent_coef=0.01,
            vf_coef=0.5,
            max_grad_norm=0.5,
            gamma=0.99,
            gae_lambda=0.95,
        )
        for game in ("ALE/Breakout-v5", "ALE/Pong-v5")
    },
    # The zoo's settings without gSDE (rlx has none), plus normalisation.
    ("ppo", "Pendulum-v1"): dict(
        n_envs=4,
        n_steps=1024,
        gae_lambda=0.95,
        gamma=0.9,
        n_epochs=10,
        learning_rate=1e-3,
        lr_schedule="linear",
        batch_size=64,
        normalize_observations=True,
        normalize_rewards=True,
    ),
    # rl-baselines3-zoo, hyperparams/a2c.yml.
    ("a2c", "CartPole-v1"): dict(n_envs=8, ent_coef=0.0),
}


def hyperparameters(agent: str, env_id: str) -> dict[str, Any]:
    """A copy of the tuned settings of ``agent`` on ``env_id``."""
    try:
        return dict(_SETTINGS[(agent, env_id)])
    except KeyError:
        known = [f"{a} on {e}" for a, e in _SETTINGS]
        raise UnknownNameError(
            f"no tuned hyperparameters for {agent} on {env_id}; there are: {', '.join(known)}."
            + did_you_mean(f"{agent} on {env_id}", known)
        ) from None
