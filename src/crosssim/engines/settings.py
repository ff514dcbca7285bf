"""``EngineProfile``: one engine column's configuration (crosssim.profiles reads it from YAML)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from crosssim.variant import Variant


@dataclass(frozen=True)
class EngineProfile:
    """Settings of one engine column: which engine, and how it is configured.

    Loaded from ``simulators/<name>.yaml`` (crosssim.profiles): its settings are split there
    into the typed ``variant`` (timestep, scales, motor strength, latency: what a calibration
    sets) and the engine's own ``settings`` (solver, iterations, contact parameters), which the
    engine class lists in ``settings_keys``.
    """

    name: str
    """Column name in results, e.g. ``mujoco`` or ``newton-featherstone``."""
    engine: str
    """Registered engine this profile configures."""
    settings: dict = field(default_factory=dict)
    """Engine-specific settings only (never variant keys)."""
    python: str | None = None
    """Interpreter for this column's worker (e.g. Isaac Sim's Python 3.12); None: crosssim's own."""
    variant: Variant = Variant()
    """Calibration of this column: every condition's perturbation is applied on top of it."""
    path: Path | None = None
    """The YAML file it was read from (None: built in code or the adapter's defaults)."""
