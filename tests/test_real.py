"""Real-to-sim without a robot: logs written by a MuJoCo configuration with hidden parameter
values stand in for the robot; calibration must recover those values and the REAL column of a
crossval must show the calibrated profile closer to the "robot" than the default one.

The stand-in robot is tests/cards/real/arm3.xml (three hinge joints, contact-free) driven by a
scripted excitation controller (tests/helpers/sysid_policy.py) through its motors.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from conftest import CARDS, ROOT, requires_fixtures
from crosssim.card import load_card
from crosssim.engines.settings import EngineProfile
from crosssim.profiles import split_settings
from crosssim.real.compare import errors, simulate
from crosssim.real.logs import LogError, check_against, read_logs, validate, write_log
from crosssim.real.simulate import Artefacts, SensorNoise, SimulateLogsConfig, simulate_logs
from crosssim.runner.harness import Harness
from crosssim.runner.simulator import open_engine
from crosssim.variant import Variant

ARM = CARDS / "real" / "arm3-excite.yaml"
HIDDEN = {"damping_scale": 1.6, "armature_scale": 0.7, "frictionloss_scale": 1.5, "motor_strength": 0.85,
          "action_latency": 1}
PARAMS = {"damping": "damping_scale", "armature": "armature_scale", "frictionloss": "frictionloss_scale",
          "motor_strength": "motor_strength", "latency": "action_latency"}
# Stated tolerances (relative). Measured on 3 logs x 3 s at the default sensor noise: damping 0.3 %,
# armature 1.1 %, dry friction 1.5 %, motor strength 0.2 %, latency exact (docs/real.md).
TOLERANCE = {"damping": 0.05, "armature": 0.05, "frictionloss": 0.25, "motor_strength": 0.02, "latency": 0}
ERROR_CUT = 10.0
"""Calibration must cut the replay error at least this much (measured: 56x)."""


def _profile(name: str, engine: str, settings: dict) -> EngineProfile:
    return split_settings(EngineProfile(name, engine), settings)


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def arm_logs(tmp_path_factory):
    out = tmp_path_factory.mktemp("arm-robot")
    simulate_logs(ARM, _profile("arm-robot", "mujoco", HIDDEN), out, SimulateLogsConfig(episodes=3, seconds=3, seed=5),
                  trust=True)
    return out


@pytest.fixture(scope="module")
def calibrated(arm_logs, tmp_path_factory):
    """`crosssim calibrate` on the arm's logs, through the CLI: (profile path, stdout)."""
    sims = tmp_path_factory.mktemp("simulators")
    proc = subprocess.run(
        [sys.executable, "-m", "crosssim.cli", "calibrate", "--real", str(arm_logs), "--engine", "mujoco",
         "--params", ",".join(PARAMS), "--out-dir", str(sims), "--name", "arm", "--quiet"],
        capture_output=True, text=True, timeout=300, env=_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return sims / "mujoco-calibrated-arm.yaml", proc.stdout


def test_calibration_recovers_hidden_parameters(calibrated):
    path, stdout = calibrated
    raw = yaml.safe_load(path.read_text())
    assert raw["engine"] == "mujoco"
    for name, setting in PARAMS.items():
        got, want = raw["settings"][setting], HIDDEN[setting]
        assert abs(got - want) <= TOLERANCE[name] * abs(want), (name, got, want)
        sigma = raw["calibration"]["parameters"][name]["sigma"]
        assert name == "latency" or 0 < sigma < 0.1 * abs(want), (name, sigma)
        record = raw["calibration"]["parameters"][name]
        assert record["identified"] and record["written"] and 0 < record["bootstrap_sd"] < 0.1, (name, record)
    before, after = raw["calibration"]["error_rad"]["before"], raw["calibration"]["error_rad"]["after"]
    assert before / after >= ERROR_CUT, (before, after)
    assert "error:" in stdout and "damping_scale" in stdout and "error by latency" in stdout


def test_calibrated_profile_by_name_in_crossval_real_column(calibrated, arm_logs, tmp_path, monkeypatch):
    from crosssim.profiles import load_profile
    from crosssim.real.compare import format_real
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    path, _ = calibrated
    monkeypatch.setenv("CROSSSIM_SIMULATORS", str(path.parent))
    profile = load_profile(path.stem)
    harness = Harness.from_card(load_card(ARM))
    sim = open_engine(profile, harness.scene)
    np.testing.assert_allclose(sim.model.mj.dof_damping,
                               harness.canonical.joint_damping * profile.variant.model.damping_scale)
    sim.close()
    summary = crossval(CrossvalConfig(policy=str(ARM), engines=("mujoco", path.stem), episodes=1, max_steps=20,
                                      out=str(tmp_path / "run"), trust_policy_code=True, inline=True, risk=False,
                                      report=False, cache=False, real=str(arm_logs))).summary
    real = summary.real
    assert real["logs"] == ["arm-robot-000", "arm-robot-001", "arm-robot-002"]
    default, fitted = real["engines"]["mujoco"], real["engines"][path.stem]
    for mode in ("open_loop", "closed_loop"):
        assert fitted[mode]["q_rms"] < 0.2 * default[mode]["q_rms"], (mode, fitted[mode], default[mode])
        assert fitted[mode]["survival"] == 1.0
    assert fitted["open_loop"]["q_rms_windows"][0] < 0.01
    assert real["policy_check"]["max_abs_action_error"] < 1e-9  # same policy, same logged inputs
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())["real"]
    assert saved["engines"][path.stem]["open_loop"]["q_rms"] == pytest.approx(fitted["open_loop"]["q_rms"])
    text = format_real(real)
    assert "REAL: 3 logs" in text and path.stem in text


