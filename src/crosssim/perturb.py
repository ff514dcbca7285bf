"""What a perturbation does in the shared control step, and the domain-randomisation draws.

A perturbation is a :class:`crosssim.variant.Variant` (``Variant.of(motor_strength=0.85, ...)``):
its model part (friction, mass, physics dt) is compiled into the MuJoCo model every adapter builds
from (``crosssim.variant.compile_model``); its harness part (motor strength, lag, torque limit,
dead band, backlash) acts here, in :class:`ActuatorChain`, so every engine sees the same one by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from crosssim.variant import HarnessVariant, Variant


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
        self.identity = p.motor_strength == 1.0 and self.limit is None and self.alpha == 1.0 and p.backlash <= 0 \
            and p.deadband <= 0

    @property
    def stateful(self) -> bool:
        return self.alpha < 1.0 or self.p.backlash > 0

    def __call__(self, tau: np.ndarray) -> np.ndarray:
        if self.identity:
            return tau
        tau = tau * self.p.motor_strength
        if self.limit is not None:
            tau = np.clip(tau, -self.limit, self.limit)
        if self.p.deadband > 0:  # the driver's dead zone: magnitude below it never reaches the motor
            tau = np.sign(tau) * np.maximum(np.abs(tau) - self.p.deadband, 0.0)
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

    def __call__(self, rng: np.random.Generator) -> Variant:
        u = lambda r: float(rng.uniform(*r))  # noqa: E731
        # Mass and friction rebuild the engine model: draw them on a coarse grid so that
        # consecutive episodes often reuse one model.
        coarse = lambda r: float(np.round(rng.uniform(*r), 1))  # noqa: E731
        return Variant.of(motor_strength=u(self.motor_strength), motor_lag=u(self.motor_lag),
                          action_latency=int(rng.integers(self.action_latency[0], self.action_latency[1] + 1)),
                          obs_noise=u(self.obs_noise), friction_scale=coarse(self.friction_scale),
                          mass_scale=coarse(self.mass_scale))
