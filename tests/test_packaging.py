"""The wheel carries every engine column: built from the project files, installed into a fresh venv,
``crosssim engines`` run from a folder outside the checkout lists the Newton profiles."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ["pyproject.toml", "README.md", "LICENSE", "src", "simulators"]


def _build_wheel(tmp_path: Path) -> Path:
    """Build from a copy of the files a wheel is made of (the build writes build/ and egg-info
    next to its source; the checkout stays clean)."""
    pytest.importorskip("build")
    src = tmp_path / "src-copy"
    src.mkdir()
    for name in SHIPPED:
        item = ROOT / name
        if item.is_dir():
            shutil.copytree(item, src / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(item, src / name)
    out = tmp_path / "dist"
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(src)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (wheel,) = out.glob("crosssim-*.whl")
    return wheel


@pytest.mark.slow
def test_installed_wheel_lists_newton_columns(tmp_path):
    wheel = _build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    profiles = sorted(p.name for p in (ROOT / "simulators").glob("*.yaml"))
    assert profiles and all(f"crosssim/simulators/{p}" in names for p in profiles), names
    assert "crosssim/simulators/robots/pendulum3.xml" in names
    assert any(n.endswith("licenses/LICENSE") for n in names)

    # A fresh venv on the base interpreter; the project venv's site-packages on a .pth resolves the
    # dependencies (no index needed) but comes after the venv's own, so the wheel's crosssim wins
    # over the editable install.
    # No PYTHONPATH: a crosssim on it (a checkout's src/ with egg-info) would count as installed.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CROSSSIM_SIMULATORS",
                                                             "CROSSSIM_TRUSTED_PROFILES")}
    venv = tmp_path / "venv"
    base = Path(getattr(sys, "_base_executable", sys.executable))
    subprocess.run([str(base), "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=60)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, timeout=120, capture_output=True, env=env)
    # After the install: with it first, pip would see the editable crosssim there as already installed.
    (site / "zz_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    where = subprocess.run([str(py), "-c", "import crosssim; print(crosssim.__file__)"], cwd=outside, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv), f"crosssim imported from {where}, not the installed wheel"
    proc = subprocess.run([str(venv / "bin" / "crosssim"), "engines"], cwd=outside, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for column in ("newton-mujoco-warp", "newton-featherstone", "newton-xpbd"):
        assert column in proc.stdout, proc.stdout
