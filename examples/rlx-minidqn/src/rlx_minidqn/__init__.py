"""rlx-minidqn: an example rlx plugin, a small DQN built only from rlx-core's building blocks.

The package imports nothing of its own on purpose (``__version__`` comes from the installed
metadata): rlx reads :mod:`rlx_minidqn.plugin` when it lists agents, and imports
:mod:`rlx_minidqn.agent`, and with it torch, only when the agent is made.
"""

from importlib.metadata import version as _installed_version

__version__ = _installed_version("rlx-minidqn")
