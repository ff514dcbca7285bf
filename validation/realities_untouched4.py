"""Held-out realities of the fourth untouched part: the test of the deployment rehearsal (issue 33).

Written and sealed 2026-12-03, before the rehearsal verdict (src/crosssim/rehearsal.py, the class
bands of docs/risk.md) was scored on any policy. Mechanisms that neither crosssim's ladders and
rehearsal axes (motor strength and lag, latency, sensor noise, ground friction, mass, contact
softness, pushes, gear play, dropped frames, actuator nets) nor any earlier realities
(realities.py, realities_heldout.py, realities_heldout2.py, realities_heldout3.py: backlash, voltage
sag, jitter, dropped frames, bumps, saturation, cogging, quantization, overruns, asymmetric strength,
joint stiffness, torque noise, velocity skew, gyro range, a tether, heavy feet) use:

- actuation: **reflected rotor inertia** added to every actuated joint (MuJoCo's ``armature``: a
  gearmotor whose rotor, seen through its gear ratio, the model does not carry) and **viscous
  damping** added to every actuated joint (back-EMF and gearbox losses that the model's own damping
  does not have).
- sensing: **encoder offsets** (each actuated joint's position, and any other joint outside the
  root body, reads a constant bias drawn per episode: an absolute encoder calibrated before a
  reassembly) and an **IMU mounting tilt** (the root body's own hinge, the torso pitch of a
  planar robot, reads a constant bias of fixed size whose sign is drawn per episode; a cart-pole's
  cart has no hinge and no IMU, its pole angle is an encoder).
- environment: a **ground slope** (gravity tilted so that +x is uphill; for a cart-pole, a tilted
  track). One mechanism: the centre-of-mass shift first written here is the design realities'
  payload offset (realities.py), and this file's test refuses a mechanism an earlier part used.
- all: every mechanism at once.

Values from physical reasoning, fixed before any run, no screening: added armature 0.002 s^2 x each
motor's peak torque (a rotor that the peak torque alone accelerates at 500 rad/s^2), damping that
costs 5 % of the peak at 5 rad/s, encoder offsets uniform in +-0.05 rad (+-3 deg), an IMU tilt of
0.05 rad, a 5 deg slope. Nothing in
src/crosssim imports this module. Episodes return (return, steps, ended early) so that the truth is
failure-aware like the verdict it tests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import mujoco
import numpy as np

from crosssim.engines.base import EngineProfile
from crosssim.engines.mujoco import EngineMuJoCo
from crosssim.errors import EngineFailure
from crosssim.scene import load_mujoco_model
from crosssim.variant import CompiledModel, ModelVariant


@dataclass(frozen=True)
class Untouched4Reality:
    name: str
    family: str
    # actuation
    armature: float = 0.0
    """[s^2] added reflected rotor inertia of every actuated joint, per N m (or N) of its motor's
    peak torque: the joint's armature grows by this x the peak."""
    damping: float = 0.0
    """Added viscous damping of every actuated joint: the torque it costs at 5 rad/s (or 5 m/s), as a
    share of the motor's peak torque."""
    # sensing
    encoder_offset: float = 0.0
    """[rad or m] half-width of the uniform per-episode bias on encoder readings (actuated joints and
    joints outside the root body)."""
    imu_tilt: float = 0.0
    """[rad] size of the bias on the root body's own hinge readings (sign drawn per episode)."""
    # environment
    slope: float = 0.0
    """[rad] ground inclination: gravity tilted so that +x is uphill."""


NOMINAL = Untouched4Reality("untouched4-nominal", "none")
ACTUATION = Untouched4Reality("untouched4-actuation", "actuation", armature=0.002, damping=0.05)
SENSING = Untouched4Reality("untouched4-sensing", "timing", encoder_offset=0.05, imu_tilt=0.05)
ENVIRONMENT = Untouched4Reality("untouched4-environment", "contact", slope=float(np.deg2rad(5.0)))
ALL = replace(ACTUATION, **{k: v for r in (SENSING, ENVIRONMENT) for k, v in r.__dict__.items()
                            if k not in ("name", "family") and v != getattr(NOMINAL, k)}, name="untouched4-all", family="all")
REALITIES = (ACTUATION, SENSING, ENVIRONMENT, ALL)
"""Families as crosssim names them (sensing mechanisms belong to its timing-and-sensing family,
environment ones to its contact-and-environment family)."""

MECHANISMS = {
    "actuation": ("armature", "damping"),
    "timing": ("encoder_offset", "imu_tilt"),
    "contact": ("slope",),
}


def root_body(m) -> int:
    """The first body below the world that carries a joint (the torso; the cart of a pendulum)."""
    return int(m.jnt_bodyid[0]) if m.njnt else 1


