"""Property-based tests: no input to the config parser or the checkpoint loader may produce
anything but a result or one :class:`~rlx.errors.RlxError` (one message, exit 2)."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import rlx  # noqa: E402
from rlx.checkpoint import (  # noqa: E402
    POLICY_FILE,
    STATE_FILE,
    json_checksum,
    load_checkpoint,
)
from rlx.config import build_config, hyperparameter, parse_assignments  # noqa: E402
from rlx.errors import RlxError  # noqa: E402
from rlx.trainer import Trainer, TrainerConfig  # noqa: E402

FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@dataclass
class Example:
    """Every kind of field the agents declare."""

    learning_rate: float = hyperparameter(0.1, "step size", low=0, high=1, low_open=True)
    n_envs: int = hyperparameter(8, "environments", low=1)
    gamma: float | None = hyperparameter(None, "discount", low=0, high=1)
    hidden_sizes: tuple[int, ...] = hyperparameter((64, 64), "layers")
    activation: str = hyperparameter("tanh", "activation", choices=("tanh", "relu"))
    normalize: bool = hyperparameter(False, "normalise")


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "learning_rate",
                "n_envs",
                "gamma",
                "hidden_sizes",
                "activation",
                "normalize",
                "unknown",
            ]
        ),
        st.one_of(json_values, st.text(max_size=20)),
        max_size=4,
    )
)
def test_the_config_parser_returns_a_config_or_one_rlx_error(overrides):
    for config_cls in (Example, TrainerConfig):
        try:
            build_config(config_cls, overrides)
        except RlxError:
            pass


@FUZZ
@given(st.lists(st.text(max_size=20), max_size=5))
def test_set_assignments_parse_or_are_one_rlx_error(items):
    try:
        parsed = parse_assignments(items)
    except RlxError:
        return
    try:
        build_config(Example, {k: v for k, v in parsed.items() if k in ("n_envs", "gamma")})
    except RlxError:
        pass


@FUZZ
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_a_config_file_of_any_bytes_is_read_or_one_rlx_error(tmp_path, content):
    from rlx.cli import _read_config_file

    path = tmp_path / "run.toml"
    path.write_bytes(content)
    try:
        _read_config_file(path)
    except RlxError:
        pass


# -- the checkpoint loader ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("fuzz") / "run"
    Trainer(
        rlx.make("random", "CartPole-v1", seed=0),
        run_dir=run,
        steps=300,
        eval_every=100,
        eval_episodes=1,
        progress=False,
        verbose=False,
        plot=False,
        tensorboard=False,
    ).fit()
    return run


def _copy(saved_run: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(saved_run, target)
    return target


def _load_all(run: Path) -> None:
    """Every way a user loads a run; each must succeed or raise one RlxError."""
    for call in (
        lambda: load_checkpoint(run / "final"),
        lambda: rlx.load(run),
        lambda: rlx.load(run / "best", resume=False),
        lambda: Trainer.resume(run, steps=10_000).run.unlock(),
    ):
        try:
            call()
        except RlxError:
            pass


@FUZZ
@given(json_values)
def test_a_state_json_of_any_json_is_one_checkpoint_error(saved_run, tmp_path, document):
    run = _copy(saved_run, tmp_path, "any-json")
    (run / "final" / STATE_FILE).write_text(json.dumps(document))
    try:
        load_checkpoint(run / "final")
    except RlxError:
        pass


@FUZZ
@given(
    st.sampled_from(["run", "trainer", "policy", "resume", "format_version", "written_by"]),
    st.one_of(
        json_values,
        st.dictionaries(
            st.sampled_from(
                [
                    "agent",
                    "env",
                    "seed",
                    "env_kwargs",
                    "hyperparameters",
                    "meta",
                    "sha256",
                    "env_steps",
                    "csv_rows",
                    "window",
                    "recent_returns",
                ]
            ),
            json_values,
            max_size=4,
        ),
    ),
)
def test_edited_fields_with_a_recomputed_checksum_load_or_are_one_rlx_error(
    saved_run, tmp_path, field, value
):
    run = _copy(saved_run, tmp_path, "edited")
    for checkpoint in (run / "final", run / "best"):
        document = json.loads((checkpoint / STATE_FILE).read_text())
        document.pop("checksum")
        if isinstance(value, dict) and isinstance(document.get(field), dict):
            document[field] = {**document[field], **value}
        else:
            document[field] = value
        document["checksum"] = json_checksum(document)
        (checkpoint / STATE_FILE).write_text(json.dumps(document))
    _load_all(run)


@FUZZ
@given(json_values, st.binary(max_size=64))
def test_a_lying_safetensors_header_is_one_checkpoint_error(saved_run, tmp_path, header, data):
    run = _copy(saved_run, tmp_path, "header")
    text = json.dumps(header).encode()
    content = struct.pack("<Q", len(text)) + text + data
    (run / "final" / POLICY_FILE).write_bytes(content)
    document = json.loads((run / "final" / STATE_FILE).read_text())
    document.pop("checksum")
    document["policy"]["sha256"] = hashlib.sha256(content).hexdigest()
    document["checksum"] = json_checksum(document)
    (run / "final" / STATE_FILE).write_text(json.dumps(document))
    _load_all(run)
