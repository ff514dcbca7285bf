"""`crosssim logs convert --layout`: logs in other layouts (nested JSON frames, flat CSV, Parquet
with nested columns) read through a declarative layout mapping must give the log they were made
from; `--policy` runs the card and conformance checks; a bad mapping is one line naming the file
and the key (issue 37, docs/real.md "Layout mappings")."""

import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import CARDS, ROOT
from crosssim.profiles import load_profile
from crosssim.real.layout import load_layout
from crosssim.real.logs import LogError, validate
from crosssim.real.simulate import Artefacts, SimulateLogsConfig, simulate_logs

ARM = CARDS / "real" / "arm3-excite-last-action.yaml"
LEFTOVER = 0.4
FILE_ORDER = ["j3", "j1", "j2"]
"""The source files hold their vectors in this joint order (the policy's is j1, j2, j3)."""

NESTED = """\
# {metadata, frames: [{groups...}]}: the nested layout of issue 37
steps: frames
time: {path: t_ms, unit: ms}
columns:
  q: {path: joints.position_deg, unit: deg}
  dq: {path: joints.velocity, unit: rad/s}
  action: policy.action
  previous_action: policy.previous_action
  obs: policy.observation
sidecar:
  robot: metadata.robot
  joints: metadata.joint_names
  control_period: {path: metadata.rate, unit: Hz}
"""
TABLE = """\
time: time
columns:
  q: {path: "q_{joint}_deg", unit: deg}
  dq: "dq_{joint}"
  action: "act_{joint}"
  previous_action: "prev_{joint}"
  obs: "obs_{i}"
sidecar:
  robot: {value: arm3-bench}
  joints: {value: [j3, j1, j2]}
  control_period: {value: 0.02}
"""


def _env():
    return {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}", "PATH": "/usr/bin:/bin", "MUJOCO_GL": "egl"}


def _convert(*args):
    return subprocess.run([sys.executable, "-m", "crosssim.cli", "logs", "convert", *map(str, args)],
                          capture_output=True, text=True, env=_env(), timeout=300)


@pytest.fixture(scope="module")
def flat(tmp_path_factory):
    """One `logs simulate` log of the arm whose policy held a leftover action at row 0."""
    out = tmp_path_factory.mktemp("flat")
    simulate_logs(ARM, load_profile("mujoco"), out,
                  SimulateLogsConfig(episodes=1, seconds=1, artefacts=Artefacts(previous_action=LEFTOVER)), trust=True)
    log, problems = validate(next(out.glob("*.parquet")))
    assert not problems
    return log


def _file(log, group):
    """(T, 3) columns of ``group`` in the file's joint order."""
    return np.stack([getattr(log, group)[:, log.joints.index(j)] for j in FILE_ORDER], axis=1)


def _previous(log):
    act = _file(log, "action")
    return np.vstack([np.full((1, 3), LEFTOVER), act[:-1]])


def _nested(log, path, previous=None):
    previous = _previous(log) if previous is None else previous
    frames = [{"t_ms": float(t * 1000), "joints": {"position_deg": list(np.degrees(q)), "velocity": list(dq)},
               "policy": {"action": list(a), "previous_action": list(p), "observation": list(o)}}
              for t, q, dq, a, p, o in zip(log.time, _file(log, "q"), _file(log, "dq"), _file(log, "action"),
                                           previous, log.obs)]
    path.write_text(json.dumps({"metadata": {"robot": "arm3-bench", "joint_names": FILE_ORDER, "rate": 50},
                                "frames": frames}))
    return path


def _table(log):
    cols = {"time": log.time}
    for group, name in (("q", "q_{}_deg"), ("dq", "dq_{}"), ("action", "act_{}")):
        for k, j in enumerate(FILE_ORDER):
            cols[name.format(j)] = _file(log, group)[:, k] * (180 / math.pi if group == "q" else 1)
    for k, j in enumerate(FILE_ORDER):
        cols[f"prev_{j}"] = _previous(log)[:, k]
    for i in range(log.obs.shape[1]):
        cols[f"obs_{i}"] = log.obs[:, i]
    return pd.DataFrame(cols)


def _same(converted, flat):
    assert converted.joints == flat.joints
    for group in ("time", "q", "dq", "action", "obs"):
        np.testing.assert_allclose(getattr(converted, group), getattr(flat, group), atol=1e-9, err_msg=group)
    assert converted.meta["previous_action"] == pytest.approx([LEFTOVER] * 3)
    assert converted.control_period == pytest.approx(0.02)


