"""Perturbations applied identically in every engine, grouped in families of real-world gap.

A Perturbation is the sweepable subset of a :class:`crosssim.variant.Variant`, flat so that it
scales by level and stores as one row of fields. Harness-level fields (motor strength, motor
lag, torque limit, action latency, observation noise) act in the shared control step, so every
engine sees the same ones by construction; model-level ones (friction, mass, physics dt) are
compiled into the MuJoCo model every adapter builds from (``crosssim.variant.compile_model``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from crosssim.variant import HARNESS_FIELDS, MODEL_FIELDS, HarnessVariant, ModelVariant, Variant


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
    action_delay: float = 0.0
    """A further delay [control steps, fractional], on top of ``action_latency``: a sub-step
    latency (0.5: the previous action acts for half of each control period)."""
    obs_noise: float = 0.0
    """Standard deviation of Gaussian noise added to every observation value (raw units)."""
    dt_divisor: int = 1
    """Physics timestep divided by this (frame skip multiplied by it: same control period)."""
    friction_scale: float = 1.0
    """Scale on every geom's sliding friction."""
    mass_scale: float = 1.0
    """Scale on every body's mass and inertia."""
    actuator: str | None = None
    """Actuator model file (crosssim.actuators): a learned actuator net or a YAML spec; None: ideal law."""
    motor_free_speed: float | None = None
    """DC-motor torque-speed envelope: joint speed [rad/s] where the available torque reaches zero."""
    push_impulse: float = 0.0
    """Horizontal impulse [N s] on a free base at fixed times of each episode (HarnessVariant)."""
    term_noise: tuple[tuple[str, float], ...] = ()
    """Noise std on named observation terms, in each term's own units (HarnessVariant)."""
    backlash: float = 0.0
    """Gear play [s]: no torque reaches a joint for this long after its torque changes sign."""
    obs_drop: float = 0.0
    """Probability that a control period's observation is lost (the previous one is read again)."""

    def __post_init__(self):  # fields that crossed a process boundary as JSON come back as lists
        if not isinstance(self.term_noise, tuple) or any(not isinstance(t, tuple) for t in self.term_noise):
            object.__setattr__(self, "term_noise", tuple((str(n), float(v)) for n, v in self.term_noise))

    @property
    def is_nominal(self) -> bool:
        return self == Perturbation()

    def variant(self) -> Variant:
        """This perturbation as a variant: model fields compiled into the model, the rest harness."""
        values = asdict(self)
        return Variant(ModelVariant(**{k: v for k, v in values.items() if k in MODEL_FIELDS}),
                       HarnessVariant(**{k: v for k, v in values.items() if k in HARNESS_FIELDS}))

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
        elif k == "actuator":  # a file is there or not
            out[k] = v if level > 0 else None
        elif k == "motor_free_speed":  # twice the gap: half the free speed
            out[k] = float(v / level) if level > 0 else None
        elif k == "action_latency" or k == "dt_divisor":
            out[k] = max(int(round(b + (v - b) * level)), 0 if k == "action_latency" else 1)
        elif k == "torque_limit":
            out[k] = float(max(1.0 - (1.0 - v) * level, 0.05))
        else:
            out[k] = float(max(b + (v - b) * level, 0.01))
    return Perturbation(**out)


class ActuatorChain:
    """Harness-level actuation perturbations, stepped at physics rate."""

    def __init__(self, p: HarnessVariant, max_torque: np.ndarray, physics_dt: float, joint_count: int):
        self.p = p
        self.limit = None if p.torque_limit is None else p.torque_limit * max_torque
        self.alpha = 1.0 if p.motor_lag <= 0 else physics_dt / (p.motor_lag + physics_dt)
        self.applied = np.zeros(joint_count)
        self.dt = physics_dt
        self.side, self.gap_left = np.zeros(joint_count), np.zeros(joint_count)
        """Backlash: the side each joint's gears last pushed on, and the play still to cross [s]."""
        self.identity = p.motor_strength == 1.0 and self.limit is None and self.alpha == 1.0 and p.backlash <= 0

    @property
    def stateful(self) -> bool:
        return self.alpha < 1.0 or self.p.backlash > 0

    def __call__(self, tau: np.ndarray) -> np.ndarray:
        if self.identity:
            return tau
        tau = tau * self.p.motor_strength
        if self.limit is not None:
            tau = np.clip(tau, -self.limit, self.limit)
        if self.alpha < 1.0:
            self.applied = self.applied + self.alpha * (tau - self.applied)
            tau = self.applied.copy()
        if self.p.backlash > 0:
            tau = self._play(tau)
        return tau

    def _play(self, tau: np.ndarray) -> np.ndarray:
        """Gear play after the motor: when a joint's torque changes sign, the gears cross their gap
        (``backlash`` seconds) before torque reaches the joint again; a physics step partly inside
        the gap passes the share of the step left after it."""
        sign = np.sign(tau)
        reversed_ = (sign != 0) & (self.side != 0) & (sign != self.side)
        self.gap_left[reversed_] = self.p.backlash
        self.side[sign != 0] = sign[sign != 0]
        engaged = 1.0 - np.clip(self.gap_left / self.dt, 0.0, 1.0)
        self.gap_left = np.maximum(self.gap_left - self.dt, 0.0)
        return tau * engaged


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
