"""The second untouched part's realities (validation/realities_heldout2.py): mechanisms no sweep, no
selection reality and no first held-out reality uses, each shown to change what it claims (small
MuJoCo checks on the untouched tasks' robots with fixed actions, no policy of any part)."""

from __future__ import annotations

import sys
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
import realities_heldout2 as rh  # noqa: E402

from crosssim.variant import HARNESS_FIELDS, MODEL_FIELDS  # noqa: E402
from crosssim.runner.harness import Harness  # noqa: E402
from crosssim.sweep import LADDERS  # noqa: E402

MECHANISMS = [k for names in rh.MECHANISMS.values() for k in names]


def only(name: str) -> rh.Heldout2Reality:
    return replace(rh.NOMINAL, name=name, **{name: getattr(rh.ALL, name)})


SAME_AS = {"saturation": "torque_limit"}
"""A mechanism crosssim can already apply, under its Variant field name: no ladder may sweep it
while this part is the test (the design must not see what tests it)."""


def test_mechanisms_are_new_to_every_sweep_and_every_other_reality():
    swept = {axis for lad in LADDERS.values() for axis, _ in lad.axes}
    swept |= {"push_impulse", "motor_free_speed", "actuator", "term_noise"}  # opt-in families (crosssim.families)
    assert not {SAME_AS.get(m, m) for m in MECHANISMS} & swept
    assert not (set(MECHANISMS) - set(SAME_AS)) & (MODEL_FIELDS | HARNESS_FIELDS)
    others = ({f.name for f in fields(realities.Reality)} | {f.name for f in fields(rh1.HeldoutReality)}) - {"name", "family"}
    assert not set(MECHANISMS) & others
    for r in rh.REALITIES:  # each family's reality holds its own mechanisms only; "all" holds every one
        on = {f.name for f in fields(r) if f.name in MECHANISMS and getattr(r, f.name) != getattr(rh.NOMINAL, f.name)}
        assert on == (set(MECHANISMS) if r.family == "all" else set(rh.MECHANISMS[r.family]))


@pytest.mark.parametrize("name", [m for m in MECHANISMS if m != "ridge_height"])  # ridges: ahead, see below
@pytest.mark.parametrize("task", ["Ant-v4", "InvertedDoublePendulum-v4"])
def test_each_mechanism_changes_the_rollout(task, name):
    assert_mechanism_changes_rollout(rh, only(name), name, task)


def test_the_nominal_loop_repeats_exactly():
    """The truth's base: the nominal loop is the same MuJoCo run twice (no draw leaks in)."""
    a, obs_a = heldout_rollout(rh, rh.NOMINAL)
    b, obs_b = heldout_rollout(rh, rh.NOMINAL)
    assert a == b and np.array_equal(obs_a, obs_b)


def test_the_actuator_clips_spreads_and_ripples():
    peak = np.array([100.0, 100.0, 100.0])
    sat = rh.Actuator(only("saturation"), peak)
    assert sat(np.array([100.0, -90.0, 30.0]), np.zeros(3)) == pytest.approx([75.0, -75.0, 30.0])
    spread = rh.Actuator(only("gain_spread"), peak)
    gains = spread(np.full(3, 10.0), np.zeros(3)) / 10.0
    assert np.all(np.abs(gains - 1) <= rh.ALL.gain_spread) and np.ptp(gains) > 0.01
    assert np.array_equal(gains, rh.Actuator(only("gain_spread"), peak)(np.full(3, 10.0), np.zeros(3)) / 10.0)
    ripple = rh.Actuator(only("ripple"), peak)
    q = np.linspace(0, 2 * np.pi / rh.ALL.ripple_k, 200)
    out = np.array([ripple(np.full(3, 10.0), np.full(3, x)) for x in q]) / 10.0
    assert out.max() == pytest.approx(1 + rh.ALL.ripple, abs=1e-3) and out.min() == pytest.approx(1 - rh.ALL.ripple, abs=1e-3)


def test_the_encoder_reads_quantized_positions_and_differentiates_them():
    h = Harness.for_task("Walker2d-v4")
    c = h.canonical
    engine, model = rh.build(h, rh.NOMINAL)
    state = engine.reset(model, h.task.initial_state(c, np.random.default_rng(0)))
    enc = rh.Encoder(only("encoder_step"), c)
    first = enc(engine.frame(model, state), 0.008)
    step = rh.ALL.encoder_step
    read = first.qpos[c.joint_qposadr]
    assert np.allclose(read / step, np.round(read / step)) and np.all(first.qvel[c.joint_dofadr] == 0)
    engine.step(model, state, np.full(c.joint_count, 5.0), 4)
    second = enc(engine.frame(model, state), 0.008)
    assert second.qvel[c.joint_dofadr] == pytest.approx((second.qpos[c.joint_qposadr] - read) / 0.008)


def test_overruns_hold_the_previous_action(monkeypatch):
    h = Harness.for_task("Ant-v4")
    applied, target = [], type(h.actuation).target

    def recording(self, action):
        applied.append(np.array(action))
        return target(self, action)

    monkeypatch.setattr(type(h.actuation), "target", recording)
    rh.run_heldout(h, FixedActions(h.action_size), only("overrun_p"), episode_seeds=[0], max_steps=300)
    applied = np.array(applied)
    held = np.mean(np.all(applied[1:] == applied[:-1], axis=1))
    assert held == pytest.approx(rh.ALL.overrun_p, abs=0.05)


def test_slope_tilts_gravity_and_ridges_stand_ahead_of_the_start():
    h = Harness.for_task("Walker2d-v4")
    _, model = rh.build(h, rh.CONTACT)
    m = model.mj
    g = m.opt.gravity
    assert np.degrees(np.arctan2(-g[0], -g[2])) == pytest.approx(rh.CONTACT.slope_deg)
    assert np.linalg.norm(g) == pytest.approx(9.81)
    data = mujoco.MjData(m)
    mujoco.mj_forward(m, data)
    geomid = np.array([-1], dtype=np.int32)

    def ground(x):
        return 5.0 - mujoco.mj_ray(m, data, np.array([x, 0.3, 5.0]), np.array([0, 0, -1.0]), None, 1, 1, geomid)

    first, _, spacing, depth, _ = rh.RIDGES
    assert ground(0.0) == pytest.approx(0.0, abs=1e-9) and ground(first - depth) == pytest.approx(0.0, abs=1e-9)
    assert ground(first) == pytest.approx(rh.CONTACT.ridge_height) and ground(first + 3 * spacing) == pytest.approx(
        rh.CONTACT.ridge_height)
