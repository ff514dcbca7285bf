"""Extensions from outside crosssim, one per kind (docs/extending.md): each is a distribution on
sys.path with an entry point, as `pip install` would leave it; plus an engine worker under
another interpreter."""

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

    def load(self, compiled, profile):
        model = super().load(compiled, profile)
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


def _install(tmp_path: Path, module: str, source: str, entry_points: str) -> dict:
    """A one-module distribution with ``entry_points`` (an entry_points.txt body), installed into a
    fresh site folder; returns the environment that puts it on a crosssim subprocess's sys.path."""
    site = tmp_path / "site"
    info = site / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (site / f"{module}.py").write_text(source)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def _crossval(card: Path, out: Path, env: dict, *extra):
    return _run(["crossval", "--policy", card, "--engines", "mujoco", "--episodes", "2", "--max-steps", "60",
                 "--no-risk", "--no-report", "--out", out, *extra], env)


def test_engine_plugin_from_outside_the_package(tmp_path):
    env = _install(tmp_path, "heavy_engine", PLUGIN, "[crosssim.engines]\nheavy = heavy_engine:EngineHeavy\n")
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


TASK_PLUGIN = '''
"""Tasks from a plugin: one new, one replacing the built-in Hopper."""
from crosssim.tasks.base import StepResult
from crosssim.tasks.gym_locomotion import Hopper


class HopperFlatReward(Hopper):
    name = "Hopper"

    def step(self, before, after, action, state, dt):
        return StepResult(1.0, {"alive": 1.0}, False)  # one per step, never ends early


class HopperLong(Hopper):
    name = "HopperLong"
    max_steps = 2000
'''


def test_task_plugin_adds_and_replaces(tmp_path):
    env = _install(tmp_path, "my_tasks", TASK_PLUGIN,
                   "[crosssim.tasks]\nHopper = my_tasks:HopperFlatReward\nHopperLong = my_tasks:HopperLong\n")
    listed = _run(["tasks"], env)
    assert listed.returncode == 0, listed.stderr
    assert "HopperLong" in listed.stdout and "Walker2d" in listed.stdout
    out = tmp_path / "run"
    proc = _crossval(_card(tmp_path), out, env)
    assert proc.returncode == 0, proc.stderr
    df = pd.read_parquet(out / "results.parquet")
    # The plugin's reward ran, not gymnasium's: 1 per step, 60 steps, no early end.
    assert df["return"].tolist() == [60.0, 60.0] and df.length.tolist() == [60, 60]


TERM_PLUGIN = '''
"""An observation term from a plugin: base height twice, as two values."""
import numpy as np

from crosssim.observations import ObservationTerm


def _height_twice(frame, ctx, offset=0.0, **_):
    return np.array([frame.base_pos[2], frame.base_pos[2]]) - offset


height_twice = ObservationTerm(_height_twice, size=2, options=frozenset({"offset"}))
not_a_term = _height_twice
'''


def _locomotion_card(tmp_path: Path, terms: str, obs_size: int) -> Path:
    import torch

    torch.manual_seed(0)
    net = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(obs_size, 8), torch.nn.Tanh()))
    net.save(str(tmp_path / "ant.pt"))
    card = tmp_path / "ant.yaml"
    card.write_text("name: ant-plugin\ntask: Locomotion\nrobot: gymnasium:ant.xml\ncontrol_period: 0.05\n"
                    "policy: {file: ant.pt, format: torchscript}\n"
                    f"observation:\n  terms: {terms}\n")
    return card


def test_observation_term_plugin(tmp_path):
    env = _install(tmp_path, "my_terms", TERM_PLUGIN,
                   "[crosssim.observation_terms]\nheight_twice = my_terms:height_twice\n"
                   "not_a_term = my_terms:not_a_term\nbroken = my_terms_gone:term\n")
    # 2 (plugin) + 8 joint positions: the policy takes 10 values, so the plugin's size is what counts.
    card = _locomotion_card(tmp_path, "[{name: height_twice, offset: 0.5}, joint_pos]", 10)
    out = tmp_path / "run"
    proc = _crossval(card, out, env)
    assert proc.returncode == 0, proc.stderr
    assert pd.read_parquet(out / "results.parquet").failure.isna().all()
    # A plugin entry that is not an ObservationTerm, or does not import: one line naming it.
    for name, says in (("not_a_term", "not a crosssim.observations.ObservationTerm"),
                       ("broken", "my_terms_gone:term (entry point in group 'crosssim.observation_terms') "
                                  "cannot be loaded")):
        bad = _crossval(_locomotion_card(tmp_path, f"[{name}]", 2), tmp_path / name, env)
        assert bad.returncode == 1 and says in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


