"""`make validate`'s split cannot leak: the untouched part's tasks and reality mechanisms appear
nowhere in the selection part, the held-out realities change the physics they claim (one small
MuJoCo check per mechanism, on the untouched tasks' robots with a fixed action, no policy), and the
design selection reads selection records only."""

from __future__ import annotations

import sys
from dataclasses import fields, replace
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))

import realities  # noqa: E402
from heldout_helpers import FixedActions  # noqa: E402
import realities_heldout as rh  # noqa: E402
import validate_risk  # noqa: E402
from train_population import population  # noqa: E402

from crosssim.variant import HARNESS_FIELDS, MODEL_FIELDS  # noqa: E402
from crosssim.runner.harness import Harness  # noqa: E402
from crosssim.sweep import LADDERS  # noqa: E402


def _task(name: str) -> str:
    return name.split("-v")[0]


def test_untouched_tasks_are_nowhere_in_the_selection_part():
    untouched = {p["task"] for p in population() if p["split"] == "untouched"}
    chosen_on = {p["task"] for p in population() if p["split"] == "selection"}
    cards = [*(ROOT / "tests" / "cards" / "zoo").glob("*.yaml"), *(ROOT / "policies").glob("hopper-*/card.yaml")]
    chosen_on |= {_task(yaml.safe_load(c.read_text())["task"]) for c in cards}
    assert untouched == {"Walker2d", "Ant"}
    assert chosen_on and not untouched & chosen_on


def test_the_second_untouched_part_is_new_and_stays_out_of_the_validation():
    """untouched2 (the next round's test): tasks no choosing part uses, no policy of the first
    untouched part again, and `make validate`'s population leaves it out until it is scored."""
    specs = population()
    second = [p for p in specs if p["split"] == "untouched2"]
    chosen_on = {p["task"] for p in specs if p["split"] == "selection"} | {"Hopper", "HalfCheetah"}
    assert {p["task"] for p in second} == {"Walker2d", "Ant", "InvertedDoublePendulum"}
    assert not {p["task"] for p in second} & chosen_on
    first = {(p["task"], p["budget"], p["dr"], p["seed"]) for p in specs if p["split"] == "untouched"}
    assert not first & {(p["task"], p["budget"], p["dr"], p["seed"]) for p in second}
    assert len({p["name"] for p in specs}) == len(specs)
    from validation_population import PARTS

    assert "untouched2" not in PARTS


def test_held_out_mechanisms_are_neither_swept_nor_in_the_selection_realities():
    held_out = {k for names in rh.MECHANISMS.values() for k in names}
    swept = {axis for lad in LADDERS.values() for axis, _ in lad.axes} | (MODEL_FIELDS | HARNESS_FIELDS)
    selection = {f.name for f in fields(realities.Reality)} - {"name", "family"}
    assert not held_out & swept and not held_out & selection
    for r in rh.REALITIES:  # each family's reality holds its own mechanisms only; "all" holds every one
        on = {f.name for f in fields(r) if f.name not in ("name", "family") and getattr(r, f.name) != getattr(rh.NOMINAL, f.name)
              and f.name in held_out}
        assert on == (held_out if r.family == "all" else set(rh.MECHANISMS[r.family]))


def _run(reality, task="Ant-v4", steps=40, on_act=None):
    h = Harness.for_task(task)
    policy = FixedActions(h.action_size, on_act=on_act)
    ret = rh.run_heldout(h, policy, reality, episode_seeds=[0], max_steps=steps)[0]
    return ret, np.array(policy.seen)


def only(name: str) -> rh.HeldoutReality:
    return replace(rh.NOMINAL, name=name, **{name: getattr(rh.ALL, name)})


@pytest.mark.parametrize("name", [k for names in rh.MECHANISMS.values() for k in names])
def test_each_mechanism_changes_the_ant_rollout(name):
    base_ret, base_obs = _run(rh.NOMINAL)
    ret, obs = _run(only(name))
    assert base_obs.shape == obs.shape
    assert np.abs(obs - base_obs).max() > 1e-3, f"{name} left the rollout unchanged"


