from __future__ import annotations

import numpy as np

from rlx.protocols import Agent, Bandit, BanditAgent, Buffer


class TwoArms:
    n_arms = 2
    context_dim = 0

    def __init__(self):
        self.rng = np.random.default_rng(0)

    def context(self):
        return np.zeros(0)

    def pull(self, action):
        return float(self.rng.random() < (0.2, 0.8)[action])

    def optimal_reward(self):
        return 0.8


class Greedy:
    def __init__(self):
        self.total, self.count = np.zeros(2), np.ones(2)

    def select(self, context):
        return int(np.argmax(self.total / self.count))

    def update(self, context, action, reward):
        self.total[action] += reward
        self.count[action] += 1


class ListBuffer:
    def __init__(self):
        self.items = []

    def add(self, **transition):
        self.items.append(transition)

    def sample(self, batch_size):
        return {"obs": np.stack([t["obs"] for t in self.items[:batch_size]])}

    def __len__(self):
        return len(self.items)


def test_bandit_protocols_accept_conforming_classes_and_reject_others():
    assert isinstance(TwoArms(), Bandit) and isinstance(Greedy(), BanditAgent)
    assert not isinstance(Greedy(), Bandit) and not isinstance(TwoArms(), BanditAgent)
    assert not isinstance(TwoArms(), Agent)


def test_a_bandit_round_trip_through_the_protocols_accumulates_exact_regret():
    bandit, agent, regret = TwoArms(), Greedy(), 0.0
    for _ in range(200):
        context = bandit.context()
        action = agent.select(context)
        regret += bandit.optimal_reward() - (0.2, 0.8)[action]
        agent.update(context, action, bandit.pull(action))
    assert 0.0 <= regret < 200 * 0.6


def test_buffer_protocol():
    buffer = ListBuffer()
    buffer.add(obs=np.ones(3))
    assert isinstance(buffer, Buffer) and len(buffer) == 1
    assert buffer.sample(1)["obs"].shape == (1, 3)
