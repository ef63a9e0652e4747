"""rlx-bandits: multi-armed and deep contextual bandit agents for rlx."""
