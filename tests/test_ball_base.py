"""A base of three slides and a ball joint moves as a free joint does, in every engine that builds
it (issue #18): the same one-legged robot, pushed (linear and angular velocity) and dropped tilted
onto the floor, on a free joint and on slides + ball, compared per quantity over 1 s. A ball
quaternion written in the wrong order (x, y, z, w) must fail the same comparison."""

from pathlib import Path

import numpy as np
import pytest

from crosssim.frame import InitialState
from crosssim.profiles import load_profile
from crosssim.runner.simulator import open_engine
from crosssim.scene import canonical_model

BASES = {
    "free": '<freejoint name="root"/>',
    "slide_ball": ('<joint name="x" type="slide" axis="1 0 0"/><joint name="y" type="slide" axis="0 1 0"/>'
                   '<joint name="z" type="slide" axis="0 0 1"/><joint name="root_ball" type="ball"/>'),
}
START_HEIGHT = 0.3
TILT = np.array([np.cos(0.15), 0.6 * np.sin(0.15), 0.8 * np.sin(0.15), 0.0])
PUSH_LIN, PUSH_ANG = np.array([0.8, -0.3, 0.5]), np.array([1.0, -2.0, 0.7])  # world m/s; body-frame rad/s
STEPS, TOUCHDOWN = 200, 50
"""1 s at 5 ms; the foot first touches the floor after step 55 (free flight before)."""
# Worst gap free vs slides + ball over the run / over the free flight, measured (2026-12-01):
# mujoco 5e-15 m / 1e-14; pybullet 8.3e-3 m, 2.2e-2 (contacts) and 4.9e-4 m, 2.7e-8 in flight
# (Bullet integrates its floating base and its slide joints differently); newton-mujoco-warp
# 4.2e-6 m / 5.1e-6 (float32); physx 0 (its floating root, the free joint's own, stands for the
# slides and the ball). A swapped quaternion gives 0.47-0.93 m / 1.27-1.68 in every engine.
TOLERANCES = {  # engine: (position [m], quaternion component, the same in free flight)
    "mujoco": (1e-9, 1e-9, 1e-9, 1e-9),
    "physx": (1e-6, 1e-6, 1e-6, 1e-6),
    "pybullet": (0.015, 0.04, 1e-3, 1e-6),
    "newton-mujoco-warp": (2e-5, 2e-5, 2e-6, 2e-6),
}


def stilt(tmp_path: Path, base: str, ball: str = "") -> Path:
    """A 5 kg torso on a sprung hip, a leg and a foot; the base frame at the soles."""
    xml = f"""<mujoco model="stilt">
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="base" pos="0 0 {START_HEIGHT}">
      {BASES[base]}
      <geom type="box" size="0.1 0.1 0.05" pos="0 0 0.45" mass="5"/>
      <body name="leg" pos="0 0 0.4">
        <joint name="hip" type="hinge" axis="0 1 0" damping="1" stiffness="200"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.34" size="0.03" mass="0.5"/>
        <body name="foot" pos="0 0 -0.38"><geom type="box" size="0.15 0.12 0.02" mass="0.2"/></body>
      </body>
    </body>
  </worldbody>
  <actuator><motor name="hip" joint="hip" gear="10"/></actuator>
</mujoco>"""
    path = tmp_path / f"stilt-{base}{'-' + str(abs(hash(ball))) if ball else ''}.xml"
    path.write_text(xml.replace('type="ball"', f'type="ball" {ball}'))
    return path


def trajectory(engine: str, path: Path, quat_order=(0, 1, 2, 3)) -> np.ndarray:
    """(STEPS, 7) base position and quaternion (w >= 0) under zero torques."""
    c = canonical_model(path)
    qpos, qvel = c.qpos0.copy(), np.zeros(c.nv)
    # Free joint: origin in the world; slides: offsets from the body's position. Both layouts put
    # position, then quaternion (w, x, y, z), then linear and body-frame angular velocity first.
    qpos[:3] = [0, 0, START_HEIGHT] if c.free_base else 0.0
    qpos[3:7] = TILT[list(quat_order)]
    qvel[:3], qvel[3:6] = PUSH_LIN, PUSH_ANG
    sim = open_engine(load_profile(engine), path)
    try:
        state, rows = sim.engine.reset(sim.model, InitialState(qpos, qvel)), []
        for _ in range(STEPS):
            f = sim.engine.frame(sim.model, state)
            rows.append(np.concatenate([f.base_pos, f.base_quat * np.sign(f.base_quat[0])]))
            sim.engine.step(sim.model, state, np.zeros(c.joint_count), 1)
        return np.array(rows)
    finally:
        sim.close()


