"""Perturbations applied identically in every engine, grouped in families of real-world gap.

Harness-level perturbations (motor strength, motor lag, torque limit, action latency,
observation noise, physics dt) live in the shared rollout, so every engine sees the same ones
by construction. Model-level ones (friction, mass) are applied to the compiled model before an
adapter builds its engine (``apply_model_scales``), so they too are one piece of code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Perturbation:
    motor_strength: float = 1.0
    """Scale on every joint torque (0.8 = motors 20% weaker)."""
    motor_lag: float = 0.0
    """First-order lag time constant on applied torques [s]."""
    torque_limit: float | None = None
    """Clip torques to this fraction of each actuator's maximum (gear x ctrl range)."""
    action_latency: int = 0
    """Actions reach the motors this many control steps late."""
    obs_noise: float = 0.0
    """Standard deviation of Gaussian noise added to every observation value (raw units)."""
    dt_divisor: int = 1
    """Physics timestep divided by this (frame skip multiplied by it: same control period)."""
    friction_scale: float = 1.0
    """Scale on every geom's sliding friction."""
    mass_scale: float = 1.0
    """Scale on every body's mass and inertia."""

    @property
    def is_nominal(self) -> bool:
        return self == Perturbation()

    def model_settings(self) -> dict:
        """Settings an engine applies when it builds its model."""
        out = {}
        if self.friction_scale != 1.0:
            out["friction_scale"] = self.friction_scale
        if self.mass_scale != 1.0:
            out["mass_scale"] = self.mass_scale
        if self.dt_divisor != 1:
            out["dt_divisor"] = self.dt_divisor
        return out

    def to_dict(self) -> dict:
        return asdict(self)


# The gap each family stands for, at the "nominal gap" intensity (level 1). Values are typical
# sim-to-real discrepancies reported for small legged robots; docs/risk.md explains the choice.
FAMILIES: dict[str, Perturbation] = {
    "actuation": Perturbation(motor_strength=0.85, motor_lag=0.01, torque_limit=0.9),
    "timing": Perturbation(action_latency=1, obs_noise=0.02),
    "contact": Perturbation(friction_scale=0.7, mass_scale=1.1),
}


def combined(families: dict[str, Perturbation] = FAMILIES) -> Perturbation:
    """Every family's gap at once."""
    out = Perturbation()
    for p in families.values():
        changes = {k: v for k, v in asdict(p).items() if v != getattr(Perturbation(), k)}
        out = replace(out, **changes)
    return out


def at_level(p: Perturbation, level: float) -> Perturbation:
    """``p`` with its distance from nominal scaled by ``level`` (0 = nominal, 2 = twice the gap)."""
    base = Perturbation()
    out = {}
    for k, v in asdict(p).items():
        b = getattr(base, k)
        if v == b or v is None:
            out[k] = v
        elif k == "action_latency" or k == "dt_divisor":
            out[k] = max(int(round(b + (v - b) * level)), 0 if k == "action_latency" else 1)
        elif k == "torque_limit":
            out[k] = float(max(1.0 - (1.0 - v) * level, 0.05))
        else:
            out[k] = float(max(b + (v - b) * level, 0.01))
    return Perturbation(**out)


def apply_model_scales(m, settings: dict) -> None:
    """Apply model-level perturbation settings to a MuJoCo ``MjModel`` in place."""
    mass = float(settings.get("mass_scale", 1.0))
    if mass != 1.0:
        m.body_mass[:] = m.body_mass * mass
        m.body_inertia[:] = m.body_inertia * mass
    friction = float(settings.get("friction_scale", 1.0))
    if friction != 1.0:
        m.geom_friction[:, 0] = m.geom_friction[:, 0] * friction
    divisor = int(settings.get("dt_divisor", 1))
    if divisor != 1:
        m.opt.timestep = m.opt.timestep / divisor
    # Joint parameters a calibrated profile (crosssim calibrate, docs/real.md) may scale.
    for key, field_name in JOINT_SCALES.items():
        scale = float(settings.get(key, 1.0))
        if scale != 1.0:
            values = getattr(m, field_name)
            values[:] = values * scale


