"""The plugin manifest that rlx loads through the ``rlx.plugins`` entry point.

It must stay cheap: it describes the agent (and a logger) with a ``"module:Class"``
string and never imports the implementation, so ``rlx list`` stays fast however many
plugins are installed.
"""

from __future__ import annotations

from collections.abc import Callable

import rlx


@rlx.hookimpl
def rlx_register_agents(register: Callable[[rlx.AgentSpec], None]) -> None:
    """Register the hill-climbing agent (a spec only: nothing is imported)."""
    register(
        rlx.AgentSpec(
            name="hill-climbing",
            target="rlx_hillclimb.agent:HillClimbingAgent",
            family="example",
            summary="linear policy trained by hill climbing with adaptive noise scaling",
            paper=(
                "Russell & Norvig (2020), Artificial Intelligence: A Modern Approach, 4th edition, "
                "section 4.1 (hill climbing)"
            ),
            observation_spaces=("Box",),
            action_spaces=("Discrete",),
        )
    )


@rlx.hookimpl
def rlx_register_loggers(register: Callable[[rlx.LoggerSpec], None]) -> None:
    """Register the JSON-lines logger."""
    register(
        rlx.LoggerSpec(
            name="jsonl",
            target="rlx_hillclimb.logger:JsonLinesLogger",
            summary="every metrics row as a JSON line in RUN_DIR/metrics.jsonl",
        )
    )
