"""Actuation: crosssim computes joint torques itself, so every engine runs one control law.

Engine-native motors are off in every adapter; what reaches an engine is one torque per
canonical joint, recomputed at physics rate where the law depends on the state (PD).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crosssim.actuation_ee import EndEffectorLaw
from crosssim.errors import CrossSimError
from crosssim.scene import CanonicalModel


@dataclass(frozen=True)
class MocapLaw:
    """A benchmark's end-effector law through a mocap body, as gymnasium-robotics' Fetch runs it
    (``fetch_env._set_action``, ``mujoco_utils.mocap_set_action`` / ``ctrl_set_action``): each
    control step the mocap goes to the welded body's pose plus ``pos_scale`` x action[:3] [m] (its
    quaternion plus ``quat_offset``, unnormalised, as the benchmark adds it), and each gripper
    actuator's ctrl to its joint's position plus action[3] [m] (0 with ``blocked``, whose finger
    joints are then set to 0 after the step). Only an engine that simulates mocap bodies and welds
    (``capabilities.mocap``: MuJoCo) runs it; the weld's relative pose is zeroed first
    (``reset_mocap_welds``)."""

    mocap: str
    """The mocap body [name]."""
    body: str
    """The robot body welded to it, whose pose the mocap starts each step from."""
    gripper: tuple[str, ...]
    """The gripper's joints [names]; the actuators on them (model order) get the gripper command."""
    pos_scale: float = 0.05
    """End-effector displacement per unit action [m]."""
    quat_offset: tuple[float, float, float, float] = (1.0, 0.0, 1.0, 0.0)
    blocked: bool = False
    """Gripper held shut: its command is 0 and its joints are zeroed after every step (Push)."""
    action_size: int = 4


@dataclass(frozen=True)
class Actuation:
    """Maps a policy action to joint torques.

    ``motor``: torque = gear x clip(action, ctrlrange) on each actuator's joint (gymnasium's
    motors); constant over the control period. ``pd``: target = scale x action + default
    pose, torque = kp (target - q) - kd qd, recomputed every physics step. ``mocap``: a benchmark's
    mocap law, run by the engine. ``ee_pd``: an end-effector command, turned into joint targets by
    crosssim's inverse kinematics and PD torques (crosssim.actuation_ee.EndEffectorLaw).
    """

    mode: str
    joint_index: np.ndarray
    """Canonical joint index driven by each action component."""
    dof_index: np.ndarray
    """qvel address of those joints."""
    qpos_index: np.ndarray
    """qpos address of those joints."""
    joint_count: int
    gear: np.ndarray
    ctrl_low: np.ndarray
    ctrl_high: np.ndarray
    kp: np.ndarray | None = None
    """Proportional gains [N m/rad], one per action component (pd)."""
    kd: np.ndarray | None = None
    """Derivative gains [N m s/rad] (pd)."""
    scale: np.ndarray | None = None
    default_pos: np.ndarray | None = None
    """Default joint positions [rad] the PD target is relative to (pd)."""
    torque_limit: np.ndarray | None = None
    """Symmetric torque clip [N m] per action component, or None."""
    target_low: np.ndarray | None = None
    """Lower clip of PD targets [rad] (position actuators' ctrl range), or None."""
    target_high: np.ndarray | None = None
    law: "MocapLaw | EndEffectorLaw | None" = None
    """``mocap``: the benchmark's end-effector law the engine runs (``Engine.step_mocap``);
    ``ee_pd``: crosssim's end-effector law (crosssim.actuation_ee), whose joint targets the control
    step computes from the command at the start of each period (``EndEffectorLaw.joint_targets``)."""

    @property
    def action_size(self) -> int:
        """Action components: the law's command, else one per driven joint."""
        return self.law.action_size if self.law is not None else len(self.joint_index)

    @property
    def constant_over_substeps(self) -> bool:
        return self.mode == "motor"

    @classmethod
    def motors(cls, c: CanonicalModel) -> "Actuation":
        low = np.where(c.actuator_ctrllimited, c.actuator_ctrlrange[:, 0], -np.inf)
        high = np.where(c.actuator_ctrllimited, c.actuator_ctrlrange[:, 1], np.inf)
        return cls("motor", c.actuator_joint.copy(), c.joint_dofadr[c.actuator_joint], c.joint_qposadr[c.actuator_joint],
                   c.joint_count, c.actuator_gear.copy(), low, high)

    def target(self, action: np.ndarray) -> np.ndarray:
        """What the action means for this law: clipped ctrl (motor), joint targets (pd) or the
        command clipped to [-1, 1] (mocap, ee_pd: the joint targets come from the state, ``law.joint_targets``)."""
        if self.mode in ("mocap", "ee_pd"):
            return np.clip(action, -1.0, 1.0)
        if self.mode == "motor":
            return np.minimum(np.maximum(action, self.ctrl_low), self.ctrl_high)
        target = self.scale * action + self.default_pos
        if self.target_low is not None:
            target = np.clip(target, self.target_low, self.target_high)
        return target

    def torques(self, target: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
        """Joint torques, one per canonical joint (zero on unactuated joints)."""
        if self.mode == "mocap":
            raise CrossSimError("the mocap law has no joint torques: the engine runs it (Engine.step_mocap)")
        if self.mode == "motor":
            tau = self.gear * target
        elif self.mode == "ee_pd":
            tau = self.law.torques(target, qpos, qvel)
        else:
            tau = self.kp * (target - qpos[self.qpos_index]) - self.kd * qvel[self.dof_index]
        if self.torque_limit is not None:
            tau = np.clip(tau, -self.torque_limit, self.torque_limit)
        out = np.zeros(self.joint_count)
        out[self.joint_index] = tau
        return out
