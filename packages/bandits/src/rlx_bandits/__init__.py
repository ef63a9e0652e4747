"""rlx-bandits: multi-armed and deep contextual bandit agents for rlx."""

from importlib.metadata import version as _installed_version

__version__ = _installed_version("rlx-bandits")
