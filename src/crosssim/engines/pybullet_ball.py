"""Ball joints of a robot's base in PyBullet (e.g. three slides and a ball joint instead of a free
joint): a ``JOINT_SPHERICAL`` link of the multibody crosssim builds (crosssim.engines.pybullet).

Two PyBullet quirks decide the code: a spherical joint comes with a motor that holds it at its
current orientation (a robot on it would never fall) until ``setJointMotorControlMultiDof`` sets
its gains and force to zero; and its state is read and written only through the ``MultiDof``
calls, as a quaternion x, y, z, w and an angular velocity in the child link's frame, which is
MuJoCo's ball-joint convention (w, x, y, z and body-frame angular velocity) up to the order.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pybullet

from crosssim.errors import EngineFailure
from crosssim.scene import element_name

BALL = int(mujoco.mjtJoint.mjJNT_BALL)


def check_balls(m, c, armature: str) -> None:
    """One line for a ball joint PyBullet would simulate differently: its damping, armature, dry
    friction, spring or limit (PyBullet's spherical joint has none of them here), or the armature
    emulation (its mass-matrix compensation counts one coordinate per joint)."""
    for j in range(m.njnt):
        if int(m.jnt_type[j]) != BALL:
            continue
        name = element_name(m, mujoco.mjtObj.mjOBJ_JOINT, j)
        d = int(m.jnt_dofadr[j])
        passive = {"damping": m.dof_damping[d], "armature": m.dof_armature[d], "frictionloss": m.dof_frictionloss[d],
                   "stiffness": m.jnt_stiffness[j], "range": float(m.jnt_limited[j])}
        used = [k for k, v in passive.items() if v]
        if used:
            raise EngineFailure(f"pybullet: ball joint {name} of {c.path.name} has {used[0]}; PyBullet's spherical joint "
                                "is built without it here: run this robot in mujoco or newton, or remove it")
        if armature == "emulate":
            raise EngineFailure(f"pybullet: armature 'emulate' cannot hold ball joint {name} of {c.path.name}; use "
                                "armature: inertia (the default for such a base) in the profile")


def free_spherical_motor(robot: int, link: int, client: int) -> None:
    """Switch off the motor PyBullet gives every spherical joint (it holds the joint still)."""
    pybullet.setJointMotorControlMultiDof(robot, link, pybullet.POSITION_CONTROL, targetPosition=[0, 0, 0, 1],
                                          targetVelocity=[0, 0, 0], positionGain=0, velocityGain=0, force=[0, 0, 0],
                                          physicsClientId=client)


def put_balls(model, qpos: np.ndarray, qvel: np.ndarray) -> None:
    """Write the ball joints' canonical coordinates (w, x, y, z; body-frame angular velocity)."""
    for link, qadr, dadr in model.balls:
        w, x, y, z = qpos[qadr:qadr + 4] / np.linalg.norm(qpos[qadr:qadr + 4])
        pybullet.resetJointStateMultiDof(model.robot, link, targetValue=[x, y, z, w],
                                         targetVelocity=list(map(float, qvel[dadr:dadr + 3])),
                                         physicsClientId=model.client)


def read_balls(model, qpos: np.ndarray, qvel: np.ndarray) -> None:
    """Fill ``qpos``/``qvel`` at the ball joints' addresses from PyBullet."""
    for link, qadr, dadr in model.balls:
        (x, y, z, w), vel = pybullet.getJointStateMultiDof(model.robot, link, physicsClientId=model.client)[:2]
        qpos[qadr:qadr + 4] = (w, x, y, z)
        qvel[dadr:dadr + 3] = vel
