"""EngineNewton: kinematics and dynamics against MuJoCo, audit, every task x every newton profile,
and a short crossval. Each check is also shown failing on a broken model where that is possible.

Warp compiles Newton's kernels once (~75 s, cached in $WARP_CACHE_PATH; the Makefile sets
.cache/warp); timings below assume a warm cache.
"""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

if importlib.util.find_spec("newton") is None:
    pytest.skip("newton is not installed (pip install 'crosssim[newton]')", allow_module_level=True)

import mujoco  # noqa: E402

from conftest import PENDULUM, random_states, requires_fixtures, zoo_card  # noqa: E402
from crosssim.actuation import Actuation  # noqa: E402
from crosssim.checks import Tolerances, check_audit, check_engines_match  # noqa: E402
from crosssim.engines import EngineProfile, get_engine  # noqa: E402
from crosssim.engines.common import check_finite  # noqa: E402
from crosssim.engines.settings import NewtonSettings  # noqa: E402
from crosssim.errors import EngineFailure  # noqa: E402
from crosssim.frame import InitialState, quat_rotate  # noqa: E402
from crosssim.profiles import load_profile, split_settings  # noqa: E402
from crosssim.scene import canonical_model, resolve_scene  # noqa: E402
from crosssim.tasks import registered_tasks  # noqa: E402
from crosssim.variant import compile_model  # noqa: E402

PROFILES = ("newton-mujoco-warp", "newton-featherstone", "newton-xpbd")
ROBOTS = ("gymnasium:hopper.xml", "gymnasium:ant.xml", "gymnasium:half_cheetah.xml", "gymnasium:walker2d_v5.xml")



def _load(profile: str, robot: str):
    p = load_profile(profile)
    engine = get_engine(p.engine)
    return engine, engine.load(compile_model(resolve_scene(robot), p.variant.model), p)


def test_profiles_pick_the_newton_adapter():
    from crosssim.engines.newton import EngineNewton

    for name in PROFILES:
        p = load_profile(name)
        assert p.engine == "newton" and p.settings.solver in name
        assert isinstance(get_engine(p.engine), EngineNewton)


def _kinematics_errors(engine, model, scene, rng, states=3) -> dict:
    """Worst |Newton - MuJoCo| at random states: base frame, round trip of qpos/qvel, every body's
    COM position and COM velocity (Newton's body twist) against mj_forward."""
    worst: dict[str, float] = {}
    for m, d, qpos, qvel in random_states(scene, model.canonical.free_base, rng, states):
        state = engine.reset(model, InitialState(qpos, qvel))
        frame = engine.frame(model, state)
        base = np.zeros(6)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, 1, base, 0)
        X, V = state.s0.body_q.numpy(), state.s0.body_qd.numpy()
        com = np.array([X[b, :3] + quat_rotate(np.array([X[b, 6], *X[b, 3:6]]), model.body_com[b])
                        for b in model.body_index])
        com_vel = []
        for b in range(1, m.nbody):
            v = np.zeros(6)
            mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, v, 0)
            com_vel.append(np.r_[v[3:], v[:3]])
        errors = {"base_pos": frame.base_pos - d.xpos[1], "base_quat": frame.base_quat - d.xquat[1],
                  "base_lin_vel": frame.base_lin_vel - base[3:], "base_ang_vel": frame.base_ang_vel - base[:3],
                  "qpos": frame.qpos - qpos, "qvel": frame.qvel - qvel, "body_com": com - d.xipos[1:],
                  "body_com_vel": V[model.body_index] - np.array(com_vel)}
        for k, e in errors.items():
            worst[k] = max(worst.get(k, 0.0), float(np.abs(e).max()))
    return worst


