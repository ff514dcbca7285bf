"""Euler angles, gait phase variants, clock, time feature and [low, high] clip on hand-computed frames."""

import numpy as np
import pytest

from crosssim.errors import CardError
from crosssim.frame import SimFrame
from crosssim.observations import ObservationBuilder, TermContext, check_terms, observation_terms, parse_terms
from crosssim.sensors import SensorReader

TERMS = observation_terms()


def _frame(quat=(1, 0, 0, 0), time=0.0):
    qpos = np.array([0, 0, 0.5, *quat, 0.1, -0.2])
    return SimFrame(time=time, qpos=qpos, qvel=np.array([0, 0, 0, 0, 0, 0, 0.3, -0.4]),
                    base_pos=np.array([0, 0, 0.5]), base_quat=np.array(quat, float), base_lin_vel=np.zeros(3),
                    base_ang_vel=np.zeros(3), joint_torque=np.zeros(2))


def _ctx(**kw):
    return TermContext(np.array([7, 8]), np.array([6, 7]), np.array([0.1, 0.0]), **kw)


def _qmul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return (w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2)


def _axis(axis, angle):
    q = [np.cos(angle / 2), 0.0, 0.0, 0.0]
    q["xyz".index(axis) + 1] = np.sin(angle / 2)
    return tuple(q)


def _opts(raw):
    return parse_terms([raw], "card.yaml")[0].options


def test_euler_single_axes():
    euler = TERMS["base_euler"]
    assert np.allclose(euler(_frame(), _ctx()), [0, 0, 0])
    assert np.allclose(euler(_frame(_axis("x", 0.5)), _ctx()), [0.5, 0, 0])
    assert np.allclose(euler(_frame(_axis("y", -0.4)), _ctx()), [0, -0.4, 0])
    assert np.allclose(euler(_frame(_axis("z", 3.0)), _ctx()), [0, 0, 3.0])
    # Yaw past pi wraps into (-pi, pi] as Humanoid-Gym's wrap_to_pi does.
    assert np.allclose(euler(_frame(_axis("z", 4.0)), _ctx()), [0, 0, 4.0 - 2 * np.pi])


def test_euler_composed_extrinsic_xyz_and_intrinsic_zyx():
    roll, pitch, yaw = 0.3, -0.2, 1.0
    # Extrinsic x, then y, then z about the world axes: R = Rz(yaw) Ry(pitch) Rx(roll).
    q = _qmul(_axis("z", yaw), _qmul(_axis("y", pitch), _axis("x", roll)))
    f = _frame(q)
    assert np.allclose(TERMS["base_euler"](f, _ctx(), **_opts({"name": "base_euler"})), [roll, pitch, yaw])
    # The closed form a Humanoid-Gym style script writes for roll/pitch/yaw gives the same.
    w, x, y, z = q
    hand = [np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y)), np.arcsin(2 * (w * y - z * x)),
            np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))]
    assert np.allclose(TERMS["base_euler"](f, _ctx()), hand)
    # The same rotation read as intrinsic z-y'-x'' lists yaw first.
    opts = _opts({"name": "base_euler", "order": "zyx", "convention": "intrinsic"})
    assert np.allclose(TERMS["base_euler"](f, _ctx(), **opts), [yaw, pitch, roll])
    # Extrinsic zyx is another rotation: R = Rx(c) Ry(b) Rz(a).
    q2 = _qmul(_axis("x", roll), _qmul(_axis("y", pitch), _axis("z", yaw)))
    assert np.allclose(TERMS["base_euler"](_frame(q2), _ctx(), order="zyx"), [yaw, pitch, roll])


def test_euler_quaternion_misread_as_xyzw_is_not_upright():
    assert not np.allclose(TERMS["base_euler"](_frame(), _ctx(quaternion_order="xyzw")), 0, atol=0.1)


