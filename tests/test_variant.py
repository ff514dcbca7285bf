"""Typed variants: profile settings parsed once, compiled once into the model, timestep honoured."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from crosssim.card import load_card
from crosssim.engines.settings import EngineProfile
from crosssim.errors import CrossSimError
from crosssim.profiles import load_profile, split_settings
from crosssim.runner.harness import Harness
from crosssim.runner.simulator import open_engine
from crosssim.runner.stepper import ControlStepper
from crosssim.scene import canonical_model, resolve_scene
from crosssim.variant import HARNESS_FIELDS, MODEL_AXES, MODEL_FIELDS, ModelVariant, Variant, compile_model

HOPPER_CARD = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"


def _crossval(tmp_path: Path, profile_text: str, name: str) -> subprocess.CompletedProcess:
    sims = tmp_path / "simulators"
    sims.mkdir(exist_ok=True)
    (sims / f"{name}.yaml").write_text(profile_text)
    return subprocess.run(
        [sys.executable, "-m", "crosssim.cli", "crossval", "--policy", str(HOPPER_CARD), "--engines", name,
         "--episodes", "1", "--max-steps", "10", "--no-risk", "--no-report", "--no-cache", "--quiet",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300, env={**os.environ, "CROSSSIM_SIMULATORS": str(sims)}, cwd=ROOT)


def test_profile_timestep_keeps_the_control_period(tmp_path):
    """A profile's finer timestep means more physics steps per control step, not a shorter step
    (before the compiled timestep fed the stepper, each control step advanced 2 ms, not 8 ms)."""
    proc = _crossval(tmp_path, "engine: mujoco\nsettings:\n  timestep: 0.0005\n", "mujoco-fine")
    assert proc.returncode == 0, proc.stderr
    with np.load(tmp_path / "run" / "trajectories.npz") as traj:
        t = traj["mujoco-fine/0/t"]
    np.testing.assert_allclose(np.diff(t), 0.008, rtol=1e-9)  # the card's control period
    np.testing.assert_allclose(t[0], 0.008, rtol=1e-9)


def test_timestep_that_does_not_divide_the_control_period_is_refused():
    harness = Harness.from_card(load_card(HOPPER_CARD))
    sim = open_engine(split_settings(EngineProfile("mujoco-odd", "mujoco"), {"timestep": 0.003}), harness.scene)
    with pytest.raises(CrossSimError, match="mujoco-odd: the control period 0.008 s is not a whole number of "
                                            "physics steps of 0.003 s"):
        ControlStepper(sim, harness)
    sim.close()


def test_unknown_profile_setting_is_one_line_naming_the_file(tmp_path):
    proc = _crossval(tmp_path, "engine: mujoco\nsettings:\n  mass_scal: 1.1\n", "mujoco-typo")
    assert "Traceback" not in proc.stderr + proc.stdout
    (line,) = [x for x in (proc.stderr + proc.stdout).splitlines() if "mass_scal" in x][:1]
    assert "mujoco-typo.yaml: unknown setting(s) mass_scal" in line and "mass_scale" in line


def test_bad_variant_value_names_the_file(tmp_path, monkeypatch):
    (tmp_path / "bad.yaml").write_text("engine: mujoco\nsettings: {action_latency: 1.5}\n")
    monkeypatch.setenv("CROSSSIM_SIMULATORS", str(tmp_path))
    with pytest.raises(CrossSimError, match=r"bad.yaml: setting 'action_latency' must be a number"):
        load_profile("bad")


def test_compile_applies_each_field_once():
    scene = resolve_scene("gymnasium:hopper.xml")
    c = canonical_model(scene)
    v = ModelVariant(timestep=0.001, dt_divisor=2, friction_scale=0.5, mass_scale=1.1, damping_scale=2.0,
                     armature_scale=3.0, frictionloss_scale=4.0)
    m = compile_model(scene, v).mj
    assert m.opt.timestep == 0.0005
    np.testing.assert_allclose(m.body_mass[1:], 1.1 * c.body_mass)
    np.testing.assert_allclose(m.geom_friction[:, 0], 0.5 * c.geom_friction[:, 0])
    np.testing.assert_allclose(m.dof_damping[c.joint_dofadr], 2.0 * c.joint_damping)
    np.testing.assert_allclose(m.dof_armature[c.joint_dofadr], 3.0 * c.joint_armature)
    assert compile_model(scene).mj.opt.timestep == c.timestep  # nominal: the scene's own


def test_every_field_has_its_function_and_every_flat_name_one_part():
    assert MODEL_FIELDS == set(MODEL_AXES)
    assert not MODEL_FIELDS & HARNESS_FIELDS  # Variant.of can route every flat field
    v = Variant.of(friction_scale=0.7, motor_strength=0.5, term_noise=[["gyro", 0.1]])  # as JSON brings it back
    assert v.model == ModelVariant(friction_scale=0.7) and v.harness.motor_strength == 0.5
    assert v.harness.term_noise == (("gyro", 0.1),) and not v.is_nominal and Variant.of().is_nominal
    with pytest.raises(TypeError, match="unknown fields \\['friction'\\]"):
        Variant.of(friction=0.7)


def test_calibrated_profile_composes_with_perturbation():
    profile = split_settings(EngineProfile("cal", "mujoco"), {"friction_scale": 0.8, "motor_strength": 0.9})
    v = profile.variant.then(Variant.of(friction_scale=0.7, motor_strength=0.5, action_latency=1))
    assert v.model.friction_scale == pytest.approx(0.56) and v.harness.motor_strength == pytest.approx(0.45)
    assert v.harness.action_latency == 1 and profile.settings.given() == {}
