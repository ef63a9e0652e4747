"""Agents that ship with rlx-core."""
