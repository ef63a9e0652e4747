"""Seed groups: one configuration trained with many seeds, each seed an ordinary run.

``rlx run AGENT --env ENV --seeds 0-15`` (:func:`new_group`) trains every seed as its own
recorded run, ``rlx.trainer.new_run(..., seed=k, out=GROUP/seed-k)``, in chunks handed to an
executor (:mod:`rlx.executors`): worker processes on this machine (``--jobs``, default one
per core), or Ray tasks on a cluster (``--backend ray``), whose workers send each seed's
files back to this process, the only one that writes the group. A seed of a group is the
single-seed run of that seed, and ``rlx eval``, ``rlx plot``, ``rlx.load``, ``--init-from``
and ``--resume`` take it as any run. When the agent batches seeds
(:class:`rlx.protocols.BatchesSeeds`: VPG, A2C, PPO, the DQNs, DDPG, TD3 and SAC), each
worker trains its share of the seeds as one batched computation, their trainers advancing in
turn (:meth:`rlx.trainer.Trainer.steps`); otherwise, and with ``--no-batched``, each worker
trains one seed at a time. Layout::

    GROUP/
      .rlx-group      the marker that makes the folder a group (written first)
      group.json      agent, env, seeds, settings, hyperparameters, wrappers, env_kwargs, tuned
      seed-<k>/       the run directory of seed k
      summary.json    per seed: stop reason, steps, final and best evaluation returns (or
                      the error), and the aggregate of the final returns (rlx.statistics)
      .lock           held by the process training the group

In Python::

    from rlx.groups import GroupTrainer, new_group

    group = new_group("q-learning", "FrozenLake-v1", seeds=range(4), settings={"steps": 20_000})
    result = group.fit()
    print(result.summary["aggregate"]["iqm"], result.results[0].final_eval)
    GroupTrainer.resume(result.path, steps=40_000).fit()   # every seed goes on

Workers start with SIGINT ignored; a Ctrl-C reaches the main process, which asks every
seed to stop after its iteration (``final/`` saved, stop reason ``interrupted``), so that
``rlx run --resume GROUP`` continues each one exactly. A seed that fails stops alone; the
others go on and ``summary.json`` records its error. A Ray task lost with its worker or node
is trained again from the newest checkpoints the driver holds.

The modules: :mod:`~rlx.groups.seeds` (``--seeds``, folders), :mod:`~rlx.groups.worker` (what
trains a chunk, wherever it runs), :mod:`~rlx.groups.record` (group.json and what a resume
finds on disk), :mod:`~rlx.groups.trainer` (the driver).
"""

from rlx.groups.record import SUMMARY_FILE
from rlx.groups.seeds import (
    MAX_SEEDS,
    check_jobs,
    check_seeds,
    default_group_path,
    parse_seeds,
    seed_dir,
)
from rlx.groups.trainer import GroupResult, GroupTrainer, new_group
from rlx.groups.worker import batches_seeds, link_seeds, train_side_by_side
from rlx.runs import GROUP_FILE, GROUP_MARKER, is_group

__all__ = [
    "GROUP_FILE",
    "GROUP_MARKER",
    "MAX_SEEDS",
    "SUMMARY_FILE",
    "GroupResult",
    "GroupTrainer",
    "batches_seeds",
    "check_jobs",
    "check_seeds",
    "default_group_path",
    "is_group",
    "link_seeds",
    "new_group",
    "parse_seeds",
    "seed_dir",
    "train_side_by_side",
]
