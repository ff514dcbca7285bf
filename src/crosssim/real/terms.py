"""What each policy input needs from a real log, and how far two of its series differ: shared by
the conformance check (crosssim.real.conformance) and the ranked card suspects (crosssim.diagnose)."""

from __future__ import annotations

import numpy as np

NEEDS = {"base_lin_vel": "vel", "base_ang_vel": "gyro", "projected_gravity": "quat", "base_euler": "quat",
         "base_height": "pos"}
"""Log groups a term needs beyond the joints."""
SENSOR_NEEDS = {"gyro": "gyro", "frameangvel": "gyro", "velocimeter": "vel", "framelinvel": "vel", "framepos": "pos",
                "framequat": "quat", "framexaxis": "quat", "frameyaxis": "quat", "framezaxis": "quat"}
"""The same for MJCF sensors (by kind), read from the logged state like every engine's."""


def log_group(harness, name: str) -> str | None:
    """The log group (``vel``, ``gyro``, ``quat``, ``pos``) that observation term ``name`` needs
    beyond the joints; None when the joints are enough (a fixed base, a joint term)."""
    if not harness.canonical.free_base:
        return None
    if name.startswith("sensor:"):
        return SENSOR_NEEDS.get(harness.sensors.types[name[len("sensor:"):]][1])
    return NEEDS.get(name)


def rms(x: np.ndarray) -> float:
    """Root mean square of ``x``; 0 for an empty array."""
    return float(np.sqrt(np.mean(np.square(x)))) if x.size else 0.0
