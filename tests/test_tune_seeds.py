"""``rlx tune --seeds K``: every trial scored over K seeds, by the IQM of their values.

Trials are q-learning on FrozenLake (rlx-classical) with a few thousand steps per seed.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")
scipy_stats = pytest.importorskip("scipy.stats")

from rlx.seeding import derive  # noqa: E402
from rlx.statistics import summarize  # noqa: E402
from rlx.tune import tune  # noqa: E402

SPACE = {"epsilon_start": 1.0, "epsilon_end": 0.05, "epsilon_decay_steps": 1500}
SPACE_FILE = "epsilon_start = 1.0\nepsilon_end = 0.05\nepsilon_decay_steps = 1500\n"
QUICK = ("--steps", "2000", "--eval-every", "500", "--eval-episodes", "20")
STUDY = "q-learning-FrozenLake-v1"


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "trials.csv", newline="") as f:
        return list(csv.DictReader(f))


def _last_evaluation(run_dir: Path) -> float:
    """The run's final evaluation return, read back from its metrics.csv."""
    with open(run_dir / "metrics.csv", newline="") as f:
        returns = [row["eval/return_mean"] for row in csv.DictReader(f)]
    return float([value for value in returns if value][-1])


def _study(out: Path, name: str = STUDY) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{out / 'study.db'}")


def _tune(rlx_cli, tmp_path: Path, out: Path, *args: str) -> tuple[int, str, str]:
    space = tmp_path / "space.toml"
    space.write_text(SPACE_FILE)
    return rlx_cli(
        "tune", "q-learning", "--env", "FrozenLake-v1", *QUICK, "--space", str(space),
        "--out", str(out), *args,
    )  # fmt: skip


def test_a_trial_over_seeds_scores_the_iqm_of_its_seed_runs(rlx_cli, tmp_path):
    out = tmp_path / "tune"
    code, _, err = _tune(rlx_cli, tmp_path, out, "--trials", "2", "--seeds", "3", "--no-prune")
    assert code == 0, err
    assert "(IQM of 3 seeds)" in err
    study = {t.number: t for t in _study(out).trials}
    rows = _rows(out)
    assert [row["state"] for row in rows] == ["complete"] * 2
    for row in rows:
        number = int(row["number"])
        trial_dir = out / "trials" / row["number"]
        seeds = [derive(0, "tune-trial", number, k) % 2**32 for k in range(3)]
        values = []
        for k, seed in enumerate(seeds):
            run_dir = trial_dir / f"seed-{k}"
            assert json.loads((run_dir / "config.json").read_text())["seed"] == seed
            values.append(_last_evaluation(run_dir))
            assert float(row[f"eval_return_seed_{k}"]) == values[-1]
        iqm = summarize(values)["iqm"]["value"]
        assert iqm == pytest.approx(scipy_stats.trim_mean(values, 0.25), abs=1e-12)
        assert float(row["eval_return"]) == iqm == study[number].value
        assert row["seed"] == " ".join(map(str, seeds))
        record = json.loads((trial_dir / "trial.json").read_text())
        assert (record["value"], record["seeds"], record["seed_values"]) == (iqm, seeds, values)
        assert record["statistic"] == "iqm" and record["state"] == "complete"
    best = (out / "best.toml").read_text()
    assert "the IQM over the trial's 3 seeds" in best


def test_one_seed_per_trial_is_the_single_run_trial_of_before(tmp_path):
    out = tmp_path / "tune"
    tune("q-learning", "FrozenLake-v1", trials=2, steps=2000, eval_every=500, eval_episodes=20,
         space=SPACE, out=out, seeds=1, prune=False)  # fmt: skip
    with open(out / "trials.csv", newline="") as f:
        header = next(csv.reader(f))
    assert header == [
        "number", "state", "eval_return", "seed", "env_steps", "seconds", "run_dir",
        "gamma", "learning_rate", "error",
    ]  # fmt: skip
    for trial in _study(out).trials:
        trial_dir = out / "trials" / str(trial.number)
        assert trial.user_attrs["seed"] == derive(0, "tune-trial", trial.number) % 2**32
        assert "seeds" not in trial.user_attrs and not list(trial_dir.glob("seed-*"))
        assert trial.value == _last_evaluation(trial_dir)
        record = json.loads((trial_dir / "trial.json").read_text())
        assert record["value"] == trial.value and "seed_values" not in record


def test_a_trial_over_seeds_can_be_pruned_between_seeds(tmp_path):
    class AlwaysPrune(optuna.pruners.BasePruner):
        def prune(self, study, trial):
            return True

    out = tmp_path / "tune"
    tune("q-learning", "FrozenLake-v1", trials=1, steps=2000, eval_every=500, eval_episodes=20,
         space=SPACE, out=out, seeds=3, pruner=AlwaysPrune())  # fmt: skip
    (trial,) = _study(out).trials
    trial_dir = out / "trials" / "0"
    first = _last_evaluation(trial_dir / "seed-0")
    assert trial.state == optuna.trial.TrialState.PRUNED
    assert trial.intermediate_values == {1: first}  # step = seeds done, never inside a seed
    assert not (trial_dir / "seed-1").exists()
    record = json.loads((trial_dir / "trial.json").read_text())
    assert (record["state"], record["seed_values"]) == ("pruned", [first])
    (row,) = _rows(out)
    assert (row["eval_return_seed_0"], row["eval_return_seed_1"]) == (str(first), "")