def test_nested_json_frames_convert_to_the_flat_log_and_pass_the_card(flat, tmp_path):
    (tmp_path / "nested.yaml").write_text(NESTED)
    src = _nested(flat, tmp_path / "run.json")
    proc = _convert(src, "--layout", tmp_path / "nested.yaml", "--out", tmp_path / "logs" / "run.parquet",
                    "--policy", ARM)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "match the logged ones" in proc.stdout and "previous action from the log" in proc.stdout
    assert "joints put in the policy's order" in proc.stdout
    log, problems = validate(tmp_path / "logs" / "run.parquet")
    assert not problems
    _same(log, flat)
    assert log.card is not None and log.meta["robot"] == "arm3-bench"


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_flat_tables_convert_through_patterns(flat, tmp_path, suffix):
    (tmp_path / "table.yaml").write_text(TABLE)
    src = tmp_path / f"run{suffix}"
    df = _table(flat)
    df.to_csv(src, index=False, float_format="%.17g") if suffix == ".csv" else df.to_parquet(src)
    proc = _convert(src, "--layout", tmp_path / "table.yaml", "--out", tmp_path / "logs" / "run.parquet",
                    "--policy", ARM)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log, problems = validate(tmp_path / "logs" / "run.parquet")
    assert not problems
    _same(log, flat)