def test_gait_phase_playground_layout_and_variants():
    phase, f, ctx = TERMS["gait_phase"], _frame(time=0.2), _ctx()
    assert np.allclose(phase(f, ctx, **_opts("gait_phase")), [1, 0], atol=1e-12)  # old default unchanged
    # Legs offset by half a cycle, grouped, cos first: [cos phiL, cos phiR, sin phiL, sin phiR].
    pg = _opts({"name": "gait_phase", "offsets": [0, 0.5], "layout": "grouped", "cos_first": True})
    assert np.allclose(phase(f, ctx, **pg), [0, 0, 1, -1], atol=1e-12)  # phiL = pi/2, phiR = 3 pi/2
    two = _opts({"name": "gait_phase", "offsets": [0, 0.5]})
    assert np.allclose(phase(f, ctx, **two), [1, 0, -1, 0], atol=1e-12)  # interleaved [sL, cL, sR, cR]
    # f = 1/1.0 + 0.5 * |(1.0, 0)| = 1.5 Hz; at t = 0.5 s: 0.75 cycles -> phi = 3 pi/2.
    fast = _opts({"name": "gait_phase", "period": 1.0, "frequency_gain": 0.5})
    assert np.allclose(phase(_frame(time=0.5), _ctx(command=np.array([1.0, 0, 0])), **fast), [-1, 0], atol=1e-12)
    # Zero command under freeze_below: every leg held at 2 pi frozen_phase (default 0.5: phi = pi).
    frozen = _opts({"name": "gait_phase", "offsets": [0, 0.25], "freeze_below": 0.1})
    assert np.allclose(phase(f, ctx, **frozen), [0, -1, 0, -1], atol=1e-12)
    assert not np.allclose(phase(f, _ctx(command=np.array([0.5, 0, 0])), **frozen), [0, -1, 0, -1])


def test_time_origin_first_call_vs_episode_start():
    for origin, expect in (("first_call", [1, 0]), ("episode_start", [np.sin(2 * np.pi * 0.275),
                                                                      np.cos(2 * np.pi * 0.275)])):
        spec = parse_terms([{"name": "gait_phase", "time_origin": origin}, {"name": "clock", "time_origin": origin}],
                           "card.yaml")
        b, ctx = ObservationBuilder(spec), _ctx()
        first = b(_frame(time=0.02), ctx)  # first policy call one 20 ms control period after reset
        assert first[2] == pytest.approx(0.0 if origin == "first_call" else 0.02)
        out = b(_frame(time=0.22), ctx)
        assert np.allclose(out[:2], expect, atol=1e-12), origin
        assert out[2] == pytest.approx(0.2 if origin == "first_call" else 0.22)


def test_time_feature_counts_policy_calls_and_resets():
    b, ctx = ObservationBuilder(parse_terms([{"name": "time_feature", "max_steps": 4}], "card.yaml")), _ctx()
    assert [b(_frame(time=0.1 * k), ctx)[0] for k in range(3)] == [1.0, 0.75, 0.5]
    b.reset()
    assert b(_frame(time=5.0), ctx)[0] == 1.0
    test = ObservationBuilder(parse_terms([{"name": "time_feature", "test_mode": True}], "card.yaml"))
    assert [test(_frame(), ctx)[0] for _ in range(3)] == [1.0, 1.0, 1.0]


def test_sizes_follow_options():
    spec = parse_terms(["base_euler", {"name": "gait_phase", "offsets": [0, 0.5, 0.25]}, "clock", "time_feature",
                        "joint_pos"], "card.yaml")
    b = ObservationBuilder(spec, history=2)
    assert b.size(2) == 2 * (3 + 6 + 1 + 1 + 2)
    assert len(b(_frame(), _ctx())) == b.size(2)


def test_clip_low_high_and_number():
    spec = parse_terms([{"name": "joint_vel", "clip": [-0.35, 0.1]}, {"name": "joint_vel", "clip": 0.2}], "card.yaml")
    assert spec[0].clip == (-0.35, 0.1) and spec[1].clip == (-0.2, 0.2)
    assert np.allclose(ObservationBuilder(spec)(_frame(), _ctx()), [0.1, -0.35, 0.2, -0.2])
    for bad in ([1, -1], [0.5], [0, "a"], -1, True, [float("nan"), 1]):
        with pytest.raises(CardError, match=r"observation.terms\[0\].clip must be"):
            parse_terms([{"name": "joint_vel", "clip": bad}], "card.yaml")


