"""crosssim's end-effector law for every engine: a benchmark's end-effector displacement command
turned into joint targets by damped least-squares inverse kinematics on the canonical model, and
joint-space PD torques with gravity compensation at physics rate.

Where a benchmark drives a mocap body welded to the gripper (gymnasium-robotics' Fetch,
crosssim.actuation.MocapLaw), only MuJoCo can run its law. This one needs nothing of the engine but
joint torques: the inverse kinematics and the gravity torques are MuJoCo's kinematics run by crosssim
on the canonical model at the joint state the engine reports (as crosssim.kinematics does for
observations), so every engine gets the same targets for the same state.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

_LOCAL = threading.local()  # one MjData per thread and scene: MuJoCo columns step states in threads


@dataclass(frozen=True)
class EndEffectorLaw:
    """Each control step (and each part of one under latency), from the joint state q0 then:
    target pose of ``body`` = its position + ``pos_scale`` x command[:3] [m] and its quaternion +
    ``quat_offset``, normalised (the mocap law's command, crosssim.actuation.MocapLaw); arm joint
    targets q* by damped least squares on the body's 6-D pose error (``iterations`` steps of
    dq = J^T (J J^T + ``damping``^2 I)^-1 e, clipped to the joint ranges); finger targets
    clip(q0 + command[3], ``gripper_range``) (0 when ``blocked``), as the benchmark's position
    actuators. Every physics step: arm torque kp (q* - q) - kd qd + g(q) (gravity and joint springs
    of the canonical model at q), finger torque ``gripper_kp`` (q* - q)."""

    scene: str
    """The scene whose canonical kinematics the law runs on (a crosssim.scene reference)."""
    body: str
    """The body the command moves [name]."""
    arm: tuple[str, ...]
    """Arm joints the inverse kinematics moves [names]."""
    gripper: tuple[str, ...]
    """Finger joints [names]."""
    kp: float = 10000.0
    """Arm joints' proportional gain [N m/rad]."""
    kd: float = 300.0
    """Arm joints' derivative gain [N m s/rad], on top of the joints' own damping."""
    gripper_kp: float = 30000.0
    """Fingers' proportional gain [N/m] (the benchmark's position actuators' kp)."""
    gripper_range: tuple[float, float] = (0.0, 0.2)
    """Finger target range [m] (the benchmark's actuators' ctrlrange)."""
    pos_scale: float = 0.05
    """End-effector displacement per unit command [m]."""
    quat_offset: tuple[float, float, float, float] = (1.0, 0.0, 1.0, 0.0)
    blocked: bool = False
    """Fingers held shut (target 0)."""
    damping: float = 0.05
    """Damped least squares' damping (metres and radians)."""
    iterations: int = 5
    action_size: int = 4

    def _ids(self):
        import mujoco

        from crosssim.kinematics import kinematics_of

        cache = getattr(_LOCAL, "data", None)
        if cache is None:
            cache = _LOCAL.data = {}
        if self not in cache:
            m = kinematics_of(self.scene).m
            jid = lambda n: mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)  # noqa: E731
            arm = np.array([jid(n) for n in self.arm])
            fingers = np.array([jid(n) for n in self.gripper])
            if (arm < 0).any() or (fingers < 0).any():
                missing = [n for n in (*self.arm, *self.gripper) if jid(n) < 0]
                from crosssim.errors import CardError

                raise CardError(f"end-effector law: joints {missing} are not in {self.scene}")
            cache[self] = (m, mujoco.MjData(m), mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, self.body),
                           m.jnt_qposadr[arm], m.jnt_dofadr[arm], m.jnt_qposadr[fingers], m.jnt_dofadr[fingers],
                           m.jnt_limited[arm].astype(bool), m.jnt_range[arm])
        return cache[self]

    def joint_targets(self, command: np.ndarray, qpos: np.ndarray) -> np.ndarray:
        """Targets [rad, m] of the arm joints then the fingers for ``command`` (clipped to [-1, 1]) at ``qpos``."""
        import mujoco

        m, d, body, qadr, dadr, fadr, _, limited, ranges = self._ids()
        command = np.clip(np.asarray(command, dtype=float), -1.0, 1.0)
        d.qpos[:] = qpos
        mujoco.mj_kinematics(m, d)
        goal_pos = d.xpos[body] + self.pos_scale * command[:3]
        goal_quat = d.xquat[body] + np.asarray(self.quat_offset)
        goal_quat /= np.linalg.norm(goal_quat)
        jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        err, conj, rot = np.zeros(6), np.zeros(4), np.zeros(3)
        for _ in range(self.iterations):
            mujoco.mj_comPos(m, d)
            err[:3] = goal_pos - d.xpos[body]
            mujoco.mju_negQuat(conj, d.xquat[body])
            dq = np.zeros(4)
            mujoco.mju_mulQuat(dq, goal_quat, conj)
            mujoco.mju_quat2Vel(rot, dq, 1.0)
            err[3:] = rot
            mujoco.mj_jacBody(m, d, jacp, jacr, body)
            jac = np.vstack([jacp[:, dadr], jacr[:, dadr]])
            step = jac.T @ np.linalg.solve(jac @ jac.T + self.damping ** 2 * np.eye(6), err)
            q = d.qpos[qadr] + step
            d.qpos[qadr] = np.where(limited, np.clip(q, ranges[:, 0], ranges[:, 1]), q)
            mujoco.mj_kinematics(m, d)
        fingers = np.zeros(len(fadr)) if self.blocked else np.clip(qpos[fadr] + command[3], *self.gripper_range)
        return np.concatenate([d.qpos[qadr], fingers])

    def torques(self, target: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
        """Arm then finger torques [N m, N] towards ``target`` (``joint_targets``'s) at the joint state."""
        import mujoco

        m, d, _, qadr, dadr, fadr, _, _, _ = self._ids()
        d.qpos[:], d.qvel[:] = qpos, 0.0
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_comVel(m, d)
        bias = np.zeros(m.nv)
        mujoco.mj_rne(m, d, 0, bias)  # gravity at rest: the torque that holds the arm still
        spring = m.jnt_stiffness[m.dof_jntid[dadr]] * (qpos[qadr] - m.qpos_spring[qadr])
        n = len(qadr)
        arm = self.kp * (target[:n] - qpos[qadr]) - self.kd * qvel[dadr] + bias[dadr] + spring
        return np.concatenate([arm, self.gripper_kp * (target[n:] - qpos[fadr])])
