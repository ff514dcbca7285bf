"""One engine column opened under one variant: the engine, its model, and what the control step
needs to know about them (the harness part of the variant, the compiled physics step)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crosssim.actuators import servo_replaced
from crosssim.engines import Engine, EngineProfile, get_engine
from crosssim.errors import EngineFailure
from crosssim.variant import CONTACT_SOFTNESS, Variant, compile_model


@dataclass
class Simulator:
    """An engine with a model built from a compiled variant; ``close()`` releases it."""

    engine: Engine
    model: Any
    """The engine's model handle (``engine.load``'s result)."""
    name: str
    """Column name (the profile's), used in failure messages and rows."""
    variant: Variant
    """Calibration with the perturbation on top; its model part is already in ``model``."""
    physics_dt: float
    """Physics step [s] of the compiled model the engine was built from."""

    def close(self) -> None:
        self.engine.close(self.model)


def open_engine(profile: EngineProfile, scene, perturbation: Variant | None = None, *,
                base: Variant | None = None) -> Simulator:
    """Compile ``scene`` with ``base`` (the card's own model changes: ``Harness.model_variant``),
    the profile's variant on top of it and ``perturbation`` on top of that, and build the engine
    from it. EngineUnavailable propagates with its install hint (the profile's settings were
    typed, and a key the engine does not read refused, when the profile was read)."""
    engine = get_engine(profile.engine)
    _check_base(engine, profile, scene)
    variant = servo_replaced((base or Variant()).then(profile.variant).then(perturbation or Variant()))
    compiled = compile_model(scene, variant.model)
    check_features(engine, compiled, profile.name)
    return Simulator(engine, engine.load(compiled, profile), profile.name, variant, compiled.timestep)


def check_features(engine: Engine, compiled, column: str) -> None:
    """Refuse, in one line, a scene that needs a feature ``engine`` does not declare (its capabilities):
    run without it, the engine would simulate another robot and call it this one."""
    opt = compiled.mj.opt
    soft = [f"{k} {getattr(compiled.variant, k):g}" for k in CONTACT_SOFTNESS if getattr(compiled.variant, k) is not None]
    if soft and not engine.capabilities.contact_softness:
        raise EngineFailure(f"{column}: {engine.name} cannot build contact softness ({', '.join(soft)}): its contacts "
                            "have no MuJoCo solref counterpart (docs/risk.md, 'Contact softness'); run that axis in "
                            "mujoco or newton")
    if (opt.viscosity > 0 or opt.density > 0) and not engine.capabilities.fluid:
        raise EngineFailure(f"{column}: {compiled.scene.name} moves in a fluid (viscosity {opt.viscosity:g}, density "
                            f"{opt.density:g}) and {engine.name} has no fluid model; run it in mujoco")


def _check_base(engine, profile: EngineProfile, scene) -> None:
    """Refuse, in one line, a robot whose base has a joint kind the engine cannot build."""
    from pathlib import Path

    from crosssim.errors import CrossSimError
    from crosssim.scene import canonical_model

    balls = canonical_model(Path(scene)).ball_joints
    if balls and not engine.capabilities.ball_joints:
        raise CrossSimError(f"{profile.name}: engine {engine.name} cannot build ball joints (base joint {balls[0]!r} "
                            f"of {Path(scene).name}); run this robot in mujoco, pybullet or newton, or give it a free "
                            "joint")
