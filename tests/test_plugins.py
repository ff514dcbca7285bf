"""Engines from outside crosssim: an entry-point plugin, and a worker under another interpreter."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd


PLUGIN = '''
"""A third-party engine: MuJoCo with twice the gravity, registered through an entry point."""
from crosssim.engines.mujoco import EngineMuJoCo


class EngineHeavy(EngineMuJoCo):
    name = "heavy"

    def load(self, scene, profile):
        model = super().load(scene, profile)
        model.mj.opt.gravity[:] = 2 * model.mj.opt.gravity
        return model
'''


def _card(tmp_path: Path) -> Path:
    import torch

    net = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(11, 3), torch.nn.Tanh()))
    net.save(str(tmp_path / "p.pt"))
    card = tmp_path / "card.yaml"
    card.write_text("name: plug\ntask: Hopper\npolicy: {file: p.pt, format: torchscript}\ncontrol_period: 0.008\n")
    return card


def _run(args, env):
    return subprocess.run([sys.executable, "-m", "crosssim.cli", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


def test_engine_plugin_from_outside_the_package(tmp_path):
    site = tmp_path / "site"
    (site / "heavy_engine-0.1.dist-info").mkdir(parents=True)
    (site / "heavy_engine.py").write_text(PLUGIN)
    (site / "heavy_engine-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: heavy-engine\nVersion: 0.1\n")
    (site / "heavy_engine-0.1.dist-info" / "entry_points.txt").write_text(
        "[crosssim.engines]\nheavy = heavy_engine:EngineHeavy\n")
    env = {"PYTHONPATH": str(site)}
    listed = _run(["engines"], env)
    assert "heavy" in listed.stdout and "heavy_engine:EngineHeavy" in listed.stdout, listed.stdout
    out = tmp_path / "run"
    proc = _run(["crossval", "--policy", _card(tmp_path), "--engines", "mujoco,heavy", "--episodes", "2",
                 "--max-steps", "100", "--no-risk", "--no-report", "--out", out], env)
    assert proc.returncode == 0, proc.stderr
    df = pd.read_parquet(out / "results.parquet")
    assert set(df.engine) == {"mujoco", "heavy"} and df.failure.isna().all()
    # Twice the gravity is different physics: the columns must differ.
    assert not (df[df.engine == "heavy"]["return"].to_numpy() == df[df.engine == "mujoco"]["return"].to_numpy()).all()


def test_worker_under_another_interpreter(tmp_path):
    """A profile's `python:` runs the column through the JSON-lines worker protocol."""
    sims = tmp_path / "simulators"
    sims.mkdir()
    (sims / "mujoco-elsewhere.yaml").write_text(f"engine: mujoco\npython: {sys.executable}\nsettings: {{}}\n")
    (sims / "broken-python.yaml").write_text("engine: mujoco\npython: /nonexistent/python3\n")
    out = tmp_path / "run"
    proc = _run(["crossval", "--policy", _card(tmp_path), "--engines", "mujoco,mujoco-elsewhere,broken-python",
                 "--episodes", "2", "--max-steps", "100", "--no-risk", "--no-report", "--out", out],
                {"CROSSSIM_SIMULATORS": str(sims)})
    assert proc.returncode == 0, proc.stderr
    df = pd.read_parquet(out / "results.parquet")
    here, there = df[df.engine == "mujoco"], df[df.engine == "mujoco-elsewhere"]
    assert there.failure.isna().all()
    assert here["return"].tolist() == there["return"].tolist()  # same physics, same numbers, other process kind
    broken = df[df.engine == "broken-python"]
    assert broken.failure.str.contains("cannot start worker interpreter /nonexistent/python3").all()
    audit = json.loads((out / "audit.json").read_text())
    assert audit["mujoco-elsewhere"]