@pytest.mark.parametrize("robot", ROBOTS)
def test_kinematics_match_mujoco(robot):
    """Free-joint quaternion order and velocity frames, joint ref offsets, merged D6 joints: to
    Newton's float32 precision (measured worst 4e-7)."""
    engine, model = _load("newton-featherstone", robot)
    worst = _kinematics_errors(engine, model, resolve_scene(robot), np.random.default_rng(0))
    assert max(worst.values()) < 5e-6, worst


def test_kinematics_check_fails_with_newtons_own_d6_anchor(monkeypatch):
    """Newton's importer anchors Hopper's merged rootx/rootz/rooty joint 1.25 m below the torso;
    left as imported, the torso is 0.37 m off at random states."""
    from crosssim.engines import newton_model

    monkeypatch.setattr(newton_model, "_fix_merged_joint_anchors", lambda *a: None)
    engine, model = _load("newton-featherstone", ROBOTS[0])
    worst = _kinematics_errors(engine, model, resolve_scene(ROBOTS[0]), np.random.default_rng(0))
    assert worst["base_pos"] > 0.1 and worst["qpos"] < 5e-6


def _standing(scene):
    c = canonical_model(scene)
    return InitialState(c.qpos0.copy(), np.zeros(c.nv))


@pytest.mark.parametrize("solver", ["mujoco-c", "mujoco-warp"])
def test_solver_mujoco_matches_mujoco_with_contacts(solver):
    """Hopper landing under random torques: SolverMuJoCo behind Newton's model follows MuJoCo
    step for step (torques as joint_f, MJCF motors off, ref, armature, damping, RK4)."""
    scene = resolve_scene(ROBOTS[0])
    engine = get_engine("newton")
    model = engine.load(compile_model(scene), EngineProfile(f"newton-{solver}", "newton", NewtonSettings(solver=solver)))
    report = check_engines_match(scene, "mujoco", "newton", steps=200, torque_scale=0.3, initial=_standing(scene),
                                 tolerances=Tolerances(qpos=1e-3, qvel=1e-2),
                                 models=((get_engine("mujoco"), None), (engine, model)))
    assert report.ok, report.failures


@pytest.mark.parametrize("robot", [ROBOTS[0], str(PENDULUM)])
def test_featherstone_contact_free_parity(robot):
    """Measured: Hopper in the air 0.0025 rad / 0.022 rad/s, pendulum 0.0017 rad / 0.029 rad/s over
    0.5 s (semi-implicit Euler vs MuJoCo's RK4 / Euler with implicit damping)."""
    scene = resolve_scene(robot)
    engine, model = _load("newton-featherstone", robot)
    report = check_engines_match(scene, "mujoco", "newton", steps=250, torque_scale=0.3 if robot == str(PENDULUM) else 0.02,
                                 tolerances=Tolerances(qpos=0.01, qvel=0.1),
                                 models=((get_engine("mujoco"), None), (engine, model)))
    assert report.ok, report.failures


def test_parity_check_fails_on_a_wrong_mass_in_newton():
    """The same parity check catches a 10 % mass error set in the Newton model before the solver
    reads it (Featherstone caches inertias when it is built, so the solver is rebuilt)."""
    scene = resolve_scene(str(PENDULUM))
    engine, model = _load("newton-featherstone", str(PENDULUM))
    k = model.canonical.body_names.index("link2")
    mass, inertia = model.nm.body_mass.numpy(), model.nm.body_inertia.numpy()
    mass[model.body_index[k]] *= 1.1
    inertia[model.body_index[k]] *= 1.1
    model.nm.body_mass.assign(mass)
    model.nm.body_inv_mass.assign(np.where(mass > 0, 1 / np.where(mass > 0, mass, 1), 0))
    model.nm.body_inertia.assign(inertia)
    model.nm.body_inv_inertia.assign(np.array([np.linalg.pinv(i) for i in inertia]))
    model.solver = type(model.solver)(model.nm)
    report = check_engines_match(scene, "mujoco", "newton", steps=250, torque_scale=0.3,
                                 tolerances=Tolerances(qpos=0.005, qvel=0.05),
                                 models=((get_engine("mujoco"), None), (engine, model)))
    assert not report.ok and any("j2" in f for f in report.failures)


