"""rlx-offpolicy: DQN, DDPG, TD3 and SAC on replay buffers, for rlx.

Importing the package loads nothing heavy (``rlx list`` imports the plugin manifest through
it): the agents and buffers load with their modules, e.g.
``from rlx_offpolicy.dqn import DQN``. The uniform replay buffer the others build on is
rlx-core's :class:`rlx.replay.ReplayBuffer`.
"""

from importlib.metadata import version as _installed_version

__version__ = _installed_version("rlx-offpolicy")