def test_backlash_cuts_torque_after_a_reversal_only():
    dt = 0.002
    a = rh.Actuator(only("backlash_time"), np.array([100.0]), dt)
    out = [a(np.array([v]))[0] for v in [10.0] * 5 + [-10.0] * 6]
    assert out[:5] == [10.0] * 5  # no gap to cross at the first engagement
    gap_steps = int(np.ceil(rh.ALL.backlash_time / dt))
    assert out[5:5 + gap_steps] == [0.0] * gap_steps and out[5 + gap_steps] == -10.0


def test_voltage_sag_derates_a_sustained_full_torque():
    a = rh.Actuator(only("sag"), np.array([100.0, 100.0]), 0.002)
    out = [a(np.array([100.0, -100.0])) for _ in range(1000)]
    assert out[0][0] > 99.0 and out[-1] == pytest.approx([100 * (1 - rh.ALL.sag), -100 * (1 - rh.ALL.sag)], rel=1e-3)


def test_second_order_bandwidth_lags_then_overshoots():
    dt = 0.002
    a = rh.Actuator(only("bandwidth_hz"), np.array([100.0]), dt)
    out = np.array([a(np.array([1.0]))[0] for _ in range(500)])
    assert out[0] < 0.2 and out.max() > 1.02 and out[-1] == pytest.approx(1.0, abs=1e-3)
    assert np.argmax(out > 0.5) * dt < 1 / rh.ALL.bandwidth_hz  # rises within a period of its bandwidth


def test_coulomb_friction_holds_a_joint_under_a_small_torque():
    h = Harness.for_task("Walker2d-v4")
    for r, moves in ((rh.NOMINAL, True), (only("coulomb"), False)):
        engine, model = rh.build(h, r)
        m = model.mj
        m.opt.gravity[:] = 0.0
        data = mujoco.MjData(m)
        dof = h.actuation.dof_index[0]
        peak = h.actuation.gear[0]
        if not moves:
            assert m.dof_frictionloss[h.actuation.dof_index] == pytest.approx(rh.ALL.coulomb * np.abs(h.actuation.gear))
        q0 = data.qpos[h.actuation.qpos_index[0]]
        data.qfrc_applied[dof] = -0.5 * rh.ALL.coulomb * peak  # away from the thigh's joint limit at 0
        mujoco.mj_step(m, data, nstep=50)
        assert (abs(data.qpos[h.actuation.qpos_index[0]] - q0) > 1e-3) == moves


def test_jitter_varies_the_physics_steps_per_period():
    counts, steps = [], [0]
    original = rh.EngineMuJoCo.step

    def counting(self, model, state, torques, n_substeps=1):
        steps[0] += n_substeps
        return original(self, model, state, torques, n_substeps)

    def on_act():
        counts.append(steps[0])
        steps[0] = 0

    rh.EngineMuJoCo.step = counting
    try:
        _run(only("jitter_p"), steps=300, on_act=on_act)
    finally:
        rh.EngineMuJoCo.step = original
    periods = np.array(counts[1:])
    assert len(periods) == 299 and set(periods) == {4, 5, 6}  # Ant: 5 physics steps per period
    assert np.mean(periods != 5) == pytest.approx(2 * rh.ALL.jitter_p, abs=0.08)


def test_dropped_frames_repeat_the_previous_observation():
    _, obs = _run(only("drop_p"), steps=300)
    repeats = np.mean(np.all(obs[1:] == obs[:-1], axis=1))
    assert repeats == pytest.approx(rh.ALL.drop_p, abs=0.05)


def test_velocity_filter_lags_the_velocities_only():
    _, base = _run(rh.NOMINAL)
    _, filtered = _run(only("velocity_filter"))
    h = Harness.for_task("Ant-v4")
    c = h.canonical
    vel = slice(c.nq - 2, c.nq - 2 + c.nv)
    assert np.array_equal(base[:, :vel.start], filtered[:, :vel.start])  # the filter changes what is seen, not the motion
    alpha = 1 - np.exp(-h.task.frame_skip * c.timestep / rh.ALL.velocity_filter)
    expected = base[0, vel] + alpha * (base[1, vel] - base[0, vel])
    assert filtered[1, vel] == pytest.approx(expected, abs=1e-9)