def test_captured_graph_is_bit_identical():
    scene = resolve_scene(ROBOTS[0])
    c = canonical_model(scene)
    engine = get_engine("newton")
    torques = np.random.default_rng(3).uniform(-60, 60, (30, c.joint_count))
    runs = []
    for capture in (True, False):
        model = engine.load(compile_model(scene), EngineProfile("f", "newton", NewtonSettings(solver="featherstone", substeps=2,
                                                                                    capture=capture)))
        state = engine.reset(model, _standing(scene))
        for tau in torques:
            engine.step(model, state, tau, 1)
        runs.append(engine.joint_state(model, state))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


# Non-ok audit rows each solver is expected to have, by quantity: integrator (Euler vs the
# models' RK4) and armature (XPBD has none).
EXPECTED_AUDIT = {
    "newton-mujoco-warp": set(),
    "newton-featherstone": {"integrator"},
    "newton-xpbd": {"integrator", "joint_armature"},
}


@pytest.mark.parametrize("profile", PROFILES)
def test_audit_matches_canonical_where_representable(profile):
    for robot in (*ROBOTS, str(PENDULUM)):
        engine, model = _load(profile, robot)
        rows = engine.audit(model)
        off = {r.quantity for r in rows if r.status != "ok"}
        assert off <= EXPECTED_AUDIT[profile], (robot, check_audit(rows))
        masses = [r for r in rows if r.quantity == "body_mass"]
        assert len(masses) == len(model.canonical.body_names) and all(r.status == "ok" for r in masses)


def test_audit_reconciles_settotalmass():
    engine, model = _load("newton-featherstone", "gymnasium:half_cheetah.xml")
    total = sum(r.engine for r in engine.audit(model) if r.quantity == "body_mass")
    assert total == pytest.approx(14.0, rel=1e-5)  # Newton's importer gives 21.18 kg


def test_profile_and_perturbation_scales_reach_the_newton_model():
    """Model-level settings (perturbations, calibrated profiles) act on Newton as on MuJoCo."""
    scene = resolve_scene(ROBOTS[0])
    c = canonical_model(scene)
    engine = get_engine("newton")
    settings = {"solver": "xpbd", "mass_scale": 1.1, "damping_scale": 2.0, "armature_scale": 0.5, "dt_divisor": 2}
    profile = split_settings(EngineProfile("scaled", "newton"), settings)
    model = engine.load(compile_model(scene, profile.variant.model), profile)
    np.testing.assert_allclose(model.nm.body_mass.numpy()[model.body_index], 1.1 * c.body_mass, rtol=1e-6)
    np.testing.assert_allclose(model.nm.joint_damping.numpy()[model.qd_index], 2.0 * c.joint_damping, rtol=1e-6)
    np.testing.assert_allclose(model.passive[2].numpy(), 2.0 * c.joint_damping, rtol=1e-6)  # XPBD's explicit damping
    np.testing.assert_allclose(model.nm.joint_armature.numpy()[model.qd_index], 0.5 * c.joint_armature, rtol=1e-6)
    assert model.dt == pytest.approx(c.timestep / 2)


def test_audit_flags_a_wrong_mass():
    engine, model = _load("newton-mujoco-warp", ROBOTS[0])
    mass = model.nm.body_mass.numpy()
    mass[model.body_index[model.canonical.body_names.index("thigh")]] *= 1.05
    model.nm.body_mass.assign(mass)
    problems = check_audit(engine.audit(model))
    assert any(p.startswith("body_mass thigh") for p in problems), problems


def test_audit_says_what_xpbd_cannot_represent():
    engine, model = _load("newton-xpbd", "gymnasium:ant.xml")
    rows = engine.audit(model)
    armature = [r for r in rows if r.quantity == "joint_armature"]
    assert armature and all(r.status == "unsupported" and "no joint armature" in r.note for r in armature)
    damping = [r for r in rows if r.quantity == "joint_damping"]
    assert all(r.status == "ok" and "explicit" in r.note for r in damping)


