"""rlx-hillclimb: an example rlx plugin, a linear policy trained by hill climbing.

The package imports nothing of its own on purpose (``__version__`` comes from the installed
metadata): rlx reads :mod:`rlx_hillclimb.plugin` when it lists agents, and imports
:mod:`rlx_hillclimb.agent` only when the agent is made.
"""

from importlib.metadata import version as _installed_version

__version__ = _installed_version("rlx-hillclimb")
