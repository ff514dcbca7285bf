"""Ball joints of a robot's base in Newton (e.g. three slides and a ball joint instead of a free
joint), on Newton's native ball joint.

Newton's MJCF importer merges all joints of one body into one Newton joint, and a body with
slides *and* a ball joint has no such joint type (Newton 1.8 stops with "JOINT_DOF attribute
... has invalid DOF index"). So the importer is handed the scene with the root body split in two:
an outer carrier body (the root's own frame, its slides, ``CARRIER_MASS`` kg) and, at the same
frame, the root body itself on its ball joint with everything else it held. Body lookups skip the
carrier; the slides are the carrier's joint coordinates, the ball is the root's: quaternion
x, y, z, w and an angular velocity in the parent frame, where MuJoCo has w, x, y, z and the
angular velocity in the child (body) frame (tests/test_ball_base.py).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np

from crosssim.errors import CrossSimError
from crosssim.frame import quat_rotate, quat_to_matrix, xyzw_to_wxyz

CARRIER_SUFFIX = "__slides"
CARRIER_MASS = 1e-6
"""Mass [kg] of the carrier body (inertia 1e-9 kg m^2): the slides need a body to move."""
BALL = int(mujoco.mjtJoint.mjJNT_BALL)


def split_base(scene: Path, root: str) -> tuple[str, object]:
    """(MJCF text with the root body split as above, a path resolver for its relative files)."""
    tree = ET.parse(scene)
    body = next((b for b in tree.getroot().iter("body") if b.get("name") == root), None)
    if body is None and root == "body_1":  # an unnamed root (crosssim.scene.element_name): the first body
        world = tree.getroot().find("worldbody")
        body = None if world is None else world.find("body")
    joints = [] if body is None else [j for j in body if j.tag == "joint"]
    if body is None or not any(j.get("type") == "ball" for j in joints):
        raise CrossSimError(f"newton: the ball joint of {scene.name}'s base body {root!r} is not written in that body "
                            "in the file itself (an include or a default class); write it there to run it in newton")
    inner = ET.Element("body", {"name": root, **({"childclass": body.get("childclass")} if body.get("childclass") else {})})
    for child in list(body):
        if not (child.tag == "joint" and child.get("type") == "slide"):
            body.remove(child)
            inner.append(child)
    body.set("name", root + CARRIER_SUFFIX)
    body.append(ET.Element("inertial", {"pos": "0 0 0", "mass": repr(CARRIER_MASS), "diaginertia": "1e-9 1e-9 1e-9"}))
    body.append(inner)
    folder = str(scene.parent)

    def resolve(base_dir, path: str) -> str:
        return os.path.normpath(path if os.path.isabs(path) else os.path.join(base_dir or folder, path))

    return ET.tostring(tree.getroot(), encoding="unicode"), resolve


def skip_carrier(labels: list[str]) -> list[int]:
    """Newton body indices of every body but a carrier, in import order."""
    return [k for k, label in enumerate(labels) if not label.endswith(CARRIER_SUFFIX)]


def ball_coordinates(nm, m, body_index) -> tuple[tuple[int, int, int, int], ...]:
    """(canonical qpos address, dof address, Newton q start, Newton qd start) of each ball joint."""
    child = nm.joint_child.numpy()
    q_start, qd_start = nm.joint_q_start.numpy(), nm.joint_qd_start.numpy()
    out = []
    for j in range(m.njnt):
        if int(m.jnt_type[j]) == BALL:
            nj = int(np.flatnonzero(child == body_index[int(m.jnt_bodyid[j]) - 1])[0])
            out.append((int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j]), int(q_start[nj]), int(qd_start[nj])))
    return tuple(out)


def put_balls(balls, qpos, qvel, q, qd) -> None:
    """Canonical ball coordinates into Newton's (``q``, ``qd`` changed in place)."""
    for qadr, dadr, nq, nqd in balls:
        quat = qpos[qadr:qadr + 4] / np.linalg.norm(qpos[qadr:qadr + 4])
        q[nq:nq + 4] = (*quat[1:], quat[0])
        qd[nqd:nqd + 3] = quat_rotate(quat, qvel[dadr:dadr + 3])  # child frame -> parent frame


def read_balls(balls, q, qd, qpos, qvel) -> None:
    """Newton's ball coordinates into canonical ``qpos``/``qvel`` (changed in place)."""
    for qadr, dadr, nq, nqd in balls:
        quat = xyzw_to_wxyz(np.asarray(q[nq:nq + 4], float))
        qpos[qadr:qadr + 4] = quat
        qvel[dadr:dadr + 3] = quat_to_matrix(quat).T @ np.asarray(qd[nqd:nqd + 3], float)
