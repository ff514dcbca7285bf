"""The command line: exit statuses, install hints, help that tells the truth."""

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from crosssim.cli import EXIT_MISMATCH, EXIT_OK, main
from crosssim.engines.availability import install_hint

ROOT = Path(__file__).resolve().parents[1]


def test_audit_exit_status_says_whether_every_parameter_matched(capsys):
    assert main(["audit", "--robot", "gymnasium:hopper.xml", "--engines", "mujoco"]) == EXIT_OK
    if importlib.util.find_spec("pybullet") is None:
        pytest.skip("pybullet is not installed: no engine here with a known mismatch")
    # The hopper asks for RK4; Bullet integrates semi-implicit Euler only: a real mismatch.
    assert main(["audit", "--robot", "gymnasium:hopper.xml", "--engines", "mujoco,pybullet"]) == EXIT_MISMATCH
    assert "MISMATCH in pybullet" in capsys.readouterr().err


def test_install_hints_name_extras_pyproject_declares():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    for dist in ("pybullet", "newton", "torch", "onnxruntime", "stable-baselines3"):
        hint = install_hint(dist)
        named = re.fullmatch(r"pip install 'crosssim\[(\w+)\]'", hint)
        assert named and named.group(1) in extras, hint
    assert install_hint("pybullet") == "pip install 'crosssim[pybullet]'"
    assert "crosssim[" not in install_hint("mujoco")  # a core dependency, not an extra
    assert install_hint("not-a-crosssim-dependency") == "pip install not-a-crosssim-dependency"
