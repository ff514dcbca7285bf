"""The physx column (PhysX 5 through SAPIEN, CPU only): kinematics, contact-free parity and audit
against MuJoCo, each shown to fail on a broken model; unsupported features refused in one line."""

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sapien", reason="the physx column needs SAPIEN: pip install 'crosssim[physx]'")

from conftest import FIXTURES, PENDULUM, random_states, requires_fixtures  # noqa: E402
from crosssim.checks import Tolerances, check_audit, check_engines_match  # noqa: E402
from crosssim.engines import EngineProfile, get_engine  # noqa: E402
from crosssim.engines.settings import PhysXSettings  # noqa: E402
from crosssim.errors import EngineFailure  # noqa: E402
from crosssim.frame import InitialState, quat_rotate  # noqa: E402
from crosssim.scene import resolve_scene  # noqa: E402
from crosssim.variant import compile_model  # noqa: E402

# The tolerances tests/test_parity.py holds PyBullet to. Measured for PhysX: pendulum 0.0010 rad /
# 0.015 rad/s worst over 0.5 s; a 90-degree error in one link's inertial frame exceeds them.
TOL = Tolerances(qpos=0.005, qvel=0.05)
ROBOTS = [str(PENDULUM), "gymnasium:hopper.xml", "gymnasium:ant.xml", "gymnasium:half_cheetah.xml",
          "gymnasium:walker2d_v5.xml"]


def _load(scene, mj=None, settings=None):
    engine = get_engine("physx")
    compiled = compile_model(scene)
    if mj is not None:
        mj(compiled.mj)
    return engine, engine.load(compiled, EngineProfile("physx", "physx", PhysXSettings(**(settings or {}))))


def _link_coms(model, state) -> np.ndarray:
    out = []
    for link in state.world.body_links:
        pose = link.get_entity_pose()
        out.append(np.asarray(pose.p, float) + quat_rotate(np.asarray(pose.q, float),
                                                           np.asarray(link.cmass_local_pose.p, float)))
    return np.array(out)


def _kinematics_error(scene, engine, model) -> float:
    """Worst difference from MuJoCo's forward kinematics over random states: body frames, link
    centres of mass and the (qpos, qvel) read back."""
    worst = 0.0
    for m, d, qpos, qvel in random_states(scene, model.canonical.free_base, np.random.default_rng(0)):
        state = engine.reset(model, InitialState(qpos, qvel))
        frame = engine.frame(model, state)
        worst = max(worst, *(np.abs(a - b).max() for a, b in [
            (frame.base_pos, d.xpos[1]), (frame.base_quat, d.xquat[1]), (frame.qpos, qpos), (frame.qvel, qvel),
            (_link_coms(model, state), d.xipos[1:])]))
        for k, link in enumerate(state.world.body_links):
            pose = link.get_entity_pose()
            worst = max(worst, np.abs(np.asarray(pose.p) - d.xpos[k + 1]).max())
    return worst


@pytest.mark.parametrize("robot", ROBOTS)
def test_physx_kinematics_match_mujoco(robot):
    """Body frames, centres of mass, base pose and joint state agree to 1e-6 (PhysX is float32:
    2.4e-7 measured)."""
    scene = resolve_scene(robot)
    engine, model = _load(scene)
    assert _kinematics_error(scene, engine, model) < 1e-6
    engine.close(model)


@requires_fixtures
@pytest.mark.parametrize("robot", ["unitree-g1/scene.xml", "playground-go1/xmls/scene_mjx_fullcollisions_flat_terrain.xml"])
def test_physx_kinematics_match_mujoco_on_the_fixtures(robot):
    """The legged fixtures (free base, meshes; G1's mesh cooking takes 5-20 s): 3.4e-7 measured."""
    scene = FIXTURES / robot
    engine, model = _load(scene)
    assert _kinematics_error(scene, engine, model) < 1e-6
    rows = [r for r in engine.audit(model) if r.status != "ok"]
    assert rows and all(r.quantity == "joint_frictionloss" and r.engine is None for r in rows)  # said, not hidden


def test_kinematics_check_fails_on_a_wrong_inertial_frame():
    def shift(mj):
        mj.body_ipos[2] += [0.0, 0.01, 0.0]

    engine, model = _load(PENDULUM, shift)
    assert _kinematics_error(PENDULUM, engine, model) > 1e-3


