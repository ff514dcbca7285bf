"""A profile's variant settings outside their physical range are refused in one line naming the
file and the key (a typo must not become a silent, impossible gap)."""

import pytest

from crosssim.errors import CrossSimError
from crosssim.profiles import _IN_RANGE, RANGES, load_profile, split_settings
from crosssim.engines import EngineProfile


@pytest.mark.parametrize("key, value, rule", [("obs_drop", 1.5, "in [0, 1)"), ("obs_drop", -0.1, "in [0, 1)"),
                                              ("backlash", -0.002, ">= 0"), ("motor_strength", -1.0, "> 0"),
                                              ("dt_divisor", 0, ">= 1"), ("mass_scale", 0.0, "> 0")])
def test_out_of_range_settings_are_refused_naming_the_file(tmp_path, monkeypatch, key, value, rule):
    (tmp_path / "robot.yaml").write_text(f"engine: mujoco\nsettings:\n  {key}: {value}\n")
    monkeypatch.setenv("CROSSSIM_SIMULATORS", str(tmp_path))
    monkeypatch.delenv("CROSSSIM_TRUSTED_PROFILES", raising=False)
    with pytest.raises(CrossSimError, match=rf"robot.yaml: setting '{key}' must be {rule.replace('[', '.').replace(')', '.')}"):
        load_profile("robot")


def test_in_range_settings_pass_and_every_rule_is_known():
    ok = split_settings(EngineProfile("p", "mujoco"), {"obs_drop": 0.0, "backlash": 0.004, "motor_strength": 0.8,
                                                        "friction_scale": 0.0, "dt_divisor": 2})
    assert ok.variant.harness.backlash == 0.004 and ok.variant.model.dt_divisor == 2
    assert set(RANGES.values()) <= set(_IN_RANGE)  # every rule has its check
