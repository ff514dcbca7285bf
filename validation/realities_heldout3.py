"""Held-out realities of the third untouched part (bench/train_population.py's ``untouched3``:
Walker2d and Ant policies nobody has looked at). Mechanisms that neither crosssim's sweeps and
perturbations (src/crosssim/sweep.py, perturb.py: motor strength, torque lag, latency, white noise,
friction, mass scale, pushes, gear play, dropped frames), nor the selection realities
(bench/realities.py), nor the first two held-out sets (bench/realities_heldout.py,
bench/realities_heldout2.py) use: this part must stay a test of kinds of harm the design never saw.

- actuation: direction-dependent strength (each motor delivers less torque one way than the
  other: a worn gear stage, a driver with asymmetric current limits), parallel joint stiffness
  (cable harnesses and covers pull every actuated joint back towards its reference position) and
  torque noise (a noisy current loop: each control period's torques are scaled by a random factor).
- timing (and sensing): velocity skew (joint and body velocities reach the policy one control
  period later than positions: a velocity estimator on a slower bus) and a gyro-range limit
  (every angular velocity the policy reads is clipped at the sensor's range).
- contact (and inertia): a tether (a constant backward pull on the root body, a share of the
  robot's weight: a safety or power cable dragged behind) and heavy feet (the distal links carry
  extra mass: boots, foot sensors).
- all: every mechanism at once.

Values from physical reasoning, before any run: 30 % less torque in one direction, a joint
stiffness that pulls with 10 % of the motor's peak at 0.5 rad, 10 % torque noise, one period of
velocity skew, a 250 deg/s gyro (4.36 rad/s, a common low-end MEMS range), a tether pulling with
5 % of the weight, feet 30 % heavier. Then bench/screen_heldout3.py's rule, fixed before it ran, on
four first-untouched-part policies (5 episodes): no mechanism raised most of their returns; the
median drops were actuation 0.13, timing 0.05, contact 0.01 (all 0.58), so timing and contact moved
twice as far from nominal: two periods of skew, a 125 deg/s gyro, a tether of 10 % of the weight,
feet 60 % heavier. Sealed after that, before any untouched3 policy ran in them. Nothing in
src/crosssim imports this module.
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
class Heldout3Reality:
    name: str
    family: str
    # actuation
    asymmetry: float = 0.0
    """Each motor's torque in its weak direction (drawn per motor, seed 2028) is scaled by 1 - this."""
    stiffness: float = 0.0
    """Parallel spring on each actuated joint: the torque it exerts at 0.5 rad (or 0.5 m) from the
    joint's reference position, as a share of the motor's peak torque."""
    torque_noise: float = 0.0
    """Standard deviation of the per-motor factor every control period's torques are scaled by."""
    # timing and sensing
    velocity_skew: int = 0
    """Control periods by which the velocities the policy reads lag the positions."""
    gyro_range: float | None = None
    """[rad/s] angular velocities the policy reads are clipped at +- this (None: no limit)."""
    # contact and inertia
    tether: float = 0.0
    """Constant backward (-x) pull on the root body, as a share of the robot's weight."""
    foot_mass: float = 0.0
    """Extra mass (and inertia) of every distal link (a body with no child), as a share of its own."""


NOMINAL = Heldout3Reality("heldout3-nominal", "none")
ACTUATION = Heldout3Reality("heldout3-actuation", "actuation", asymmetry=0.3, stiffness=0.1, torque_noise=0.1)
TIMING = Heldout3Reality("heldout3-timing", "timing", velocity_skew=2, gyro_range=np.deg2rad(125.0))
CONTACT = Heldout3Reality("heldout3-contact", "contact", tether=0.1, foot_mass=0.6)
ALL = replace(ACTUATION, **{k: v for r in (TIMING, CONTACT) for k, v in r.__dict__.items()
                            if k not in ("name", "family") and v != getattr(NOMINAL, k)}, name="heldout3-all", family="all")
REALITIES = (ACTUATION, TIMING, CONTACT, ALL)

MECHANISMS = {
    "actuation": ("asymmetry", "stiffness", "torque_noise"),
    "timing": ("velocity_skew", "gyro_range"),
    "contact": ("tether", "foot_mass"),
}
"""Which fields make each family's mechanisms (tests check each changes what it claims)."""


def distal_bodies(m) -> np.ndarray:
    """Bodies no other body hangs from (the feet of a legged model), the world excluded."""
    parents = set(int(p) for p in m.body_parentid[1:])
    return np.array([b for b in range(1, m.nbody) if b not in parents], dtype=int)


def angular_dofs(m) -> np.ndarray:
    """Velocity coordinates that are angular: hinge joints, a ball's three, a free joint's last three."""
    out = []
    for j in range(m.njnt):
        t, a = int(m.jnt_type[j]), int(m.jnt_dofadr[j])
        if t == int(mujoco.mjtJoint.mjJNT_HINGE):
            out.append(a)
        elif t == int(mujoco.mjtJoint.mjJNT_BALL):
            out += [a, a + 1, a + 2]
        elif t == int(mujoco.mjtJoint.mjJNT_FREE):
            out += [a + 3, a + 4, a + 5]
    return np.array(out, dtype=int)