def test_noise_free_log_replays_exactly(tmp_path):
    """The harness path is identical in logging and replay: latency queue, clip, initial state."""
    profile = _profile("arm-robot", "mujoco", HIDDEN)
    simulate_logs(ARM, profile, tmp_path,
                  SimulateLogsConfig(episodes=1, seconds=1, noise=SensorNoise().scaled(0.0), suffix=".csv"), trust=True)
    harness = Harness.from_card(load_card(ARM))
    (log,) = read_logs(tmp_path, harness)
    sim = open_engine(profile, harness.scene)
    from crosssim.policies import load_policy

    policy = load_policy(harness.card, obs_size=harness.obs_size, action_size=harness.action_size, trust=True)
    for kwargs in ({}, {"segment": 7}, {"policy": policy}):
        trace = simulate(sim, harness, log, **kwargs)
        assert errors(log, trace)["q_rms"] < 1e-6, kwargs  # CSV keeps 9 significant digits


def test_contact_friction_on_a_contact_free_robot_is_reported_unidentifiable(arm_logs):
    from crosssim.real.calibrate import calibrate, parse_params

    harness = Harness.from_card(load_card(ARM))
    logs = read_logs(arm_logs, harness)
    fit = calibrate(harness, [log.head(50) for log in logs], EngineProfile("mujoco", "mujoco"),
                    parse_params("friction,motor_strength"), max_evals=40)
    assert fit.sigma["friction"] == float("inf")
    assert any(f.startswith("friction: the logs do not depend on it") for f in fit.findings)
    assert "friction_scale" not in fit.settings() and "motor_strength" in fit.settings()  # not written as if known
    assert fit.error_after < fit.error_before


def test_profile_settings_compose_with_perturbations():
    settings = {"motor_strength": 0.9, "action_latency": 1, "friction_scale": 0.8, "damping_scale": 2.0,
                "iterations": 20}
    profile = _profile("p", "mujoco", settings)
    assert profile.settings.given() == {"iterations": 20}  # the engine's own settings, typed apart
    h = profile.variant.then(Variant.of(motor_strength=0.85, action_latency=1)).harness
    assert h.motor_strength == pytest.approx(0.765) and h.action_latency == 2
    assert _profile("p", "mujoco", {"iterations": 20}).variant.then(Variant.of()) == Variant.of()
    m = profile.variant.then(Variant.of(friction_scale=0.7, mass_scale=1.1)).model
    assert m.friction_scale == pytest.approx(0.56) and m.mass_scale == 1.1 and m.damping_scale == 2.0


@pytest.mark.parametrize("engine", ["mujoco", "pybullet"])
def test_engines_honour_joint_scales(engine):
    pytest.importorskip(engine)
    harness = Harness.from_card(load_card(ARM))
    c = harness.canonical
    sim = open_engine(_profile(engine, engine, {"damping_scale": 2.0, "armature_scale": 0.5,
                                                "frictionloss_scale": 3.0}), harness.scene)
    try:
        rows = {(r.quantity, r.item): r.engine for r in sim.engine.audit(sim.model)}
        for k, j in enumerate(c.joint_names):
            assert rows[("joint_damping", j)] == pytest.approx(2.0 * c.joint_damping[k])
            assert rows[("joint_armature", j)] == pytest.approx(0.5 * c.joint_armature[k])
            assert rows[("joint_frictionloss", j)] == pytest.approx(3.0 * c.joint_frictionloss[k])
    finally:
        sim.close()


# -- malformed logs: every problem names the file and the column or field ------------------------

def _good(tmp_path, name="log", **meta):
    t = np.arange(5) * 0.02
    cols = {"time": t, **{f"{p}.{j}": np.zeros(5) for p in ("q", "dq", "action") for j in ("j1", "j2", "j3")}}
    return write_log(tmp_path / f"{name}.parquet", {"robot": "arm3", "joints": ["j1", "j2", "j3"],
                                                    "control_period": 0.02, **meta}, cols), cols


def _rewrite(path, cols):
    import pandas as pd

    pd.DataFrame(cols).to_parquet(path, index=False)


