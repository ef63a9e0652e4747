"""Sizes that cannot fit in memory are refused before anything is allocated, in every family.

From the hardening report: ``rlx run dqn --env CartPole-v1 --set n_envs=100000000`` grew to
23.9 GB until the kernel killed it, and a 20-digit ``n_envs`` was a traceback. Each family
estimates what its settings make it allocate and asks :func:`rlx.memory.check_allocation`
first, so each absurd size below is one message (exit 2) saying what was asked, about how
much memory it needs and how much there is, and no run directory. Every command runs under
an address-space limit, so that a regression fails here instead of eating the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlx import memory
from rlx.config import build_config, hyperparameter
from rlx.errors import ConfigError

#: Address-space limit of every command here: torch and an agent take well under 2 GB of it.
LIMIT = 6 * 2**30


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


@pytest.fixture
def rlx_limited(tmp_path):
    """The real ``rlx ARGS --out tmp_path/run`` in ``tmp_path`` under :data:`LIMIT`, after
    importing the module ``prelude`` (from ``tmp_path``) when one is named."""

    def run(*args: str, prelude: str | None = None):
        start = ["-m", "rlx.cli"]
        if prelude is not None:
            start = ["-c", f"import {prelude}; from rlx.cli import main; main()"]
        return subprocess.run(
            [sys.executable, *start, "run", *args, "--out", str(tmp_path / "run"), "--no-progress"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(tmp_path)},
            preexec_fn=limit_memory,
            timeout=300,
        )

    return run


def assert_refused(result, tmp_path: Path, *words: str) -> str:
    """Exit 2, one line on stderr with ``words`` in it, no traceback, nothing written."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr + result.stdout
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    message = lines[0]
    assert message.startswith("error: ")
    for word in words:
        assert word in message, message
    assert not (tmp_path / "run").exists()
    assert not (tmp_path / "runs").exists()
    return message


MEMORY = ("would need about", "available to this process", "; lower")


@pytest.mark.parametrize(
    "args",
    [
        ("dqn", "--env", "CartPole-v1", "--set", "n_envs=100000000"),
        ("ppo", "--env", "CartPole-v1", "--set", "n_envs=100000000"),
        ("a2c", "--env", "CartPole-v1", "--set", "n_steps=100000000"),
        ("svpg", "--env", "CartPole-v1", "--set", "n_particles=10000000"),
        ("dqn", "--env", "CartPole-v1", "--set", "buffer_size=100000000000"),
        ("dqn", "--env", "CartPole-v1", "--set", "prioritized=true", "--set", "buffer_size=1e10"),
        ("sac", "--env", "Pendulum-v1", "--set", "buffer_size=10000000000"),
        ("td3", "--env", "Pendulum-v1", "--set", "hidden_sizes=1000000,1000000"),
        ("ddpg", "--env", "Pendulum-v1", "--set", "batch_size=1e9", "--set", "buffer_size=1e9"),
        ("openai-es", "--env", "CartPole-v1", "--set", "population_size=100000000"),
        ("cma-es", "--env", "CartPole-v1", "--set", "hidden_sizes=1000,1000"),
        ("cem", "--env", "CartPole-v1", "--set", "population_size=1000000000"),
        ("ns-es", "--env", "CartPole-v1", "--set", "meta_population_size=1000000000"),
        ("neural-greedy", "--env", "rlx/Statlog-v0", "--set", "batch_size=1000000000"),
        ("bootstrap", "--env", "rlx/Statlog-v0", "--set", "n_networks=100000000"),
        ("neural-linear", "--env", "rlx/Statlog-v0", "--set", "hidden_sizes=100000"),
    ],
    ids=lambda args: " ".join(args[:1] + args[3:]),
)
def test_a_size_that_cannot_fit_is_one_message_before_anything_is_allocated(
    rlx_limited, tmp_path, args
):
    assert_refused(rlx_limited(*args), tmp_path, *MEMORY)


@pytest.mark.parametrize("agent", ["ppo", "dqn", "openai-es"])
def test_a_size_beyond_64_bits_is_one_message_at_the_config_check(rlx_limited, tmp_path, agent):
    setting = "population_size" if agent == "openai-es" else "n_envs"
    result = rlx_limited(agent, "--env", "CartPole-v1", "--set", f"{setting}=99999999999999999999")
    message = assert_refused(result, tmp_path, "99999999999999999999", "out of range")
    assert setting in message


@pytest.mark.parametrize("agent", ["thompson", "epsilon-greedy", "fixed"])
def test_a_multi_armed_agent_refuses_tables_of_a_billion_arms(rlx_limited, tmp_path, agent):
    config = tmp_path / "arms.toml"
    config.write_text("[env_kwargs]\nn_arms = 1_000_000_000\n")
    result = rlx_limited(agent, "--env", "rlx/BernoulliMAB-v0", "--config", str(config))
    assert_refused(result, tmp_path, "1,000,000,000 arms", *MEMORY[:2])


@pytest.mark.parametrize("kwargs", ["n_arms = 1_000_000_000", "n_bandits = 1_000_000_000"])
def test_a_bandit_environment_refuses_a_billion_arms_or_bandits(rlx_limited, tmp_path, kwargs):
    (tmp_path / "env.toml").write_text(f"[env_kwargs]\n{kwargs}\n")
    result = rlx_limited(
        "thompson", "--env", "rlx/BernoulliMAB-v0", "--steps", "10", "--config", "env.toml"
    )
    assert_refused(result, tmp_path, *MEMORY, "lower n_arms or n_bandits")