@pytest.mark.parametrize("engine", list(TOLERANCES))
def test_slides_and_ball_move_as_a_free_joint(tmp_path, engine):
    if engine == "pybullet":
        pytest.importorskip("pybullet")
    if engine.startswith("newton"):
        pytest.importorskip("newton")
    if engine == "physx":
        pytest.importorskip("sapien")
    free = trajectory(engine, stilt(tmp_path, "free"))
    ball_path = stilt(tmp_path, "slide_ball")
    ball = trajectory(engine, ball_path)
    pos_tol, quat_tol, pos_air, quat_air = TOLERANCES[engine]
    gap = np.abs(free - ball)
    assert free[:, 2].min() < 0.12 < START_HEIGHT  # it did land (the base frame is at the soles)
    assert gap[:, :3].max() <= pos_tol, (engine, gap[:, :3].max())
    assert gap[:, 3:].max() <= quat_tol, (engine, gap[:, 3:].max())
    assert gap[:TOUCHDOWN, :3].max() <= pos_air, (engine, gap[:TOUCHDOWN, :3].max())
    assert gap[:TOUCHDOWN, 3:].max() <= quat_air, (engine, gap[:TOUCHDOWN, 3:].max())
    # Broken case: the ball's quaternion written x, y, z, w fails the same comparison.
    swapped = np.abs(free - trajectory(engine, ball_path, quat_order=(1, 2, 3, 0)))
    assert swapped[:, :3].max() > 10 * pos_tol and swapped[:, 3:].max() > 10 * quat_tol


@pytest.mark.parametrize("engine", list(TOLERANCES))
def test_ball_state_round_trip_and_pose_with_an_offset_anchor(tmp_path, engine):
    """A ball anchored off the body origin: a state written and read back is the same, and the base
    pose is MuJoCo's forward kinematics of it."""
    import mujoco

    pytest.importorskip({"pybullet": "pybullet", "physx": "sapien"}.get(engine, "mujoco"))
    if engine.startswith("newton"):
        pytest.importorskip("newton")
    path = stilt(tmp_path, "slide_ball", 'pos="0.05 -0.02 0.3"')
    c = canonical_model(path)
    rng = np.random.default_rng(1)
    qpos, qvel = c.qpos0.copy(), rng.normal(size=c.nv)
    qpos[:3] = rng.normal(size=3) * 0.3
    qpos[3:7] = rng.normal(size=4)
    qpos[3:7] /= np.linalg.norm(qpos[3:7]) * np.sign(qpos[3])
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    sim = open_engine(load_profile(engine), path)
    try:
        state = sim.engine.reset(sim.model, InitialState(qpos, qvel))
        frame = sim.engine.frame(sim.model, state)
        q, v = sim.engine.joint_state(sim.model, state)
    finally:
        sim.close()
    tol = {"mujoco": 1e-9, "pybullet": 1e-6}.get(engine, 1e-5)  # PhysX and Newton hold float32
    q = np.array(q)
    q[3:7] *= np.sign(q[3])
    np.testing.assert_allclose(q, qpos, atol=tol)
    np.testing.assert_allclose(v, qvel, atol=10 * tol)
    np.testing.assert_allclose(frame.base_pos, d.xpos[1], atol=tol)
    np.testing.assert_allclose(frame.base_quat * np.sign(frame.base_quat[0]), d.xquat[1], atol=tol)


def test_physx_refuses_a_ball_it_cannot_stand_a_free_root_for(tmp_path):
    pytest.importorskip("sapien")
    with pytest.raises(Exception) as err:
        open_engine(load_profile("physx"), stilt(tmp_path, "slide_ball", 'damping="0.1"'))
    text = str(err.value)
    assert "\n" not in text and text.startswith("physx: ball joints not supported (joint root_ball in stilt-slide_ball")
    assert text.endswith("SAPIEN 3 exposes no spherical articulation joint, and its joints have damping, armature, "
                         "friction, a spring, a range or an actuator")
