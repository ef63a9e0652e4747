"""rlx-hillclimb: an example rlx plugin, a linear policy trained by hill climbing.

The package imports nothing on purpose: rlx reads :mod:`rlx_hillclimb.plugin` when it
lists agents, and imports :mod:`rlx_hillclimb.agent` only when the agent is made.
"""
