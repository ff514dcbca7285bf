"""The third untouched part's realities (validation/realities_heldout3.py): mechanisms no sweep, no
perturbation, no selection reality and no earlier held-out reality uses, each shown to change what
it claims (small MuJoCo checks on the untouched tasks' robots with fixed actions, no policy of any
part)."""

from __future__ import annotations

import sys
import dataclasses
from dataclasses import fields, replace
from pathlib import Path

import mujoco
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))

import realities  # noqa: E402
from heldout_helpers import FixedActions, assert_mechanism_changes_rollout, heldout_rollout  # noqa: E402
import realities_heldout as rh1  # noqa: E402
import realities_heldout2 as rh2  # noqa: E402
import realities_heldout3 as rh  # noqa: E402

from crosssim.variant import HARNESS_FIELDS, MODEL_FIELDS  # noqa: E402
from crosssim.runner.harness import Harness  # noqa: E402
from crosssim.sweep import LADDERS  # noqa: E402

MECHANISMS = [k for names in rh.MECHANISMS.values() for k in names]


def only(name: str) -> rh.Heldout3Reality:
    return replace(rh.NOMINAL, name=name, **{name: getattr(rh.ALL, name)})


def test_mechanism_names_are_new_to_every_sweep_perturbation_and_other_reality():
    swept = {axis for lad in LADDERS.values() for axis, _ in lad.axes}
    assert not set(MECHANISMS) & swept
    assert not set(MECHANISMS) & (MODEL_FIELDS | HARNESS_FIELDS)
    others = set()
    for cls in (realities.Reality, rh1.HeldoutReality, rh2.Heldout2Reality):
        others |= {f.name for f in fields(cls)} - {"name", "family"}
    assert not set(MECHANISMS) & others
    for r in rh.REALITIES:  # each family's reality holds its own mechanisms only; "all" holds every one
        on = {f.name for f in fields(r) if f.name in MECHANISMS and getattr(r, f.name) != getattr(rh.NOMINAL, f.name)}
        assert on == (set(MECHANISMS) if r.family == "all" else set(rh.MECHANISMS[r.family]))


@pytest.mark.parametrize("name", MECHANISMS)
@pytest.mark.parametrize("task", ["Ant-v4", "Walker2d-v4"])
def test_each_mechanism_changes_the_rollout(task, name):
    assert_mechanism_changes_rollout(rh, only(name), name, task)


def test_the_nominal_loop_repeats_exactly_and_is_the_earlier_parts_loop():
    """The truth's base: the nominal loop is the same MuJoCo run twice, and the same run as the
    second part's nominal loop (no mechanism leaks into nominal)."""
    a, obs_a = heldout_rollout(rh, rh.NOMINAL)
    b, obs_b = heldout_rollout(rh, rh.NOMINAL)
    assert a == b and np.array_equal(obs_a, obs_b)
    h = Harness.for_task("Ant-v4")
    policy = FixedActions(h.action_size, amplitude=0.9)
    assert rh2.run_heldout(h, policy, rh2.NOMINAL, episode_seeds=[0], max_steps=40)[0] == a


def test_the_actuator_is_weaker_one_way_and_noisy_per_period():
    n = 2000
    asym = rh.Actuator(only("asymmetry"), n)
    out = asym(np.full(n, 10.0))
    assert set(np.round(out, 9)) == {10.0, round(10.0 * (1 - rh.ALL.asymmetry), 9)}
    assert np.array_equal(asym(-np.full(n, 10.0)) == -10.0, out != 10.0)  # the other way is the strong one
    noisy = rh.Actuator(only("torque_noise"), n)
    assert np.array_equal(noisy(np.full(n, 10.0)), np.full(n, 10.0))  # no draw before the first period
    noisy.new_period(np.random.default_rng(0))
    factor = noisy(np.full(n, 10.0)) / 10.0
    assert factor.mean() == pytest.approx(1.0, abs=0.02) and factor.std() == pytest.approx(rh.ALL.torque_noise, rel=0.1)
    assert np.array_equal(noisy(np.full(n, 10.0)) / 10.0, factor)  # held for the whole period


