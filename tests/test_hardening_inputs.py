"""Bad input found after the hostile-input round: each is one message, exit code 2, found
before any work, and nothing written or lost.

- ``rlx eval --video`` to a place where no file can be made (under a regular file, in
  ``/proc``, a read-only folder) is refused before the policy is loaded;
- ``--wrapper`` arguments of the wrong type, that the wrapper's constructor refuses, or a
  ``module:Class`` that is no gymnasium wrapper are refused when the environment is first
  built, before the run directory exists;
- an MLflow store that cannot be written is refused at once (MLflow's client retries an
  unwritable SQLite database for about two minutes);
- ``rlx tune`` of another study into an existing study's folder is refused instead of
  replacing that study's ``best.toml``, ``trials.csv`` and plots.

As root, ``chmod`` does not make a folder unwritable: those cases are skipped there, and the
others use paths no user can write (under a regular file, in ``/proc``).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlx
from rlx.trainer import Trainer

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_non_root = pytest.mark.skipif(ROOT, reason="root writes in any folder, whatever its mode")


def one_message(code: int, err: str, expected: str) -> None:
    """Exit code 2 and one line on stderr, ``error: ...`` holding ``expected``."""
    assert code == 2, err
    assert expected in err, err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err


def unwritable(tmp_path: Path, where: str) -> Path:
    """A folder in which no file can be made: under a regular file, in /proc, or read-only."""
    if where == "file":
        (tmp_path / "file").write_text("kept")
        return tmp_path / "file" / "sub"
    if where == "proc":
        return Path("/proc/rlx-hardening-test")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    return folder


PLACES = ["file", "proc", pytest.param("read-only", marks=needs_non_root)]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with the SHA-256 of its content."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A short q-learning run on FrozenLake-v1."""
    path = tmp_path_factory.mktemp("hardening") / "run"
    Trainer(
        rlx.make("q-learning", "FrozenLake-v1", seed=0),
        run_dir=path,
        steps=500,
        eval_episodes=1,
        progress=False,
        verbose=False,
        plot=False,
        tensorboard=False,
    ).fit()
    return path


# -- 1. rlx eval --video -----------------------------------------------------------------------


@pytest.mark.parametrize("where", PLACES)
def test_eval_video_where_no_file_can_be_made_is_refused_before_loading(
    rlx_cli, run_dir, tmp_path, monkeypatch, where
):
    pytest.importorskip("imageio_ffmpeg")
    before = snapshot(run_dir)
    video = unwritable(tmp_path, where) / "episodes.mp4"

    def load(*args, **kwargs):
        raise AssertionError("the policy was loaded before the video path was checked")

    monkeypatch.setattr(rlx, "load", load)
    code, out, err = rlx_cli("eval", str(run_dir), "--video", str(video))
    one_message(code, err, f"cannot write the video {video}")
    assert out == "" and not video.exists()
    assert snapshot(run_dir) == before
    if where == "file":
        assert (tmp_path / "file").read_text() == "kept"


# -- 2. --wrapper and --training-wrapper -------------------------------------------------------

PLAIN_CLASS = "class Plain:\n    def __init__(self, env):\n        self.env = env\n"


@pytest.mark.parametrize(
    ("option", "wrapper", "expected"),
    [
        (
            "--wrapper",
            "ClipReward,min_reward=abc",
            "wrapper ClipReward: min_reward must be float | np.ndarray | None, got 'abc'",
        ),
        (
            "--training-wrapper",
            "ClipReward,min_reward=1,max_reward=-1",
            "wrapper ClipReward with {'min_reward': 1, 'max_reward': -1} failed: Min reward (1) "
            "must be smaller than max reward (-1)",
        ),
        ("--wrapper", "rlx_test_plain:Plain", "'rlx_test_plain:Plain' is not a gymnasium.Wrapper"),
        ("--wrapper", "collections:OrderedDict", "is not a gymnasium.Wrapper"),
        ("--wrapper", "TimeLimit,max_episode_steps=0", "wrapper TimeLimit with"),
    ],
)
def test_a_wrapper_that_refuses_its_arguments_is_one_message_before_the_run_directory(
    rlx_cli, tmp_path, monkeypatch, option, wrapper, expected
):
    (tmp_path / "rlx_test_plain.py").write_text(PLAIN_CLASS)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "100", "--out", str(out),
        "--no-progress", option, wrapper,
    )  # fmt: skip
    one_message(code, err, expected)
    assert not out.exists()


def _wrapper_names() -> list[str]:
    from rlx.wrappers import _gymnasium_wrapper_names

    # RecordVideo writes into the folder it is given; HumanRendering opens a window.
    return [n for n in _gymnasium_wrapper_names() if n not in ("RecordVideo", "HumanRendering")]


def _parameters(name: str) -> list[str]:
    import gymnasium.wrappers

    try:
        signature = inspect.signature(getattr(gymnasium.wrappers, name))
    except Exception:  # a wrapper whose extra is not installed: its name alone is refused
        return []
    return [p for p in signature.parameters if p != "env"]