@pytest.mark.parametrize("raw, message", [
    ({"name": "gait_phase", "perod": 0.8}, r"unknown keys \['perod'\]; did you mean 'period'"),
    ({"name": "gait_phase", "layout": "sideways"}, "layout must be one of interleaved, grouped"),
    ({"name": "gait_phase", "offsets": []}, "offsets must be a non-empty list"),
    ({"name": "gait_phase", "cos_first": "yes"}, "cos_first must be true or false"),
    ({"name": "gait_phase", "time_origin": "now"}, "time_origin must be one of episode_start, first_call"),
    ({"name": "base_euler", "order": "xyy"}, "order must be one of xyz"),
    ({"name": "base_euler", "convention": "intrinsik"}, "convention must be one of extrinsic, intrinsic"),
    ({"name": "time_feature", "max_steps": 2.5}, "max_steps must be an integer >= 1"),
    ({"name": "base_eulr"}, "did you mean 'base_euler'"),
])
def test_bad_options_are_one_line_naming_the_field(raw, message):
    with pytest.raises(CardError, match=message) as info:
        parse_terms([raw], "card.yaml")
    assert str(info.value).startswith("card.yaml: observation.terms[0]") and "\n" not in str(info.value)


def test_base_terms_refused_on_a_fixed_base(tmp_path):
    fixed, free = tmp_path / "fixed.xml", tmp_path / "free.xml"
    fixed.write_text('<mujoco><worldbody><body name="arm"><geom size="0.1"/><body name="l">'
                     '<joint name="j" type="hinge"/><geom size="0.1"/></body></body></worldbody></mujoco>')
    free.write_text('<mujoco><worldbody><body name="b"><freejoint/><geom size="0.1"/></body></worldbody></mujoco>')
    terms = parse_terms(["joint_pos", "base_euler"], "card.yaml")
    with pytest.raises(CardError, match=r"card.yaml: field 'observation.terms\[1\]' \(base_euler\) reads the "
                                        r"floating base, but fixed.xml's root body has no joint"):
        check_terms(terms, fixed, "card.yaml")
    check_terms(terms, free, "card.yaml")
    check_terms(parse_terms(["joint_pos", "clock"], "card.yaml"), fixed, "card.yaml")


def test_sensor_offsets(tmp_path):
    import mujoco

    xml = tmp_path / "s.xml"
    xml.write_text("""<mujoco><worldbody><body name="b" pos="0 0 1"><freejoint/><geom size="0.1" mass="1"/>
      <site name="imu"/><body name="l"><joint name="knee" axis="0 1 0"/><geom size="0.1" mass="1"/></body>
      </body></worldbody><sensor><jointpos joint="knee" name="knee_enc"/><gyro site="imu" name="gyro"/>
      </sensor></mujoco>""")
    m = mujoco.MjModel.from_xml_path(str(xml))
    d = mujoco.MjData(m)
    d.qpos[7], d.qvel[3:6] = 0.7, [0.1, 0.2, 0.3]
    mujoco.mj_forward(m, d)
    f = SimFrame(0.0, d.qpos.copy(), d.qvel.copy(), d.xpos[1], d.xquat[1], np.zeros(3), np.zeros(3), np.zeros(1))
    terms = parse_terms([{"name": "sensor:knee_enc", "offset": 0.2}, {"name": "sensor:gyro", "offset": [0, 0, 1]}],
                        "card.yaml")
    reader = SensorReader(xml)
    check_terms(terms, xml, "card.yaml", reader)
    ctx = TermContext(np.array([7]), np.array([6]), np.zeros(1), sensors=reader)
    assert np.allclose(ObservationBuilder(terms)(f, ctx), [0.5, 0.1, 0.2, -0.7])
    short = parse_terms([{"name": "sensor:gyro", "offset": [0, 1]}], "card.yaml")
    with pytest.raises(CardError, match=r"field 'observation.terms\[0\].offset' has 2 values; sensor:gyro gives 3"):
        check_terms(short, xml, "card.yaml", reader)
    with pytest.raises(CardError, match="offset must be a number or a list of numbers"):
        parse_terms([{"name": "sensor:gyro", "offset": "up"}], "card.yaml")
