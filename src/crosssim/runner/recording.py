"""What the recorded episode (the report's filmstrip and trace episode) keeps beyond the base pose
and joint positions: the joint torques crosssim's actuation applied and each foot's contact force.

Feet are the card's ``task_options.fall.feet`` where it names them, else the end bodies of the
robot's kinematic tree that have collision geometry (a legged robot's feet, a Hopper's foot; a
humanoid's hands count too). A foot is in contact when the contact force on it exceeds
``CONTACT_SHARE`` of the robot's weight: small enough for a foot that only brushes the floor, large
enough that no engine's numerical residue reads as a touch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CONTACT_SHARE = 0.01
"""A foot touches when its contact force exceeds this share of the robot's weight."""
MAX_FEET = 8
"""At most this many end bodies are recorded (a gait diagram of more is unreadable)."""


@dataclass(frozen=True)
class Recording:
    """The extra series of a recorded episode, per control step (the frame at its end)."""

    torque_joints: np.ndarray
    """Canonical index of each joint whose torque is kept (the policy's joints, its order)."""
    torque_names: tuple[str, ...]
    feet: tuple[str, ...]
    """Body names of the feet, in the robot's body order."""
    foot_rows: np.ndarray
    """Row of each foot in ``SimFrame.body_ext_wrench`` (bodies except the world)."""
    contact_force: float
    """Contact threshold [N]: ``CONTACT_SHARE`` of the robot's weight."""

    @classmethod
    def of(cls, harness) -> Recording:
        c = harness.canonical
        named = tuple(getattr(getattr(harness.task, "fall", None), "feet", ()) or ())
        feet = named or end_bodies(Path(c.path))
        rows = np.array([c.body_names.index(f) for f in feet if f in c.body_names], dtype=int)
        joints = np.asarray(harness.actuation.joint_index, dtype=int)
        weight = c.total_mass * float(np.linalg.norm(c.gravity) or 9.81)
        return cls(joints, tuple(c.joint_names[j] for j in joints), tuple(c.body_names[r] for r in rows), rows,
                   CONTACT_SHARE * weight)

    def start(self) -> dict[str, list]:
        """Empty series for one episode."""
        return {"joint_torque": [], "foot_force": []}

    def add(self, series: dict[str, list], frame) -> None:
        """Append ``frame``'s torques [N m or N] and foot contact forces [N] (NaN where the engine
        gave no contact wrench)."""
        series["joint_torque"].append(np.asarray(frame.joint_torque, float)[self.torque_joints])
        wrench = frame.body_ext_wrench
        if len(self.foot_rows) and len(wrench) > self.foot_rows.max():
            series["foot_force"].append(np.linalg.norm(wrench[self.foot_rows, 3:], axis=1))
        else:
            series["foot_force"].append(np.full(len(self.foot_rows), np.nan))

    def finish(self, series: dict[str, list]) -> dict[str, np.ndarray]:
        """The stored series: torques, forces, contact flags, and the names and threshold they need.
        An engine that gave no contact wrench keeps no foot series (the report says so)."""
        n = len(series["joint_torque"])
        out = {"joint_torque": np.asarray(series["joint_torque"], float).reshape(n, len(self.torque_joints)),
               "torque_joints": np.asarray(self.torque_names, dtype=str), "feet": np.asarray(self.feet, dtype=str)}
        force = np.asarray(series["foot_force"], float).reshape(n, len(self.foot_rows))
        if len(self.foot_rows) and n and np.isfinite(force).all():
            out |= {"foot_force": force, "foot_contact": force > self.contact_force,
                    "contact_threshold": np.asarray([self.contact_force])}
        return out


def end_bodies(scene: Path) -> tuple[str, ...]:
    """Bodies of ``scene``'s robot with no child body and a colliding geom (the root excluded), in
    body order: its feet for a legged robot; at most ``MAX_FEET``."""
    return _end_bodies(str(Path(scene).resolve()))


@functools.lru_cache(maxsize=8)
def _end_bodies(scene: str) -> tuple[str, ...]:
    import mujoco

    from crosssim.scene import element_name, load_mujoco_model

    m = load_mujoco_model(Path(scene))
    parents = set(int(p) for p in m.body_parentid[1:])
    colliding = {int(m.geom_bodyid[g]) for g in range(m.ngeom) if m.geom_contype[g] or m.geom_conaffinity[g]}
    root = 1
    out = [b for b in range(2, m.nbody) if b not in parents and b in colliding and _under(m, b, root)]
    return tuple(element_name(m, mujoco.mjtObj.mjOBJ_BODY, b) for b in out[:MAX_FEET])


def _under(m, body: int, root: int) -> bool:
    """Whether ``body`` hangs below ``root`` (not a second free body of the scene)."""
    while body > 0:
        if body == root:
            return True
        body = int(m.body_parentid[body])
    return False
