"""Engine parity on contact-free motion, and parity audits, each shown to fail on a broken model."""

import numpy as np
import pytest

pybullet = pytest.importorskip("pybullet")

from conftest import PENDULUM, random_states  # noqa: E402
from crosssim.checks import Tolerances, check_audit, check_engines_match  # noqa: E402
from crosssim.engines import EngineProfile, get_engine  # noqa: E402
from crosssim.engines.settings import PyBulletSettings  # noqa: E402
from crosssim.scene import resolve_scene  # noqa: E402
from crosssim.variant import compile_model  # noqa: E402

# Measured: 0.0026 rad / 0.029 rad/s worst over 0.5 s (MuJoCo integrates damping implicitly,
# Bullet explicitly). A 10% mass error on one link gives 0.016 rad / 0.13 rad/s.
TOL = Tolerances(qpos=0.005, qvel=0.05)


def _broken_pybullet(scene, body="link2", factor=1.1):
    engine = get_engine("pybullet")
    model = engine.load(compile_model(scene), EngineProfile("pybullet", "pybullet"))
    k = model.canonical.body_names.index(body)
    link = int(model.body_link[k])
    pb = dict(physicsClientId=model.client)
    pybullet.changeDynamics(model.robot, link, mass=float(model.canonical.body_mass[k] * factor), **pb)
    pybullet.changeDynamics(model.robot, link, localInertiaDiagonal=list(model.canonical.body_inertia[k] * factor), **pb)
    return engine, model


def test_mujoco_pybullet_agree_on_contact_free_motion():
    report = check_engines_match(PENDULUM, "mujoco", "pybullet", steps=250, torque_scale=0.3, tolerances=TOL)
    assert report.ok, report.failures


def test_parity_check_fails_on_wrong_mass():
    broken = _broken_pybullet(PENDULUM)
    report = check_engines_match(PENDULUM, "mujoco", "pybullet", steps=250, torque_scale=0.3, tolerances=TOL,
                                 models=((get_engine("mujoco"), None), broken))
    assert not report.ok
    assert any("j2" in f for f in report.failures)


def test_hopper_suspended_joint_parity():
    """Hopper in the air: armature emulation keeps PyBullet's joints within 0.03 rad of MuJoCo's
    over 0.5 s (RK4 vs semi-implicit Euler accounts for the rest)."""
    scene = resolve_scene("gymnasium:hopper.xml")
    report = check_engines_match(scene, "mujoco", "pybullet", steps=250, torque_scale=0.02,
                                 tolerances=Tolerances(qpos=0.03, qvel=0.3))
    assert report.ok, report.failures


@pytest.mark.parametrize("robot", ["gymnasium:hopper.xml", "gymnasium:half_cheetah.xml", "gymnasium:walker2d_v5.xml",
                                   "gymnasium:ant.xml", str(PENDULUM)])
def test_audit_matches_where_representable(robot):
    scene = resolve_scene(robot)
    for name in ("mujoco", "pybullet"):
        engine = get_engine(name)
        model = engine.load(compile_model(scene), EngineProfile(name, name))
        rows = engine.audit(model)
        # Integrator: Bullet has only Euler. Inertia: floating bases fold armature into it (noted).
        mismatches = [r for r in rows if r.status == "MISMATCH" and r.quantity != "integrator"
                      and "armature" not in r.note]
        assert not mismatches, check_audit(mismatches)
        engine.close(model)


