"""The real robot's mechanisms (issue 33): encoder offsets, Coulomb joint friction, a motor dead band,
dropped and jittered command frames, IMU bias. Each acts in the shared control step, so every engine
gets it by construction; each is checked to change the physics (or the reading) as stated in MuJoCo
and PyBullet, to be drawn reproducibly from the episode's seed, and to change nothing at zero."""

import numpy as np
import pytest
import yaml

from conftest import CARDS, requires_fixtures
from crosssim.card import load_card
from crosssim.errors import CrossSimError
from crosssim.frame import InitialState
from crosssim.perturb import ActuatorChain
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness
from crosssim.runner.mechanisms import FRICTION_SPEED
from crosssim.runner.simulator import open_engine
from crosssim.runner.stepper import ControlStepper
from crosssim.variant import HarnessVariant, Variant

ENGINES = ("mujoco", "pybullet")
ANT = CARDS / "ant-locomotion.yaml"
AXES = ("encoder_offset", "joint_friction", "deadband", "action_drop", "action_jitter", "imu_bias")


@pytest.fixture(scope="module")
def reacher():
    """Reacher with gymnasium's motors: two planar joints (gravity does not act on them), armature 1."""
    return Harness.for_task("Reacher")


@pytest.fixture(scope="module")
def reacher_pd(tmp_path_factory) -> Harness:
    """Reacher under a PD law holding the pose (0.3, -0.5) rad, driven by a zero policy."""
    folder = tmp_path_factory.mktemp("reacher-pd")
    card = {"name": "reacher-pd", "task": "Reacher", "policy": {"file": "numpy:zeros_like", "format": "callable"},
            "control_period": 0.02, "action": {"mode": "pd", "kp": 20.0, "kd": 2.0, "default_pos": [0.3, -0.5]}}
    (folder / "card.yaml").write_text(yaml.safe_dump(card))
    return Harness.from_card(load_card(folder / "card.yaml"))


@pytest.fixture(scope="module")
def ant():
    return Harness.from_card(load_card(ANT))


def _stepper(engine: str, harness: Harness, **fields):
    sim = open_engine(load_profile(engine), harness.scene, Variant.of(**fields), base=harness.model_variant)
    return sim, ControlStepper(sim, harness)


def _run(engine, harness, actions, fields, *, seed=0, initial=None):
    """(frames, observations, planned parts) over ``actions``, one control period each."""
    sim, st = _stepper(engine, harness, **fields)
    try:
        frame, ts = st.reset(initial or harness.task.nominal_initial_state(harness.canonical), seed)
        frames, obs, parts = [], [], []
        for a in actions:
            obs.append(st.observe(frame, ts))
            parts.append(st.plan(np.asarray(a, float)))
            st.physics(parts[-1])
            frame = st.settle()
            frames.append(frame)
        return frames, np.array(obs), parts, st
    finally:
        sim.close()


# -- encoder offsets ---------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
def test_encoder_offset_shifts_the_held_pose_by_minus_the_offset(engine, reacher_pd):
    """The servo's PD reads the same encoders: holding a target, the true joint settles at target - offset."""
    zeros = np.zeros((150, reacher_pd.action_size))
    base = _run(engine, reacher_pd, zeros, {}, seed=7)[0][-1]
    frames, _, _, st = _run(engine, reacher_pd, zeros, {"encoder_offset": 0.05}, seed=7)
    offset = st._mech.offset
    assert np.all(np.abs(offset) <= 0.05) and np.all(offset != 0)
    idx = reacher_pd.actuation.qpos_index
    np.testing.assert_allclose(frames[-1].qpos[idx] - base.qpos[idx], -offset, atol=1e-3)


