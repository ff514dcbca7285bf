"""An engine's profile settings are a typed model (crosssim.engines.settings), checked when the
profile is read: a bad value, an unknown key or an unknown engine is one line naming the profile
file and the key, never a ValueError from deep inside an adapter."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from crosssim.errors import CrossSimError, EngineUnavailable
from crosssim.profiles import load_profile

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def profiles(tmp_path, monkeypatch):
    """Write simulators/<name>.yaml files into a folder searched first; returns the writer."""
    monkeypatch.setenv("CROSSSIM_SIMULATORS", str(tmp_path))
    monkeypatch.delenv("CROSSSIM_TRUSTED_PROFILES", raising=False)

    def write(name: str, text: str) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        return path

    return write


def _refusal(name: str) -> str:
    with pytest.raises(CrossSimError) as err:
        load_profile(name)
    message = str(err.value)
    assert "\n" not in message, message
    return message


def test_a_bad_value_is_one_line_naming_the_file_and_key(profiles):
    path = profiles("pybullet", "engine: pybullet\nsettings:\n  substeps: lots\n")
    assert _refusal("pybullet") == f"{path}: settings.substeps: 'lots' is not an integer"


def test_an_unknown_key_is_refused_when_the_profile_is_read(profiles):
    path = profiles("pybullet-fast", "engine: pybullet\nsettings:\n  substep: 2\n")
    message = _refusal("pybullet-fast")
    assert message.startswith(f"{path}: unknown setting(s) substep (did you mean 'substeps'?); pybullet reads "
                              "armature, solver_iterations, substep_dt, substeps"), message


@pytest.mark.parametrize("engine, settings, says", [
    ("mujoco", "{iterations: 2.5}", "settings.iterations: 2.5 is not an integer"),
    ("physx", "{solver: cg}", "settings.solver: 'cg' is not one of tgs or pgs"),
    ("pybullet", "{armature: loose}", "settings.armature: 'loose' is not one of auto, emulate, inertia or ignore"),
    ("pybullet", "{substep_dt: -0.001}", "settings.substep_dt: -0.001 must be >= 0"),
    ("newton", "{substep_dt: 0}", "settings.substep_dt: 0 must be > 0"),
    ("newton", "{capture: 'yes'}", "settings.capture: 'yes' is not true or false"),
    ("newton", "{contact: soft}", "settings.contact: 'soft' is not mujoco or a mapping"),
    ("newton", "{contact: {ke: stiff}}", "settings.contact.ke: 'stiff' is not a number"),
    ("newton", "{contact: {kx: 1.0}}", "settings.contact.kx: unknown key"),
])
def test_every_engine_types_its_settings(profiles, engine, settings, says):
    path = profiles("column", f"engine: {engine}\nsettings: {settings}\n")
    assert _refusal("column") == f"{path}: {says}"


def test_an_unknown_engine_names_the_value_and_the_file(profiles):
    """issue 31: `engine: notanengine` in mujoco-bad.yaml was "unknown engine 'mujoco-bad' (did you
    mean 'mujoco-bad'?)"."""
    from crosssim.options import engine_names

    path = profiles("mujoco-bad", "engine: notanengine\n")
    with pytest.raises(argparse.ArgumentTypeError) as err:
        engine_names("mujoco-bad")
    message = str(err.value)
    assert message.startswith(f"{path}: engine 'notanengine' is not a registered engine;"), message
    assert "mujoco, newton, physx, pybullet" in message and "did you mean 'mujoco-bad'" not in message
    profiles("mujoc", "engine: mujoc\n")
    assert "engine 'mujoc' is not a registered engine; did you mean 'mujoco'?" in _refusal("mujoc")


def test_the_unknown_engine_line_from_the_command_line(profiles, tmp_path):
    profiles("mujoco-bad", "engine: notanengine\n")
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", "crossval", "--policy",
                           ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml", "--engines", "mujoco,mujoco-bad",
                           "--out", tmp_path / "run"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "mujoco-bad.yaml: engine 'notanengine' is not a registered engine" in proc.stderr, proc.stderr


def test_settings_are_typed_and_round_trip(profiles):
    from crosssim.engines.settings import NewtonSettings
    from crosssim.profiles import flat_settings, with_settings

    profile = load_profile("newton-featherstone")  # the shipped profile
    assert isinstance(profile.settings, NewtonSettings)
    assert profile.settings.solver == "featherstone" and profile.settings.contact == "mujoco"
    assert profile.settings.substep_dt == 0.001 and profile.settings.substeps == 1  # the default
    again = with_settings(profile, {**flat_settings(profile), "mass_scale": 1.1})
    assert again.settings == profile.settings and again.variant.model.mass_scale == 1.1
    profiles("newton-soft", "engine: newton\nsettings:\n  solver: xpbd\n  contact: {from: mujoco, kd: 10}\n")
    soft = load_profile("newton-soft").settings
    assert soft.contact.from_ == "mujoco" and soft.contact.kd == 10.0
    assert soft.given() == {"solver": "xpbd", "contact": {"from": "mujoco", "kd": 10.0}}


def test_a_profile_for_another_interpreter_keeps_an_unknown_engines_settings(profiles):
    """Its worker, where the engine is installed, reads the profile again and types them there."""
    profiles("elsewhere", f"engine: not-installed-here\npython: {sys.executable}\nsettings: {{quality: 3}}\n")
    assert load_profile("elsewhere").settings.given() == {"quality": 3}


def test_an_engine_refuses_another_engines_settings():
    from crosssim.engines import EngineProfile
    from crosssim.engines.settings import MuJoCoSettings, PyBulletSettings, settings_of

    assert settings_of(EngineProfile("p", "pybullet"), PyBulletSettings) == PyBulletSettings()  # the defaults
    with pytest.raises(CrossSimError, match="its settings are MuJoCoSettings, and engine pybullet reads "
                                            "PyBulletSettings"):
        settings_of(EngineProfile("p", "pybullet", MuJoCoSettings()), PyBulletSettings)


@pytest.mark.parametrize("name", ["mujoco", "pybullet", "physx", "newton"])
def test_the_builtin_settings_table_is_each_engines_own(name):
    """Profiles are typed without importing the engine: from a table that must match the classes."""
    from crosssim.engines.registry import engine_class
    from crosssim.engines.settings import BUILTIN_SETTINGS

    try:
        cls = engine_class(name)
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    assert cls.settings_model is BUILTIN_SETTINGS[name]