@pytest.mark.parametrize("breakage, expected", [
    (lambda p, c: c.pop("q.j2"), "column 'q.j2'"),
    (lambda p, c: c["dq.j1"].__setitem__(3, np.nan), "column 'dq.j1' has 1 missing or non-finite values (first at row 3)"),
    (lambda p, c: c["time"].__setitem__(3, 0.0), "column 'time' is not strictly increasing"),
    (lambda p, c: c.__setitem__("time", np.arange(5) * 0.05), "column 'time': rows are 0.05 s apart (median)"),
    (lambda p, c: c.__setitem__("time", np.array([0, 0.02, 0.12, 0.14, 0.16])), "column 'time' pauses 0.1 s at row 2"),
    (lambda p, c: c.__setitem__("quat.w", np.ones(5)), "'quat.x', 'quat.y', 'quat.z' missing"),
    (lambda p, c: c.__setitem__("q.elbow", np.ones(5)), "unknown column 'q.elbow'"),
    (lambda p, c: p.with_suffix(".json").unlink(), "sidecar log.json is missing"),
    (lambda p, c: p.with_suffix(".json").write_text("{not json"), "not valid JSON"),
    (lambda p, c: p.with_suffix(".json").write_text(json.dumps({"format": "crosssim-log", "version": 1,
                                                                 "robot": "arm3", "control_period": 0.02})),
     "field 'joints' (the policy's joint order"),
    (lambda p, c: p.write_bytes(b"PAR1 garbage"), "cannot be read as Parquet"),
])
def test_malformed_log_is_named_clearly(tmp_path, breakage, expected):
    path, cols = _good(tmp_path)
    breakage(path, cols)
    if path.is_file() and path.read_bytes()[:12] != b"PAR1 garbage":
        _rewrite(path, cols)
    log, problems = validate(path)
    assert log is None and problems
    assert any(expected in p for p in problems), problems
    assert all(p.startswith(str(path.parent)) for p in problems)


def test_log_against_card_checks_joint_order_and_period(tmp_path):
    path, cols = _good(tmp_path, joints=["j2", "j1", "j3"], control_period=0.01)
    _rewrite(path, {**cols, "time": np.arange(5) * 0.01})
    log, problems = validate(path)
    assert not problems
    found = check_against(log, Harness.from_card(load_card(ARM)))
    assert any("field 'joints' is ['j2', 'j1', 'j3']; the policy's joint order" in p for p in found), found
    assert any("control_period 0.01 s; the policy runs every 0.02 s" in p for p in found), found


def test_cli_logs_validate(tmp_path):
    good, cols = _good(tmp_path, name="good")
    bad, _ = _good(tmp_path, name="bad")
    cols.pop("action.j3")
    _rewrite(bad, cols)
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", "logs", "validate", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{good}: ok (5 rows" in proc.stdout
    assert f"{bad}: policy actions: column 'action.j3' missing" in proc.stdout


def test_crossval_with_a_bad_log_fails_before_running_engines(tmp_path):
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    bad, cols = _good(tmp_path / "logs")
    cols.pop("q.j1")
    _rewrite(bad, cols)
    with pytest.raises(LogError, match=r"log.parquet: .*q\.j1"):
        crossval(CrossvalConfig(policy=str(ARM), engines=("mujoco",), episodes=1, out=str(tmp_path / "run"),
                                trust_policy_code=True, inline=True, risk=False, report=False, cache=False,
                                real=str(tmp_path / "logs")))


@requires_fixtures
def test_go1_floating_base_logs_round_trip(tmp_path):
    """Floating base: base pose, orientation and gyro logged, replay exact without noise, and the
    REAL section reports orientation error and survival."""
    from crosssim.real.compare import real_section

    card_path = CARDS / "robots" / "playground-go1.yaml"
    hidden = _profile("go1-robot", "mujoco", {"motor_strength": 0.9, "action_latency": 1})
    # exact replay needs the base's position and velocity
    simulate_logs(card_path, hidden, tmp_path / "clean",
                  SimulateLogsConfig(episodes=1, seconds=0.6, noise=SensorNoise().scaled(0.0),
                                     artefacts=Artefacts(base_pose=True)))
    card = load_card(card_path)
    harness = Harness.from_card(card)
    (log,) = read_logs(tmp_path / "clean", harness)
    assert log.quat is not None and log.gyro is not None and log.command is not None and log.obs is not None
    sim = open_engine(hidden, harness.scene)
    trace = simulate(sim, harness, log)
    err = errors(log, trace)
    assert err["q_rms"] < 1e-9 and err["orientation_error_deg"] < 1e-6
    simulate_logs(card_path, hidden, tmp_path / "noisy", SimulateLogsConfig(episodes=1, seconds=0.6))
    section = real_section(card, ["mujoco"], read_logs(tmp_path / "noisy", harness))
    closed = section["engines"]["mujoco"]["closed_loop"]
    assert closed["survival"] == 1.0 and np.isfinite(closed["orientation_error_deg"])
    assert section["policy_check"]["max_abs_action_error"] < 1e-4
