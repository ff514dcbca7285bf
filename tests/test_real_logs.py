"""Real deployments' logs: jittered timestamps, dry runs, declared delays and offsets, a missing
base pose, every problem listed, and the deployment conformance check (docs/real.md)."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from conftest import CARDS, requires_fixtures
from crosssim.card import load_card
from crosssim.engines.settings import EngineProfile
from crosssim.profiles import split_settings
from crosssim.real.compare import errors, simulate
from crosssim.real.conformance import compare_term, conformance
from crosssim.real.logs import COLUMN_GROUPS, SIDECAR_FIELDS, read_logs, validate, write_log
from crosssim.real.simulate import Artefacts, SensorNoise, SimulateLogsConfig, simulate_logs
from crosssim.runner.harness import Harness
from crosssim.runner.simulator import open_engine

ARM = CARDS / "real" / "arm3-excite.yaml"
GO1 = CARDS / "robots" / "playground-go1.yaml"
JOINTS = ["j1", "j2", "j3"]


def _profile(name, settings):
    return split_settings(EngineProfile(name, "mujoco"), settings)


def _log(tmp_path, time, name="log", **meta):
    n = len(time)
    cols = {"time": time, **{f"{p}.{j}": np.sin(np.arange(n) * 0.1 + k) for p in ("q", "dq", "action")
                             for k, j in enumerate(JOINTS)}}
    return write_log(tmp_path / f"{name}.parquet", {"robot": "arm3", "joints": JOINTS, "control_period": 0.02,
                                                    **meta}, cols)


def test_real_50hz_jitter_passes_and_is_reported(tmp_path):
    """One 17 ms step (the next catches up), and a run with 22.6 ms steps here and there."""
    t = np.arange(200) * 0.02
    t[50:] -= 0.003  # one 17 ms step
    late = t.copy()
    late[[20, 80, 140]] += 0.0026  # 22.6 ms steps, each followed by a 17.4 ms one
    for name, time in (("short", t), ("late", late)):
        log, problems = validate(_log(tmp_path, time, name))
        assert not problems, problems
        assert log.timing.jitter_max == pytest.approx(0.003, abs=1e-6) or log.timing.jitter_max == pytest.approx(
            0.0026, abs=1e-6)
        assert len(log) == 200 and np.allclose(np.diff(log.time), 0.02)
        assert "jitter" in log.timing.describe()


def test_resampling_interpolates_states_and_holds_actions(tmp_path):
    time = np.arange(6) * 0.02
    time[3] += 0.005
    path = _log(tmp_path, time)
    log, problems = validate(path)
    assert not problems and log.timing.resampled
    raw = log.as_logged
    np.testing.assert_allclose(raw.time, time)
    # states are measured at the row's time: interpolated at the grid time 0.06 between rows 2 and 3
    w = 0.005 / 0.025
    np.testing.assert_allclose(log.dq[3], raw.dq[3] + (raw.dq[2] - raw.dq[3]) * w, atol=1e-12)
    # positions with their velocities (cubic Hermite): exact for a cubic in time
    poly = lambda t: 2 * t**3 - t**2 + 0.5 * t  # noqa: E731
    slope = lambda t: 6 * t**2 - 2 * t + 0.5  # noqa: E731
    from crosssim.real.timing import hermite

    got = hermite(time, poly(time)[:, None], slope(time)[:, None], np.array([0.03, 0.06, 0.07]))
    np.testing.assert_allclose(got[:, 0], poly(np.array([0.03, 0.06, 0.07])), atol=1e-12)
    np.testing.assert_array_equal(log.action[3], raw.action[3])  # the control step's own action


def test_a_missed_cycle_holds_the_action(tmp_path):
    time = np.array([0.0, 0.02, 0.06, 0.08])  # the row at 0.04 s was never logged
    log, problems = validate(_log(tmp_path, time))
    assert not problems and len(log) == 5
    np.testing.assert_array_equal(log.action[2], log.as_logged.action[1])


def test_every_problem_is_listed(tmp_path):
    time = np.arange(10) * 0.02
    time[[3, 7]] = time[[2, 6]]  # two rows out of order
    path = _log(tmp_path, time, action_delay=-1, joint_offsets={"elbow": 0.1}, previous_action=[0.0],
                applied="yes", colour="red")
    log, problems = validate(path)
    text = "\n".join(problems)
    assert log is None
    for expected in ("not strictly increasing at row 3, 7", "field 'action_delay' must be a non-negative number",
                     "field 'joint_offsets' names ['elbow']", "field 'previous_action' must be a list of 3 numbers",
                     "field 'applied' must be true or false", "unknown field 'colour'"):
        assert expected in text, text
    assert all(p.startswith(str(tmp_path)) for p in problems)


def test_cli_lists_every_problem_and_the_schema_is_declarative(tmp_path):
    time = np.arange(10) * 0.02
    time[5] = time[4]
    _log(tmp_path, time, action_delay="one")
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", "logs", "validate", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "not strictly increasing" in proc.stdout and "field 'action_delay'" in proc.stdout
    assert {"q", "dq", "action", "quat"} <= {g.name for g in COLUMN_GROUPS}
    assert {"applied", "action_delay", "joint_offsets", "previous_action"} <= {f.name for f in SIDECAR_FIELDS}


def test_declared_fractional_delay_offsets_and_previous_action_replay_exactly(tmp_path):
    """A robot whose motors get each action 1.5 control steps late, with encoder offsets: its log
    declares both; replay on the default profile is exact without noise."""
    robot = _profile("arm-robot", {"action_delay": 1.5})
    simulate_logs(ARM, robot, tmp_path,
                  SimulateLogsConfig(episodes=1, seconds=1, noise=SensorNoise().scaled(0.0),
                                     artefacts=Artefacts(declare_delay=True, joint_offsets=(("j2", 0.1),))),
                  trust=True)
    harness = Harness.from_card(load_card(ARM))
    (log,) = read_logs(tmp_path, harness)
    assert log.action_delay == 1.5 and log.meta["joint_offsets"] == {"j2": 0.1}
    sim = open_engine(_profile("mujoco", {}), harness.scene)
    try:
        for kwargs in ({}, {"segment": 7}):
            assert errors(log, simulate(sim, harness, log, **kwargs))["q_rms"] < 1e-6, kwargs
        undeclared = log.__class__(**{**log.__dict__, "meta": {**log.meta, "action_delay": 1.0}})
        assert errors(undeclared, simulate(sim, harness, undeclared))["q_rms"] > 1e-3  # the half step matters
    finally:
        sim.close()


def test_compare_term_names_scale_offset_and_order():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3))
    assert compare_term("t", x, x)["status"] == "ok"
    bug = compare_term("base_ang_vel", x * math.pi / 180, x)
    assert bug["status"] == "scale" and bug["scale"] == pytest.approx(0.017453, rel=1e-4)
    assert "degrees to radians" in bug["hint"]
    swapped = compare_term("joint_pos_rel", x[:, [1, 0, 2]], x)
    assert swapped["status"] == "order" and swapped["order"] == [1, 0, 2]
    shifted = compare_term("joint_pos_rel", x + [0.0, 0.3, 0.0], x)
    assert shifted["status"] == "offset" and shifted["offset"] == pytest.approx([0.0, 0.3, 0.0], abs=1e-9)
    assert compare_term("t", rng.normal(size=(300, 3)), x)["status"] == "mismatch"


def test_conformance_on_the_arm_finds_a_mis_scaled_term(tmp_path):
    simulate_logs(ARM, _profile("arm-robot", {}), tmp_path / "ok", SimulateLogsConfig(episodes=1, seconds=1),
                  trust=True)
    simulate_logs(ARM, _profile("arm-robot", {}), tmp_path / "bug",
                  SimulateLogsConfig(episodes=1, seconds=1, artefacts=Artefacts(obs_scale=(("joint_vel", 0.1),))),
                  trust=True)
    harness = Harness.from_card(load_card(ARM))
    ok = conformance(harness, read_logs(tmp_path / "ok", harness))
    assert ok["ok"], ok
    bad = conformance(harness, read_logs(tmp_path / "bug", harness))
    term = {t["term"]: t for t in bad["terms"]}
    assert not bad["ok"] and term["joint_vel"]["status"] == "scale"
    assert term["joint_vel"]["scale"] == pytest.approx(0.1, rel=1e-3) and term["joint_pos_rel"]["status"] == "ok"


@requires_fixtures
def test_go1_without_base_pose_starts_standing_and_finds_the_gyro_bug(tmp_path):
    """No pos.* / vel.*: the base height comes from the feet on the ground; the deployment's gyro
    fed through pi/180 is reported with its factor; dry runs are kept out of the replay."""
    from dataclasses import replace

    from crosssim.real.compare import real_section
    from crosssim.real.start import initial_state

    robot = _profile("go1-robot", {"action_latency": 1})
    simulate_logs(GO1, robot, tmp_path / "logs",
                  SimulateLogsConfig(episodes=1, seconds=1.0, seed=3,
                                     artefacts=Artefacts(obs_scale=(("sensor:gyro", math.pi / 180),), base_pose=True,
                                                         declare_delay=True)))
    simulate_logs(GO1, _profile("go1-dry", {}), tmp_path / "logs",
                  SimulateLogsConfig(episodes=1, seconds=0.4, seed=9, artefacts=Artefacts(dry_run=True)))
    card = load_card(GO1)
    harness = Harness.from_card(card)
    dry, log = read_logs(tmp_path / "logs", harness)
    assert not dry.applied and log.applied and log.action_delay == 1
    # base height from the feet on the ground vs the logged one (measured: mean 5 mm, at most 15 mm
    # after the first row; the home keyframe itself sinks its feet 16 mm into the floor)
    est = np.array([initial_state(replace(log, pos=None, vel=None), harness, k).qpos[2] for k in range(len(log))])
    gap = est[1:] - log.pos[1:, 2]
    assert np.abs(gap).max() < 0.02 and abs(gap.mean()) < 0.008, gap
    no_pose = replace(log, pos=None, vel=None)
    section = real_section(card, ["mujoco"], [dry, no_pose])
    assert section["dry_runs"] == [dry.name] and list(section["engines"]["mujoco"]["per_log"]) == [log.name]
    assert section["base_estimated"] == [log.name]  # replays start from the estimated base state
    closed = section["engines"]["mujoco"]["closed_loop"]
    assert closed["survival"] == 1.0 and closed["q_rms"] < 0.3 and closed["first_fall_s"] is None
    terms = {t["term"]: t for t in section["conformance"]["per_log"][log.name]}
    assert terms["sensor:gyro"]["status"] == "scale" and terms["sensor:gyro"]["scale"] == pytest.approx(math.pi / 180,
                                                                                                       rel=0.01)
    assert terms["projected_gravity"]["status"] == terms["joint_pos_rel"]["status"] == "ok"
    assert terms["sensor:local_linvel"]["status"] == "not checked"  # privileged: not logged, here deliberately
    assert all(t["status"] in ("ok", "not checked") for t in section["conformance"]["per_log"][dry.name])


# -- converters: files written here in the layouts robots produce -------------------------------

HEADER = """builtin_interfaces/Time stamp
string frame_id
================================================================================
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec"""
JOINT_STATE = "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\nfloat64[] effort\n" \
    "================================================================================\nMSG: std_msgs/Header\n" + HEADER
IMU = ("std_msgs/Header header\ngeometry_msgs/Quaternion orientation\nfloat64[9] orientation_covariance\n"
       "geometry_msgs/Vector3 angular_velocity\nfloat64[9] angular_velocity_covariance\n"
       "geometry_msgs/Vector3 linear_acceleration\nfloat64[9] linear_acceleration_covariance\n"
       "================================================================================\nMSG: std_msgs/Header\n"
       + HEADER + "\n================================================================================\n"
       "MSG: geometry_msgs/Quaternion\nfloat64 x\nfloat64 y\nfloat64 z\nfloat64 w\n"
       "================================================================================\n"
       "MSG: geometry_msgs/Vector3\nfloat64 x\nfloat64 y\nfloat64 z")
ARRAY = ("std_msgs/MultiArrayLayout layout\nfloat32[] data\n"
         "================================================================================\n"
         "MSG: std_msgs/MultiArrayLayout\nstd_msgs/MultiArrayDimension[] dim\nuint32 data_offset\n"
         "================================================================================\n"
         "MSG: std_msgs/MultiArrayDimension\nstring label\nuint32 size\nuint32 stride")


def _stamp(t):
    return {"sec": int(t), "nanosec": int(round((t - int(t)) * 1e9))}


def test_convert_a_ros2_bag_in_mcap(tmp_path):
    """JointState in another joint order, Imu (x, y, z, w), Float32MultiArray actions; 50 Hz with
    a 17 ms step; converted by `crosssim logs convert`, validated, joints reordered by name."""
    pytest.importorskip("mcap_ros2")
    from mcap_ros2.writer import Writer

    bag = tmp_path / "run.mcap"
    times = np.arange(30) * 0.02
    times[10:] -= 0.003
    with open(bag, "wb") as f:
        w = Writer(f)
        js, imu, arr = (w.register_msgdef("sensor_msgs/msg/JointState", JOINT_STATE),
                        w.register_msgdef("sensor_msgs/msg/Imu", IMU),
                        w.register_msgdef("std_msgs/msg/Float32MultiArray", ARRAY))
        for k, t in enumerate(times):
            ns = int(round(t * 1e9)) + 1_000_000_000
            stamp = {"stamp": _stamp(1.0 + t), "frame_id": "base"}
            w.write_message("/joint_states", js, {"header": stamp, "name": ["j3", "j1", "j2"],
                                                  "position": [0.3 + k, 0.1 + k, 0.2 + k], "velocity": [3.0, 1.0, 2.0],
                                                  "effort": []}, log_time=ns, publish_time=ns)
            w.write_message("/imu", imu, {"header": stamp, "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0},
                                          "orientation_covariance": [0.0] * 9,
                                          "angular_velocity": {"x": 0.1, "y": 0.2, "z": 0.3},
                                          "angular_velocity_covariance": [0.0] * 9,
                                          "linear_acceleration": {"x": 0.0, "y": 0.0, "z": 9.8},
                                          "linear_acceleration_covariance": [0.0] * 9}, log_time=ns + 1000,
                            publish_time=ns + 1000)
            w.write_message("/policy/action", arr, {"layout": {"dim": [], "data_offset": 0}, "data": [k, -k, 0.5]},
                            log_time=ns + 2000, publish_time=ns + 2000)
        w.finish()
    out = tmp_path / "logs" / "run.parquet"
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", "logs", "convert", str(bag), "--out", str(out),
                           "--joints", "j1,j2,j3", "--control-period", "0.02", "--robot", "arm3", "--action-delay", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "topic /policy/obs not in the bag" in proc.stdout and "jitter" in proc.stdout
    log, problems = validate(out)
    assert not problems and len(log) == 30 and log.action_delay == 1
    raw = log.as_logged
    np.testing.assert_allclose(raw.q[5], [5.1, 5.2, 5.3])
    np.testing.assert_allclose(raw.dq[0], [1.0, 2.0, 3.0])
    np.testing.assert_allclose(raw.action[7], [7, -7, 0.5])
    np.testing.assert_allclose(raw.quat[0], [1, 0, 0, 0]) and np.testing.assert_allclose(raw.gyro[0], [0.1, 0.2, 0.3])
    assert raw.time[0] == pytest.approx(1.0) and log.timing.jitter_max == pytest.approx(0.003, abs=1e-6)


def test_convert_a_per_step_json_list(tmp_path):
    steps = [{"t": 0.02 * k, "joint_pos": [k, k + 1, k + 2], "joint_vel": [0, 0, 0], "actions": [1, 2, 3],
              "base_quat": [0, 0, 0, 1], "gyro": [0.0, 0.1, 0.2], "note": "x"} for k in range(6)]
    (tmp_path / "steps.json").write_text(json.dumps({"steps": steps}))
    out = tmp_path / "logs" / "steps.csv"
    from crosssim.real.convert import Target, from_json_steps

    path, ignored = from_json_steps(tmp_path / "steps.json", out, Target("r", ("j1", "j2", "j3"), 0.02, "xyzw"))
    log, problems = validate(path)
    assert not problems and ignored == ["ignored keys: note"]
    np.testing.assert_allclose(log.q[2], [2, 3, 4]) and np.testing.assert_allclose(log.quat[0], [1, 0, 0, 0])
    steps[3]["joint_pos"] = [1.0]
    (tmp_path / "bad.json").write_text(json.dumps(steps))
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", "logs", "convert", str(tmp_path / "bad.json"),
                           "--out", str(tmp_path / "bad.parquet"), "--joints", "j1,j2,j3", "--control-period", "0.02"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "bad.json: step 3: 'q' has 1 values; expected 3" in proc.stdout + proc.stderr
