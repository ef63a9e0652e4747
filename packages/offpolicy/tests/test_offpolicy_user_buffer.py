"""A user's replay buffer class (``replay_buffer_class``): built and used by the agent,
recorded by import path, loaded back only when trusted, and a class that lacks what the
agent calls is one ConfigError naming all of it."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import rlx
from rlx.errors import ConfigError, UntrustedCodeError
from rlx.testing import check_agent
from rlx.trainer import Trainer

SMALL = dict(
    learning_starts=32,
    batch_size=32,
    train_freq=16,
    gradient_steps=2,
    buffer_size=500,
    hidden_sizes=(16,),
)


@pytest.fixture
def buffers_module(tmp_path, monkeypatch):
    """A module of the user's importable as ``rlx_offpolicy_test_buffers``."""
    (tmp_path / "rlx_offpolicy_test_buffers.py").write_text(
        textwrap.dedent(
            """
            import numpy as np

            from rlx.replay import ReplayBuffer
            from rlx_offpolicy.prioritized import PrioritizedReplayBuffer

            calls = []


            class RecentReplay(ReplayBuffer):
                '''Half of each minibatch from the newest 64 transitions of each
                environment, the rest uniform.'''

                def sample(self, batch_size, rng, gamma, n_step=1):
                    calls.append(("sample", batch_size))
                    slots, envs = self.sample_indices(batch_size, rng)
                    recent = rng.random(batch_size) < 0.5
                    back = rng.integers(1, np.minimum(self.counts[envs], 64) + 1)
                    newest = (self.positions[envs] - back) % self.slots
                    return self.gather(np.where(recent, newest, slots), envs, gamma, n_step)


            class CountingPrioritized(PrioritizedReplayBuffer):
                '''The built-in prioritized buffer, counting priority updates.'''

                def update_priorities(self, indices, td_errors):
                    calls.append(("update_priorities", len(indices)))
                    super().update_priorities(indices, td_errors)


            class NoCheckpoints:
                '''Samples, but cannot be saved.'''

                def __init__(self, *layout):
                    pass

                def add(self, *step):
                    pass

                def sample(self, batch_size, rng, gamma, n_step=1):
                    return {}

                def __len__(self):
                    return 0


            class Empty:
                '''Nothing a replay buffer has.'''


            def not_a_class(*args):
                return None
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import rlx_offpolicy_test_buffers

    rlx_offpolicy_test_buffers.calls.clear()
    return rlx_offpolicy_test_buffers


def test_a_users_buffer_class_is_built_used_and_keeps_the_contract(buffers_module):
    target = "rlx_offpolicy_test_buffers:RecentReplay"
    # The contract, save and load, and an exact resume through the class's state and load.
    check_agent("sac", "Pendulum-v1", iterations=3, replay_buffer_class=target, **SMALL)
    agent = rlx.make("td3", "Pendulum-v1", seed=0, replay_buffer_class=target, **SMALL)
    assert type(agent.buffer) is buffers_module.RecentReplay
    buffers_module.calls.clear()
    for _ in range(4):
        agent.step()
    assert ("sample", 32) in buffers_module.calls


def test_a_prioritized_users_class_gets_alpha_and_the_priority_updates(buffers_module):
    agent = rlx.make(
        "sac",
        "Pendulum-v1",
        seed=0,
        prioritized=True,
        priority_alpha=0.3,
        replay_buffer_class="rlx_offpolicy_test_buffers:CountingPrioritized",
        **SMALL,
    )
    assert agent.buffer.alpha == 0.3
    for _ in range(4):
        agent.step()
    assert ("update_priorities", 32) in buffers_module.calls


def test_the_class_given_to_make_is_recorded_by_path_and_loads_only_when_trusted(
    buffers_module, tmp_path
):
    agent = rlx.make(
        "ddpg", "Pendulum-v1", seed=0, replay_buffer_class=buffers_module.RecentReplay, **SMALL
    )
    target = "rlx_offpolicy_test_buffers:RecentReplay"
    assert agent.config.replay_buffer_class == target
    run = tmp_path / "run"
    Trainer(agent, steps=96, eval_every=0, eval_episodes=0, run_dir=run, progress=False).fit()
    config = json.loads((run / "config.json").read_text())
    assert config["hyperparameters"]["replay_buffer_class"] == target
    with pytest.raises(UntrustedCodeError, match="sets replay_buffer_class="):
        rlx.load(run)
    loaded = rlx.load(run, trust_code=True)
    assert type(loaded.buffer) is buffers_module.RecentReplay
    observation = np.zeros(3, np.float32)
    np.testing.assert_array_equal(loaded.act(observation), agent.act(observation))


@pytest.mark.parametrize(
    "name, settings, message",
    [
        (
            "Empty",
            {},
            r"lacks what the agent calls: add \(rlx.protocols.Buffer\), sample "
            r"\(rlx.protocols.Buffer\), __len__ \(rlx.protocols.Buffer\), state "
            r"\(checkpoints\), load \(checkpoints\)\. Subclass rlx.replay.ReplayBuffer",
        ),
        ("NoCheckpoints", {}, r"lacks what the agent calls: state \(checkpoints\), load"),
        (
            "RecentReplay",
            {"prioritized": True},
            r"lacks what the agent calls: update_priorities \(prioritized\)\. Subclass "
            r"rlx_offpolicy.prioritized.PrioritizedReplayBuffer",
        ),
        ("not_a_class", {}, "is a function, not a class"),
        ("RecentReplai", {}, "has no 'RecentReplai'. Did you mean: RecentReplay"),
    ],
)
def test_a_class_that_lacks_what_the_agent_calls_is_one_config_error(
    buffers_module, name, settings, message
):
    with pytest.raises(ConfigError, match=message):
        rlx.make(
            "td3",
            "Pendulum-v1",
            replay_buffer_class=f"rlx_offpolicy_test_buffers:{name}",
            **settings,
            **SMALL,
        )


def test_a_bad_buffer_class_on_the_command_line_is_exit_2_with_one_message(
    buffers_module, rlx_cli, tmp_path
):
    code, _, err = rlx_cli(
        "run",
        "sac",
        "--env",
        "Pendulum-v1",
        "--set",
        "replay_buffer_class=rlx_offpolicy_test_buffers:RecentReplai",
        "--steps",
        "100",
        "--out",
        str(tmp_path / "r"),
    )
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Did you mean: RecentReplay" in lines[0], err
