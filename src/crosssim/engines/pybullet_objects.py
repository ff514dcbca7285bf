"""Free objects (a body under the world on a free joint, besides a free base: Fetch's block) in the
pybullet column: each its own Bullet multibody with a floating base, beside the robot's.

Bullet collides two multibodies unless told not to, so every object-link and object-world-body pair
is switched on or off by MuJoCo's contype/conaffinity bits and excludes; friction must come out as
MuJoCo's max(mu_a, mu_b) from Bullet's product of the two bodies' coefficients (robot links hold
max(mu, floor), world bodies 1), else the column is refused in one line naming the body.
The free joint's damping (MuJoCo: -d qvel on its six dofs) is applied as explicit force and torque.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pybullet

from crosssim.engines.features import free_objects, object_contacts
from crosssim.errors import EngineFailure
from crosssim.frame import cross3, quat_rotate, quat_to_matrix, xyzw_to_wxyz
from crosssim.scene import element_name


@dataclass
class PyBulletObject:
    body: int
    """MuJoCo body."""
    multibody: int
    qposadr: int
    dofadr: int
    ipos: np.ndarray
    iquat: np.ndarray
    """Inertial frame in the body frame (PyBullet's base frame is the inertial one)."""
    damping: float
    """The free joint's damping [N s/m, N m s/rad]."""


def build_objects(m, client: int, robot: int, body_link: np.ndarray, worlds, inertia: dict, shape_of, link_mu: dict,
                  scene: Path) -> list[PyBulletObject]:
    """The objects' multibodies, collision filters and friction. ``shape_of(geoms)``: a Bullet
    collision shape of MuJoCo geoms; ``link_mu``: the friction set on each robot body's link."""
    from crosssim.engines.pybullet_build import xyzw

    pb = dict(physicsClientId=client)
    out = []
    for b in free_objects(m):
        if any(int(m.body_parentid[k]) == b for k in range(m.nbody)):
            raise EngineFailure(f"pybullet cannot build free object '{element_name(m, 1, b)}' in {scene.name}: bodies "
                                "hang from it (an object is built as one rigid body)")
        if any(int(m.geom_bodyid[g]) == b for g in (*m.pair_geom1[:m.npair], *m.pair_geom2[:m.npair])):
            raise EngineFailure(f"pybullet cannot build <pair> contact of free object '{element_name(m, 1, b)}' in "
                                f"{scene.name}: object contacts follow the bits only")
        geoms = [g for g in range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b])
                 if m.geom_contype[g] or m.geom_conaffinity[g]]
        mb = pybullet.createMultiBody(float(m.body_mass[b]), shape_of(geoms), -1, list(m.body_pos[b]),
                                      xyzw(m.body_quat[b]), baseInertialFramePosition=list(m.body_ipos[b]),
                                      baseInertialFrameOrientation=xyzw(inertia[b][1]), **pb)
        pybullet.changeDynamics(mb, -1, localInertiaDiagonal=list(inertia[b][0]), **pb)
        pybullet.changeDynamics(mb, -1, linearDamping=0.0, **pb)
        pybullet.changeDynamics(mb, -1, angularDamping=0.0, **pb)
        mu = float(max((m.geom_friction[g, 0] for g in geoms), default=1.0))
        pybullet.changeDynamics(mb, -1, lateralFriction=mu, **pb)
        j = int(m.body_jntadr[b])
        out.append(PyBulletObject(b, mb, int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j]), m.body_ipos[b].copy(),
                                  np.asarray(inertia[b][1], float), float(m.dof_damping[m.jnt_dofadr[j]])))
    _filter_and_check(m, out, client, robot, body_link, worlds, link_mu, scene)
    return out