def test_bumps_raise_the_ground_away_from_the_start_only():
    h = Harness.for_task("Ant-v4")
    _, model = rh.build(h, only("bumps"))
    m = model.mj
    data = mujoco.MjData(m)
    mujoco.mj_forward(m, data)

    floor = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    assert m.geom_type[floor] == mujoco.mjtGeom.mjGEOM_HFIELD

    def ground(x, y):
        return 5.0 - mujoco.mj_rayHfield(m, data, floor, np.array([x, y, 5.0]), np.array([0, 0, -1.0]))

    assert ground(0.0, 0.0) == pytest.approx(0.0, abs=1e-6)
    far = [ground(x, y) for x in np.linspace(3, 30, 40) for y in (-2.0, 0.0, 2.0)]
    assert max(far) > 0.5 * rh.ALL.bumps and max(far) <= rh.ALL.bumps + 1e-6 and min(far) >= -1e-6


def test_bouncy_contacts_rebound_a_dropped_ant():
    h = Harness.for_task("Ant-v4")
    rebound = {}
    for r in (rh.NOMINAL, only("damping_ratio")):
        _, model = rh.build(h, r)
        m = model.mj
        data = mujoco.MjData(m)
        data.qpos[:] = m.qpos0
        data.qpos[2] = 1.0
        vz = []
        for _ in range(150):
            mujoco.mj_step(m, data)
            vz.append(data.qvel[2])
        rebound[r.name] = max(vz[np.argmin(vz):])  # the largest upward speed after the impact
    assert rebound["damping_ratio"] > rebound["heldout-nominal"] + 0.05


def test_friction_patches_follow_the_base():
    r = only("patches")
    factors = rh._patch_factors(r)
    seen = {rh.patch_factor(r, factors, x, 0.0) for x in np.arange(0.0, 60.0, r.patch_length)}
    assert len(seen) > 10 and min(seen) >= r.patches[0] and max(seen) <= r.patches[1]
    assert rh.patch_factor(r, factors, 0.0, 0.0) == rh.patch_factor(r, factors, 0.9, 0.0)  # one patch, -0.5 to 1 m
    h = Harness.for_task("Ant-v4")
    base = rh.build(h, rh.NOMINAL)[1].mj.geom_friction[:, 0].copy()
    pairs, fresh = [], [False]
    original = rh.EngineMuJoCo.step

    def looking(self, model, state, torques, n_substeps=1):
        if fresh[0]:  # the first physics step of a period: the state is the frame the patch was read at
            x, y = state.qpos[:2]
            pairs.append((model.mj.geom_friction[:, 0].copy(), base * rh.patch_factor(r, factors, x, y)))
            fresh[0] = False
        return original(self, model, state, torques, n_substeps)

    rh.EngineMuJoCo.step = looking
    try:
        _run(r, steps=20, on_act=lambda: fresh.__setitem__(0, True))
    finally:
        rh.EngineMuJoCo.step = original
    assert len(pairs) == 20 and all(np.allclose(a, b) for a, b in pairs)
    assert not np.allclose(pairs[0][0], base)  # the start patch is not the nominal floor


def _record(part, fractions=(0.8, 0.9, 0.95), seed=0):
    rng = np.random.default_rng(seed)
    truth = {t: float(rng.uniform()) for t in validate_risk.TARGETS}
    scores = {}
    for f in fractions:
        h = {fam: float(rng.uniform(0.1, 3.0)) for fam in validate_risk.FAMILIES}
        scores[str(f)] = {"refused": False, "headroom": h, "censored": {fam: False for fam in h},
                          "margin": dict(h), "headroom_ref": h}
    return {"name": f"{part}-{seed}", "part": part, "truth": {"drop": truth}, "scores": scores}


class Untouchable(dict):
    """A record whose fields raise when read: select_design must not look at them."""

    def __getitem__(self, key):
        if key == "part":
            return "untouched"
        raise AssertionError(f"select_design read {key!r} of an untouched record")

    get = __getitem__


def test_design_selection_reads_selection_records_only():
    chosen_on = [_record(p, seed=k) for k, p in enumerate(["design"] * 6 + ["selection"] * 6)]
    alone = validate_risk.select_design(chosen_on)
    mixed = validate_risk.select_design(chosen_on[:3] + [Untouchable()] * 4 + chosen_on[3:])
    assert mixed[0] == alone[0] and str(mixed[1]) == str(alone[1])
    with pytest.raises(ValueError, match="no design or selection records"):
        validate_risk.select_design([Untouchable()])
