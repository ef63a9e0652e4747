"""Contract checks that plugin authors run in their own tests, as the built-in families do.

    from rlx.testing import check_agent, check_env

    def test_my_agent_keeps_the_contract():
        check_agent("my-agent", "CartPole-v1")

The pytest fixture ``rlx_registry`` (registered automatically when rlx-core is installed)
gives a test a registry holding only the plugins it adds.
"""

from rlx.testing.checks import check_agent, check_env, same_state, transfer_state, whole_state

__all__ = ["check_agent", "check_env", "same_state", "transfer_state", "whole_state"]