def compile_model(scene, r: Heldout3Reality, *, joints=(), peak=None):
    """The scene's MjModel with ``r``'s model changes: heavy feet, and springs on the joints named
    ``joints`` (the actuated ones) with stiffness ``r.stiffness x peak / 0.5`` about the model's
    reference pose."""
    m = load_mujoco_model(scene)
    if r.foot_mass:
        feet = distal_bodies(m)
        m.body_mass[feet] *= 1.0 + r.foot_mass
        m.body_inertia[feet] *= 1.0 + r.foot_mass
    if r.stiffness:
        ids = [m.joint(name).id for name in joints]
        m.jnt_stiffness[ids] = r.stiffness * np.asarray(peak, dtype=float) / 0.5
    return m


def tether_pull(m, r: Heldout3Reality) -> float:
    """[N] the tether's backward pull on the root body: ``r.tether`` x the robot's weight."""
    return r.tether * float(np.sum(m.body_mass)) * float(np.linalg.norm(m.opt.gravity))


def build(harness, r: Heldout3Reality, peak: np.ndarray):
    """(engine, model) of MuJoCo with ``r``'s model changes."""
    act = harness.actuation
    joints = [harness.canonical.joint_names[j] for j in act.joint_index]
    m = compile_model(harness.scene, r, joints=joints, peak=peak)
    if harness.card is not None and harness.card.physics_timestep:
        m.opt.timestep = harness.card.physics_timestep
    engine = EngineMuJoCo()
    return engine, engine.load(CompiledModel(harness.scene, m, ModelVariant()), EngineProfile("heldout3", "mujoco"))


class Actuator:
    """Direction-dependent strength and per-period torque noise: torques in, torques out."""

    def __init__(self, r: Heldout3Reality, n: int):
        rng = np.random.default_rng(2028)
        self.r = r
        self.weak = rng.choice([-1.0, 1.0], n)  # the direction each motor is weak in
        self.noise = np.ones(n)

    def new_period(self, draws: np.random.Generator) -> None:
        if self.r.torque_noise:
            self.noise = 1.0 + self.r.torque_noise * draws.standard_normal(len(self.noise))

    def __call__(self, tau: np.ndarray) -> np.ndarray:
        if self.r.asymmetry:
            tau = np.where(np.sign(tau) == self.weak, tau * (1.0 - self.r.asymmetry), tau)
        return tau * self.noise


class Sensors:
    """What the policy reads: velocities ``velocity_skew`` periods old, angular ones clipped at the
    gyro's range."""

    def __init__(self, r: Heldout3Reality, m):
        self.r, self.angular = r, angular_dofs(m)
        self.past: list[np.ndarray] = []

    def reset(self) -> None:
        self.past = []

    def __call__(self, frame):
        r = self.r
        if not r.velocity_skew and r.gyro_range is None:
            return frame
        qvel = frame.qvel.copy()
        if r.velocity_skew:
            self.past.append(qvel)
            qvel = self.past[0].copy()  # the first readings repeat until the skewed one arrives
            if len(self.past) > r.velocity_skew:
                self.past.pop(0)
        if r.gyro_range is not None:
            qvel[self.angular] = np.clip(qvel[self.angular], -r.gyro_range, r.gyro_range)
        return replace(frame, qvel=qvel, derived=None)


def run_heldout(harness, policy, r: Heldout3Reality, *, episode_seeds, max_steps: int | None = None) -> list[float]:
    """Returns of ``policy`` in held-out reality ``r``, one per seed (initial states drawn as
    crossval draws them). ``NOMINAL`` runs the same loop with no mechanism (the true drop's base)."""
    task, c, act = harness.task, harness.canonical, harness.actuation
    if act.mode != "motor":
        raise ValueError("held-out realities model torque motors (gymnasium tasks) only")
    peak = np.abs(act.gear) * np.maximum(np.abs(act.ctrl_low), np.abs(act.ctrl_high))
    engine, model = build(harness, r, peak)
    m = model.mj
    dt = float(m.opt.timestep)
    actuator, sensors = Actuator(r, len(peak)), Sensors(r, m)
    pull = tether_pull(m, r)
    returns = []
    for seed in episode_seeds:
        rng = np.random.default_rng(seed)
        state = engine.reset(model, task.initial_state(c, rng))
        state.xfrc_applied[1, 0] = -pull  # the root body; MjData keeps it across steps
        frame = engine.frame(model, state, contacts=task.needs_contacts)
        ts = task.reset(frame)
        policy.reset()
        sensors.reset()
        draws = np.random.default_rng([seed, 14])
        seen = task.observe(sensors(frame), ts)
        total = 0.0
        for _ in range(max_steps or task.max_steps):
            action = np.asarray(policy.act(seen), dtype=float)
            if harness.card is not None and harness.card.action.clip is not None:
                action = np.clip(action, *harness.card.action.clip)
            ctrl = act.target(action)
            actuator.new_period(draws)
            try:
                for _ in range(task.frame_skip):
                    q, qd = engine.joint_state(model, state)
                    tau = act.torques(ctrl, q, qd)
                    tau[act.joint_index] = actuator(tau[act.joint_index])
                    engine.step(model, state, tau, 1)
            except EngineFailure:  # the simulated robot blew up: the episode ends with what it earned
                break
            after = engine.frame(model, state, contacts=task.needs_contacts)
            if not after.is_finite():
                break
            step = task.step(frame, after, action, ts, task.frame_skip * dt)
            total += step.reward
            frame = after
            seen = task.observe(sensors(frame), ts)
            if step.terminated:
                break
        returns.append(total)
    return returns