#: Values as they are typed after ``key=``: numbers, JSON, words and debris.
VALUES = st.one_of(
    st.integers(-3, 300).map(str),
    st.floats(allow_nan=False, width=32).map(repr),
    st.sampled_from(
        ["abc", "true", "null", "[]", "[1, 2]", "[84, 84]", "[[1]]", "{}", '"x"', "1e400"]
    ),
    st.sampled_from(["NaN", "-Infinity", '["a"]', "uint8", "float32", '{"a": 1}']),
    st.text(alphabet="ab01=[].-{}", max_size=6),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
        max_leaves=6,
    ).map(json.dumps),
)


@st.composite
def wrapper_texts(draw) -> str:
    name = draw(st.sampled_from(_wrapper_names()))
    keys = [*_parameters(name), "bogus"]
    assignments = [
        f"{draw(st.sampled_from(keys))}={draw(VALUES)}" for _ in range(draw(st.integers(0, 3)))
    ]
    return ",".join([name, *assignments])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=wrapper_texts(), env_id=st.sampled_from(["CartPole-v1", "FrozenLake-v1", "Pendulum-v1"])
)
def test_random_arguments_of_gymnasium_wrappers_raise_nothing_but_rlx_errors(text, env_id):
    """Whatever a user types after a gymnasium wrapper's name, building the environment and
    its first steps either work or raise one RlxError."""
    from rlx.api import make_env
    from rlx.errors import RlxError
    from rlx.wrappers import parse

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = make_env(env_id, wrappers=[parse(text)])
            try:
                env.reset(seed=0)
                for _ in range(3):
                    env.step(env.action_space.sample())
            finally:
                env.close()
    except RlxError:
        pass


# -- 3. MLflow stores that cannot be written ---------------------------------------------------


@pytest.mark.parametrize("store", ["sqlite", "file"])
@pytest.mark.parametrize("where", PLACES)
def test_an_unwritable_mlflow_store_is_refused_at_once(
    rlx_cli, tmp_path, monkeypatch, store, where
):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)  # MLflow would put artifacts in ./mlruns
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    # MLflow's own client retries such a store for two minutes: rlx must refuse it before
    # making one. (Checked directly rather than by the time taken, which a busy machine
    # stretches.)
    asked = []

    def client(*args, **kwargs):
        asked.append(kwargs)
        raise RuntimeError("MLflow was asked before the store was checked")

    monkeypatch.setattr(mlflow, "MlflowClient", client)
    folder = unwritable(tmp_path, where)
    uri = f"sqlite:///{folder / 'mlflow.db'}" if store == "sqlite" else f"file://{folder}/mlruns"
    out = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "q-learning", "--env", "FrozenLake-v1", "--steps", "100", "--out", str(out),
        "--no-progress", "--logger", f"mlflow,tracking_uri={uri}",
    )  # fmt: skip
    assert asked == [], "MLflow was asked before the store was checked"
    one_message(code, err, "MLflow database" if store == "sqlite" else "MLflow file store")
    assert not out.exists() and not (tmp_path / "mlruns").exists()
    assert not folder.exists() or not any(folder.iterdir())


# -- 4. rlx tune into another study's folder ---------------------------------------------------

TUNE = ("--env", "FrozenLake-v1", "--steps", "500", "--eval-every", "250", "--eval-episodes", "2")


def test_tune_of_another_study_into_a_study_folder_is_refused_and_the_same_study_continues(
    rlx_cli, tmp_path
):
    pytest.importorskip("optuna")
    out = tmp_path / "tune"
    code, _, err = rlx_cli("tune", "q-learning", *TUNE, "--trials", "1", "--out", str(out))
    assert code == 0, err
    before = snapshot(out)
    assert "best.toml" in before
    holder = "--out {} holds the study 'q-learning-FrozenLake-v1' (q-learning on FrozenLake-v1)"
    for other in (
        ("sarsa", *TUNE),
        ("q-learning", *TUNE, "--study-name", "other"),
    ):
        code, _, err = rlx_cli("tune", *other, "--trials", "1", "--out", str(out))
        one_message(code, err, holder.format(out))
        assert snapshot(out) == before
    shared = f"sqlite:///{tmp_path / 'shared.db'}"
    code, _, err = rlx_cli("tune", "q-learning", *TUNE, "--trials", "1", "--out", str(out),
                       "--storage", shared)  # fmt: skip
    one_message(code, err, f"not 'q-learning-FrozenLake-v1' in {shared}")
    assert snapshot(out) == before and not (tmp_path / "shared.db").exists()
    code, _, err = rlx_cli("tune", "q-learning", *TUNE, "--trials", "2", "--out", str(out))
    assert code == 0, err
    assert "continuing from 1 finished trials" in err
    assert (out / "trials" / "1").is_dir()


# -- 5. a wrapper preset's keywords ------------------------------------------------------------


def test_a_misspelt_preset_keyword_is_one_message_naming_the_presets_keywords(rlx_cli, tmp_path):
    """``--wrapper atari,stak=4`` was Python's TypeError about ``atari()`` and a traceback."""
    pytest.importorskip("rlx_envs.atari")
    out = tmp_path / "run"
    code, _, err = rlx_cli(
        "run", "ppo", "--env", "ALE/Breakout-v5", "--steps", "100", "--out", str(out),
        "--no-progress", "--wrapper", "atari,stak=4",
    )  # fmt: skip
    one_message(code, err, "wrapper preset atari has no keyword 'stak'. Did you mean: stack?")
    assert "Its keywords: noop_max=30, frame_skip=4, screen_size=84, stack=4," in err
    assert not out.exists()