def test_parquet_with_nested_struct_columns(flat, tmp_path):
    layout = NESTED.replace("steps: frames\n", "").replace("  robot: metadata.robot\n", "  robot: {value: r}\n")
    layout = layout.replace("  joints: metadata.joint_names\n", "  joints: {value: [j3, j1, j2]}\n")
    layout = layout.replace("{path: metadata.rate, unit: Hz}", "{value: 0.02}")
    (tmp_path / "nested.yaml").write_text(layout)
    frames = json.loads(_nested(flat, tmp_path / "run.json").read_text())["frames"]
    pd.DataFrame(frames).to_parquet(tmp_path / "run.parquet")
    proc = _convert(tmp_path / "run.parquet", "--layout", tmp_path / "nested.yaml", "--out",
                    tmp_path / "logs" / "run.parquet", "--joints", "j1,j2,j3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log, problems = validate(tmp_path / "logs" / "run.parquet")
    assert not problems
    _same(log, flat)


def test_a_wrong_unit_or_previous_action_fails_the_card_check(flat, tmp_path):
    """The checks run: degrees read as radians make the logged joint_pos_rel input 0.01745x the one
    rebuilt from the log (exit 1, a fix named); a previous action of zeros at row 0 where the
    policy held 0.4 is the previous_action finding."""
    (tmp_path / "nounit.yaml").write_text(NESTED.replace(", unit: deg}", "}"))
    src = _nested(flat, tmp_path / "run.json")
    proc = _convert(src, "--layout", tmp_path / "nounit.yaml", "--out", tmp_path / "a" / "run.parquet",
                    "--policy", ARM)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "joint_pos_rel: scale 0.01745" in proc.stdout and "fix:" in proc.stdout, proc.stdout
    wrong = _previous(flat)
    wrong[0] = 0.0
    (tmp_path / "nested.yaml").write_text(NESTED)
    src = _nested(flat, tmp_path / "wrong.json", previous=wrong)
    proc = _convert(src, "--layout", tmp_path / "nested.yaml", "--out", tmp_path / "b" / "run.parquet",
                    "--policy", ARM)
    assert proc.returncode == 1 and "previous_action" in proc.stdout, proc.stdout


@pytest.mark.parametrize("text, key", [
    ("colums: {}\n", "key 'colums' is not known"),
    ("columns: {q: a, dq: b}\n", "key 'columns.action' is missing"),
    ("columns: {q: a, dq: b, action: c, gyro: {path: g, unit: deg/sec}}\n", "key 'columns.gyro.unit' is 'deg/sec'"),
    ("columns: {q: a, dq: b, action: c, gyro: {path: g, order: xyzw}}\n", "key 'columns.gyro.order'"),
    ("columns: {q: a, dq: b, action: c, speed: v}\n", "key 'columns.speed' is not a column group"),
    ("columns: {q: a, dq: b, action: [1, 2]}\n", "key 'columns.action' must be a dotted path"),
    ("columns: {q: a, dq: b, action: c}\nsidecar: {colour: red}\n", "key 'sidecar.colour' is not a sidecar"),
    ("[1, 2\n", "not a readable YAML layout mapping"),
    ("columns: {q: {path: a, topic: /x}, dq: b, action: c}\n", "key 'columns.q.topic' applies to MCAP sources only"),
    ("format: mcap\ncolumns: {q: {path: a, topic: /x}, dq: {path: b, topic: /x}, action: {path: c, topic: /x}}\n",
     "key 'steps' is missing"),
])
def test_a_bad_mapping_is_one_line_naming_the_file_and_key(tmp_path, text, key):
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(LogError, match="bad.yaml") as err:
        load_layout(tmp_path / "bad.yaml")
    assert key in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_cli_bad_mapping_and_missing_path_are_one_line(flat, tmp_path):
    (tmp_path / "bad.yaml").write_text(NESTED.replace("unit: deg}", "unit: degree}"))
    src = _nested(flat, tmp_path / "run.json")
    proc = _convert(src, "--layout", tmp_path / "bad.yaml", "--out", tmp_path / "x.parquet")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "bad.yaml: key 'columns.q.unit' is 'degree'; q is one of rad, deg, m, mm" in proc.stdout + proc.stderr
    (tmp_path / "moved.yaml").write_text(NESTED.replace("joints.velocity", "joints.vel"))
    proc = _convert(src, "--layout", tmp_path / "moved.yaml", "--out", tmp_path / "x.parquet")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "run.json: step 0: no 'joints.vel' (columns.dq of" in proc.stdout + proc.stderr


def test_json_steps_fill_previous_action_from_the_log(tmp_path):
    """The per-step JSON converter (no mapping) takes row 0's logged previous action into the
    sidecar, and notes a later step whose previous action is not the step before's action."""
    from crosssim.real.convert import Target, from_json_steps

    steps = [{"t": 0.02 * k, "q": [k, 0, 0], "dq": [0, 0, 0], "action": [k, 1, 2], "last_action": [k - 1, 1, 2]}
             for k in range(5)]
    steps[0]["last_action"] = [0.7, 0.7, 0.7]
    (tmp_path / "s.json").write_text(json.dumps(steps))
    path, notes = from_json_steps(tmp_path / "s.json", tmp_path / "o.parquet", Target("r", ("a", "b", "c"), 0.02))
    log, problems = validate(path)
    assert not problems and log.meta["previous_action"] == [0.7, 0.7, 0.7] and notes == []
    steps[3]["last_action"] = [9, 9, 9]
    (tmp_path / "s.json").write_text(json.dumps(steps))
    _, notes = from_json_steps(tmp_path / "s.json", tmp_path / "o.parquet", Target("r", ("a", "b", "c"), 0.02))
    assert notes == ["the previous action of 1 steps is not the step before's action (first at step 3): the action "
                     "in force is not what the log says the policy returned"]


MCAP_LAYOUT = """\
format: mcap
steps: /policy/action
time: {topic: /joint_states, path: header.stamp}
columns:
  q: {topic: /joint_states, path: position, unit: deg}
  dq: {topic: /joint_states, path: velocity}
  action: {topic: /policy/action, path: data}
  previous_action: {topic: /policy/previous_action, path: data}
  obs: {topic: /policy/obs, path: data}
sidecar:
  joints: {value: [j3, j1, j2]}
  control_period: {value: 0.02}
"""


def test_a_ros2_bag_through_a_mapping(flat, tmp_path):
    """CDR messages (JointState, Float64MultiArray) read through a mapping with topics: the
    decoded messages' fields by name, the stamp as the time, the log it was made from."""
    pytest.importorskip("mcap_ros2")
    from mcap_ros2.writer import Writer

    from test_real_logs import ARRAY, JOINT_STATE, _stamp

    bag = tmp_path / "run.mcap"
    array = ARRAY.replace("float32[] data", "float64[] data")
    with open(bag, "wb") as f:
        w = Writer(f)
        js, arr = w.register_msgdef("sensor_msgs/msg/JointState", JOINT_STATE), \
            w.register_msgdef("std_msgs/msg/Float64MultiArray", array)
        rows = zip(flat.time, _file(flat, "q"), _file(flat, "dq"), _file(flat, "action"), _previous(flat), flat.obs)
        for t, q, dq, a, p, o in rows:
            ns = int(round((10.0 + t) * 1e9))
            state = {"header": {"stamp": _stamp(t), "frame_id": "base"}, "name": FILE_ORDER,
                     "position": list(np.degrees(q)), "velocity": list(dq), "effort": []}
            w.write_message("/joint_states", js, state,
                            log_time=ns, publish_time=ns)
            for i, (topic, data) in enumerate((("/policy/obs", o), ("/policy/previous_action", p),
                                               ("/policy/action", a))):
                w.write_message(topic, arr, {"layout": {"dim": [], "data_offset": 0}, "data": list(data)},
                                log_time=ns + 1000 * (i + 1), publish_time=ns + 1000 * (i + 1))
        w.finish()
    (tmp_path / "bag.yaml").write_text(MCAP_LAYOUT)
    proc = _convert(bag, "--layout", tmp_path / "bag.yaml", "--out", tmp_path / "logs" / "run.parquet", "--policy", ARM)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log, problems = validate(tmp_path / "logs" / "run.parquet")
    assert not problems
    _same(log, flat)
    (tmp_path / "bad.yaml").write_text(MCAP_LAYOUT.replace("{topic: /joint_states, path: velocity}", "velocity"))
    with pytest.raises(LogError, match="bad.yaml: key 'columns.dq' has no 'topic'"):
        load_layout(tmp_path / "bad.yaml")
