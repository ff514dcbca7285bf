"""A sidecar's action_delay of more control steps than the log has rows is refused in one line
(a delay in milliseconds written as steps would otherwise queue that many actions in a replay)."""

import numpy as np
import pytest

from crosssim.real.logs import LogError, read_log, validate, write_log

COLS = {"time": np.arange(5) * 0.01, "q.a": np.zeros(5), "dq.a": np.zeros(5), "action.a": np.zeros(5)}
META = {"robot": "r", "joints": ["a"], "control_period": 0.01}


def test_a_delay_beyond_the_log_is_a_problem(tmp_path):
    path = write_log(tmp_path / "log.csv", {**META, "action_delay": 20}, COLS)
    log, problems = validate(path)
    assert any("'action_delay' is 20 control steps" in p for p in problems)
    with pytest.raises(LogError, match="action_delay"):
        read_log(path)


def test_a_delay_within_the_log_is_fine(tmp_path):
    path = write_log(tmp_path / "log.csv", {**META, "action_delay": 1.5}, COLS)
    assert validate(path)[1] == []
