"""Locomotion reset events: episodes differ from one another, the same seed gives the same episode."""

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import CARDS, requires_fixtures
from crosssim.errors import CardError
from crosssim.evaluate import crossval
from crosssim.runner import CrossvalConfig
from crosssim.tasks import make_task
from crosssim.tasks.locomotion import ResetEvents

G1 = CARDS / "robots" / "unitree-g1.yaml"


def _g1(tmp_path, name: str, **options):
    raw = yaml.safe_load(G1.read_text())
    raw["robot"] = str((G1.parent / raw["robot"]).resolve())
    raw["policy"]["file"] = str((G1.parent / raw["policy"]["file"]).resolve())
    raw["task_options"].update(episode_seconds=2, **options)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _run(card, out, seed=0):
    summary = crossval(CrossvalConfig(policy=str(card), engines=("mujoco",), episodes=5, out=str(out), seed=seed,
                                      risk=False, report=False, cache=False)).summary
    return summary, pd.read_parquet(out / "results.parquet")


@requires_fixtures
def test_g1_episodes_vary_and_repeat(tmp_path):
    card = _g1(tmp_path, "default")
    summary, df = _run(card, tmp_path / "a")
    assert df["return"].std() > 1e-3, df["return"].tolist()  # was ~1e-13: every episode the same
    assert summary.warnings == []
    _, again = _run(card, tmp_path / "b")
    cols = ["episode", "seed", "return", "length", "terminated", "x_velocity"]
    pd.testing.assert_frame_equal(df[cols], again[cols])  # same seed, same rows
    assert not df.terminated.any()  # the default variation does not knock the G1 over


@requires_fixtures
def test_identical_episodes_warn(tmp_path):
    card = _g1(tmp_path, "fixed", reset={"joint_pos_noise": 0, "joint_vel_noise": 0, "yaw_range": [0, 0]})
    summary, df = _run(card, tmp_path / "fixed")
    assert df["return"].std() < 1e-9
    assert len(summary.warnings) == 1 and "identical" in summary.warnings[0]
    data = (tmp_path / "fixed" / "summary.json").read_text()
    assert "identical" in data


def test_reset_events_are_seeded():
    from crosssim.scene import canonical_model, resolve_scene

    c = canonical_model(resolve_scene("gymnasium:ant.xml"))
    events = ResetEvents()
    a = events.sample(c, c.qpos0, np.random.default_rng(3))
    b = events.sample(c, c.qpos0, np.random.default_rng(3))
    other = events.sample(c, c.qpos0, np.random.default_rng(4))
    assert np.array_equal(a.qpos, b.qpos) and np.array_equal(a.qvel, b.qvel)
    assert not np.allclose(a.qpos, other.qpos)
    assert np.linalg.norm(a.qpos[3:7]) == pytest.approx(1.0)  # still a unit quaternion, now with a heading
    assert np.abs(a.qpos[c.joint_qposadr] - c.qpos0[c.joint_qposadr]).max() <= 0.05
    assert np.abs(a.qvel[c.joint_dofadr]).max() <= 0.1 and not a.qvel[:6].any()  # the base starts at rest


@pytest.mark.parametrize("reset,error", [
    ({"joint_noise": 0.1}, "reset.joint_noise is not a reset option"),
    ({"joint_pos_noise": -1}, "joint_pos_noise must be a number >= 0"),
    ({"yaw_range": [1, 0]}, "yaw_range must be"),
    ([0.1], "must be a mapping"),
])
def test_bad_reset_options(reset, error):
    with pytest.raises(CardError, match=error):
        make_task("Locomotion", reset=reset)


def test_reset_noise_keeps_its_meaning():
    task = make_task("Locomotion", reset_noise=0.3)
    assert task.reset_events == ResetEvents(0.3, 0.0, (0.0, 0.0))
    with pytest.raises(CardError, match="not both"):
        make_task("Locomotion", reset_noise=0.3, reset={})
