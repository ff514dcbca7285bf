"""MuJoCo's warnings go to the ``crosssim.mujoco`` logger, never to MUJOCO_LOG.TXT in the user's folder."""

import logging
import subprocess
import sys


def test_an_unstable_step_leaves_no_log_file_in_the_current_folder(tmp_path):
    code = ("import logging, mujoco, numpy as np\n"
            "from crosssim.engines import get_engine\n"  # importing crosssim's MuJoCo engine routes the log
            "get_engine('mujoco')\n"
            "m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body><freejoint/><geom size=\"0.1\"/>"
            "</body></worldbody></mujoco>')\n"
            "d = mujoco.MjData(m); d.qpos[0] = np.nan; mujoco.mj_step(m, d)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert "MuJoCo: Nan, Inf or huge value in QPOS" in proc.stderr  # logging's last-resort handler: stderr


def test_warnings_reach_the_logger(caplog):
    import mujoco
    import numpy as np

    from crosssim.mujoco_log import route

    route()
    m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body><freejoint/><geom size="0.1"/></body></worldbody></mujoco>')
    d = mujoco.MjData(m)
    d.qpos[0] = np.nan
    with caplog.at_level(logging.WARNING, logger="crosssim.mujoco"):
        mujoco.mj_step(m, d)
    assert any("QPOS" in r.getMessage() for r in caplog.records)


def test_known_harmless_warnings_are_debug_only(caplog):
    from crosssim.mujoco_log import _warn

    with caplog.at_level(logging.DEBUG, logger="crosssim.mujoco"):
        _warn("compiler attribute 'settotalmass' is deprecated and will be removed")
        _warn("Nan, Inf or huge value in QACC")
    levels = {r.getMessage().split(": ", 1)[1][:20]: r.levelno for r in caplog.records}
    assert levels == {"compiler attribute '": logging.DEBUG, "Nan, Inf or huge val": logging.WARNING}
