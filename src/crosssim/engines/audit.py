"""``AuditRow``: one physical parameter as the engine reads it back, beside its canonical value."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AuditRow:
    """One physical parameter, canonical value next to what the engine reports back."""

    quantity: str
    """e.g. ``body_mass``, ``joint_damping``."""
    item: str
    """Body, joint or actuator name (or ``model``)."""
    canonical: float
    engine: float | None
    """Value read back from the engine; None where the engine cannot represent it."""
    tolerance: float
    note: str = ""

    @property
    def status(self) -> str:
        if self.engine is None:  # cannot be represented: harmless only where it is zero
            return "ok" if self.canonical == 0 else "unsupported"
        if not np.isfinite(self.engine) or abs(self.engine - self.canonical) > self.tolerance:
            return "MISMATCH"
        return "ok"
