"""`crosssim calibrate` with an --out-dir it cannot write: one line before any simulation runs,
never a traceback after the fit (which was lost with it)."""

import time

from conftest import ROOT
from crosssim.cli import main
from crosssim.engines.settings import EngineProfile
from crosssim.real.simulate import SimulateLogsConfig, simulate_logs

ARM = ROOT / "tests" / "cards" / "real" / "arm3-excite.yaml"


def test_an_unwritable_out_dir_is_refused_before_calibrating(tmp_path, capsys):
    logs = tmp_path / "logs"
    simulate_logs(ARM, EngineProfile(name="arm", engine="mujoco"), logs,
                  SimulateLogsConfig(episodes=1, seconds=1, seed=0), trust=True)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    start = time.monotonic()
    code = main(["calibrate", "--real", str(logs), "--engine", "mujoco", "--params", "damping",
                 "--out-dir", str(blocker / "sims"), "--name", "arm", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and "cannot write the calibrated profile to" in err and "--out-dir" in err
    assert "calibrating" not in err and time.monotonic() - start < 30