def test_encoder_offset_is_on_joint_position_readings_only(ant):
    """In the policy's input the offset appears on joint_pos_rel (rad, before scale) and nowhere else."""
    zeros = np.zeros((2, ant.action_size))
    _, clean, _, _ = _run("mujoco", ant, zeros, {}, seed=3)
    _, biased, _, st = _run("mujoco", ant, zeros, {"encoder_offset": 0.02}, seed=3)
    diff = biased[0] - clean[0]
    n = ant.action_size
    joint_pos_rel = slice(6 + 3, 6 + 3 + n)  # after base_ang_vel, projected_gravity, command
    np.testing.assert_allclose(diff[joint_pos_rel], st._mech.offset, atol=1e-12)
    rest = np.delete(diff[: len(diff) // 2], np.arange(joint_pos_rel.start, joint_pos_rel.stop))
    assert np.all(rest == 0.0)


def test_encoder_offset_is_drawn_per_episode_from_the_seed(reacher_pd):
    zeros = np.zeros((1, reacher_pd.action_size))
    draw = lambda seed: _run("mujoco", reacher_pd, zeros, {"encoder_offset": 0.05}, seed=seed)[3]._mech.offset  # noqa: E731
    assert np.array_equal(draw(4), draw(4))
    assert not np.array_equal(draw(4), draw(5))


# -- Coulomb joint friction -------------------------------------------------------------------------

def _spin(engine, harness, speed, friction, steps=50):
    c = harness.canonical
    qvel = np.zeros(c.nv)
    qvel[c.joint_dofadr[0]] = speed
    frames = _run(engine, harness, np.zeros((steps, harness.action_size)),
                  {"joint_damping": 0.0, "joint_friction": friction}, initial=InitialState(c.qpos0.copy(), qvel))[0]
    return np.array([f.qvel[c.joint_dofadr[0]] for f in frames])


def _inertia(harness) -> float:
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(harness.scene))
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    return float(full[0, 0])


@pytest.mark.parametrize("engine", (*ENGINES, "physx"))
def test_coulomb_friction_decelerates_a_free_joint_at_friction_over_inertia(engine, reacher):
    """A joint spinning freely (no damping, no gravity in the plane) loses speed linearly in time at
    F / I, the same at 3 and 6 rad/s: dry friction, not viscous damping (which would scale with speed).
    PhysX too: a harness mechanism needs nothing of the engine."""
    if engine == "physx":
        pytest.importorskip("sapien")
    friction, dt = 0.1, reacher.control_dt
    t = dt * np.arange(1, 51)
    expected = friction / _inertia(reacher) * t
    for speed in (3.0, 6.0):
        free, rubbed = _spin(engine, reacher, speed, 0.0), _spin(engine, reacher, speed, friction)
        assert np.allclose(free, speed, atol=2e-3)  # nothing else slows it
        np.testing.assert_allclose(free - rubbed, expected, rtol=0.05)


@pytest.mark.parametrize("engine", ENGINES)
def test_coulomb_friction_brings_a_slow_joint_to_rest(engine, reacher):
    """Below ``FRICTION_SPEED`` the smoothed sign fades out: the joint stops and stays stopped,
    never driven backwards."""
    rubbed = _spin(engine, reacher, 0.3, 0.5, steps=100)
    assert np.all(rubbed > -1e-3) and abs(rubbed[-1]) < 0.2 * FRICTION_SPEED


# -- dead band -------------------------------------------------------------------------------------

def test_deadband_removes_its_magnitude_from_each_commanded_torque():
    chain = ActuatorChain(HarnessVariant(deadband=2.0), np.full(3, 100.0), 0.002, 3)
    assert not chain.identity and not chain.stateful
    np.testing.assert_allclose(chain(np.array([1.5, -5.0, 2.5])), [0.0, -3.0, 0.5])


@pytest.mark.parametrize("engine", ENGINES)
def test_deadband_stops_small_commands_and_halves_twice_its_size(engine, reacher):
    """Reacher's motors have gear 200: an action of 0.005 asks 1 N m, under a 2 N m dead band (no
    motion); 0.02 asks 4 N m and 2 N m reach the joint (half the acceleration)."""
    def speed(action, band):
        acts = np.tile([action, 0.0], (5, 1))
        return _run(engine, reacher, acts, {"joint_damping": 0.0, "deadband": band})[0][-1].qvel[0]
    assert speed(0.005, 2.0) == pytest.approx(0.0, abs=1e-9) and speed(0.005, 0.0) > 1e-3
    assert speed(0.02, 2.0) == pytest.approx(0.5 * speed(0.02, 0.0), rel=0.02)


# -- dropped and jittered command frames -------------------------------------------------------------

def _ramp(harness, steps=400):
    return [0.5 * np.sin(0.3 * t + np.arange(harness.action_size)) for t in range(steps)]


@pytest.mark.parametrize("engine", ENGINES)
def test_dropped_commands_keep_the_previous_action_at_their_rate(engine, ant):
    actions = _ramp(ant)
    _, _, parts, _ = _run(engine, ant, actions, {"action_drop": 0.2}, seed=1)
    applied = np.array([p[0][0] for p in parts])
    sent = np.array([ant.actuation.target(a) for a in actions])
    dropped = ~np.all(applied == sent, axis=1)
    assert dropped.mean() == pytest.approx(0.2, abs=0.06)
    held = np.flatnonzero(dropped)
    held = held[held > 0]
    assert np.all(applied[held] == applied[held - 1])  # the motors kept what they had
    again = np.array([p[0][0] for p in _run(engine, ant, actions, {"action_drop": 0.2}, seed=1)[2]])
    other = np.array([p[0][0] for p in _run(engine, ant, actions, {"action_drop": 0.2}, seed=2)[2]])
    assert np.array_equal(again, applied) and not np.array_equal(other, applied)


@pytest.mark.parametrize("engine", ENGINES)
def test_jitter_delays_each_command_by_a_drawn_part_of_the_period(engine, ant):
    """Ant's 50 ms period is 5 physics steps: each period the previous action acts first for a
    drawn part of it, uniform in [0, 0.6] periods (mean 0.3), reproducibly, and the motion changes."""
    actions = _ramp(ant, 300)
    frames, _, parts, st = _run(engine, ant, actions, {"action_jitter": 0.6}, seed=1)
    late = []
    for k, p in enumerate(parts[1:], start=1):
        prev = ant.actuation.target(actions[k - 1])
        held = sum(n for target, n in p if np.array_equal(target, prev))
        blended = [target for target, n in p if n == 1 and not np.array_equal(target, prev)
                   and not np.array_equal(target, ant.actuation.target(actions[k]))]
        frac = 0.0
        if blended:  # the one physics step with the switch inside: its share of the previous action
            now = ant.actuation.target(actions[k])
            frac = float(np.dot(blended[0] - now, prev - now) / np.dot(prev - now, prev - now))
        late.append((held + frac) / st.substeps)
    late = np.array(late)
    assert late.min() >= 0 and late.max() <= 0.6 + 1e-9
    assert late.mean() == pytest.approx(0.3, abs=0.04)
    again = _run(engine, ant, actions, {"action_jitter": 0.6}, seed=1)[0]
    assert all(np.array_equal(a.qpos, b.qpos) for a, b in zip(frames, again))
    plain = _run(engine, ant, actions, {}, seed=1)[0]
    assert not np.allclose(frames[-1].qpos, plain[-1].qpos)


# -- IMU bias --------------------------------------------------------------------------------------

def test_imu_bias_is_constant_on_the_gyro_and_gravity_terms_only(ant):
    zeros = np.zeros((3, ant.action_size))
    _, clean, _, _ = _run("mujoco", ant, zeros, {}, seed=5)
    _, biased, _, _ = _run("mujoco", ant, zeros, {"imu_bias": 0.02}, seed=5)
    _, again, _, _ = _run("mujoco", ant, zeros, {"imu_bias": 0.02}, seed=5)
    _, other, _, _ = _run("mujoco", ant, zeros, {"imu_bias": 0.02}, seed=6)
    diff = (biased - clean)[:, : clean.shape[1] // 2]  # the newest frame of the two-frame history
    imu = diff[:, :6]  # base_ang_vel (rad/s), projected_gravity: scale 1 on this card
    assert np.all(imu != 0) and np.all(np.abs(imu) <= 0.02)
    np.testing.assert_allclose(imu, np.broadcast_to(imu[0], imu.shape), atol=1e-12)  # constant over the episode
    assert np.all(diff[:, 6:] == 0.0)
    assert np.array_equal(again, biased) and not np.array_equal(other, biased)


@requires_fixtures
def test_imu_bias_reaches_an_mjcf_gyro_sensor_term():
    """The Playground Go1 card reads its gyro as ``sensor:gyro``: that is the IMU's gyro too."""
    go1 = Harness.from_card(load_card(CARDS / "robots" / "playground-go1.yaml"))
    zeros = np.zeros((1, go1.action_size))
    clean = _run("mujoco", go1, zeros, {}, seed=1)[1][0]
    biased = _run("mujoco", go1, zeros, {"imu_bias": 0.02}, seed=1)[1][0]
    diff = biased - clean  # local_linvel (3), gyro (3), projected_gravity (3), then the rest
    assert np.all(diff[:3] == 0) and np.all(diff[3:9] != 0) and np.all(np.abs(diff[3:9]) <= 0.02)
    assert np.all(diff[9:] == 0)


def test_imu_bias_without_an_imu_term_is_refused_in_one_line(reacher):
    with pytest.raises(CrossSimError, match="imu_bias 0.01 on an observation without an IMU term") as exc:
        _stepper("mujoco", reacher, imu_bias=0.01)
    assert "\n" not in str(exc.value)


# -- zero is nothing -------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", AXES)
def test_each_axis_at_zero_changes_nothing(axis, ant, reacher_pd):
    """Stated at 0, an axis leaves the variant nominal, the engine's fast native PD path in place, and
    every frame and observation bit-identical."""
    assert Variant.of(**{axis: 0.0}).is_nominal
    for harness in (ant, reacher_pd):
        actions = _ramp(harness, 60)
        frames, obs, _, _ = _run("mujoco", harness, actions, {axis: 0.0}, seed=2)
        ref_frames, ref_obs, _, _ = _run("mujoco", harness, actions, {}, seed=2)
        assert np.array_equal(obs, ref_obs)
        assert all(np.array_equal(a.qpos, b.qpos) and np.array_equal(a.qvel, b.qvel) for a, b in zip(frames, ref_frames))


@requires_fixtures
@pytest.mark.parametrize("axis", ("encoder_offset", "joint_friction"))
def test_axes_that_read_the_state_leave_the_native_pd_path(axis):
    """MuJoCo's native PD (the card's law in C) reads the true joint state: with an encoder offset
    or joint friction the harness computes the torques itself, and without them keeps the fast path."""
    from crosssim.runner.batched import _native

    g1 = Harness.from_card(load_card(CARDS / "robots" / "unitree-g1.yaml"))
    for fields, expected in (({}, True), ({axis: 0.1}, False)):
        sim, _ = _stepper("mujoco", g1, **fields)
        try:
            assert ControlStepper(sim, g1, native_pd=_native(sim, g1)).native is expected
        finally:
            sim.close()


@pytest.mark.parametrize("key, bad", [("action_drop", 1.0), ("action_jitter", 1.5), ("encoder_offset", -0.01),
                                      ("joint_friction", -0.1), ("deadband", -1.0), ("imu_bias", -0.01)])
def test_profile_settings_are_range_checked(tmp_path, monkeypatch, key, bad):
    (tmp_path / "robot.yaml").write_text(f"engine: mujoco\nsettings:\n  {key}: {bad}\n")
    monkeypatch.setenv("CROSSSIM_SIMULATORS", str(tmp_path))
    monkeypatch.delenv("CROSSSIM_TRUSTED_PROFILES", raising=False)
    with pytest.raises(CrossSimError, match=f"robot.yaml: setting '{key}' must be"):
        load_profile("robot")