LOADER_PLUGIN = '''
"""A policy format from a plugin: a linear policy stored as plain arrays (.npz, no pickles)."""
import numpy as np

from crosssim.errors import PolicyLoadError
from crosssim.policies import Policy


class LinearPolicy(Policy):
    batchable = True  # no memory across calls: episodes may run in lockstep

    def __init__(self, w, b):
        self.w, self.b = w, b
        self.action_size, self.obs_size = w.shape

    def reset(self):
        pass

    def act(self, obs):
        return np.tanh(np.asarray(obs) @ self.w.T + self.b)


def load_linear(card, *, obs_size, action_size, trust):
    try:
        with np.load(card.policy_file, allow_pickle=False) as f:  # arrays only: no code runs, trusted or not
            return LinearPolicy(f["w"], f["b"])
    except (OSError, KeyError, ValueError) as exc:
        raise PolicyLoadError(f"{card.policy_file}: not a linear policy ({exc})") from None
'''


def test_policy_loader_plugin(tmp_path):
    import numpy as np

    env = _install(tmp_path, "my_loader", LOADER_PLUGIN, "[crosssim.policy_loaders]\nlinear = my_loader:load_linear\n")
    np.savez(tmp_path / "lin.npz", w=np.full((3, 11), 0.01), b=np.zeros(3))
    card = tmp_path / "card.yaml"
    card.write_text("name: lin\ntask: Hopper\npolicy: {file: lin.npz, format: linear}\n")
    out = tmp_path / "run"
    proc = _crossval(card, out, env)
    assert proc.returncode == 0, proc.stderr
    assert pd.read_parquet(out / "results.parquet").failure.isna().all()
    # Without the plugin the format is unknown: one line that lists what is installed.
    gone = _crossval(card, tmp_path / "gone", {})
    assert gone.returncode == 1 and "'policy.format' is 'linear'; one of callable, onnx" in gone.stderr, gone.stderr
    # The loader's sizes are checked for plugins as for built-ins.
    np.savez(tmp_path / "lin.npz", w=np.zeros((3, 7)), b=np.zeros(3))
    bad = _crossval(card, tmp_path / "bad", env)
    assert bad.returncode == 1 and "takes 7 observation values but task Hopper produces 11" in bad.stderr, bad.stderr


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
    # every episode of broken-python failed: the results are written and crossval says so (exit 5)
    assert proc.returncode == 5 and "every episode failed in broken-python" in proc.stderr, proc.stderr
    df = pd.read_parquet(out / "results.parquet")
    here, there = df[df.engine == "mujoco"], df[df.engine == "mujoco-elsewhere"]
    assert there.failure.isna().all()
    assert here["return"].tolist() == there["return"].tolist()  # same physics, same numbers, other process kind
    broken = df[df.engine == "broken-python"]
    assert broken.failure.str.contains("cannot start worker interpreter /nonexistent/python3").all()
    audit = json.loads((out / "audit.json").read_text())
    assert audit["mujoco-elsewhere"]


PERTURBATION = '''
"""A third-party model perturbation: scale gravity, registered through an entry point."""
from crosssim.variant import PerturbationAxis


def scale_gravity(m, value):
    m.opt.gravity[:] = m.opt.gravity * value


gravity_scale = PerturbationAxis(scale_gravity, compose="scale", doc="scale on gravity")
'''


def test_perturbation_plugin_from_outside_the_package(tmp_path):
    site = tmp_path / "site"
    (site / "gravity_perturbation-0.1.dist-info").mkdir(parents=True)
    (site / "gravity_perturbation.py").write_text(PERTURBATION)
    (site / "gravity_perturbation-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: gravity-perturbation\nVersion: 0.1\n")
    (site / "gravity_perturbation-0.1.dist-info" / "entry_points.txt").write_text(
        "[crosssim.perturbations]\ngravity_scale = gravity_perturbation:gravity_scale\n")
    sims = tmp_path / "simulators"
    sims.mkdir()
    (sims / "mujoco-heavy.yaml").write_text("engine: mujoco\nsettings: {gravity_scale: 2.0}\n")
    args = ["crossval", "--policy", _card(tmp_path), "--engines", "mujoco,mujoco-heavy", "--episodes", "2",
            "--max-steps", "100", "--no-risk", "--no-report", "--no-cache"]
    out = tmp_path / "run"
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    proc = _run([*args, "--out", out], {"PYTHONPATH": path, "CROSSSIM_SIMULATORS": str(sims)})
    assert proc.returncode == 0, proc.stderr
    df = pd.read_parquet(out / "results.parquet")
    assert df.failure.isna().all()
    heavy, plain = df[df.engine == "mujoco-heavy"], df[df.engine == "mujoco"]
    assert not (heavy["return"].to_numpy() == plain["return"].to_numpy()).all()  # twice the gravity
    # Without the plugin installed the same profile is refused, naming the file and the setting.
    proc = _run([*args, "--out", tmp_path / "run2"], {"CROSSSIM_SIMULATORS": str(sims)})
    assert "mujoco-heavy.yaml: unknown setting(s) gravity_scale" in proc.stdout + proc.stderr
