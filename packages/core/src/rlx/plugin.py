"""The plugin manifest of rlx-core, registered through the ``rlx.plugins`` entry point."""

from __future__ import annotations

from collections.abc import Callable

from rlx.hookspecs import hookimpl
from rlx.spec import AgentSpec, LoggerSpec


@hookimpl
def rlx_register_agents(register: Callable[[AgentSpec], None]) -> None:
    """Register the ``random`` baseline agent."""
    register(
        AgentSpec(
            name="random",
            target="rlx.agents.random:RandomAgent",
            family="baseline",
            summary="uniform random actions, no learning: the baseline every agent must beat",
            paper=(
                "no paper: uniformly random actions are the reference score of the benchmarks, "
                "e.g. the random play of Mnih et al. (2015), Human-level control through deep "
                "reinforcement learning, Nature 518"
            ),
        )
    )


@hookimpl
def rlx_register_loggers(register: Callable[[LoggerSpec], None]) -> None:
    """Register the built-in loggers: csv, tensorboard, mlflow and wandb."""
    register(
        LoggerSpec(
            name="csv",
            target="rlx.loggers:CsvLogger",
            summary="metrics.csv in the run directory (always on: resume and plots read it)",
        )
    )
    register(
        LoggerSpec(
            name="tensorboard",
            target="rlx.loggers:TensorBoardLogger",
            summary="TensorBoard events in RUN_DIR/tensorboard (on by default when installed)",
            extra="rlx-core[tensorboard]",
        )
    )
    register(
        LoggerSpec(
            name="mlflow",
            target="rlx.loggers:MlflowLogger",
            summary="MLflow run: params, metrics by step, learning curve and final checkpoint",
            extra="rlx-core[mlflow]",
        )
    )
    register(
        LoggerSpec(
            name="wandb",
            target="rlx.loggers:WandbLogger",
            summary="Weights & Biases run (offline mode needs no network): config, metrics, "
            "learning curve, final checkpoint",
            extra="rlx-core[wandb]",
        )
    )