def test_mujoco_physx_agree_on_contact_free_motion():
    report = check_engines_match(PENDULUM, "mujoco", "physx", steps=250, torque_scale=0.3, tolerances=TOL)
    assert report.ok, report.failures


def test_parity_check_fails_on_a_rotated_inertia_frame():
    def rotate(mj):  # link2's principal axes turned 90 degrees about x: y and z moments swap
        mj.body_iquat[3] = [np.sqrt(0.5), np.sqrt(0.5), 0.0, 0.0]

    broken = _load(PENDULUM, rotate)
    report = check_engines_match(PENDULUM, "mujoco", "physx", steps=250, torque_scale=0.3, tolerances=TOL,
                                 models=((get_engine("mujoco"), None), broken))
    assert not report.ok


def test_hopper_suspended_joint_parity():
    """Hopper in the air, armature included (PhysX has joint armature natively)."""
    report = check_engines_match(resolve_scene("gymnasium:hopper.xml"), "mujoco", "physx", steps=250,
                                 torque_scale=0.02, tolerances=Tolerances(qpos=0.03, qvel=0.3))
    assert report.ok, report.failures


@pytest.mark.parametrize("robot", ROBOTS)
def test_audit_matches_where_representable(robot):
    engine, model = _load(resolve_scene(robot))
    rows = engine.audit(model)
    mismatches = [r for r in rows if r.status == "MISMATCH" and r.quantity != "integrator"]
    assert not mismatches, check_audit(mismatches)
    assert all(r.status != "unsupported" or r.quantity == "joint_frictionloss" for r in rows)
    engine.close(model)
    engine.close(model)  # twice is harmless


def test_audit_reads_back_from_physx_and_flags_a_wrong_mass():
    engine, model = _load(PENDULUM)
    link = model.world.body_links[model.canonical.body_names.index("link1")]
    link.mass = float(link.mass * 1.05)
    problems = check_audit(engine.audit(model))
    assert any(p.startswith("body_mass link1") for p in problems), problems


def test_unsupported_features_are_one_line_naming_the_engine(tmp_path):
    xml = tmp_path / "eq.xml"
    xml.write_text("""<mujoco><worldbody><body name="a"><joint name="h" type="hinge"/><geom size="0.1"/>
      <body name="b" pos="0 0 -0.3"><joint name="h2" type="hinge"/><geom size="0.1"/></body></body></worldbody>
      <equality><joint joint1="h" joint2="h2"/></equality></mujoco>""")
    with pytest.raises(EngineFailure) as info:
        _load(xml)
    assert "physx" in str(info.value) and "equality" in str(info.value) and "\n" not in str(info.value)


def test_ball_joint_is_refused_naming_the_joint(tmp_path):
    xml = tmp_path / "ball.xml"
    xml.write_text("""<mujoco><worldbody><body name="a"><joint name="shoulder" type="ball"/><geom size="0.1"/>
      </body></worldbody></mujoco>""")
    with pytest.raises(EngineFailure, match=r"^physx: ball joints not supported \(joint shoulder in ball.xml\): SAPIEN 3 "
                                            r"exposes no spherical articulation joint, and only a base of three slides "
                                            r"then the ball is built \(as a free root\)$"):
        _load(xml)


def test_import_crosssim_does_not_import_sapien():
    code = "import sys, crosssim, crosssim.engines, crosssim.cli; print('sapien' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_physx_is_listed_by_crosssim_engines():
    from crosssim.engines.availability import engine_statuses

    status = {name: (ok, detail) for name, ok, detail in engine_statuses()}
    assert status["physx"][0], status["physx"]


def test_audit_gravity_is_this_models_not_the_last_loaded():
    """SAPIEN's scene config is process-global: a later model with other gravity must not change this audit."""
    engine, model = _load(PENDULUM)
    _load(PENDULUM, mj=lambda m: m.opt.gravity.__setitem__(2, -3.0))
    row = next(r for r in engine.audit(model) if r.quantity == "gravity_z")
    assert row.engine == pytest.approx(model.mj.opt.gravity[2], abs=1e-5) and row.status == "ok", row
