"""Contract checks that plugin authors run in their own tests, as the built-in families do.

    from rlx.testing import check_agent, check_env, check_seed_batch

    def test_my_agent_keeps_the_contract():
        check_agent("my-agent", "CartPole-v1")

    def test_my_batched_seeds_are_their_single_runs():   # an agent with seed_batch
        check_seed_batch("my-agent", "CartPole-v1", iterations=5)

The pytest fixture ``rlx_registry`` (registered automatically when rlx-core is installed)
gives a test a registry holding only the plugins it adds, and ``rlx_cli`` runs ``rlx ARGS``
in the test's process: ``code, out, err = rlx_cli("list")``. When a check fails it names
where: ``state_difference`` says which array key (with shapes, the first differing index and
values) or metadata path first differs between two agent states, and
``check_close_states(a, b, tolerance)`` holds two agents' whole states equal up to rounding
(a batched seed against its single run). ``optimal_returns(env)``
gives a toy-text environment's best return from each state, to test for the optimum.
"""

from rlx.testing.checks import (
    check_agent,
    check_close_states,
    check_env,
    check_seed_batch,
    same_state,
    state_difference,
    transfer_state,
    whole_state,
)
from rlx.testing.optimal import optimal_returns

__all__ = [
    "check_agent",
    "check_close_states",
    "check_env",
    "check_seed_batch",
    "optimal_returns",
    "same_state",
    "state_difference",
    "transfer_state",
    "whole_state",
]
