"""Scripted experts for the Fetch tasks (crosssim.tasks.fetch): trusted callables a card names with
``policy: {format: callable, file: "crosssim.tasks.fetch_expert:pick_and_place"}`` and runs with
``--trust-policy-code``.

gymnasium-robotics ships no expert for Fetch (Meta-World does, but pins mujoco 3.3.0;
docs/manipulation.md); these follow the usual scripted pick-and-place of the HER demonstrations
(approach above the block, descend open, close, carry to the goal). Both are memoryless: every
action is a function of the observation alone, so episodes run in lockstep and a run is
reproducible from its seed.

Observation layout (31 values, gymnasium's flattening of the benchmark's dict): achieved goal 0-2,
desired goal 3-5, grip position 6-8, block position 9-11, block minus grip 12-14, finger positions
15-16, then rotations and velocities.
"""

from __future__ import annotations

import numpy as np

GAIN = 10.0
"""Action per metre of position error (1 action unit moves the mocap 5 cm)."""
ABOVE = 0.05
"""Height above the block the grip approaches first [m]."""
OPEN_WIDTH = 0.06
"""Finger opening [m] (sum of both finger joints) below which the gripper counts as closed on the 5 cm block."""


def _move(error: np.ndarray, grip: float) -> np.ndarray:
    return np.concatenate([np.clip(GAIN * error, -1.0, 1.0), [grip]])


def pick_and_place(obs: np.ndarray) -> np.ndarray:
    """One action of the pick-and-place expert: [dx, dy, dz, gripper] in [-1, 1]."""
    obs = np.asarray(obs, dtype=float)
    goal, grip, block, rel = obs[3:6], obs[6:9], obs[9:12], obs[12:15]
    width = obs[15] + obs[16]
    xy = float(np.linalg.norm(rel[:2]))
    if width < OPEN_WIDTH and xy < 0.02 and abs(rel[2]) < 0.02:  # closed on the block: carry it
        return _move(goal - block, -1.0)
    if xy < 0.01 and abs(rel[2]) < 0.01:  # between the fingers: close
        return np.array([0.0, 0.0, 0.0, -1.0])
    if xy < 0.01:  # above it: descend, open
        return _move(rel, 1.0)
    return _move(block + np.array([0.0, 0.0, ABOVE]) - grip, 1.0)  # approach from above, open


def push(obs: np.ndarray) -> np.ndarray:
    """One action of the push expert (gripper held shut by the task): rise clear of the block, go
    behind it on the line from the goal, lower to its height, push it along that line."""
    obs = np.asarray(obs, dtype=float)
    goal, grip, block = obs[3:6], obs[6:9], obs[9:12]
    line = goal[:2] - block[:2]
    dist = float(np.linalg.norm(line))
    if dist < 1e-6:
        return np.zeros(4)
    u = line / dist
    offset = grip[:2] - block[:2]
    along = float(np.dot(offset, u))
    off_line = float(np.linalg.norm(offset - along * u))
    low = grip[2] < block[2] + 0.02
    if low and off_line < 0.02 and -0.08 < along < -0.02:  # behind the block, at its height: push
        target = np.concatenate([goal[:2] - 0.03 * u, [block[2]]])
        return _move(target - grip, 0.0)
    behind = block[:2] - 0.06 * u
    clear = block[2] + 0.08
    if np.linalg.norm(grip[:2] - behind) > 0.01:
        if grip[2] < clear - 0.01:  # rise first: never sweep across the block
            return _move(np.array([0.0, 0.0, clear - grip[2]]), 0.0)
        return _move(np.concatenate([behind - grip[:2], [clear - grip[2]]]), 0.0)
    return _move(np.concatenate([behind - grip[:2], [block[2] - grip[2]]]), 0.0)  # lower behind it