def test_diverging_solver_reports_nan_frames():
    """Featherstone at one solver step per 0.01 s diverges on Ant: frames (contact wrenches
    included) are NaN, and the harness's check turns them into 'diverged'."""
    task = registered_tasks()["Ant"]()
    scene = resolve_scene(task.scene)
    c = canonical_model(scene)
    engine = get_engine("newton")
    model = engine.load(compile_model(scene), EngineProfile("newton-featherstone-1", "newton", NewtonSettings(solver="featherstone")))
    act, rng = Actuation.motors(c), np.random.default_rng(0)
    state = engine.reset(model, task.initial_state(c, rng))
    for _ in range(40):
        q, qd = engine.joint_state(model, state)
        engine.step(model, state, act.torques(act.target(rng.uniform(-1, 1, 8)), q, qd), task.frame_skip)
        frame = engine.frame(model, state, contacts=True)
        if not frame.is_finite():
            break
    assert not frame.is_finite()
    with pytest.raises(EngineFailure, match=r"diverged \(NaN\) at t = "):
        check_finite(frame, "newton-featherstone")


def test_warp_cache_defaults_to_a_crosssim_folder(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "WARP_CACHE_PATH"} | {"HOME": str(tmp_path)}
    code = ("import os, crosssim.engines.newton, warp as wp; wp.init(); "
            "print(os.environ['WARP_CACHE_PATH']); print(wp.config.kernel_cache_dir)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    expected = str(tmp_path / ".cache" / "crosssim" / "warp")
    assert lines[-2] == expected and lines[-1].startswith(expected)


@requires_fixtures
def test_short_crossval_with_newton_columns(tmp_path):
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    engines = ("mujoco", "newton-mujoco-warp", "newton-featherstone")
    summary = crossval(CrossvalConfig(policy=str(zoo_card("ppo", "Hopper")), engines=engines, episodes=1,
                                      max_steps=100, out=str(tmp_path))).summary
    per = summary.engines
    assert all(per[e].failed == 0 and per[e].error is None for e in engines), per
    assert per["newton-mujoco-warp"].mean_return == pytest.approx(per["mujoco"].mean_return, rel=0.02)
    assert np.isfinite(per["newton-featherstone"].mean_return)
    assert per["newton-featherstone"].audit_mismatches == 1  # the integrator: Euler, not RK4


@pytest.mark.parametrize("profile", ["newton-mujoco-warp", "newton-featherstone"])
def test_ant_contact_wrenches_carry_its_weight(profile):
    """Ant-v5's observation reads cfrc_ext. Resting on its four feet from 1.5 s to 3 s, the vertical
    contact force summed over bodies equals the weight (measured MuJoCo 1.000, mujoco-warp
    1.000-1.004, four feet nonzero), as it does in MuJoCo; a reading of zero (reported once for
    mujoco-warp, not reproduced on Newton 1.8 / MuJoCo-Warp 3.17) fails here."""
    scene = resolve_scene(ROBOTS[1])
    c = canonical_model(scene)
    engine, model = _load(profile, ROBOTS[1])
    state = engine.reset(model, _standing(scene))
    weight = c.total_mass * 9.81
    engine.step(model, state, np.zeros(c.joint_count), 150)  # mujoco-warp lands later (0.857 at 1 s)
    for _ in range(6):
        engine.step(model, state, np.zeros(c.joint_count), 25)
        wrench = engine.frame(model, state, contacts=True).body_ext_wrench
        assert wrench[:, 5].sum() == pytest.approx(weight, rel=0.02)
        assert (np.abs(wrench[:, 3:]).sum(axis=1) > 0.1).sum() == 4  # the four feet, nothing else