def test_cart_pole_moves_as_in_mujoco_not_through_its_rail():
    """gymnasium's cart-poles set contype 0 on every geom: in MuJoCo nothing touches, the cart
    runs inside the rail. Bullet collides every pair unless told, so this needs MuJoCo's bits
    per world-body/link pair. Measured over 50 steps (0.5 s): 0.0035 rad / 0.0064 rad/s worst;
    with the rail colliding (the bug, found 2026-12-02) 5.7 rad / 101 rad/s from the first step."""
    from crosssim.frame import InitialState
    from crosssim.scene import canonical_model

    scene = resolve_scene("gymnasium:inverted_double_pendulum.xml")
    c = canonical_model(scene)
    qpos = c.qpos0.copy()
    qpos[1:] += 0.05  # poles a little off upright: they fall, the cart stays inside its limits
    kwargs = dict(steps=50, torque_scale=0.05, tolerances=Tolerances(qpos=0.01, qvel=0.05),
                  initial=InitialState(qpos, np.zeros(c.nv)))
    report = check_engines_match(scene, "mujoco", "pybullet", **kwargs)
    assert report.ok, report.failures

    engine = get_engine("pybullet")
    broken = engine.load(compile_model(scene), EngineProfile("pybullet", "pybullet"))
    pb = dict(physicsClientId=broken.client)
    for body in range(pybullet.getNumBodies(**pb)):
        if body != broken.robot:
            for link in broken.body_link:
                pybullet.setCollisionFilterPair(body, broken.robot, -1, int(link), 1, **pb)
    report = check_engines_match(scene, "mujoco", "pybullet", models=((get_engine("mujoco"), None), (engine, broken)),
                                 **kwargs)
    assert not report.ok


def test_audit_flags_a_wrong_mass():
    engine, model = _broken_pybullet(PENDULUM, "link1", 1.05)
    problems = check_audit(engine.audit(model))
    assert any(p.startswith("body_mass link1") for p in problems), problems


def test_audit_says_what_pybullet_cannot_represent():
    engine = get_engine("pybullet")
    scene = resolve_scene("gymnasium:ant.xml")
    ignored = engine.load(compile_model(scene), EngineProfile("pybullet", "pybullet", PyBulletSettings(armature="ignore")))
    rows = [r for r in engine.audit(ignored) if r.quantity == "joint_armature"]
    assert rows and all(r.status == "unsupported" and "no armature" in r.note for r in rows)
    folded = engine.load(compile_model(scene), EngineProfile("pybullet", "pybullet"))  # floating base: armature as inertia
    rows = engine.audit(folded)
    assert all(r.status == "ok" for r in rows if r.quantity == "joint_armature")
    assert any(r.status == "MISMATCH" and "armature" in r.note for r in rows if r.quantity == "body_inertia")
    integrator = [r for r in rows if r.quantity == "integrator"][0]
    assert integrator.status == "MISMATCH" and "Euler" in integrator.note  # ant.xml asks for RK4


def test_pybullet_kinematics_match_mujoco_exactly():
    """Link centres of mass and base frames agree to 1e-6 in random configurations."""

    from crosssim.frame import InitialState

    rng = np.random.default_rng(0)
    for robot in ("gymnasium:hopper.xml", "gymnasium:ant.xml", "gymnasium:half_cheetah.xml"):
        scene = resolve_scene(robot)
        engine = get_engine("pybullet")
        model = engine.load(compile_model(scene), EngineProfile("pybullet", "pybullet"))
        for m, d, qpos, qvel in random_states(scene, model.canonical.free_base, rng):
            state = engine.reset(model, InitialState(qpos, qvel))
            frame = engine.frame(model, state)  # ``state`` is in the server: the raw reads below see it
            np.testing.assert_allclose(frame.base_pos, d.xpos[1], atol=1e-6)
            np.testing.assert_allclose(frame.base_quat, d.xquat[1], atol=1e-6)
            np.testing.assert_allclose(frame.qvel, qvel, atol=1e-6)
            for k, link in enumerate(model.body_link):
                pb = dict(physicsClientId=model.client)
                com = (pybullet.getBasePositionAndOrientation(model.robot, **pb)[0] if link == -1
                       else pybullet.getLinkState(model.robot, int(link), **pb)[0])
                np.testing.assert_allclose(com, d.xipos[k + 1], atol=1e-6)
