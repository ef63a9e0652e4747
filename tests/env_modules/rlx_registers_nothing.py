"""A module that imports fine and registers no environment."""