JOINT_SCALES = {"damping_scale": "dof_damping", "armature_scale": "dof_armature",
                "frictionloss_scale": "dof_frictionloss"}
"""Profile settings that scale a MuJoCo per-dof array (every dof)."""

MODEL_SCALES = ("friction_scale", "mass_scale", "dt_divisor", *JOINT_SCALES)
"""Model-level settings that compose by multiplication (profile x perturbation)."""


def merge_model_settings(settings: dict, p: "Perturbation") -> dict:
    """A profile's settings with ``p``'s model-level settings on top: scales multiply, so a
    perturbation of a calibrated profile is a gap from the calibrated model, not the canonical one."""
    out = dict(settings)
    for key, value in p.model_settings().items():
        out[key] = type(value)(value * settings.get(key, 1)) if key in MODEL_SCALES else value
    return out


def with_profile(p: "Perturbation", settings: dict | None) -> "Perturbation":
    """``p`` on top of a profile's harness-level settings (a calibrated profile's motor strength,
    latency, lag): strengths multiply, latencies and lags add, torque limits take the tighter."""
    s = settings or {}
    if not any(k in s for k in ("motor_strength", "motor_lag", "action_latency", "torque_limit")):
        return p
    limit = s.get("torque_limit")
    if limit is not None and p.torque_limit is not None:
        limit = min(float(limit), p.torque_limit)
    return replace(p, motor_strength=p.motor_strength * float(s.get("motor_strength", 1.0)),
                   motor_lag=p.motor_lag + float(s.get("motor_lag", 0.0)),
                   action_latency=p.action_latency + int(s.get("action_latency", 0)),
                   torque_limit=p.torque_limit if limit is None else float(limit))


class ActuatorChain:
    """Harness-level actuation perturbations, stepped at physics rate."""

    def __init__(self, p: Perturbation, max_torque: np.ndarray, physics_dt: float, joint_count: int):
        self.p = p
        self.limit = None if p.torque_limit is None else p.torque_limit * max_torque
        self.alpha = 1.0 if p.motor_lag <= 0 else physics_dt / (p.motor_lag + physics_dt)
        self.applied = np.zeros(joint_count)
        self.identity = p.motor_strength == 1.0 and self.limit is None and self.alpha == 1.0

    @property
    def stateful(self) -> bool:
        return self.alpha < 1.0

    def __call__(self, tau: np.ndarray) -> np.ndarray:
        if self.identity:
            return tau
        tau = tau * self.p.motor_strength
        if self.limit is not None:
            tau = np.clip(tau, -self.limit, self.limit)
        if self.alpha < 1.0:
            self.applied = self.applied + self.alpha * (tau - self.applied)
            return self.applied.copy()
        return tau


@dataclass(frozen=True)
class RandomizationRanges:
    """Domain-randomisation ranges for training (uniform draws per episode)."""

    motor_strength: tuple[float, float] = (0.8, 1.2)
    motor_lag: tuple[float, float] = (0.0, 0.02)
    action_latency: tuple[int, int] = (0, 1)
    obs_noise: tuple[float, float] = (0.0, 0.03)
    friction_scale: tuple[float, float] = (0.5, 1.5)
    mass_scale: tuple[float, float] = (0.85, 1.15)

    def __call__(self, rng: np.random.Generator) -> Perturbation:
        u = lambda r: float(rng.uniform(*r))  # noqa: E731
        # Mass and friction rebuild the engine model: draw them on a coarse grid so that
        # consecutive episodes often reuse one model.
        coarse = lambda r: float(np.round(rng.uniform(*r), 1))  # noqa: E731
        return Perturbation(motor_strength=u(self.motor_strength), motor_lag=u(self.motor_lag),
                            action_latency=int(rng.integers(self.action_latency[0], self.action_latency[1] + 1)),
                            obs_noise=u(self.obs_noise), friction_scale=coarse(self.friction_scale),
                            mass_scale=coarse(self.mass_scale))