def _filter_and_check(m, objects, client, robot, body_link, worlds, link_mu, scene) -> None:
    """Switch off every object-link / object-world pair MuJoCo never lets touch; refuse a pair whose
    friction Bullet's product cannot make MuJoCo's."""
    pb = dict(physicsClientId=client)
    world_of = {g: w for w, geoms in worlds for g in geoms}
    by_body = {o.body: o for o in objects}
    touches: dict[tuple, float] = {}
    for g, h, _, mu in object_contacts(m):
        other = int(m.geom_bodyid[h])
        key = (int(m.geom_bodyid[g]), ("world", world_of.get(h)) if other == 0 else ("body", other))
        touches[key] = max(touches.get(key, 0.0), mu)
    for o in objects:
        own = pybullet.getDynamicsInfo(o.multibody, -1, **pb)[1]
        for b in range(1, m.nbody):
            if b == o.body or m.body_geomnum[b] == 0:
                continue
            key = (o.body, ("body", b))
            target = by_body[b].multibody if b in by_body else robot
            link = -1 if b in by_body else int(body_link[b])
            if b in by_body and b < o.body:
                continue
            if key not in touches:
                pybullet.setCollisionFilterPair(o.multibody, target, -1, link, 0, **pb)
                continue
            other_mu = pybullet.getDynamicsInfo(target, link, **pb)[1]
            _check(m, o.body, b, own * other_mu, touches[key], scene)
        for w, _ in worlds:
            key = (o.body, ("world", w))
            if key not in touches:
                pybullet.setCollisionFilterPair(o.multibody, w, -1, -1, 0, **pb)
            else:
                _check(m, o.body, 0, own * pybullet.getDynamicsInfo(w, -1, **pb)[1], touches[key], scene)


def _check(m, obj: int, other: int, bullet: float, mujoco_mu: float, scene: Path) -> None:
    if abs(bullet - mujoco_mu) > 1e-6:
        raise EngineFailure(f"pybullet cannot build friction of the contacts of body '{element_name(m, 1, obj)}' with "
                            f"'{element_name(m, 1, other)}' in {scene.name}: Bullet multiplies the two bodies' "
                            f"coefficients ({bullet:g}), MuJoCo takes the max ({mujoco_mu:g})")


def put_objects(objects, qpos: np.ndarray, qvel: np.ndarray, client: int) -> None:
    """Set each object's pose and velocity from MuJoCo's free-joint coordinates (origin position,
    quaternion w x y z; world linear velocity of the origin, body-frame angular velocity)."""
    from crosssim.engines.pybullet_build import xyzw

    pb = dict(physicsClientId=client)
    for o in objects:
        pos, quat = qpos[o.qposadr:o.qposadr + 3], qpos[o.qposadr + 3:o.qposadr + 7]
        quat = quat / np.linalg.norm(quat)
        com = pos + quat_rotate(quat, o.ipos)
        pybullet.resetBasePositionAndOrientation(o.multibody, list(com), xyzw(_mul(quat, o.iquat)), **pb)
        ang = quat_rotate(quat, qvel[o.dofadr + 3:o.dofadr + 6])
        pybullet.resetBaseVelocity(o.multibody, list(qvel[o.dofadr:o.dofadr + 3] + cross3(ang, com - pos)), list(ang),
                                   **pb)


def read_objects(objects, qpos: np.ndarray, qvel: np.ndarray, client: int) -> None:
    """Write each object's free-joint coordinates into ``qpos`` / ``qvel`` (``put_objects``' inverse)."""
    pb = dict(physicsClientId=client)
    for o in objects:
        com, orn = pybullet.getBasePositionAndOrientation(o.multibody, **pb)
        lin, ang = (np.asarray(v) for v in pybullet.getBaseVelocity(o.multibody, **pb))
        quat = _mul(xyzw_to_wxyz(orn), o.iquat * np.array([1, -1, -1, -1]))
        pos = np.asarray(com) - quat_rotate(quat, o.ipos)
        qpos[o.qposadr:o.qposadr + 3], qpos[o.qposadr + 3:o.qposadr + 7] = pos, quat
        qvel[o.dofadr:o.dofadr + 3] = lin + cross3(ang, pos - np.asarray(com))
        qvel[o.dofadr + 3:o.dofadr + 6] = quat_to_matrix(quat).T @ ang


def damp_objects(objects, client: int) -> None:
    """The free joints' damping for the next Bullet step: -d v at the centre of mass (MuJoCo: at the
    origin; the same for a body whose mass centre is its origin, as the block's), -d w (external forces
    last one step)."""
    pb = dict(physicsClientId=client)
    for o in objects:
        if o.damping:
            com, orn = pybullet.getBasePositionAndOrientation(o.multibody, **pb)
            lin, ang = (np.asarray(v) for v in pybullet.getBaseVelocity(o.multibody, **pb))
            pybullet.applyExternalForce(o.multibody, -1, list(-o.damping * lin), list(com), pybullet.WORLD_FRAME, **pb)
            pybullet.applyExternalTorque(o.multibody, -1, list(-o.damping * ang), pybullet.WORLD_FRAME, **pb)


def _mul(a, b) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])
