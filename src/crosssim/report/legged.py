"""The recorded episode's joint torques and foot contacts (gait diagram) for the report.

The series come from crosssim.runner.recording: ``joint_torque`` with the joints' names in
``torque_joints``, ``foot_contact`` / ``foot_force`` with the feet's names in ``feet``. A run folder
written before they were recorded, or an engine whose adapter gives no contact wrench, has none:
the report then says which engine lacks what instead of drawing an empty panel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crosssim.report import plots


@dataclass(frozen=True)
class GaitRow:
    """One engine's feet in the recorded episode."""

    engine: str
    foot: str
    duty: float
    """Share of the recorded control steps the foot is in contact [0, 1]."""
    touchdowns: int
    """Times the foot comes down (a step without contact followed by one with)."""
    peak_force: float
    """Largest contact force on the foot [N]."""


def _names(tr, key: str) -> list[str]:
    return [str(x) for x in np.asarray(tr.get(key, []))]


def torque_panels(trajs: dict, engines: list[str], ref: str | None, units: dict[str, str],
                  limits: dict[str, float] | None = None) -> tuple[list, str | None]:
    """(one panel per joint of every engine's recorded torques, a note naming the engines without
    any, or None); ``units``: joint name -> "N·m" or "N" (hinges by default); ``limits``: joint
    name -> the largest torque its actuator gives (drawn as +-limit where finite)."""
    have = [e for e in engines if "joint_torque" in trajs.get(e, {})]
    if not have:
        return [], "joint torques are not recorded in this run's trajectories (base and joint positions are; " \
                   "rerun crossval to record them)"
    names = _names(trajs[have[0]], "torque_joints") or [
        f"joint {k}" for k in range(np.asarray(trajs[have[0]]["joint_torque"]).shape[1])]

    def column(name):
        def of(tr):
            if "joint_torque" not in tr:
                return None
            own = _names(tr, "torque_joints") or names
            return np.asarray(tr["joint_torque"])[:, own.index(name)] if name in own else None
        return of

    limits = limits or {}
    panels = [(f"{n} torque", plots.time_panel(f"{n} torque", units.get(n, "N·m"), trajs, engines, ref, column(n),
                                               limit=limits.get(n))) for n in names]
    missing = [e for e in engines if e in trajs and e not in have]
    return panels, (f"no torques recorded for {', '.join(missing)}" if missing else None)


def gait(trajs: dict, engines: list[str]) -> dict:
    """The gait diagram: one panel per engine (feet x time, a bar where the foot touches), the
    per-foot table (duty factor, touchdowns, peak force), and what is missing, in words."""
    from crosssim.runner.recording import CONTACT_SHARE

    out: dict = {"panels": [], "rows": [], "missing": [], "threshold": None, "feet": [], "note": None,
                 "share": CONTACT_SHARE}
    recorded = [e for e in engines if e in trajs and len(trajs[e].get("t", []))]
    until = max((float(trajs[e]["t"][-1]) for e in recorded), default=None)  # one time axis for every engine
    for e in recorded:
        tr = trajs[e]
        if "foot_contact" not in tr:
            continue
        feet, contact = _names(tr, "feet"), np.asarray(tr["foot_contact"], bool)
        t, force = np.asarray(tr["t"], float), np.asarray(tr["foot_force"], float)
        out["feet"] = out["feet"] or feet
        out["threshold"] = float(np.asarray(tr.get("contact_threshold", [np.nan]))[0])
        out["panels"].append((e, plots.gait_panel(e, t, contact, feet, style=engines.index(e), until=until)))
        for k, foot in enumerate(feet):
            c = contact[:, k]
            out["rows"].append(GaitRow(e, foot, float(c.mean()) if len(c) else float("nan"),
                                       int(np.count_nonzero(c[1:] & ~c[:-1])), float(force[:, k].max(initial=0.0))))
    out["missing"] = [e for e in recorded if "foot_contact" not in trajs[e] and len(trajs[e].get("feet", []))]
    if not out["panels"]:
        out["note"] = _no_gait(trajs, recorded, out["missing"])
    return out


def _no_gait(trajs: dict, recorded: list[str], missing: list[str]) -> str:
    """Why there is no gait diagram, in words."""
    if not any("feet" in trajs[e] for e in recorded):
        return "foot contacts are not recorded in this run's trajectories (rerun crossval to record them)"
    if missing:
        return f"{', '.join(missing)}: the engine adapter gives no contact forces"
    return "the robot has no feet to draw (no end body of its kinematic tree has collision geometry)"


__all__ = ["GaitRow", "gait", "torque_panels"]
