"""Shared test helpers. Tests that need ../shared/fixtures skip with a reason where it is absent."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures"
CARDS = ROOT / "tests" / "cards"
PENDULUM = ROOT / "simulators" / "robots" / "pendulum3.xml"

os.environ.setdefault("MUJOCO_GL", "egl")
# Tests never reuse rows cached by a user's runs (or by each other across sessions).
os.environ["CROSSSIM_CACHE"] = tempfile.mkdtemp(prefix="crosssim-test-cache-")

requires_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"{FIXTURES} is absent (CI has ../shared/fixtures; a user clone may not)")


def installed_engines() -> list[str]:
    return [e for e in ("mujoco", "pybullet") if importlib.util.find_spec(e) is not None]


ZOO_AGENTS = [(algo, env) for algo in ("a2c", "ars", "ppo", "sac", "tqc", "trpo") for env in ("Hopper", "HalfCheetah")]


def random_states(scene, free_base: bool, rng, n: int = 3):
    """(model, data, qpos, qvel) at ``n`` random states near qpos0, mj_forward already run."""
    import mujoco
    import numpy as np

    m = mujoco.MjModel.from_xml_path(str(scene))
    d = mujoco.MjData(m)
    for _ in range(n):
        qpos = m.qpos0 + rng.uniform(-0.3, 0.3, m.nq)
        qvel = rng.uniform(-1, 1, m.nv)
        if free_base:
            qpos[3:7] /= np.linalg.norm(qpos[3:7])
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, d)
        yield m, d, qpos, qvel


def zoo_card(algo: str, env: str) -> Path:
    return CARDS / "zoo" / f"{algo}-{env}.yaml"


# -- shared by tests/robustness: a small valid policy and card to corrupt ----------------------------


@pytest.fixture(scope="session")
def good_policy(tmp_path_factory):
    """A TorchScript MLP for Hopper (11 -> 3) and its card, written once per session."""
    torch = pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("good")
    torch.manual_seed(0)
    net = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(11, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3),
                                               torch.nn.Tanh()))
    net.save(str(folder / "policy.pt"))
    card = {"name": "good", "task": "Hopper", "policy": {"file": "policy.pt", "format": "torchscript"},
            "control_period": 0.008, "trained_in": "mujoco"}
    (folder / "card.yaml").write_text(yaml.safe_dump(card))
    return folder


def write_card(folder: Path, **changes) -> Path:
    """A card in ``folder`` from the good card's fields, with ``changes`` (None deletes a field)."""
    card = {"name": "case", "task": "Hopper", "policy": {"file": "policy.pt", "format": "torchscript"},
            "control_period": 0.008, "trained_in": "mujoco"}
    for key, value in changes.items():
        if value is None:
            card.pop(key, None)
        else:
            card[key] = value
    path = folder / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    return path


def assert_one_line_error(proc, *needles):
    """A CLI run that failed cleanly: exit 1, no traceback, the last stderr line is crosssim's one
    error line and contains every ``needles``."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("crosssim: error:"), proc.stderr
    for n in needles:
        assert n in last, (n, last)

