"""`import crosssim` (and its CLI module) must not import any engine, torch or onnxruntime."""

import subprocess
import sys

HEAVY = ("mujoco", "pybullet", "newton", "warp", "torch", "onnxruntime", "ray", "gymnasium")


def test_import_crosssim_loads_no_engine():
    code = ("import sys, crosssim, crosssim.engines, crosssim.cli, crosssim.card, crosssim.errors; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"eagerly imported: {out.stdout.strip()}"


def test_missing_engine_is_a_clear_message(monkeypatch):
    from crosssim.engines.registry import ENGINES, get_engine
    from crosssim.errors import EngineUnavailable

    monkeypatch.setitem(ENGINES.builtins, "ghost", "crosssim_no_such_module.engine:EngineGhost")
    try:
        get_engine("ghost")
    except EngineUnavailable as exc:
        assert "ghost is not available" in str(exc) and "install" in str(exc)
    else:
        raise AssertionError("expected EngineUnavailable")
