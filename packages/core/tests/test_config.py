from __future__ import annotations

from dataclasses import dataclass

import pytest

from rlx.config import build_config, describe, hyperparameter, parse_assignments, to_dict
from rlx.errors import ConfigError, UnknownNameError


@dataclass
class ExampleConfig:
    learning_rate: float = hyperparameter(0.1, "step size", low=0, high=1, low_open=True)
    batch: int = hyperparameter(32, "samples per update", low=1)
    trace: str = hyperparameter("replacing", "trace kind", choices=("replacing", "accumulating"))
    decay: float | None = hyperparameter(None, "optional decay")
    layers: tuple[int, ...] = hyperparameter((64, 64), "hidden sizes")
    normalize: bool = hyperparameter(False, "normalise observations")

    def __post_init__(self) -> None:
        if self.batch > 1000 and self.learning_rate > 0.5:
            raise ValueError("large batches need learning_rate <= 0.5")


def test_strings_from_the_command_line_are_parsed_to_the_declared_types():
    config = build_config(
        ExampleConfig,
        {
            "learning_rate": "0.5",
            "batch": "1_000",
            "decay": "0.9",
            "layers": "32,16",
            "normalize": "yes",
        },
    )
    assert config.learning_rate == 0.5
    assert config.batch == 1000
    assert config.decay == 0.9
    assert config.layers == (32, 16)
    assert config.normalize is True


def test_none_is_accepted_for_optional_values():
    assert build_config(ExampleConfig, {"decay": "none"}).decay is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"learning_rate": "fast"}, "learning_rate expects a number"),
        ({"batch": "2.5"}, "batch expects an integer"),
        ({"batch": True}, "batch expects an integer"),
        ({"normalize": "maybe"}, "normalize expects true or false"),
        ({"learning_rate": 0}, r"learning_rate must be in (0, 1]"),
        ({"learning_rate": 1.5}, r"learning_rate must be in (0, 1]"),
        ({"learning_rate": "nan"}, "learning_rate must be a finite number"),
        ({"batch": 0}, r"batch must be in [1, inf]"),
        ({"trace": "replace"}, "trace must be one of replacing, accumulating"),
        ({"batch": 2000, "learning_rate": 0.9}, "large batches need"),
    ],
)
def test_bad_values_name_the_key_and_what_is_valid(overrides, message):
    with pytest.raises(ConfigError) as info:
        build_config(ExampleConfig, overrides)
    assert message in str(info.value)


def test_unknown_key_suggests_the_closest_one():
    with pytest.raises(UnknownNameError, match="Did you mean: learning_rate"):
        build_config(ExampleConfig, {"learning_rat": 0.2})


def test_describe_lists_type_default_range_and_meaning():
    rows = {row["name"]: row for row in describe(ExampleConfig)}
    assert rows["learning_rate"] == {
        "name": "learning_rate",
        "type": "float",
        "default": 0.1,
        "help": "step size",
        "range": "(0, 1]",
    }
    assert rows["trace"]["range"] == "{replacing, accumulating}"
    assert rows["layers"]["default"] == (64, 64)


def test_to_dict_is_json_ready_and_round_trips():
    config = build_config(ExampleConfig, {"layers": (8,)})
    data = to_dict(config)
    assert data["layers"] == [8]
    assert build_config(ExampleConfig, data) == config


def test_set_assignments_need_an_equals_sign():
    assert parse_assignments(["learning-rate=0.3", "batch = 4"]) == {
        "learning_rate": "0.3",
        "batch": "4",
    }
    with pytest.raises(ConfigError, match="key=value"):
        parse_assignments(["learning_rate"])
