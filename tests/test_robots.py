"""Policies deployed on real robots: Unitree G1 (Isaac Gym, TorchScript LSTM) and Go1 (MJX, ONNX).

Acceptance numbers come from the authors' own MuJoCo deployments (../shared/fixtures/README.md).
The harness-mismatch cases are the classic card mistakes: each must end in "harness mismatch"
with the matching hint, never in a risk number.
"""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import CARDS, FIXTURES, requires_fixtures
from crosssim.evaluate import crossval
from crosssim.runner import CrossvalConfig

pytestmark = requires_fixtures
G1 = CARDS / "robots" / "unitree-g1.yaml"
GO1 = CARDS / "robots" / "playground-go1.yaml"


def _variant(tmp_path: Path, card: Path, name: str, edit) -> Path:
    """A copy of ``card`` with absolute paths, changed by ``edit(dict)``."""
    raw = yaml.safe_load(card.read_text())
    raw["robot"] = str((card.parent / raw["robot"]).resolve())
    raw["policy"]["file"] = str((card.parent / raw["policy"]["file"]).resolve())
    edit(raw)
    out = tmp_path / f"{name}.yaml"
    out.write_text(yaml.safe_dump(raw))
    return out


@pytest.mark.parametrize("card,speed", [(G1, 0.45), (GO1, 0.48)], ids=["g1", "go1"])
def test_walks_like_its_authors_say_in_mujoco(tmp_path, card, speed):
    """20 s at a 0.5 m/s command, no fall, forward speed within 0.1 m/s of the authors' number."""
    summary = crossval(CrossvalConfig(policy=str(card), engines=("mujoco",), episodes=1, out=str(tmp_path),
                                      risk=False, report=False)).summary
    df = pd.read_parquet(tmp_path / "results.parquet")
    row = df.iloc[0]
    assert row.failure is None and not row.terminated and row.length == 1000  # 20 s at 50 Hz
    assert row.x_velocity == pytest.approx(speed, abs=0.1)
    assert summary.engines["mujoco"].terminated_early == 0.0


@pytest.mark.parametrize("card", [G1, GO1], ids=["g1", "go1"])
def test_crossval_every_engine(tmp_path, card):
    """Short episodes in every installed CPU engine, with the risk profile and the harness check."""
    short = _variant(tmp_path, card, "short", lambda r: r["task_options"].update(episode_seconds=3))
    summary = crossval(CrossvalConfig(policy=str(short), engines=("mujoco", "pybullet"), episodes=1,
                                      out=str(tmp_path / "run"), report=False)).summary
    assert summary.risk.harness_check.status == "ok", summary.risk.harness_check
    assert summary.risk.verdict in ("low", "medium", "high")
    for e in ("mujoco", "pybullet"):
        assert summary.engines[e].failed == 0, summary.engines[e]


def _swap_legs(raw):
    j = raw["joints"]
    raw["joints"] = j[6:] + j[:6]


def _history_wrapper(tmp_path) -> Path:
    """G1's policy behind a 2-frame frame-major history: it reads the newest frame only."""
    import torch

    inner = torch.jit.load(str(FIXTURES / "unitree-g1" / "motion.pt"))

    class Newest(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x[:, 47:])

        @torch.jit.export
        def reset_memory(self):
            self.m.reset_memory()

    path = tmp_path / "g1_history.pt"
    torch.jit.script(Newest(inner)).save(str(path))
    return path


MISTAKES = {
    "permuted joint order": (lambda r: _swap_legs(r), "joints"),
    "quaternion read as x,y,z,w": (lambda r: r["observation"].update(quaternion_order="xyzw"), "quaternion"),
    "wrong default pose": (lambda r: r["action"].update(default_pos=[0.0, 0.0, 0.0, 1.2, -0.6, 0.0] * 2),
                           "default_pos"),
}


@pytest.mark.parametrize("mistake", list(MISTAKES) + ["history in the wrong layout"])
def test_classic_card_mistakes_are_harness_mismatches(tmp_path, mistake):
    if mistake == "history in the wrong layout":
        wrapper = _history_wrapper(tmp_path)

        def edit(r):
            r["policy"]["file"] = str(wrapper)
            r["observation"]["history"] = {"length": 2, "layout": "term_major"}  # trained frame_major
        hint = "history"
    else:
        edit, hint = MISTAKES[mistake]

    def short(r):
        edit(r)
        r["task_options"]["episode_seconds"] = 4

    card = _variant(tmp_path, G1, "mistake", short)
    # 5 episodes: 0 of 5 is a decided mismatch (0 of 1 is "too few episodes to decide").
    summary = crossval(CrossvalConfig(policy=str(card), engines=("mujoco",), episodes=5, out=str(tmp_path / "run"),
                                      report=False)).summary
    risk = summary.risk
    assert risk.verdict == "harness mismatch", risk.harness_check
    assert any(hint in h for h in risk.harness_check.hints), risk.harness_check.hints


def test_history_wrapper_is_fine_in_the_right_layout(tmp_path):
    """The control for the layout case: the same wrapper with the layout it was built for walks."""
    wrapper = _history_wrapper(tmp_path)

    def edit(r):
        r["policy"]["file"] = str(wrapper)
        r["observation"]["history"] = {"length": 2, "layout": "frame_major"}
        r["task_options"]["episode_seconds"] = 4

    card = _variant(tmp_path, G1, "right", edit)
    # 5 episodes: 0 of 5 is a decided mismatch (0 of 1 is "too few episodes to decide").
    summary = crossval(CrossvalConfig(policy=str(card), engines=("mujoco",), episodes=5, out=str(tmp_path / "run"),
                                      report=False)).summary
    assert summary.risk.harness_check.status == "ok", summary.risk.harness_check
