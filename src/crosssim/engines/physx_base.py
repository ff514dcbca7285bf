"""The physx column's floating root for a base of three slides and a ball joint.

SAPIEN 3 exposes no spherical articulation joint, but three orthogonal slides followed by a ball
joint move the root body exactly as a free joint does (the same configuration space and the same
mass matrix in other coordinates), as long as none of the four joints adds anything of its own:
no damping, armature, dry friction, spring, range or actuator. Such a base is built as PhysX's
floating root and its canonical coordinates are mapped to the root's pose and velocity; any other
ball joint is refused in one line saying why.

With the root body at ``p0, q0`` (qpos0), slide axes ``d_i`` (world directions ``R0 a_i``), slide
values ``s_i`` and the ball's rotation ``qb`` about its anchor ``a`` (body frame):
orientation ``q = q0 qb``; origin ``p = p0 + sum s_i d_i + R0 a - R(q) a``; origin velocity
``v = sum sdot_i d_i - w x R(q) a``, with ``w = R(q) w_body`` and ``w_body`` the ball's velocity.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from crosssim.errors import EngineFailure
from crosssim.frame import cross3, quat_rotate, quat_to_matrix
from crosssim.scene import element_name

JNT = mujoco.mjtJoint


@dataclass(frozen=True)
class SlideBallBase:
    slides: tuple[int, ...]
    """Canonical joint index of each slide."""
    slide_qpos: np.ndarray
    slide_dof: np.ndarray
    axes: np.ndarray
    """(3, 3) world direction of each slide, rows."""
    p0: np.ndarray
    q0: np.ndarray
    anchor: np.ndarray
    """The ball's anchor in the body frame."""
    ball_qpos: int
    ball_dof: int


def _qmul(a, b) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def slide_ball_base(m, c, scene_name: str) -> SlideBallBase | None:
    """The mapping for ``m``'s ball-jointed base, None without a ball joint; EngineFailure (one
    line) for a ball joint that is not such a base."""
    balls = [j for j in range(m.njnt) if int(m.jnt_type[j]) == int(JNT.mjJNT_BALL)]
    if not balls:
        return None
    name = element_name(m, mujoco.mjtObj.mjOBJ_JOINT, balls[0])
    why = None
    jnts = list(range(m.body_jntadr[1], m.body_jntadr[1] + m.body_jntnum[1]))
    types = [int(m.jnt_type[j]) for j in jnts]
    if len(balls) != 1 or types != [int(JNT.mjJNT_SLIDE)] * 3 + [int(JNT.mjJNT_BALL)]:
        why = "only a base of three slides then the ball is built (as a free root)"
    else:
        R0 = quat_to_matrix(m.body_quat[1])
        axes = np.array([R0 @ (m.jnt_axis[j] / np.linalg.norm(m.jnt_axis[j])) for j in jnts[:3]])
        driven = {int(m.actuator_trnid[a, 0]) for a in range(m.nu)}
        if np.abs(axes @ axes.T - np.eye(3)).max() > 1e-9:
            why = "its slides are not orthogonal"
        for j in jnts:
            d = int(m.jnt_dofadr[j])
            n = 3 if int(m.jnt_type[j]) == int(JNT.mjJNT_BALL) else 1
            if (m.dof_damping[d:d + n].any() or m.dof_armature[d:d + n].any() or m.dof_frictionloss[d:d + n].any()
                    or m.jnt_stiffness[j] or m.jnt_limited[j] or j in driven):
                why = "its joints have damping, armature, friction, a spring, a range or an actuator"
    if why:
        raise EngineFailure(f"physx: ball joints not supported (joint {name} in {scene_name}): SAPIEN 3 exposes no "
                            f"spherical articulation joint, and {why}")
    index = {n: k for k, n in enumerate(c.joint_names)}
    names = [element_name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in jnts[:3]]  # unnamed: as canonical
    return SlideBallBase(
        slides=tuple(index[n] for n in names), slide_qpos=np.array([m.jnt_qposadr[j] for j in jnts[:3]]),
        slide_dof=np.array([m.jnt_dofadr[j] for j in jnts[:3]]), axes=axes, p0=m.body_pos[1].copy(),
        q0=m.body_quat[1].copy(), anchor=m.jnt_pos[jnts[3]].copy(), ball_qpos=int(m.jnt_qposadr[jnts[3]]),
        ball_dof=int(m.jnt_dofadr[jnts[3]]))


def to_root(b: SlideBallBase, qpos: np.ndarray, qvel: np.ndarray):
    """(origin, quaternion w-x-y-z, origin velocity [world], angular velocity [body]) of the root."""
    qb = qpos[b.ball_qpos:b.ball_qpos + 4] / np.linalg.norm(qpos[b.ball_qpos:b.ball_qpos + 4])
    q = _qmul(b.q0, qb)
    arm = quat_rotate(q, b.anchor)
    pos = b.p0 + qpos[b.slide_qpos] @ b.axes + quat_rotate(b.q0, b.anchor) - arm
    ang_body = qvel[b.ball_dof:b.ball_dof + 3]
    lin = qvel[b.slide_dof] @ b.axes - cross3(quat_rotate(q, ang_body), arm)
    return pos, q, lin, ang_body


def from_root(b: SlideBallBase, pos, quat, lin, ang_world, qpos: np.ndarray, qvel: np.ndarray) -> None:
    """Write the slides' and the ball's coordinates of a root pose and velocity into qpos/qvel."""
    arm = quat_rotate(quat, b.anchor)
    qpos[b.slide_qpos] = b.axes @ (pos - b.p0 - quat_rotate(b.q0, b.anchor) + arm)
    qb = _qmul(b.q0 * np.array([1, -1, -1, -1]), quat)
    qpos[b.ball_qpos:b.ball_qpos + 4] = qb
    qvel[b.slide_dof] = b.axes @ (lin + cross3(ang_world, arm))
    qvel[b.ball_dof:b.ball_dof + 3] = quat_to_matrix(quat).T @ ang_world
