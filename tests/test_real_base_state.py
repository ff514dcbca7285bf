"""Base state of a floating base that logged none (issue 37): orientation from the IMU
(complementary filter), height and velocity from leg kinematics with the feet in contact, so that
whole logs can be replayed in segments (docs/real.md, "Base state estimation")."""

from dataclasses import replace

import numpy as np
import pytest

from conftest import CARDS, requires_fixtures
from crosssim.card import load_card
from crosssim.engines.settings import EngineProfile
from crosssim.profiles import split_settings
from crosssim.real.base_state import estimate_base, filter_orientation, with_estimated_base
from crosssim.real.calibrate import Objective
from crosssim.real.logs import read_logs
from crosssim.real.rates import _qmul, _rotvec
from crosssim.real.simulate import Artefacts, SimulateLogsConfig, _rotate_small, simulate_logs
from crosssim.runner.harness import Harness

GO1 = CARDS / "robots" / "playground-go1.yaml"
HIDDEN = {"motor_strength": 0.9, "damping_scale": 1.5, "friction_scale": 0.6, "action_latency": 1}
# Stated tolerances (measured on these logs: height error mean 3 mm, at most 21 – 27 mm at a
# touchdown; velocity error 0.09 – 0.12 m/s RMS per axis against 0.07 – 0.44 m/s of motion).
HEIGHT_MEAN, HEIGHT_MAX, VEL_RMS = 0.008, 0.04, 0.15


def _angle(a, b):
    return np.linalg.norm(_rotvec(_qmul(a * np.array([1, -1, -1, -1]), b)), axis=1)


def test_the_orientation_filter_removes_noise_without_drift():
    """A body rocking about two axes at 1 – 2 Hz, logged at 50 Hz with the default sensor noise
    (orientation 0.005 rad, gyro 0.01 rad/s): the filtered orientation is 2x closer to the truth;
    with the gyro a sign off (a wrong frame) it is not."""
    dt, t = 0.02, np.arange(300) * 0.02
    rate = np.stack([0.8 * np.sin(2 * np.pi * t), 0.5 * np.cos(2 * np.pi * 1.7 * t), 0.2 + 0 * t], axis=1)
    true = [np.array([1.0, 0, 0, 0])]
    for k in range(1, len(t)):
        step = 0.5 * (rate[k - 1] + rate[k]) * dt
        a = np.linalg.norm(step)
        q = _qmul(true[-1], np.array([np.cos(a / 2), *(np.sin(a / 2) * step / a)]))
        true.append(q / np.linalg.norm(q))
    true = np.array(true)
    rng = np.random.default_rng(1)
    noisy = np.array([_rotate_small(q, 0.005, rng) for q in true])
    gyro = rate + rng.normal(0, 0.01, rate.shape)
    raw, filtered = _angle(true, noisy).mean(), _angle(true, filter_orientation(noisy, gyro, dt)).mean()
    assert filtered < 0.5 * raw, (filtered, raw)
    assert _angle(true, filter_orientation(noisy, gyro, dt))[-50:].max() < 0.01  # no drift
    assert _angle(true, filter_orientation(noisy, -gyro, dt)).mean() > raw  # a wrong gyro shows
    assert np.allclose(filter_orientation(noisy, None, dt), noisy)


@pytest.fixture(scope="module")
def go1(tmp_path_factory):
    out = tmp_path_factory.mktemp("go1-logs")
    simulate_logs(GO1, split_settings(EngineProfile("go1-robot", "mujoco"), HIDDEN), out,
                  SimulateLogsConfig(episodes=2, seconds=1.5, seed=3, artefacts=Artefacts(base_pose=True)))
    harness = Harness.from_card(load_card(GO1))
    return harness, read_logs(out, harness)


@requires_fixtures
def test_go1_base_height_and_velocity_from_the_legs(go1):
    """The logs carry the true base pose (motion capture); dropped, the estimate is within the
    stated tolerances of it, and far closer than the zero velocity a replay assumed before."""
    harness, logs = go1
    for log in logs:
        est = estimate_base(replace(log, pos=None, vel=None), harness)
        dz = est.pos[:, 2] - log.pos[:, 2]
        assert abs(dz.mean()) < HEIGHT_MEAN and np.abs(dz[1:]).max() < HEIGHT_MAX, (log.name, dz.mean(), dz.max())
        err = np.sqrt(np.mean((est.vel - log.vel) ** 2, axis=0))
        motion = np.sqrt(np.mean(log.vel ** 2, axis=0))
        assert (err < VEL_RMS).all(), (log.name, err)
        assert err[0] < 0.5 * motion[0], (log.name, err, motion)  # walking forward: far better than zero
        assert motion.max() > VEL_RMS  # zero velocity would fail the tolerance: the check can fail
        assert 1.5 < est.contact.sum(axis=1).mean() < 4  # a trot: two feet down, more at the switches
        assert est.gyro_used
    # a gyro logged in deg/s (x 180/pi) would wreck the filter: it is left out, the logged orientation used
    log = logs[0]
    bad = estimate_base(replace(log, pos=None, vel=None, gyro=log.gyro * 180 / np.pi), harness)
    assert not bad.gyro_used and np.allclose(bad.quat, log.quat / np.linalg.norm(log.quat, axis=1, keepdims=True))


@requires_fixtures
def test_whole_go1_logs_replayed_in_segments_prefer_the_hidden_physics(go1):
    """With the estimate every row can start a segment: the 0.2 s segments over the whole logs
    score the hidden parameters better than the default ones; logs with a pose are left alone."""
    harness, logs = go1
    dropped = [replace(log, pos=None, vel=None) for log in logs]
    estimated, notes = with_estimated_base(dropped, harness)
    assert all(log.base_estimated for log in estimated) and "leg kinematics" in notes[0]
    kept, none = with_estimated_base(logs, harness)
    assert none == [] and kept[0].pos is logs[0].pos
    obj = Objective(harness, estimated, EngineProfile("mujoco", "mujoco"), 10)
    hidden, default = obj.rms(HIDDEN), obj.rms({})
    assert len(set(obj.groups)) == sum(len(range(0, len(log) - 1, 10)) for log in logs)  # every segment
    assert hidden < 0.8 * default, (hidden, default)
