"""Real robots' mechanisms the shared control step applies, the same in every engine (docs/risk.md,
"Mechanisms"): encoder offsets, Coulomb joint friction, IMU bias, dropped (held) action frames and
per-step timing jitter. Each is a HarnessVariant field (crosssim.variant); each draws from its own
random stream of the episode's seed, so adding one never shifts another's numbers, and the same
seed gives the same offsets, biases, drops and delays in every engine.

Torque-side dead band is in crosssim.perturb.ActuatorChain with the other motor perturbations.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from crosssim.errors import CrossSimError
from crosssim.frame import SimFrame

FRICTION_SPEED = 0.1
"""Joint speed [rad/s or m/s] of the Coulomb friction's smoothed sign, ``tanh(qd / FRICTION_SPEED)``:
full friction above about twice it; below, a viscous slope (friction / FRICTION_SPEED) that an
explicit physics step integrates stably for joints of small quadrupeds (0.3 N m over 0.1 rad/s is
3 N m s/rad, well under 2 I / dt for I = 0.01 kg m^2 and dt = 4 ms)."""
IMU_TERMS = ("base_ang_vel", "projected_gravity")
"""The observation terms an IMU on the base measures: a gyro [rad/s] and the gravity direction
(unitless; a bias b on a component is a tilt error of about b rad). A ``sensor:<name>`` term whose
MJCF sensor is a ``gyro`` is the gyro too."""
STREAMS = {"encoder_offset": 6, "action_drop": 7, "action_jitter": 8, "imu_bias": 9}
"""Each mechanism's side stream beside the observation noise's (crosssim.runner.stepper._stream)."""


def _rng(noise_seed, name: str) -> np.random.Generator:
    seed = None if noise_seed is None else [*np.atleast_1d(np.asarray(noise_seed, dtype=np.int64)).tolist(),
                                            STREAMS[name]]
    return np.random.default_rng(seed)


def _imu_name(term: str, sensors) -> str:
    """The IMU term a card term measures (``base_ang_vel`` for an MJCF gyro sensor), else its name."""
    if term.startswith("sensor:") and sensors is not None:
        kind = sensors.types.get(term[len("sensor:"):], (None, None))[1]
        return "base_ang_vel" if kind == "gyro" else term
    return term


class Mechanisms:
    """One stepper's mechanisms and their per-episode state (``reset`` draws it)."""

    def __init__(self, p, actuation, term_names: list[str] | None, column: str, sensors=None):
        """``p``: the HarnessVariant; ``actuation``: the harness's (its joints are the encoders'
        and the friction's); ``term_names``: the card's observation terms (None: the task's own);
        ``sensors``: the harness's SensorReader (what a ``sensor:`` term measures)."""
        self.p, self.act = p, actuation
        if not 0.0 <= p.action_drop < 1.0:
            raise CrossSimError(f"{column}: action_drop is a probability in [0, 1), not {p.action_drop!r}")
        if not 0.0 <= p.action_jitter <= 1.0:
            raise CrossSimError(f"{column}: action_jitter is at most one control period (0 to 1), not {p.action_jitter!r}")
        self._names = [_imu_name(n, sensors) for n in term_names or ()]
        self.imu_terms = [k for k, n in enumerate(self._names) if n in IMU_TERMS]
        if p.imu_bias > 0 and not self.imu_terms:
            raise CrossSimError(f"{column}: imu_bias {p.imu_bias:g} on an observation without an IMU term "
                                f"({', '.join(IMU_TERMS)}): it would change nothing; drop the axis for this card")
        self.offset = np.zeros(len(actuation.qpos_index))
        """Each policy joint's encoder offset this episode [rad or m]."""
        self._drop = self._jitter = None

    @property
    def reads_state(self) -> bool:
        """The torque law must see the encoders' reading and the friction the joint speed at every
        physics step (no engine-native PD, no torque held over a control period)."""
        return self.p.encoder_offset > 0 or self.p.joint_friction > 0

    def reset(self, noise_seed) -> dict[int, np.ndarray]:
        """Draw this episode's offsets and streams; return the IMU bias per observation term index
        (empty without one), constant over the episode."""
        p = self.p
        if p.encoder_offset > 0:
            self.offset = _rng(noise_seed, "encoder_offset").uniform(-p.encoder_offset, p.encoder_offset,
                                                                     len(self.act.qpos_index))
        self._drop = _rng(noise_seed, "action_drop") if p.action_drop > 0 else None
        self._jitter = _rng(noise_seed, "action_jitter") if p.action_jitter > 0 else None
        if p.imu_bias <= 0:
            return {}
        rng = _rng(noise_seed, "imu_bias")
        # one IMU: a term listed twice reads the same biased sensor
        per_name = {name: rng.uniform(-p.imu_bias, p.imu_bias, 3) for name in IMU_TERMS}
        return {k: per_name[self._names[k]] for k in self.imu_terms}

    # -- sensing ---------------------------------------------------------------------------------

    def sensed(self, frame: SimFrame) -> SimFrame:
        """What the robot's sensors read at ``frame``: joint positions through the encoders (the
        episode's offset on each policy joint); the true frame is the task's (reward, termination)."""
        if self.p.encoder_offset <= 0:
            return frame
        qpos = frame.qpos.copy()
        qpos[self.act.qpos_index] += self.offset
        return replace(frame, qpos=qpos, derived=None)

    def encoder_q(self, qpos: np.ndarray) -> np.ndarray:
        """The joint positions the torque law reads: the servo's PD runs on the same encoders."""
        if self.p.encoder_offset <= 0:
            return qpos
        q = np.array(qpos, dtype=float)
        q[self.act.qpos_index] += self.offset
        return q

    # -- actuation -------------------------------------------------------------------------------

    def friction(self, qvel: np.ndarray, joint_count: int) -> np.ndarray | None:
        """Coulomb friction torque on each policy joint, opposing its speed: ``-F tanh(qd / v)``
        (``FRICTION_SPEED``), one per canonical joint; None without friction."""
        if self.p.joint_friction <= 0:
            return None
        out = np.zeros(joint_count)
        out[self.act.joint_index] = -self.p.joint_friction * np.tanh(qvel[self.act.dof_index] / FRICTION_SPEED)
        return out

    def dropped(self) -> bool:
        """Whether this control period's new action is lost (the previous one stays on the motors)."""
        return self._drop is not None and bool(self._drop.random() < self.p.action_drop)

    def jitter(self) -> float:
        """This period's extra delay [control periods] before its action reaches the motors."""
        return 0.0 if self._jitter is None else float(self._jitter.uniform(0.0, self.p.action_jitter))
