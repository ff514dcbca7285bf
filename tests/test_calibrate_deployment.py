"""`crosssim calibrate` writes the measured gap as a deployment file (docs/risk.md, "Expected
deployment gap"): logs of a stand-in robot with a hidden latency (1.5 control steps) and hidden
weak motors (strength 0.85) are calibrated, the file is written (the twin's residual gap: none on
average, with the fit's uncertainty; the hidden gap from the canonical model for the record), a card
names it, and the verdict's expected gap is the written one (at +2 sigma)."""

import dataclasses
import os
import subprocess
import sys

import pytest
import yaml

from conftest import CARDS, ROOT
from crosssim.card import load_card
from crosssim.engines.settings import EngineProfile
from crosssim.profiles import split_settings
from crosssim.real.simulate import SimulateLogsConfig, simulate_logs

ARM = CARDS / "real" / "arm3-excite.yaml"
HIDDEN = {"motor_strength": 0.85, "action_latency": 1, "action_delay": 0.5}
PERIOD = 0.02  # the arm card's control period [s]
TOLERANCE = {"latency": 0.1 * PERIOD, "motor_strength": 0.02}
"""Stated tolerances on the written gap: latency within a tenth of a control step (2 ms; the delay is
resolved to physics steps of 2 ms), strength within 0.02 of 1 - 0.85."""


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    logs = tmp_path_factory.mktemp("robot")
    simulate_logs(ARM, split_settings(EngineProfile("arm-robot", "mujoco"), HIDDEN), logs,
                  SimulateLogsConfig(episodes=3, seconds=2, seed=5), trust=True)
    sims = tmp_path_factory.mktemp("simulators")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", "calibrate", "--real", str(logs), "--engine", "mujoco",
                           "--params", "motor_strength,latency", "--out-dir", str(sims), "--name", "arm", "--quiet",
                           "--max-evals", "60"], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    path = sims / "deployments" / "mujoco-calibrated-arm.yaml"
    assert f"deployment gap: {path}" in proc.stdout
    return path


def test_deployment_file_holds_the_hidden_gap(written):
    """The gap written is the twin's (the calibrated profile holds the hidden values): none on
    average, with the fit's uncertainty; the gap from the canonical model is the hidden one."""
    raw = yaml.safe_load(written.read_text())
    canonical = raw["calibration"]["from_canonical"]
    assert canonical["latency"] == pytest.approx(1.5 * PERIOD, abs=TOLERANCE["latency"])
    assert canonical["motor_strength"] == pytest.approx(0.15, abs=TOLERANCE["motor_strength"])
    assert raw["latency"] == 0.0 and raw["motor_strength"] == 0.0
    assert 0 < raw["uncertainty"]["motor_strength"] < 0.02 and 0 < raw["uncertainty"]["latency"] < 0.005
    assert raw["calibration"]["not_identified"] == [] and raw["calibration"]["implausible"] == {}
    assert len(raw["calibration"]["logs"]) == 3 and raw["calibration"]["twin"] == "mujoco-calibrated-arm"


def test_card_naming_the_file_gets_its_gap_in_the_verdict(written, tmp_path):
    from test_risk import HOPPER, VISITED, _rows

    from crosssim.risk import risk_profile
    from crosssim.runner.ladders import ladders_for

    if not HOPPER.exists():
        pytest.skip("default hopper policy not present")
    raw = yaml.safe_load(written.read_text())
    card_raw = yaml.safe_load(ARM.read_text())
    card_raw["robot"] = str(ARM.parent / card_raw["robot"])
    card_raw["deployment"] = {"file": str(written)}
    (tmp_path / "card.yaml").write_text(yaml.safe_dump(card_raw))
    card = load_card(tmp_path / "card.yaml")
    assert card.deployment.latency == raw["latency"] and card.deployment.uncertainty == raw["uncertainty"]
    # The verdict on a hopper's rows with the arm's measured gap: every number from the file, at +2 sigma.
    hopper = dataclasses.replace(load_card(HOPPER), claimed={}, deployment=card.deployment)
    risk = risk_profile(_rows(VISITED), hopper, ladders=ladders_for(hopper), reference="mujoco", resamples=20,
                        control_period=PERIOD)
    latency = raw["latency"] + 2 * raw["uncertainty"]["latency"]
    strength = raw["motor_strength"] + 2 * raw["uncertainty"]["motor_strength"]
    assert risk.deployment["latency"] == pytest.approx(latency)
    assert risk.deployment["motor_strength"] == pytest.approx(strength)
    assert "calibrated values at +2 sigma" in risk.deployment_source
    # The twin's delay is known to 2 sigma = a few ms: the timing family's gap is no longer the
    # canonical model's 1.5 steps (what the twin already holds) but what the class default keeps
    # (its motor lag), at most one step.
    assert risk.components["timing"].gap <= 1.0 + 1e-9
    assert risk.components["timing"].gap >= latency / PERIOD
