"""The ``cma-es`` agent's ``restarts`` setting: IPOP restarts double the population in a
run, the blocks and the backend follow it, and a run resumes exactly across a restart."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import rlx
from rlx.errors import ConfigError
from rlx.testing import check_agent

FLAT_ID = "rlx_test/FlatReward-v0"


class FlatReward(gymnasium.Env):
    """Every episode is one step worth 1 whatever the action: every member's fitness is the
    same, so CMA-ES's TolFun criterion stops the run after its window of generations."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 1.0, True, False, {}


gymnasium.register(FLAT_ID, entry_point=FlatReward, max_episode_steps=5)
#: A linear policy of 4 parameters and 30 members: TolFun's window is 10 + 30 * 4 / 30 = 14.
SMALL = dict(hidden_sizes=(), population_size=30)


def test_restarts_double_the_population_and_the_blocks_follow():
    agent = rlx.make("cma-es", FLAT_ID, seed=0, restarts=2, **SMALL)
    sizes = []
    for _ in range(60):
        iteration = agent.step()
        sizes.append(len(iteration.episode_returns))
    assert sizes[0] == 30 and 60 in sizes and 120 in sizes and max(sizes) == 120
    assert sizes == sorted(sizes)  # never shrinks
    assert agent.strategy.restarts_done == 2
    assert agent.settings.block_size == 120  # block_size=0: the whole population, one block
    without = rlx.make("cma-es", FLAT_ID, seed=0, **SMALL)
    assert {len(without.step().episode_returns) for _ in range(60)} == {30}


@pytest.mark.parametrize("iterations", [10, 24])
def test_a_run_resumes_exactly_across_a_restart(iterations):
    # 10: the restart (about generation 15) comes after the checkpoint; 24: before it, so the
    # resumed agent, made with 30 members, loads a strategy of 60.
    check_agent("cma-es", FLAT_ID, iterations=iterations, restarts=1, **SMALL)


def test_restarts_with_worker_processes_rebuild_the_shards():
    agent = rlx.make("cma-es", FLAT_ID, seed=0, restarts=1, backend="process", workers=2, **SMALL)
    try:
        sizes = [len(agent.step().episode_returns) for _ in range(20)]
    finally:
        agent.close()
    assert sizes[0] == 30 and sizes[-1] == 60
    assert agent.settings.block_size == 30  # two workers: half the doubled population each


def test_negative_restarts_are_refused():
    with pytest.raises((ConfigError, ValueError), match="restarts"):
        rlx.make("cma-es", FLAT_ID, restarts=-1)
