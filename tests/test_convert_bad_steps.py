"""`crosssim logs convert` on a JSON step list with values that are not numbers: one line naming
the step and the key (LogError), never a traceback."""

import json

import pytest

from crosssim.real.convert import Target, from_json_steps
from crosssim.real.logs import LogError

GOOD = {"time": 0.0, "q": [1.0], "dq": [0.0], "action": [0.0]}


@pytest.mark.parametrize("key, value", [
    ("q", ["x"]), ("q", {"a": 1}), ("q", [[1.0]]), ("dq", None), ("time", None), ("time", [0.1, 0.2]),
    ("time", "soon"), ("quat", [1, 0, 0]), ("quat", "up"),
])
def test_a_value_that_is_no_number_is_one_line(tmp_path, key, value):
    src = tmp_path / "steps.json"
    src.write_text(json.dumps([GOOD, {**GOOD, "time": 0.01, key: value}]))
    with pytest.raises(LogError, match=f"step 1: '{key}'"):
        from_json_steps(src, tmp_path / "out.csv", Target(robot="r", joints=("a",), control_period=0.01))


def test_numbers_still_convert(tmp_path):
    src = tmp_path / "steps.json"
    src.write_text(json.dumps([GOOD, {**GOOD, "time": 0.01, "q": 2}]))
    path, ignored = from_json_steps(src, tmp_path / "out.csv", Target(robot="r", joints=("a",), control_period=0.01))
    assert path.is_file() and ignored == []


def test_an_unwritable_out_is_one_line(tmp_path):
    src = tmp_path / "steps.json"
    src.write_text(json.dumps([GOOD, {**GOOD, "time": 0.01}]))
    (tmp_path / "blocker").write_text("")
    with pytest.raises(LogError, match="cannot write the log"):
        from_json_steps(src, tmp_path / "blocker" / "out.csv", Target(robot="r", joints=("a",), control_period=0.01))


def test_json_nested_100000_deep_is_one_line(tmp_path):
    """Issue 31 (low): a 100,000-deep JSON gave a 23-line RecursionError."""
    src = tmp_path / "steps.json"
    src.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(LogError, match="nested too deeply"):
        from_json_steps(src, tmp_path / "out.csv", Target(robot="r", joints=("a",), control_period=0.01))
