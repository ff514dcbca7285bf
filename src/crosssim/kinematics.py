"""Body poses and centre-of-mass quantities for tasks, from the joint state alone.

A task that observes bodies (Reacher's fingertip, Pusher's object, Humanoid's com inertia and
velocity) reads them from ``SimFrame.derived`` where the engine hands over its own arrays (MuJoCo,
so that gymnasium's observations are reproduced exactly), and otherwise from here: MuJoCo's
kinematics run on the canonical model at the frame's qpos/qvel. Kinematics is geometry, not
physics, so every engine's frame gives the same numbers for the same joint state.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from crosssim.frame import SimFrame


class Kinematics:
    """MuJoCo's position and velocity kinematics of one scene, on a private MjData."""

    def __init__(self, path: Path):
        import mujoco

        from crosssim.scene import load_mujoco_model

        self._mujoco = mujoco
        self.m = load_mujoco_model(path)
        self.d = mujoco.MjData(self.m)

    def body_id(self, name: str) -> int:
        """mjData row of body ``name`` (0 is the world)."""
        return self._mujoco.mj_name2id(self.m, self._mujoco.mjtObj.mjOBJ_BODY, name)

    def of(self, frame: SimFrame) -> dict[str, np.ndarray]:
        """``xpos``, ``xquat``, ``xipos``, ``cinert``, ``cvel``, ``site_xpos``, ``site_xmat``, ``cdof``,
        ``subtree_com``, ``qfrc_constraint`` (rows
        as mjData's, the world's first): the engine's own where the frame has them, else computed at
        the frame's joint state. Computed ``qfrc_constraint`` is zero: constraint forces need the
        solver, which only the engine ran."""
        if frame.derived is not None:
            return frame.derived
        mj, m, d = self._mujoco, self.m, self.d
        d.qpos[:], d.qvel[:] = frame.qpos, frame.qvel
        mj.mj_kinematics(m, d)
        mj.mj_comPos(m, d)
        mj.mj_comVel(m, d)
        return {"xpos": d.xpos.copy(), "xquat": d.xquat.copy(), "xipos": d.xipos.copy(), "cinert": d.cinert.copy(),
                "cvel": d.cvel.copy(), "site_xpos": d.site_xpos.copy(), "site_xmat": d.site_xmat.copy(),
                "cdof": d.cdof.copy(), "subtree_com": d.subtree_com.copy(), "qfrc_constraint": np.zeros(m.nv)}

    def site_id(self, name: str) -> int:
        """mjData row of site ``name``."""
        return self._mujoco.mj_name2id(self.m, self._mujoco.mjtObj.mjOBJ_SITE, name)

    def site_velocity(self, frame: SimFrame, site: int, derived: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
        """World linear [m/s] and angular [rad/s] velocity of site row ``site``: MuJoCo's site Jacobian
        (``mj_jacSite``) times the frame's qvel, taken at the kinematics ``derived`` holds (``of(frame)``'s:
        the engine's own where it has them, as gymnasium-robotics reads them)."""
        mj, d = self._mujoco, self.d
        derived = self.of(frame) if derived is None else derived
        d.site_xpos[:], d.cdof[:], d.subtree_com[:] = derived["site_xpos"], derived["cdof"], derived["subtree_com"]
        jacp, jacr = np.zeros((3, self.m.nv)), np.zeros((3, self.m.nv))
        mj.mj_jacSite(self.m, d, jacp, jacr, site)
        return jacp @ frame.qvel, jacr @ frame.qvel


@functools.lru_cache(maxsize=16)
def kinematics_of(scene: str) -> Kinematics:
    """One Kinematics per scene reference (``gymnasium:reacher.xml`` or a path), built on first use."""
    from crosssim.scene import resolve_scene

    return Kinematics(resolve_scene(scene))
