"""Observation terms on hand-computed frames; history layouts; sensors from state; fuzzed specs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosssim.errors import CardError
from crosssim.frame import SimFrame
from crosssim.observations import ObservationBuilder, TermContext, TermSpec, observation_terms, parse_terms

TERMS = observation_terms()


def _frame(quat=(1, 0, 0, 0), lin=(0, 0, 0), ang=(0, 0, 0), time=0.0):
    qpos = np.array([0, 0, 0.5, *quat, 0.1, -0.2])
    qvel = np.array([*lin, 0, 0, 0, 0.3, -0.4])
    return SimFrame(time=time, qpos=qpos, qvel=qvel, base_pos=np.array([0, 0, 0.5]),
                    base_quat=np.array(quat, float), base_lin_vel=np.array(lin, float),
                    base_ang_vel=np.array(ang, float), joint_torque=np.zeros(2))


def _ctx(**kw):
    return TermContext(np.array([7, 8]), np.array([6, 7]), np.array([0.1, 0.0]), **kw)


def test_projected_gravity_upright_and_tilted():
    assert np.allclose(TERMS["projected_gravity"](_frame(), _ctx()), [0, 0, -1])
    # Pitched 90 deg nose-down about y: quat (cos 45, 0, sin 45, 0); gravity along body +x.
    q = (np.cos(np.pi / 4), 0, np.sin(np.pi / 4), 0)
    assert np.allclose(TERMS["projected_gravity"](_frame(quat=q), _ctx()), [1, 0, 0], atol=1e-12)
    # Rolled 30 deg about x: gravity in body frame (0, -sin 30, -cos 30).
    a = np.radians(30)
    q = (np.cos(a / 2), np.sin(a / 2), 0, 0)
    assert np.allclose(TERMS["projected_gravity"](_frame(quat=q), _ctx()), [0, -np.sin(a), -np.cos(a)])


def test_quaternion_read_as_xyzw_flips_gravity_upright():
    g = TERMS["projected_gravity"](_frame(), _ctx(quaternion_order="xyzw"))
    assert g[2] > 0.99  # the classic mistake: upright robot "sees" gravity pointing up


def test_velocities_in_base_frame():
    yaw = np.radians(90)  # base turned to face world +y
    q = (np.cos(yaw / 2), 0, 0, np.sin(yaw / 2))
    f = _frame(quat=q, lin=(0, 2.0, 0), ang=(0, 0, 0.5))
    assert np.allclose(TERMS["base_lin_vel"](f, _ctx()), [2.0, 0, 0], atol=1e-12)  # forward in the body
    assert np.allclose(TERMS["base_ang_vel"](f, _ctx()), [0, 0, 0.5], atol=1e-12)


def test_joint_terms_command_action_phase():
    ctx = _ctx(command=np.array([0.5, 0, 0.1]), last_action=np.array([0.3, -0.3]))
    f = _frame(time=0.2)
    assert np.allclose(TERMS["joint_pos_rel"](f, ctx), [0.0, -0.2])
    assert np.allclose(TERMS["joint_pos"](f, ctx), [0.1, -0.2])
    assert np.allclose(TERMS["joint_vel"](f, ctx), [0.3, -0.4])
    assert np.allclose(TERMS["command"](f, ctx), [0.5, 0, 0.1])
    assert np.allclose(TERMS["last_action"](f, ctx), [0.3, -0.3])
    assert np.allclose(TERMS["gait_phase"](f, ctx, period=0.8), [1.0, 0.0], atol=1e-12)  # quarter period
    assert np.allclose(TERMS["base_height"](f, ctx), [0.5])


def test_history_layouts():
    terms = (TermSpec("joint_pos"), TermSpec("base_height"))
    ctx = _ctx()
    for layout, expect in (("frame_major", [0.1, -0.2, 0.5, 0.1, -0.2, 0.5, 0.2, -0.2, 0.5]),
                           ("term_major", [0.1, -0.2, 0.1, -0.2, 0.2, -0.2, 0.5, 0.5, 0.5])):
        b = ObservationBuilder(terms, history=3, layout=layout)
        b(_frame(), ctx)
        f2 = _frame()
        f2.qpos[7] = 0.2
        out = b(f2, ctx)
        assert np.allclose(out, expect), (layout, out)
        assert b.size(2) == 9


def test_scale_and_clip():
    b = ObservationBuilder((TermSpec("joint_vel", scale=np.array([10.0, 1.0]), clip=2.0),))
    assert np.allclose(b(_frame(), _ctx()), [2.0, -0.4])


def test_sensor_from_state_matches_mujoco(tmp_path):
    """A gyro computed from the canonical state equals MuJoCo's own sensor reading."""
    import mujoco

    from crosssim.sensors import SensorReader

    xml = tmp_path / "s.xml"
    xml.write_text("""<mujoco><worldbody><body name="b" pos="0 0 1"><freejoint/>
      <geom size="0.1" mass="1"/><site name="imu" pos="0.1 0 0" euler="0 0 0.5"/></body></worldbody>
      <sensor><gyro site="imu" name="gyro"/><velocimeter site="imu" name="vel"/>
      <accelerometer site="imu" name="acc"/></sensor></mujoco>""")
    m = mujoco.MjModel.from_xml_path(str(xml))
    d = mujoco.MjData(m)
    d.qpos[3:7] = [0.9, 0.1, 0.3, 0.2]
    d.qpos[3:7] /= np.linalg.norm(d.qpos[3:7])
    d.qvel[:] = [0.5, -0.2, 0.1, 0.4, -0.3, 0.7]
    mujoco.mj_forward(m, d)
    reader = SensorReader(xml)
    f = SimFrame(0.0, d.qpos.copy(), d.qvel.copy(), d.xpos[1], d.xquat[1], np.zeros(3), np.zeros(3), np.zeros(0))
    assert np.allclose(reader.read("gyro", f), d.sensordata[0:3])
    assert np.allclose(reader.read("vel", f), d.sensordata[3:6])
    with pytest.raises(CardError, match="accelerometer sensor, which needs accelerations"):
        reader.check("acc", "card.yaml")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from(sorted(TERMS) + ["sensor:x", "bogus", ""]),
    st.fixed_dictionaries({"name": st.sampled_from(sorted(TERMS) + ["nope"])},
                          optional={"scale": st.one_of(st.floats(allow_nan=True), st.lists(st.floats(), max_size=3),
                                                       st.text(max_size=3)),
                                    "clip": st.one_of(st.floats(allow_nan=True), st.integers(), st.booleans()),
                                    "period": st.one_of(st.floats(allow_nan=True), st.integers(-2, 5)),
                                    "extra": st.integers()}),
    st.integers(), st.none()), max_size=6))
def test_term_parser_fuzz(raw):
    """Any term list either parses into valid specs or raises CardError: never another exception."""
    try:
        specs = parse_terms(raw, "card.yaml")
    except CardError as exc:
        assert "card.yaml" in str(exc)
        return
    for s in specs:
        assert s.name in TERMS or s.name.startswith("sensor:")
        assert np.isfinite(np.asarray(s.scale, dtype=float)).all()
