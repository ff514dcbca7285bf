"""Base state of a floating-base robot that did not log its pose: estimated from the IMU and the legs.

A legged robot usually logs its joints and its IMU (orientation and gyro) but no base position or
linear velocity. A replay can only be reset to a row whose whole state is known, so without an
estimate calibration used the first ``--segment`` seconds of each log (issue 37: 7 % of the data).
Here, per row (docs/real.md, "Base state estimation"):

- **orientation**: a complementary filter: the gyro (body rate) integrated over the control period,
  pulled towards the logged orientation with time constant ``FILTER_TAU`` (the logged orientation
  sets tilt and heading in the long run, the gyro the short-term changes, so per-row orientation
  noise is smoothed without drift); a gyro that disagrees with the orientation's rate of change
  (crosssim/real/rates.py: a unit bug) is left out;
- **height**: the logged joints and the filtered orientation put in the model, the base raised or
  lowered until the lowest collision point touches the ground (crosssim/real/start.py);
- **feet in contact**: each foot (a leaf body of the robot with collision geometry) whose lowest
  point is within ``CONTACT_MARGIN`` of the lowest foot's;
- **horizontal position**: leg odometry: a foot in contact at two successive rows does not move,
  so the base moves opposite to its displacement relative to the base, from the task's initial
  position (it drifts; on flat ground nothing depends on it);
- **linear velocity**: the rate of change of that position and of the height (central differences;
  the foot's velocity through the Jacobian was noisier at touchdowns: measured, docs/real.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from crosssim.errors import CrossSimError
from crosssim.real.logs import RealLog
from crosssim.real.rates import _qmul, compare_rates, window_means, window_rates, window_rows
from crosssim.real.start import _model, collides, geom_bottom, ground_height, lowest_point

FILTER_TAU = 0.1
"""Time constant [s] of the orientation filter: over shorter times the gyro is followed, over longer
ones the logged orientation (0.1 s: five rows at 50 Hz, the logged orientation's noise shrinks
about 3x while the gyro's noise, integrated over 0.1 s, adds about 1 mrad)."""
CONTACT_MARGIN = 0.01
"""A foot whose lowest point is within this of the lowest foot's is in contact [m] (soft-contact
penetration and a foot's rolling are a few mm; a swing foot lifts several cm). Measured on the Go1
fixture: 0.005 – 0.015 give the same velocity error within 10 %."""
ODOMETRY_SPREAD = 0.006
"""Feet in contact whose displacements disagree are weighted by a Gaussian of this width [m] around
the previous step's displacement (0.3 m/s at 50 Hz): a foot touching down or slipping does not
drag the estimate (Go1: horizontal velocity error 0.10 -> 0.09 m/s RMS)."""


@dataclass(frozen=True)
class BaseEstimate:
    """The estimated base state at every row of a log (world frame, MuJoCo conventions)."""

    quat: np.ndarray
    """(T, 4) base orientation, w first."""
    pos: np.ndarray
    """(T, 3) base position [m]."""
    vel: np.ndarray
    """(T, 3) base linear velocity, world frame [m/s]."""
    contact: np.ndarray
    """(T, feet) True where a foot is in contact."""
    feet: tuple[str, ...]
    """The feet's body names."""
    gyro_used: bool
    """The gyro entered the orientation filter (False: none logged, or it disagrees with the
    orientation's rate of change)."""


def _exp(rotvec: np.ndarray) -> np.ndarray:
    angle = float(np.linalg.norm(rotvec))
    if angle < 1e-12:
        return np.array([1.0, *(0.5 * rotvec)])
    return np.array([np.cos(angle / 2), *(np.sin(angle / 2) * rotvec / angle)])


def _slerp_to(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    """From ``a`` a share ``t`` of the way to ``b`` (unit quaternions, w first)."""
    b = b if float(np.dot(a, b)) >= 0 else -b
    rel = _qmul(np.array([a[0], -a[1], -a[2], -a[3]]), b)
    s = float(np.linalg.norm(rel[1:]))
    angle = 2 * np.arctan2(s, rel[0])
    step = _exp(rel[1:] / max(s, 1e-12) * angle * t) if s > 1e-12 else np.array([1.0, 0.0, 0.0, 0.0])
    out = _qmul(a, step)
    return out / np.linalg.norm(out)


def filter_orientation(quat: np.ndarray, gyro: np.ndarray | None, dt: float, tau: float = FILTER_TAU) -> np.ndarray:
    """Complementary filter of a logged orientation (T, 4; w first) and body rate (T, 3) [rad/s]:
    predict by the gyro's mean rate over each step, correct a share dt / (tau + dt) towards the
    logged orientation. Without a gyro: the logged orientation, normalised."""
    quat = np.asarray(quat, float) / np.linalg.norm(quat, axis=1, keepdims=True)
    if gyro is None or len(quat) < 2:
        return quat
    alpha = dt / (tau + dt)
    out = np.empty_like(quat)
    out[0] = quat[0]
    for k in range(1, len(quat)):
        pred = _qmul(out[k - 1], _exp(0.5 * (gyro[k - 1] + gyro[k]) * dt))
        out[k] = _slerp_to(pred / np.linalg.norm(pred), quat[k], alpha)
    return out


def foot_geoms(m) -> dict[str, list[int]]:
    """The robot's feet: each leaf body (no child body) that owns collision geometry, with its geoms."""
    parents = set(int(p) for p in m.body_parentid[1:])
    feet: dict[str, list[int]] = {}
    for g in range(m.ngeom):
        b = int(m.geom_bodyid[g])
        if b not in parents and collides(m, g) and m.geom_type[g] not in (0, 1):
            feet.setdefault(m.body(b).name or f"body{b}", []).append(g)
    return feet


def _foot_points(m, d, feet: dict[str, list[int]]) -> np.ndarray:
    """Each foot's lowest point (feet, 3), world frame as posed in ``d``: the lowest geom's centre
    in x and y, its lowest z."""
    points = []
    for geoms in feet.values():
        z, g = min((z, g) for z, g in ((geom_bottom(m, d, g), g) for g in geoms) if z is not None)
        points.append([d.geom_xpos[g, 0], d.geom_xpos[g, 1], z])
    return np.array(points)


def _pose_rows(log: RealLog, harness, quat: np.ndarray, feet: dict[str, list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Per row, with the base at the origin in the row's orientation and joints: the base height
    that puts the lowest collision point on the ground (T,), and each foot's lowest point (T, feet, 3)."""
    import mujoco

    c = harness.canonical
    m = _model(harness.scene)
    d = mujoco.MjData(m)
    init = harness.task.initial_state(c, np.random.default_rng(0))
    qadr = c.joint_qposadr[[c.joint_names.index(j) for j in log.joints]]
    height, points = np.zeros(len(log)), np.zeros((len(log), len(feet), 3))
    for k in range(len(log)):
        qpos = np.array(init.qpos, float)
        qpos[:3], qpos[3:7], qpos[qadr] = 0.0, quat[k], log.q[k]
        d.qpos[:] = qpos
        mujoco.mj_kinematics(m, d)
        height[k] = ground_height(m, d) - lowest_point(m, d)
        points[k] = _foot_points(m, d, feet)
    return height, points


def _odometry(points: np.ndarray, contact: np.ndarray) -> np.ndarray:
    """Base displacement [m] from each row to the next: a foot in contact at both rows stays put, so
    the base moves opposite to it; feet that disagree (one touching down or slipping) are weighted
    by how well they continue the previous step's displacement (``ODOMETRY_SPREAD``)."""
    disp = np.zeros((len(points), 3))
    prev = np.zeros(2)
    for k in range(len(points) - 1):
        both = contact[k] & contact[k + 1]
        if not both.any():
            both = points[k + 1, :, 2] == points[k + 1, :, 2].min()
        step = -(points[k + 1, both] - points[k, both])
        w = np.exp(-np.sum((step[:, :2] - prev) ** 2, axis=1) / (2 * ODOMETRY_SPREAD ** 2)) + 1e-12
        disp[k + 1] = (w[:, None] * step).sum(axis=0) / w.sum()
        prev = disp[k + 1, :2]
    return disp


def trusted_gyro(log: RealLog) -> np.ndarray | None:
    """The gyro column, unless the logged orientation's rate of change says it is off (a unit bug,
    a flipped axis: docs/real.md "Angular rates against the orientation"), where the filter would
    integrate a wrong rate: None then (the logged orientation is used alone)."""
    if log.gyro is None or log.quat is None:
        return log.gyro
    w = window_rows(log.time)
    if len(log) < w + 3:
        return log.gyro
    check = compare_rates("gyro", window_means(log.gyro, log.time, w), window_rates(log.quat, log.time, w), w)
    return None if check["status"] in ("scale", "axis") else log.gyro


def estimate_base(log: RealLog, harness) -> BaseEstimate:
    """The base state of every row of ``log`` from its orientation, gyro and joints (module doc)."""
    m = _model(harness.scene)
    feet = foot_geoms(m)
    if not feet:
        raise CrossSimError(f"{harness.scene}: no feet (leaf bodies with collision geometry) to estimate the base "
                            "from; log pos.* and vel.* (docs/real.md)")
    dt = log.control_period
    gyro = trusted_gyro(log)
    quat = filter_orientation(log.quat, gyro, dt)
    height, points = _pose_rows(log, harness, quat, feet)
    contact = points[:, :, 2] <= points[:, :, 2].min(axis=1, keepdims=True) + CONTACT_MARGIN
    init = harness.task.initial_state(harness.canonical, np.random.default_rng(0))
    pos = np.zeros((len(log), 3))
    pos[:, :2] = np.asarray(init.qpos, float)[:2] + np.cumsum(_odometry(points, contact)[:, :2], axis=0)
    pos[:, 2] = height
    vel = np.gradient(pos, dt, axis=0) if len(log) > 1 else np.zeros_like(pos)
    return BaseEstimate(quat, pos, vel, contact, tuple(feet), gyro is not None)


def needs_estimate(log: RealLog, harness) -> bool:
    """A floating-base log without base position or linear velocity, with an orientation to start from."""
    return bool(harness.canonical.free_base and log.quat is not None and (log.pos is None or log.vel is None))


def with_estimated_base(logs: list[RealLog], harness) -> tuple[list[RealLog], list[str]]:
    """``logs`` with an estimated base state where a floating base logged none (orientation
    filtered, position and velocity from the legs; logged groups are kept), and a note naming
    them (empty when none needed it)."""
    out, named = [], []
    for log in logs:
        if not needs_estimate(log, harness):
            out.append(log)
            continue
        est = estimate_base(log, harness)
        out.append(replace(log, quat=est.quat, pos=log.pos if log.pos is not None else est.pos,
                           vel=log.vel if log.vel is not None else est.vel, base_estimated=True))
        named.append(log.name)
    if not named:
        return out, []
    return out, [f"base position and velocity estimated for {len(named)} log(s) without pos.*/vel.* (orientation: "
                 "gyro and logged orientation, complementary filter; height and velocity: leg kinematics with the "
                 "feet in contact; docs/real.md 'Base state estimation'), so every row can start a replay"]