@pytest.mark.parametrize("agent", ["q-learning", "sarsa", "sarsa-lambda", "dyna-q"])
def test_a_tabular_agent_refuses_a_table_of_a_trillion_states(rlx_limited, tmp_path, agent):
    (tmp_path / "huge_env.py").write_text(
        textwrap.dedent(
            """
            import gymnasium as gym

            class HugeDiscrete(gym.Env):
                observation_space = gym.spaces.Discrete(10**12)
                action_space = gym.spaces.Discrete(4)

                def reset(self, *, seed=None, options=None):
                    super().reset(seed=seed)
                    return 0, {}

                def step(self, action):
                    return 0, 0.0, True, False, {}

            gym.register("HugeDiscrete-v0", entry_point=HugeDiscrete, max_episode_steps=10)
            """
        )
    )
    result = rlx_limited(agent, "--env", "HugeDiscrete-v0", prelude="huge_env")
    assert_refused(result, tmp_path, "1,000,000,000,000 states", *MEMORY[:2])


@pytest.mark.parametrize(
    "args",
    [
        ("dqn", "--env", "CartPole-v1", "--set", "n_envs=4", "--set", "buffer_size=100000"),
        ("ppo", "--env", "CartPole-v1", "--set", "n_envs=2000", "--set", "n_steps=4"),
        ("openai-es", "--env", "CartPole-v1", "--set", "population_size=64"),
        ("q-learning", "--env", "FrozenLake-v1"),
    ],
    ids=lambda args: args[0],
)
def test_normal_settings_still_train_under_the_limit(rlx_limited, tmp_path, args):
    result = rlx_limited(*args, "--steps", "8000", "--eval-episodes", "1")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "config.json").is_file()


def test_an_atari_frame_buffer_of_a_million_transitions_fits_where_the_memory_is(monkeypatch):
    from rlx_offpolicy.frames import FrameReplayBuffer

    nbytes = FrameReplayBuffer.nbytes_for(
        1_000_000, 1, (4, 84, 84), np.dtype(np.uint8), (), np.dtype(np.uint8)
    )
    assert 7.0e9 < nbytes < 7.2e9  # one 84x84 frame, an action and 7 bytes a transition
    monkeypatch.setattr(memory, "available_memory", lambda: 20 * 2**30)
    memory.check_allocation("a frame replay buffer", nbytes, "lower buffer_size")
    monkeypatch.setattr(memory, "available_memory", lambda: 4 * 2**30)
    with pytest.raises(ConfigError, match=r"6\.6 GiB of memory, but 4\.0 GiB are available"):
        memory.check_allocation("a frame replay buffer", nbytes, "lower buffer_size")


@settings(max_examples=300, deadline=None)
@given(
    nbytes=st.one_of(st.integers(0, 2**40), st.integers(0, 10**40)),
    available=st.one_of(st.none(), st.integers(0, 2**50)),
)
def test_the_check_raises_only_config_errors_and_accepts_what_fits(nbytes, available):
    original = memory.available_memory
    memory.available_memory = lambda: available
    try:
        fits = available is None or nbytes <= memory.HEADROOM * available
        try:
            memory.check_allocation("something", nbytes, "lower it")
        except ConfigError as exc:
            assert not fits
            assert "lower it" in str(exc) and "\n" not in str(exc)
        else:
            assert fits
    finally:
        memory.available_memory = original


def test_the_available_memory_is_bounded_by_the_address_space_limit():
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from rlx.memory import available_memory; print(available_memory())",
        ],
        capture_output=True,
        text=True,
        preexec_fn=limit_memory,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert 0 < int(result.stdout) < LIMIT


def test_an_integer_setting_beyond_64_bits_is_a_config_error():
    from dataclasses import dataclass

    @dataclass
    class Config:
        n: int = hyperparameter(1, "a size", low=1)
        sizes: tuple[int, ...] = hyperparameter((1,), "sizes")

    assert build_config(Config, {"n": "12345678901234567"}).n == 12345678901234567
    for overrides in ({"n": "99999999999999999999"}, {"n": 2**63}, {"sizes": "1,1e30"}):
        with pytest.raises(ConfigError, match="out of range"):
            build_config(Config, overrides)


def test_seeds_that_train_at_once_share_the_memory(monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 10 * 2**30)
    memory.check_allocation("a replay buffer", 6 * 2**30, "lower buffer_size")  # fits alone
    with (
        memory.shared_by(2),
        pytest.raises(ConfigError, match=r"each of the 2 seeds that train at once.*lower --jobs"),
    ):
        memory.check_allocation("a replay buffer", 6 * 2**30, "lower buffer_size")
    memory.check_allocation("a replay buffer", 6 * 2**30, "lower buffer_size")  # block over


def test_a_group_whose_seeds_cannot_fit_side_by_side_is_refused_before_anything(
    tmp_path, monkeypatch, rlx_cli
):
    """Four DQN seeds at once, each with a buffer of about 0.35 GiB, on 1 GiB: refused before
    the group directory exists (one seed at a time would fit)."""
    monkeypatch.setattr(memory, "available_memory", lambda: 2**30)
    group = tmp_path / "group"
    args = ["run", "dqn", "--env", "CartPole-v1", "--set", "buffer_size=7500000"]
    code, _, err = rlx_cli(*args, "--seeds", "0-3", "--jobs", "4", "--out", str(group))
    assert code == 2 and "4 seeds that train at once" in err and "lower --jobs" in err, err
    assert not group.exists()
