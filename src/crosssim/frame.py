"""SimFrame: what every engine reports, in SI units, canonical joint order, world frame."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class InitialState:
    """A state to reset an engine to, in MuJoCo's generalized-coordinate layout.

    MuJoCo's compiled model is canonical, so its ``qpos``/``qvel`` layout is the interchange
    format: a free joint stores position, quaternion (w, x, y, z), world linear velocity and
    *body-frame* angular velocity, exactly as ``mjData`` does.
    """

    qpos: np.ndarray
    """Generalized positions [m, rad, quaternion w-x-y-z], MuJoCo layout."""
    qvel: np.ndarray
    """Generalized velocities [m/s, rad/s], MuJoCo layout."""
    task: dict | None = None
    """What the task drew with the state from the same random stream (a goal [m]), handed to the
    task's state at reset; engines never read it."""


@dataclass
class SimFrame:
    """One instant of one engine, engine-independent. Tasks and metrics see only this."""

    time: float
    """Simulated time since reset [s]."""
    qpos: np.ndarray
    """Generalized positions [m, rad, quaternion w-x-y-z], canonical (MuJoCo) layout."""
    qvel: np.ndarray
    """Generalized velocities [m/s, rad/s], canonical (MuJoCo) layout."""
    base_pos: np.ndarray
    """Position of the root body frame in the world [m]."""
    base_quat: np.ndarray
    """Orientation of the root body, quaternion w, x, y, z."""
    base_lin_vel: np.ndarray
    """Linear velocity of the root body frame origin, world frame [m/s]."""
    base_ang_vel: np.ndarray
    """Angular velocity of the root body, world frame [rad/s]."""
    joint_torque: np.ndarray
    """Torques applied by crosssim's actuation this step [N m or N], one per actuated dof."""
    body_ext_wrench: np.ndarray = field(default_factory=lambda: np.zeros((0, 6)))
    """External (contact) wrench on each body except the world, MuJoCo ``cfrc_ext`` convention:
    [torque (3) N m, force (3) N], about the robot's centre of mass, world-aligned axes."""
    derived: dict[str, np.ndarray] | None = None
    """The engine's own derived quantities, where it declares ``native_derived`` and the task asked
    (``Task.needs_derived``): MuJoCo's mjData arrays ``xpos``, ``xquat``, ``xipos``, ``cinert``,
    ``cvel``, ``site_xpos`` and ``qfrc_constraint`` (world body and rows included) as its last
    kinematics pass left them: one integrator stage behind ``qpos``, which is what gymnasium's
    environments observe. None: tasks compute them from qpos/qvel (crosssim.kinematics)."""

    @property
    def base_ang_vel_body(self) -> np.ndarray:
        """Angular velocity of the root body in its own frame [rad/s]."""
        return quat_rotate_inverse(self.base_quat, self.base_ang_vel)

    @property
    def base_lin_vel_body(self) -> np.ndarray:
        """Linear velocity of the root body in its own frame [m/s]."""
        return quat_rotate_inverse(self.base_quat, self.base_lin_vel)

    def is_finite(self) -> bool:
        # A sum is NaN or inf as soon as one element is (inf - inf is NaN): one check, not two arrays.
        return bool(np.isfinite(self.qpos.sum() + self.qvel.sum()))


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion given as w, x, y, z."""
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def quat_rotate_inverse(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Express world vector ``v`` in the frame of orientation ``q`` (w, x, y, z)."""
    return quat_to_matrix(q).T @ v


def cross3(a, b) -> np.ndarray:
    """Cross product of two 3-vectors (np.cross costs ~20x more on one pair)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], dtype=float)


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate body-frame vector ``v`` into the world by orientation ``q`` (w, x, y, z)."""
    return quat_to_matrix(q) @ v


def xyzw_to_wxyz(q) -> np.ndarray:
    return np.array([q[3], q[0], q[1], q[2]], dtype=float)


def wxyz_to_xyzw(q) -> np.ndarray:
    return np.array([q[1], q[2], q[3], q[0]], dtype=float)