@pytest.mark.parametrize("given", ["0", "-1", "abc"])
def test_seeds_other_than_a_positive_integer_is_one_message_exit_2(rlx_cli, tmp_path, given):
    out = tmp_path / "tune"
    code, _, err = _tune(rlx_cli, tmp_path, out, "--trials", "1", "--seeds", given)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert "--seeds must be a positive integer" in err and repr(given) in err
    assert not out.exists()


def test_a_study_continues_only_with_its_number_of_seeds(rlx_cli, tmp_path):
    out = tmp_path / "tune"
    code, _, err = _tune(rlx_cli, tmp_path, out, "--trials", "1", "--no-prune")
    assert code == 0, err
    # A study recorded before --seeds existed has no seeds in its record: it had one.
    study = _study(out)
    recorded = dict(study.user_attrs["rlx"])
    assert recorded.pop("seeds") == 1
    study.set_user_attr("rlx", recorded)
    before = sorted(str(p) for p in out.rglob("*"))
    code, _, err = _tune(rlx_cli, tmp_path, out, "--trials", "2", "--seeds", "2")
    assert code == 2 and "was started with seeds=1, not 2" in err
    assert len(err.strip().splitlines()) == 1
    assert sorted(str(p) for p in out.rglob("*")) == before
    code, _, err = _tune(rlx_cli, tmp_path, out, "--trials", "2", "--no-prune")
    assert code == 0, err
    assert [row["state"] for row in _rows(out)] == ["complete"] * 2


#: PPO on CartPole (rlx-onpolicy batches its seeds): two learning rates, tiny runs.
PPO_SPACE = {
    "default_space": False,
    "learning_rate": [3e-4, 1e-3],
    "n_envs": 2,
    "n_steps": 64,
    "batch_size": 64,
    "n_epochs": 2,
    "hidden_sizes": [16, 16],
}


def test_a_trial_of_batching_seeds_trains_them_as_one_and_scores_as_one_by_one(tmp_path):
    """PPO's seeds train as one batched computation (trial.json says so); the trial's seed
    values are those of the same trial trained one seed after another (a batched seed is its
    single run, to float rounding), and the value is their IQM."""
    pytest.importorskip("rlx_onpolicy")
    studies = {}
    for batched in (True, False):
        out = tmp_path / f"batched-{batched}"
        tune("ppo", "CartPole-v1", trials=2, steps=512, eval_every=256, eval_episodes=3,
             space=PPO_SPACE, out=out, seeds=3, prune=False, batched=batched)  # fmt: skip
        trials = _study(out, "ppo-CartPole-v1").trials
        studies[batched] = (out, {t.number: t for t in trials})
    for number in (0, 1):
        records = []
        for batched in (True, False):
            out, trials = studies[batched]
            record = json.loads((out / "trials" / str(number) / "trial.json").read_text())
            assert record["batched"] is batched and record["state"] == "complete"
            assert record["value"] == trials[number].value
            assert record["value"] == pytest.approx(
                summarize(record["seed_values"])["iqm"]["value"]
            )
            records.append(record)
        assert records[0]["params"] == records[1]["params"]
        assert records[0]["seed_values"] == pytest.approx(records[1]["seed_values"], rel=1e-6)


def test_ctrl_c_in_a_batched_trial_stops_every_seed_after_its_iteration(tmp_path, monkeypatch):
    """SIGINT at trial 1's first evaluation: each seed of the batch finishes its iteration and
    saves final/, the trial is marked interrupted, and the study stops there."""
    import os
    import signal

    import rlx.tune.objective

    pytest.importorskip("rlx_onpolicy")
    evaluate = rlx.tune.objective._Pruning.on_evaluation
    sent = []

    def interrupting(self, trainer, result):
        if self.trial.number == 1 and not sent:  # one Ctrl-C (a second stops at once)
            sent.append(trainer.iterations)
            os.kill(os.getpid(), signal.SIGINT)
        return evaluate(self, trainer, result)

    monkeypatch.setattr(rlx.tune.objective._Pruning, "on_evaluation", interrupting)
    out = tmp_path / "tune"
    result = tune("ppo", "CartPole-v1", trials=3, steps=512, eval_every=256, eval_episodes=2,
                  space=PPO_SPACE, out=out, seeds=2, prune=False)  # fmt: skip
    assert result.interrupted
    states = [t.state.name for t in _study(out, "ppo-CartPole-v1").trials]
    assert states == ["COMPLETE", "FAIL"]
    record = json.loads((out / "trials" / "1" / "trial.json").read_text())
    assert (record["state"], record["batched"]) == ("interrupted", True)
    for k in range(2):
        run = out / "trials" / "1" / f"seed-{k}"
        assert (run / "final").is_dir()
        state = json.loads((run / "final" / "state.json").read_text())
        assert state["trainer"]["stop_reason"] == "interrupted"
        # Iterations, not steps: the seeds' counts of valid steps differ by their episode ends.
        assert sent[0] <= state["trainer"]["iterations"] and state["trainer"]["env_steps"] < 512
