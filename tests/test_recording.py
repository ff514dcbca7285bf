"""The recorded episode's joint torques and foot contacts (crosssim.runner.recording), in every engine."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import CARDS, FIXTURES
from crosssim.frame import SimFrame
from crosssim.runner.recording import Recording, end_bodies
from crosssim.runner.workers import EngineJob, execute_job

G1_CARD = CARDS / "robots" / "unitree-g1.yaml"
needs_g1 = pytest.mark.skipif(not (FIXTURES / "unitree-g1").is_dir(), reason=f"{FIXTURES / 'unitree-g1'} is absent")
ENGINES = ("mujoco", "pybullet", "physx", "newton-mujoco-warp")
STEPS = 60  # 1.2 s of walking: the G1 lifts each foot at least once


_RUNS: dict = {}


def _recorded(card, profile: str, *, record: bool = True, batch: bool = False, episodes=((0, 0),)) -> dict:
    """Rows by episode of one engine job (each distinct job runs once per session)."""
    key = (str(card), profile, record, batch, episodes)
    if key not in _RUNS:
        _RUNS[key] = _run(card, profile, record=record, batch=batch, episodes=episodes)
    if not _RUNS[key]:
        pytest.skip(f"{profile} gave no row (engine not installed here?)")
    return _RUNS[key]


def _run(card, profile: str, *, record: bool, batch: bool, episodes) -> dict:
    rows = {}
    job = EngineJob(str(card), profile, episodes, max_steps=STEPS, record=record, batch=batch)
    execute_job(job, lambda kind, payload: rows.__setitem__(payload["episode"], payload) if kind == "row" else None)
    return rows


def _frame(torque, wrench) -> SimFrame:
    z = np.zeros(3)
    return SimFrame(0.0, np.zeros(7), np.zeros(6), z, np.array([1.0, 0, 0, 0]), z, z, np.asarray(torque, float),
                    np.asarray(wrench, float).reshape(-1, 6))


def test_end_bodies_are_the_feet():
    from crosssim.scene import resolve_scene

    assert end_bodies(resolve_scene("gymnasium:hopper.xml")) == ("foot",)
    assert end_bodies(resolve_scene("gymnasium:walker2d.xml")) == ("foot", "foot_left")
    if (FIXTURES / "unitree-g1").is_dir():
        assert end_bodies(FIXTURES / "unitree-g1" / "scene.xml") == ("left_ankle_roll_link", "right_ankle_roll_link")


def test_contact_flags_follow_the_threshold_and_an_engine_without_wrenches_keeps_no_feet():
    rec = Recording(np.array([1, 0]), ("b", "a"), ("foot",), np.array([2]), 5.0)
    series = rec.start()
    for fz in (0.0, 4.9, 5.1, 80.0):
        rec.add(series, _frame([10.0, 20.0, 30.0], [[0] * 6, [0] * 6, [0, 0, 0, 0, 0, fz]]))
    out = rec.finish(series)
    assert out["joint_torque"].tolist() == [[20.0, 10.0]] * 4  # the policy's joints, its order
    assert out["foot_contact"][:, 0].tolist() == [False, False, True, True]
    assert out["foot_force"][:, 0].tolist() == [0.0, 4.9, 5.1, 80.0] and list(out["feet"]) == ["foot"]
    series = rec.start()
    rec.add(series, _frame([1.0, 2.0, 3.0], np.zeros((0, 6))))  # an engine that gives no contact wrench
    out = rec.finish(series)
    assert "foot_contact" not in out and list(out["feet"]) == ["foot"] and out["joint_torque"].shape == (1, 2)


@pytest.fixture(scope="module")
def g1_mujoco():
    return _recorded(G1_CARD, "mujoco")[0]


@needs_g1
@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_records_torques_and_foot_contacts_that_agree_with_mujoco(engine, g1_mujoco):
    """The G1 walking 1.2 s from the same start: each foot's share of time on the ground within 10
    points of MuJoCo's (measured: 0-2), each joint's torque correlated with MuJoCo's over time above
    0.85 (measured: 0.92-1.00) and its RMS within a factor 2 (measured: 0.86-1.5, the ankle rolls
    the farthest, in PhysX)."""
    ref = g1_mujoco["trajectory"]
    tr = _recorded(G1_CARD, engine)[0]["trajectory"] if engine != "mujoco" else ref
    assert list(tr["feet"]) == ["left_ankle_roll_link", "right_ankle_roll_link"]
    assert list(tr["torque_joints"])[:2] == ["left_hip_pitch_joint", "left_hip_roll_joint"]
    contact, torque = np.asarray(tr["foot_contact"], bool), np.asarray(tr["joint_torque"], float)
    assert contact.shape == (STEPS, 2) and torque.shape == (STEPS, 12)
    duty = contact.mean(axis=0)
    assert (duty > 0.3).all() and (duty < 0.9).all()  # walking: each foot both on the ground and in the air
    assert np.abs(duty - np.asarray(ref["foot_contact"], bool).mean(axis=0)).max() <= 0.10
    ref_torque = np.asarray(ref["joint_torque"], float)
    rms, ref_rms = np.sqrt((torque ** 2).mean(axis=0)), np.sqrt((ref_torque ** 2).mean(axis=0))
    assert (ref_rms > 1.0).all()  # every joint works
    assert ((rms / ref_rms > 0.5) & (rms / ref_rms < 2.0)).all()
    # Each joint's torque follows MuJoCo's over time: a joint-order or sign slip fails here.
    assert min(np.corrcoef(torque[:, k], ref_torque[:, k])[0, 1] for k in range(12)) > 0.85


@needs_g1
@pytest.mark.parametrize("engine", ENGINES)
def test_recording_changes_no_row(engine):
    """Reading contact wrenches for the recorded episode leaves its numbers as they were, bit for bit."""
    plain, recorded = _recorded(G1_CARD, engine, record=False)[0], _recorded(G1_CARD, engine)[0]
    assert plain["ret"] == recorded["ret"] and plain["length"] == recorded["length"]
    assert plain["metrics"] == recorded["metrics"]
    assert plain.get("trajectory") in (None, {})


@needs_g1
def test_lockstep_records_the_same_gait(g1_mujoco):
    batched = _recorded(G1_CARD, "mujoco", batch=True, episodes=((0, 0), (1, 1)))
    assert not batched[1].get("trajectory")  # only episode 0 is recorded
    tr, ref = batched[0]["trajectory"], g1_mujoco["trajectory"]
    assert tr["foot_contact"].shape == (STEPS, 2)  # the policy's last bits differ in a batch, not the gait
    assert np.abs(tr["foot_contact"].mean(0) - np.asarray(ref["foot_contact"]).mean(0)).max() <= 0.05


def test_report_gait_says_which_engine_lacks_contacts_and_when_nothing_was_recorded():
    from crosssim.report.legged import gait, torque_panels

    t = np.arange(1, 11) * 0.02
    down = np.array([[1, 0]] * 5 + [[0, 1]] * 5, bool)
    full = {"t": t, "feet": np.array(["l", "r"]), "foot_contact": down, "foot_force": down * 50.0,
            "contact_threshold": np.array([3.0]), "joint_torque": np.ones((10, 1)), "torque_joints": np.array(["knee"])}
    bare = {"t": t, "feet": np.array(["l", "r"]), "joint_torque": np.ones((10, 1)), "torque_joints": np.array(["knee"])}
    g = gait({"a": full, "b": bare}, ["a", "b"])
    assert [e for e, _ in g["panels"]] == ["a"] and g["missing"] == ["b"] and g["note"] is None
    assert [(r.foot, r.duty, r.touchdowns, r.peak_force) for r in g["rows"]] == [("l", 0.5, 0, 50.0), ("r", 0.5, 1, 50.0)]
    assert "b: the engine adapter gives no contact forces" in gait({"b": bare}, ["b"])["note"]
    old = {"t": t, "qpos": np.zeros((10, 7))}  # a run folder from before torques and feet were recorded
    assert "not recorded" in gait({"a": old}, ["a"])["note"]
    panels, note = torque_panels({"a": old}, ["a"], "a", {})
    assert panels == [] and "not recorded" in note
    panels, note = torque_panels({"a": full, "b": old}, ["a", "b"], "a", {})
    assert [p for p, _ in panels] == ["knee torque"] and note == "no torques recorded for b"
    nofeet = dict(bare, feet=np.array([], dtype=str))
    assert "no feet" in gait({"a": nofeet}, ["a"])["note"]


def test_an_engine_without_contact_wrenches_still_records_the_rest(good_policy, monkeypatch):
    """Newton's XPBD solver raises for contact wrenches: the recorded episode must neither fail nor
    change; it keeps its torques and no foot series (the report then names the engine)."""
    from crosssim.card import load_card
    from crosssim.errors import CrossSimError
    from crosssim.policies import load_policy
    from crosssim.profiles import load_profile
    from crosssim.runner.rollout import Harness, run_episode
    from crosssim.runner.simulator import open_engine

    card = load_card(good_policy / "card.yaml")
    harness = Harness.from_card(card)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size)
    sim = open_engine(load_profile("mujoco"), harness.scene)
    frame = sim.engine.frame

    def no_wrench(model, state, *, contacts=False, **kw):
        if contacts:
            raise CrossSimError("newton (xpbd): contact wrenches are not available for this solver")
        return frame(model, state, **kw)

    monkeypatch.setattr(sim.engine, "frame", no_wrench)
    plain = run_episode(sim, harness, policy, episode=0, seed=3, max_steps=50)
    recorded = run_episode(sim, harness, policy, episode=0, seed=3, max_steps=50, record=True)
    sim.close()
    assert recorded.failure is None and (recorded.ret, recorded.length) == (plain.ret, plain.length)
    tr = recorded.trajectory
    assert tr["joint_torque"].shape == (recorded.length, 3) and list(tr["feet"]) == ["foot"]
    assert "foot_contact" not in tr
