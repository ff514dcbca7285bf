"""Deployment conformance without false alarms, and a physical cross-check of angular rates
(issue 37): logs made by `logs simulate` with a leftover previous action at row 0, a deployment
bug in one input's scale, and a gyro in degrees per second (docs/real.md)."""

import json
import math
import subprocess
import sys

import pytest

from conftest import CARDS, ROOT, requires_fixtures
from crosssim.card import load_card
from crosssim.engines.settings import EngineProfile
from crosssim.profiles import load_profile, split_settings
from crosssim.real.conformance import conformance
from crosssim.real.logs import read_logs
from crosssim.real.simulate import Artefacts, SimulateLogsConfig, simulate_logs
from crosssim.runner.harness import Harness

ARM = CARDS / "real" / "arm3-excite-last-action.yaml"
GO1 = CARDS / "robots" / "playground-go1.yaml"
LEFTOVER = 0.4
"""The previous action the arm's controller holds at row 0 (every joint), as on a robot whose
policy was not reset between runs."""


def _arm_logs(folder, **artefacts):
    simulate_logs(ARM, load_profile("mujoco"), folder,
                  SimulateLogsConfig(episodes=1, seconds=1, artefacts=Artefacts(**artefacts)), trust=True)
    harness = Harness.from_card(load_card(ARM))
    return harness, read_logs(folder, harness)


def _terms(result):
    return {t["term"]: t for terms in result["per_log"].values() for t in terms}


def test_leftover_previous_action_at_row_0_passes_the_correct_card(tmp_path):
    """Row 0's last_action input holds 0.4 (left over), the sidecar declares nothing (zeros):
    rows 1.. match, so the correct card passes; `logs validate` exits 0."""
    harness, logs = _arm_logs(tmp_path, previous_action=LEFTOVER)
    assert logs[0].obs[0, -3:] == pytest.approx([0.5 * LEFTOVER] * 3)  # card scale 0.5
    result = conformance(harness, logs)
    assert result["ok"], result
    env = {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}", "PATH": "/usr/bin:/bin", "MUJOCO_GL": "egl"}
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", "logs", "validate", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "match the logged ones" in proc.stdout


def test_declared_previous_action_is_checked_and_its_fix_named(tmp_path):
    """Declared right: ok. Declared wrong (zeros where the policy held 0.4): a previous_action
    finding on row 0 alone, whose fix is the value row 0 shows."""
    harness, logs = _arm_logs(tmp_path, previous_action=LEFTOVER, declare_previous_action=True)
    assert logs[0].meta["previous_action"] == [LEFTOVER] * 3
    assert conformance(harness, logs)["ok"]
    side = next(tmp_path.glob("*.json"))
    meta = json.loads(side.read_text())
    meta["previous_action"] = [0.0, 0.0, 0.0]
    side.write_text(json.dumps(meta))
    result = conformance(harness, read_logs(tmp_path, harness))
    term = _terms(result)["last_action"]
    assert not result["ok"] and term["status"] == "previous_action"
    assert "previous_action: [0.4, 0.4, 0.4]" in term["fix"]


def test_suspects_name_the_measured_scale_beside_a_leftover_action(tmp_path):
    """The deployment fed joint_vel x 0.1 (a bug no fixed x2 / x0.5 suspect covers) and row 0 holds a
    leftover action: conformance names the scale with its card fix, and the ranked suspects put
    the measured-scale fix first, removing all of the input error."""
    from crosssim.diagnose import rank_log_suspects

    harness, logs = _arm_logs(tmp_path, previous_action=LEFTOVER, obs_scale=(("joint_vel", 0.1),))
    result = conformance(harness, logs)
    terms = _terms(result)
    assert terms["last_action"]["status"] == "ok" and terms["joint_vel"]["status"] == "scale"
    assert "observation.terms[1] (joint_vel) scale: 1 -> 0.1" in terms["joint_vel"]["fix"]
    ranking = rank_log_suspects(load_card(ARM), logs)
    assert ranking.scores[0].suspect.startswith("observation.terms[1] (joint_vel) scale x0.1"), ranking.hint()
    assert ranking.scores[0].recovered > 0.95 and ranking.hint().startswith("most likely")


@requires_fixtures
def test_gyro_in_degrees_per_second_is_named_from_the_orientation(tmp_path):
    """The Go1's IMU reads deg/s, logged and fed to the policy as rad/s: conformance cannot see it
    (the input is rebuilt from the same column), the orientation's rate of change does: ratio
    57.3 (within 10 %), named, with the card fix; a correct log matches."""
    from crosssim.real.rates import format_rates, rate_checks

    robot = split_settings(EngineProfile("go1-robot", "mujoco"), {})
    harness = Harness.from_card(load_card(GO1))
    found = {}
    for name, scale in (("ok", 1.0), ("deg", 180 / math.pi)):
        simulate_logs(GO1, robot, tmp_path / name,
                      SimulateLogsConfig(episodes=1, seconds=1.5, seed=3, artefacts=Artefacts(gyro_scale=scale)))
        logs = read_logs(tmp_path / name, harness)
        assert _terms(conformance(harness, logs))["sensor:gyro"]["status"] == "ok"  # blind to it
        found[name] = rate_checks(harness, logs)
    ok = [t for v in found["ok"]["per_log"].values() for t in v]
    assert found["ok"]["ok"] and {t["status"] for t in ok} == {"ok"}, format_rates(found["ok"])
    assert all(abs(t["ratio"] - 1) < 0.2 for t in ok)
    bad = {t["what"]: t for v in found["deg"]["per_log"].values() for t in v}
    assert not found["deg"]["ok"]
    for what in ("gyro column", "input sensor:gyro"):
        assert bad[what]["status"] == "scale" and bad[what]["ratio"] == pytest.approx(180 / math.pi, rel=0.1)
        assert "180/pi" in bad[what]["hint"]
    assert "scale: 1 -> 57.2958" in bad["input sensor:gyro"]["fix"]
    assert "ratio 5" in format_rates(found["deg"]) and "fix:" in format_rates(found["deg"])
