"""Typed results: one (de)serializer, a schema version, and one clear line for old run folders."""

import json
import math
import subprocess
import sys

import pytest

from crosssim.errors import CrossSimError
from crosssim.gate import Check, Decision
from crosssim.results import (SCHEMA_VERSION, EngineSummary, EpisodeRow, HarnessCheck, RiskAggregate, RiskComponent,
                              RiskProfile, RungPoint, RunSummary, SchemaError, from_dict, rows_frame, to_dict)
from crosssim.runfolder import read_summary, write_summary


def _summary() -> RunSummary:
    nan = float("nan")
    engines = {"mujoco": EngineSummary(3, 0, 900.0, (850.0, 950.0), 200.0, 0.0, 1.2, 0, None, 0.0),
               "pybullet": EngineSummary(3, 3, nan, (nan, nan), nan, nan, nan, 4, "pybullet: killed", nan)}
    risk = RiskProfile(HarnessCheck("skipped", "no claims", measured={"return": 900.0}, reference_return=900.0),
                       {"actuation": RiskComponent(
                           "actuation", 1.5, (1.2, 2.0), False, {"motor_strength": 0.85}, 1.0, {"motor_strength": 0.9},
                           1.5, (1.2, 2.0), 0.05, (0.0, 0.1), "medium", {"mujoco": 1.5, "pybullet": nan}, 0.0,
                           {"mujoco": [RungPoint(2, 2.0, {"motor_strength": 0.8}, 3, 0.7, (0.6, 0.8), False)]})},
                       RiskAggregate(0.25, (0.2, 0.3), {"mujoco": 1.0, "pybullet": 0.0}, 1.5, (1.2, 2.0), "actuation"),
                       "medium", "actuation", "medium risk", "mujoco", {"pass_fraction": 0.9},
                       deployment={"motor_strength": 0.1}, deployment_source="card", sweep_episodes=3)
    return RunSummary("0.1.0", "p", "card.yaml", "p.pt", None, "Hopper", "mujoco", 0, 3, engines, "crosssim crossval",
                      "2026-01-01T00:00:00+00:00", workers={"mujoco": {"max_rss_mb": 100.0}}, risk=risk)


def _same(a, b) -> bool:
    """Equal, with NaN equal to NaN (dataclass == compares NaN as unequal)."""
    return json.dumps(to_dict(a)) == json.dumps(to_dict(b))


def test_summary_round_trips_through_json(tmp_path):
    s = _summary()
    write_summary(tmp_path, s)
    raw = json.loads((tmp_path / "summary.json").read_text())
    assert raw["schema_version"] == SCHEMA_VERSION and raw["engines"]["mujoco"]["return_ci95"] == [850.0, 950.0]
    back = read_summary(tmp_path)
    assert _same(back, s) and back.engines["mujoco"].return_ci95 == (850.0, 950.0)
    assert math.isnan(back.engines["pybullet"].mean_return) and back.risk.components["actuation"].margin == 1.5
    assert back.risk.components["actuation"].curves["mujoco"][0].retained_ci95 == (0.6, 0.8)


def test_gate_decision_uses_the_same_serializer():
    d = Decision("WARN", (Check("transfer risk", "WARN", "aggregate risk 0.40", None), Check("x", "PASS", "y", "mujoco")))
    assert from_dict(Decision, json.loads(json.dumps(to_dict(d)))) == d


def test_episode_row_column_named_return():
    row = EpisodeRow("p", "mujoco", "nominal", 0, 7, 12.5, 100, False, None, 1.0, {"survival_time": 2.0})
    assert row.to_record()["return"] == 12.5 and to_dict(row)["return"] == 12.5
    assert from_dict(EpisodeRow, to_dict(row)) == row
    failed = EpisodeRow.failed("p", "pybullet", "combined", 1, 8, "pybullet: lost")
    df = rows_frame([row, failed])
    assert list(df.columns) == ["policy", "engine", "condition", "episode", "seed", "return", "length", "terminated",
                                "failure", "termination_reason", "x_velocity", "metric_survival_time"]
    assert df.failure.isna().tolist() == [True, False] and math.isnan(df["return"][1])


@pytest.mark.parametrize("change,expected", [
    (lambda d: d.pop("schema_version"), "written by crosssim 0.1.0 schema none"),
    (lambda d: d.update(schema_version=SCHEMA_VERSION + 1), f"schema {SCHEMA_VERSION + 1}"),
    (lambda d: d["engines"]["mujoco"].pop("mean_return"), "summary.json.engines.mujoco: missing field 'mean_return'"),
    (lambda d: d["engines"]["mujoco"].update(failed="three"), "engines.mujoco.failed: expected int"),
])
def test_old_or_foreign_run_folder_is_one_clear_error(tmp_path, change, expected):
    write_summary(tmp_path, _summary())
    data = json.loads((tmp_path / "summary.json").read_text())
    change(data)
    (tmp_path / "summary.json").write_text(json.dumps(data))
    with pytest.raises(CrossSimError, match="rerun crossval") as err:
        read_summary(tmp_path)
    assert expected in str(err.value) and str(tmp_path) in str(err.value)
    assert isinstance(err.value, SchemaError)


def test_gate_and_report_on_a_run_folder_from_before_the_schema(tmp_path):
    """A summary.json as crosssim wrote it before typed results (no schema_version): one line, no KeyError."""
    old = to_dict(_summary())
    del old["schema_version"]
    (tmp_path / "summary.json").write_text(json.dumps(old))
    for args in (["gate", "--run", str(tmp_path)], ["report", str(tmp_path)]):
        proc = subprocess.run([sys.executable, "-m", "crosssim.cli", *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip().splitlines()[-1] == (f"crosssim: error: run folder {tmp_path} was written by crosssim 0.1.0 schema "
                                       f"none; this crosssim reads schema {SCHEMA_VERSION}; rerun crossval")


@pytest.mark.parametrize("trained,validated,engines,expected", [
    ("pybullet", ("mujoco",), ("mujoco", "pybullet"), "pybullet"),  # where it was trained, when run
    ("isaac", ("pybullet", "mujoco"), ("mujoco", "pybullet"), "pybullet"),  # else the first validated engine run
    (None, ("isaac",), ("pybullet", "mujoco"), "pybullet"),  # else the first engine run (never an engine not run)
])
def test_one_reference_engine_rule(tmp_path, trained, validated, engines, expected):
    from crosssim.card import Card

    card = Card(path=tmp_path / "card.yaml", name="p", task="Hopper", policy_file=tmp_path / "p.pt",
                policy_format="torchscript", trained_in=trained, validated_in=validated)
    assert card.reference_engine(engines) == expected
