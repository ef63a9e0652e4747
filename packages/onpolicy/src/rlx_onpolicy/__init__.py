"""rlx-onpolicy: VPG, A2C, PPO and SVPG on gymnasium vector environments, for rlx.

Importing the package loads nothing heavy (``rlx list`` imports the plugin manifest through
it): the agents, GAE and the rollout buffer load with their modules, e.g.
``from rlx_onpolicy.rollout import gae, RolloutBuffer``.
"""

from importlib.metadata import version as _installed_version

__version__ = _installed_version("rlx-onpolicy")
