"""A module whose import fails."""

raise RuntimeError("this environment module is broken on purpose")
