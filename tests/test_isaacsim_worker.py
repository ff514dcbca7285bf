"""The Isaac Sim column's path, driven end to end with a stand-in: a real worker process under a
profile's `python:` interpreter, speaking the JSON-lines worker protocol (docs/engines.md,
"Isaac Sim worker"), with an entry-point engine registered as `isaacsim` exactly as the Isaac
Sim plugin is, but backed by MuJoCo (this machine has no RTX GPU and no Python 3.12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"

STANDIN = '''
"""Stand-in for crosssim_isaacsim (docs/engines.md): the same registration, MuJoCo physics."""
import sys

from crosssim.engines.mujoco import EngineMuJoCo


class EngineIsaacSim(EngineMuJoCo):
    name = "isaacsim"

    def load(self, compiled, profile):
        print("stand-in engine loading (engine output must go to stderr)")  # the worker redirects it
        return super().load(compiled, profile)
'''


@pytest.fixture()
def isaac_env(tmp_path) -> dict:
    """The environment a user's Isaac machine provides: the plugin on the worker's path and a
    simulators/isaacsim.yaml naming the worker interpreter."""
    site = tmp_path / "site"
    info = site / "crosssim_isaacsim-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "crosssim_isaacsim.py").write_text(STANDIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: crosssim-isaacsim\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[crosssim.engines]\nisaacsim = crosssim_isaacsim:EngineIsaacSim\n")
    sims = tmp_path / "simulators"
    sims.mkdir()
    (sims / "isaacsim.yaml").write_text(f"engine: isaacsim\npython: {sys.executable}\nsettings: {{}}\n")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "CROSSSIM_SIMULATORS": str(sims), "PYTHONSAFEPATH": "1",
            "CROSSSIM_CACHE": str(tmp_path / "cache")}


def test_the_worker_speaks_the_protocol(isaac_env):
    """Job in on stdin; out on stdout one JSON object per line: audit, a row per episode, done.
    The engine's own print goes to stderr, never into the protocol stream."""
    job = {"card_path": str(CARD), "profile": "isaacsim", "episodes": [[0, 0], [1, 1]], "trust": False,
           "max_steps": 40, "conditions": [["nominal", {}]]}
    proc = subprocess.run([sys.executable, "-m", "crosssim.runner.stdio_worker"], input=json.dumps(job),
                          capture_output=True, text=True, env=isaac_env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    messages = [json.loads(line) for line in proc.stdout.splitlines()]
    kinds = [m["kind"] for m in messages]
    assert kinds == ["audit", "row", "row", "done"], (kinds, proc.stderr[-2000:])
    assert "stand-in engine loading" in proc.stderr
    audit = messages[0]["payload"]
    assert {"timestep", "body_mass"} <= {r["quantity"] for r in audit}
    rows = [m["payload"] for m in messages[1:3]]
    assert [r["episode"] for r in rows] == [0, 1] and all(r["length"] == 40 for r in rows)
    assert messages[-1]["payload"]["max_rss_mb"] > 0


def test_a_bad_job_is_one_error_message(isaac_env):
    job = {"card_path": str(CARD), "profile": "isaacsim-missing", "episodes": [[0, 0]], "trust": False,
           "max_steps": 5, "conditions": [["nominal", {}]]}
    proc = subprocess.run([sys.executable, "-m", "crosssim.runner.stdio_worker"], input=json.dumps(job),
                          capture_output=True, text=True, env=isaac_env, timeout=300, cwd=ROOT)
    messages = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [m["kind"] for m in messages] == ["error"] and "isaacsim-missing" in messages[0]["payload"]


def test_crossval_runs_the_isaacsim_column_through_the_worker(isaac_env, tmp_path):
    """`crosssim crossval --engines mujoco,isaacsim` as the user runs it: the column comes back
    through the protocol with MuJoCo's numbers (same physics in the stand-in)."""
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "crosssim.cli", "crossval", "--policy", str(CARD), "--engines",
                           "mujoco,isaacsim", "--episodes", "2", "--max-steps", "60", "--no-risk", "--no-report",
                           "--out", str(out)], capture_output=True, text=True, env=isaac_env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    df = pd.read_parquet(out / "results.parquet")
    here, there = df[df.engine == "mujoco"], df[df.engine == "isaacsim"]
    assert len(there) == 2 and there.failure.isna().all()
    assert here["return"].tolist() == there["return"].tolist()
    assert json.loads((out / "audit.json").read_text())["isaacsim"]