def sensed_joints(m, actuated_dofs) -> tuple[np.ndarray, np.ndarray]:
    """(qpos addresses with an encoder, qpos addresses of the root's hinges read by an IMU)."""
    root = root_body(m)
    hinge, slide = int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)
    encoders, imu = [], []
    for j in range(m.njnt):
        t = int(m.jnt_type[j])
        if t not in (hinge, slide):
            continue
        adr, dof = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
        if dof in actuated_dofs or int(m.jnt_bodyid[j]) != root:
            encoders.append(adr)
        elif t == hinge:
            imu.append(adr)
    return np.array(encoders, dtype=int), np.array(imu, dtype=int)


def compile_model(scene, r: Untouched4Reality, *, dofs=(), peak=None):
    """The scene's MjModel with ``r``'s model changes on the actuated ``dofs`` (peak torques ``peak``)."""
    m = load_mujoco_model(scene)
    dofs = np.asarray(dofs, dtype=int)
    peak = np.asarray(peak if peak is not None else [], dtype=float)
    if r.armature:
        m.dof_armature[dofs] += r.armature * peak
    if r.damping:
        m.dof_damping[dofs] += r.damping * peak / 5.0
    if r.slope:
        g = float(np.linalg.norm(m.opt.gravity))
        m.opt.gravity[:] = (-g * np.sin(r.slope), 0.0, -g * np.cos(r.slope))
    return m


def build(harness, r: Untouched4Reality, peak: np.ndarray):
    act = harness.actuation
    m = compile_model(harness.scene, r, dofs=act.dof_index, peak=peak)
    if harness.card is not None and harness.card.physics_timestep:
        m.opt.timestep = harness.card.physics_timestep
    engine = EngineMuJoCo()
    return engine, engine.load(CompiledModel(harness.scene, m, ModelVariant()), EngineProfile("untouched4", "mujoco"))


class Sensors:
    """What the policy reads: encoder and IMU readings with this episode's biases."""

    def __init__(self, r: Untouched4Reality, m, actuated_dofs):
        self.r = r
        self.encoders, self.imu = sensed_joints(m, set(int(d) for d in actuated_dofs))
        self.bias = np.zeros(m.nq)

    def reset(self, seed: int) -> None:
        rng = np.random.default_rng([seed, 404])
        self.bias[:] = 0.0
        if self.r.encoder_offset:
            self.bias[self.encoders] = rng.uniform(-self.r.encoder_offset, self.r.encoder_offset, len(self.encoders))
        if self.r.imu_tilt:
            self.bias[self.imu] = self.r.imu_tilt * rng.choice([-1.0, 1.0])

    def __call__(self, frame):
        if not self.bias.any():
            return frame
        return replace(frame, qpos=frame.qpos + self.bias, derived=None)


def run_untouched4(harness, policy, r: Untouched4Reality, *, episode_seeds,
                   max_steps: int | None = None) -> list[tuple[float, int, bool]]:
    """(return, control steps, ended early) of ``policy`` in reality ``r``, one per seed (initial
    states drawn as crossval draws them). ``NOMINAL`` runs the same loop with no mechanism."""
    task, c, act = harness.task, harness.canonical, harness.actuation
    if act.mode != "motor":
        raise ValueError("the fourth part's realities model torque motors (gymnasium tasks) only")
    peak = np.abs(act.gear) * np.maximum(np.abs(act.ctrl_low), np.abs(act.ctrl_high))
    engine, model = build(harness, r, peak)
    m = model.mj
    dt = float(m.opt.timestep)
    sensors = Sensors(r, m, act.dof_index)
    limit = max_steps or task.max_steps
    out = []
    for seed in episode_seeds:
        rng = np.random.default_rng(seed)
        state = engine.reset(model, task.initial_state(c, rng))
        frame = engine.frame(model, state, contacts=task.needs_contacts)
        ts = task.reset(frame)
        policy.reset()
        sensors.reset(seed)
        seen = task.observe(sensors(frame), ts)
        total, steps, early = 0.0, 0, False
        for _ in range(limit):
            action = np.asarray(policy.act(seen), dtype=float)
            if harness.card is not None and harness.card.action.clip is not None:
                action = np.clip(action, *harness.card.action.clip)
            ctrl = act.target(action)
            try:
                for _ in range(task.frame_skip):
                    q, qd = engine.joint_state(model, state)
                    engine.step(model, state, act.torques(ctrl, q, qd), 1)
            except EngineFailure:  # the simulated robot blew up: a failure
                early = True
                break
            after = engine.frame(model, state, contacts=task.needs_contacts)
            if not after.is_finite():
                early = True
                break
            step = task.step(frame, after, action, ts, task.frame_skip * dt)
            total += step.reward
            steps += 1
            frame = after
            seen = task.observe(sensors(frame), ts)
            if step.terminated:
                early = True
                break
        out.append((float(total), steps, bool(early)))
    return out
