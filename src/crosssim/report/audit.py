"""The parity audit for people: each quantity by name with its unit, codes by their meaning
("RK4 vs Euler", not "1 vs 0"), and per engine a summary of what does not match."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crosssim.results import AuditEntry
from crosssim.text import number

QUANTITIES = {
    "timestep": ("physics timestep", "s"),
    "integrator": ("integrator", ""),
    "body_mass": ("body mass", "kg"),
    "body_inertia": ("body inertia (principal)", "kg·m²"),
    "joint_range": ("joint range", "rad or m"),
    "joint_damping": ("joint damping", "N·m·s/rad"),
    "joint_armature": ("joint armature", "kg·m²"),
    "joint_frictionloss": ("joint dry friction", "N·m"),
    "joint_stiffness": ("joint stiffness", "N·m/rad"),
    "geom_friction": ("sliding friction against the floor", ""),
    "actuator_gear": ("actuator gear", ""),
    "gravity_z": ("gravity (z)", "m/s²"),
}
"""Audit quantity -> (name, unit); an unknown quantity is shown by its key."""

INTEGRATORS = {0: "Euler", 1: "RK4", 2: "implicit", 3: "implicitfast"}
"""MuJoCo's mjtIntegrator codes, the canonical model's and every engine's audit value."""


def value_text(quantity: str, value) -> str:
    if value is None:
        return "cannot be set"
    if quantity == "integrator" and float(value).is_integer():
        return INTEGRATORS.get(int(value), f"code {int(value)}")
    if quantity == "timestep":
        return f"{value * 1000:.4g} ms"
    unit = QUANTITIES.get(quantity, ("", ""))[1]
    text = number(value) if abs(value) >= 0.01 or value == 0 else f"{value:.3g}"
    return f"{text} {unit}".strip() if unit and unit != "rad or m" else text


@dataclass(frozen=True)
class AuditLine:
    quantity: str
    item: str
    canonical: str
    engine: str
    difference: str
    status: str
    note: str


@dataclass(frozen=True)
class AuditGroup:
    """One quantity's rows that do not match in one engine."""

    quantity: str
    count: int
    status: str
    largest: str
    """The largest difference, in words."""
    note: str


@dataclass(frozen=True)
class AuditEngine:
    engine: str
    total: int
    groups: list[AuditGroup]
    lines: list[AuditLine]


def _difference(r: AuditEntry) -> tuple[float, str]:
    c, e = r.canonical, r.engine
    if e is None or not np.isfinite(e):
        return float("inf"), "—"
    if r.quantity == "integrator":
        return float(c != e), "different method" if c != e else "same"
    if c != 0:
        rel = (e - c) / abs(c)
        return abs(rel), f"{100 * rel:+.1f} %"
    return abs(e - c), f"{e - c:+.3g}"


def audit_view(audit: dict[str, list[AuditEntry]]) -> list[AuditEngine]:
    """Per engine: the rows that do not match (named, with units) and a summary by quantity."""
    out = []
    for engine, rows in audit.items():
        bad = [r for r in rows if r.status != "ok"]
        groups, lines = [], []
        by_quantity: dict[tuple[str, str], list[AuditEntry]] = {}
        for r in bad:
            by_quantity.setdefault((r.quantity, r.status), []).append(r)
            name = QUANTITIES.get(r.quantity, (r.quantity.replace("_", " "), ""))[0]
            lines.append(AuditLine(name, r.item, value_text(r.quantity, r.canonical),
                                   value_text(r.quantity, r.engine), _difference(r)[1], r.status, r.note))
        for (quantity, status), group in by_quantity.items():
            name = QUANTITIES.get(quantity, (quantity.replace("_", " "), ""))[0]
            worst = max(group, key=lambda r: _difference(r)[0])
            if status == "MISMATCH":
                largest = (f"{worst.item}: {value_text(quantity, worst.canonical)} vs "
                           f"{value_text(quantity, worst.engine)} ({_difference(worst)[1]})")
            else:
                largest = "the engine cannot represent it"
            groups.append(AuditGroup(name, len(group), status, largest, group[0].note))
        out.append(AuditEngine(engine, len(rows), groups, lines))
    return out
