"""The engine state at a log row, estimating what the robot did not log.

A floating-base robot often logs its joints and IMU but no base position: the base height is
then set so that the robot's lowest collision geometry touches the ground (the highest plane of
the world body, else z = 0), with the logged joints and orientation, and the horizontal
position from the task's initial state. Base linear velocity that was not logged is zero. So a
replay of a standing or walking robot starts on its feet, not sunk into or hovering over the
floor (docs/real.md, "Start state").
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from crosssim.frame import InitialState

_GEOM_PLANE, _GEOM_HFIELD, _GEOM_SPHERE, _GEOM_CAPSULE, _GEOM_ELLIPSOID, _GEOM_CYLINDER, _GEOM_BOX, _GEOM_MESH = \
    0, 1, 2, 3, 4, 5, 6, 7


@lru_cache(maxsize=8)
def _model(scene: Path):
    from crosssim.scene import load_mujoco_model

    return load_mujoco_model(scene)


def ground_height(m, d) -> float:
    """Top of the ground: the highest plane (or height field) on the world body, else 0 [m]."""
    tops = []
    for g in range(m.ngeom):
        if m.geom_bodyid[g] != 0:
            continue
        if m.geom_type[g] == _GEOM_PLANE:
            tops.append(float(d.geom_xpos[g, 2]))
        elif m.geom_type[g] == _GEOM_HFIELD:
            tops.append(float(d.geom_xpos[g, 2] + m.hfield_size[m.geom_dataid[g], 2]))
    return max(tops) if tops else 0.0


def geom_bottom(m, d, g: int) -> float | None:
    """Lowest z [m] of collision geom ``g`` as posed in ``d`` (None for a plane or height field)."""
    t, size, z = int(m.geom_type[g]), m.geom_size[g], float(d.geom_xpos[g, 2])
    up = d.geom_xmat[g].reshape(3, 3)[2]  # world z of each local axis
    if t == _GEOM_SPHERE:
        return z - size[0]
    if t == _GEOM_CAPSULE:
        return z - abs(up[2]) * size[1] - size[0]
    if t == _GEOM_CYLINDER:
        return z - abs(up[2]) * size[1] - size[0] * np.sqrt(max(0.0, 1.0 - up[2] ** 2))
    if t == _GEOM_BOX:
        return z - float(np.sum(np.abs(up) * size[:3]))
    if t == _GEOM_ELLIPSOID:
        return z - float(np.sqrt(np.sum((up * size[:3]) ** 2)))
    if t == _GEOM_MESH:
        mesh = m.geom_dataid[g]
        start, count = m.mesh_vertadr[mesh], m.mesh_vertnum[mesh]
        return float(np.min(m.mesh_vert[start:start + count] @ up)) + z
    return None


def collides(m, g: int) -> bool:
    """Geom ``g`` is a robot's collision geom (not on the world body, contype or conaffinity set)."""
    return m.geom_bodyid[g] != 0 and not (m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0)


def lowest_point(m, d) -> float:
    """Lowest z [m] of the robot's collision geometry (geoms not on the world body that collide)."""
    lows = [geom_bottom(m, d, g) for g in range(m.ngeom) if collides(m, g)]
    lows = [z for z in lows if z is not None]
    return float(min(lows)) if lows else float(np.inf)


def standing_height(scene: Path, qpos: np.ndarray) -> float:
    """Base height [m] that puts the robot in pose ``qpos`` (base x, y and orientation as given)
    with its lowest collision point on the ground."""
    import mujoco

    m = _model(Path(scene))
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    d.qpos[2] = 0.0
    mujoco.mj_kinematics(m, d)
    low = lowest_point(m, d)
    return float(ground_height(m, d) - low) if np.isfinite(low) else float(qpos[2])


def initial_state(log, harness, k: int = 0) -> InitialState:
    """The engine state at log row ``k``: logged joints, base orientation, gyro, and base
    position and velocity where logged; else base height from the feet on the ground (above),
    zero base linear velocity, and the task's initial state for anything else."""
    c = harness.canonical
    init = harness.task.initial_state(c, np.random.default_rng(0))
    qpos, qvel = np.array(init.qpos, dtype=float), np.zeros(c.nv)
    idx = [c.joint_names.index(j) for j in log.joints]
    qpos[c.joint_qposadr[idx]] = log.q[k]
    qvel[c.joint_dofadr[idx]] = log.dq[k]
    if c.free_base:  # MuJoCo layout: position, quaternion w-x-y-z, world linear, body angular velocity
        for arr, part, value in ((qpos, slice(0, 3), log.pos), (qpos, slice(3, 7), log.quat),
                                 (qvel, slice(0, 3), log.vel), (qvel, slice(3, 6), log.gyro)):
            if value is not None:
                arr[part] = value[k]
        if log.pos is None:
            qpos[2] = standing_height(harness.scene, qpos)
    return InitialState(qpos, qvel)


def first_call_time(harness) -> float:
    """Time [s] of a log's first row (the first policy call) on the robot's clock since reset: one
    control period with the card's ``first_call: after_one_period``, else 0."""
    return harness.control_dt if harness.first_call == "after_one_period" else 0.0
