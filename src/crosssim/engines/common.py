"""What every adapter and the control step share: the canonical model an adapter reconciles to,
and the check that a frame is finite."""

from __future__ import annotations

from crosssim.errors import EngineFailure
from crosssim.frame import SimFrame
from crosssim.variant import CompiledModel


def compiled_canonical(compiled: CompiledModel):
    """The canonical parameters of ``compiled`` *with its variant applied*: what an adapter
    reconciles to and audits against (a calibrated or perturbed column holds the variant's masses,
    friction and joint parameters, not the scene's). Call it before an adapter changes
    ``compiled.mj`` (MuJoCo's adapter zeroes native actuator gains)."""
    from crosssim.scene import canonical_from_mj, canonical_model

    if compiled.variant == type(compiled.variant)():  # unvaried: the cached scene model
        return canonical_model(compiled.scene)
    return canonical_from_mj(compiled.mj, compiled.scene)


def check_finite(frame: SimFrame, engine: str) -> None:
    """Raise EngineFailure naming ``engine`` and the time [s] when ``frame`` holds a NaN or inf."""
    if not frame.is_finite():
        raise EngineFailure(f"{engine}: diverged (NaN) at t = {frame.time:.3f} s")