def test_springs_pull_the_actuated_joints_with_the_stated_share_of_peak():
    h = Harness.for_task("Walker2d-v4")
    act = h.actuation
    peak = np.abs(act.gear) * np.maximum(np.abs(act.ctrl_low), np.abs(act.ctrl_high))
    _, model = rh.build(h, only("stiffness"), peak)
    m = model.mj
    data = mujoco.MjData(m)
    joints = [m.joint(h.canonical.joint_names[j]) for j in act.joint_index]
    for j in joints:
        data.qpos[j.qposadr[0]] = m.qpos_spring[j.qposadr[0]] + 0.5
    mujoco.mj_forward(m, data)
    spring = np.array([-data.qfrc_passive[j.dofadr[0]] for j in joints])
    assert spring == pytest.approx(rh.ALL.stiffness * peak, rel=1e-6)
    unactuated = set(range(m.njnt)) - {j.id for j in joints}
    assert all(m.jnt_stiffness[j] == 0 for j in unactuated)


def test_sensors_lag_velocities_and_clip_angular_ones_only():
    h = Harness.for_task("Ant-v4")
    m = rh.build(h, rh.NOMINAL, np.ones(h.action_size))[1].mj
    free = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE][0]
    linear = np.arange(3) + m.jnt_dofadr[free]
    assert set(rh.angular_dofs(m)) == set(range(m.nv)) - set(linear)

    frame_cls = dataclasses.make_dataclass("F", ["qvel", "derived"])
    sense = rh.Sensors(only("velocity_skew"), m)
    assert rh.ALL.velocity_skew == 2
    readings = [np.full(m.nv, float(k)) for k in range(1, 6)]
    seen = [sense(frame_cls(v, "x")).qvel[0] for v in readings]
    assert seen == [1.0, 1.0, 1.0, 2.0, 3.0]  # the first reading repeats until the one two periods old arrives
    gyro = rh.Sensors(only("gyro_range"), m)
    fast = gyro(frame_cls(np.full(m.nv, 100.0), "x"))
    assert np.all(fast.qvel[linear] == 100.0) and np.all(fast.qvel[rh.angular_dofs(m)] == rh.ALL.gyro_range)
    assert fast.derived is None


def test_the_tether_pulls_back_and_the_feet_are_heavier():
    h = Harness.for_task("Walker2d-v4")
    peak = np.ones(h.action_size)
    m0 = rh.build(h, rh.NOMINAL, peak)[1].mj
    m = rh.build(h, rh.CONTACT, peak)[1].mj
    feet = rh.distal_bodies(m)
    assert sorted(m.body(b).name for b in feet) == ["foot", "foot_left"]
    assert m.body_mass[feet] == pytest.approx(m0.body_mass[feet] * (1 + rh.CONTACT.foot_mass))
    others = np.setdiff1d(np.arange(m.nbody), feet)
    assert np.array_equal(m.body_mass[others], m0.body_mass[others])
    assert rh.tether_pull(m, rh.CONTACT) == pytest.approx(rh.CONTACT.tether * m.body_mass.sum() * 9.81)
    ant = rh.build(Harness.for_task("Ant-v4"), rh.NOMINAL, np.ones(8))[1].mj
    assert m.body(1).name == ant.body(1).name == "torso"  # the pull goes on body 1: the root, in both robots
    assert len(rh.distal_bodies(rh.build(Harness.for_task("Ant-v4"), rh.NOMINAL, np.ones(8))[1].mj)) == 4
    # the pull is felt: with the robot held still by zero actions, the torso drifts back
    pulled = rh.run_heldout(h, FixedActions(h.action_size, amplitude=0.0), only("tether"), episode_seeds=[0], max_steps=30)
    still = rh.run_heldout(h, FixedActions(h.action_size, amplitude=0.0), rh.NOMINAL, episode_seeds=[0], max_steps=30)
    assert pulled[0] < still[0]  # the forward-velocity reward falls
