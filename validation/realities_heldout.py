"""Held-out realities of the untouched validation part (Walker2d-v4, Ant-v4): mechanisms that
neither crosssim's sweeps (src/crosssim/sweep.py: motor strength, first-order torque lag, whole-step
action latency, white observation noise, friction and mass scales) nor the selection realities
(bench/realities.py: DC-motor speed limit, dead zone, late sensors with a bias, soft contacts,
elliptic cones, a payload) use.

- actuation: gearbox backlash (on each reversal of a joint torque no torque reaches the joint
  while the gears cross their gap), Coulomb joint friction, battery voltage sag (torque derated by
  the motors' recent current draw) and a second-order actuator bandwidth (under-damped).
- timing: control-period jitter (a period lasts one physics step more or less at random),
  dropped observation frames (the policy reads the previous frame again), and a first-order
  low-pass filter on every velocity the policy observes (IMU and encoder-differentiation filters).
- contact: random-bump terrain (a heightfield in place of the floor), bouncy contacts (a damping
  ratio below critical: restitution) and ground patches of different friction.
- all: every mechanism at once.

The values come from physical reasoning (servo bandwidth 40 Hz, an IMU filter near 20 Hz, bumps of
2 cm, a few ms of gear play), moderated once after a look at six *selection-part* policies (RL-Zoo
and project Hopper/HalfCheetah, 3 episodes: the first values drove most of them to a 100 % loss,
and an under-damped contact diverged at a 10 ms physics step). They were committed, sealed, before
any untouched (Walker2d/Ant) policy ran in them, and are not tuned afterwards. Nothing in
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
class HeldoutReality:
    name: str
    family: str
    # actuation
    backlash_time: float = 0.0
    """[s] after each sign reversal of a joint's torque, no torque reaches the joint for this long."""
    coulomb: float = 0.0
    """Dry friction on every actuated joint, as a share of its motor's peak torque (gear x ctrl)."""
    sag: float = 0.0
    """Torque derating at full current draw on every motor (battery voltage sag): torque x (1 - sag x load),
    load = the mean over motors of |torque| / peak, low-passed with ``sag_tau``."""
    sag_tau: float = 0.05
    """[s] time constant of the battery's response to the current draw."""
    bandwidth_hz: float | None = None
    """Natural frequency of a second-order actuator response [Hz] (None: ideal actuator)."""
    bandwidth_zeta: float = 0.6
    """Its damping ratio (below 1: the torque overshoots)."""
    # timing
    jitter_p: float = 0.0
    """Probability that a control period lasts one physics step more, and (the same) one less."""
    drop_p: float = 0.0
    """Probability that an observation frame is dropped: the policy reads the previous one again."""
    velocity_filter: float = 0.0
    """[s] time constant of a first-order low-pass filter on every observed velocity."""
    # contact
    bumps: float = 0.0
    """[m] height of the random-bump terrain (0: the flat floor)."""
    bump_length: float = 0.3
    """[m] horizontal correlation length of the bumps."""
    damping_ratio: float | None = None
    """Contact damping ratio of every geom (MuJoCo solref[1]; default 1, critical: no bounce). Its time
    constant becomes at least 4 physics steps, where MuJoCo keeps an under-damped contact stable."""
    patches: tuple[float, float] | None = None
    """Friction factor range of the ground patches (uniform per patch, fixed layout)."""
    patch_length: float = 1.5
    """[m] length of a ground patch along x (and y)."""


NOMINAL = HeldoutReality("heldout-nominal", "none")
ACTUATION = HeldoutReality("heldout-actuation", "actuation", backlash_time=0.006, coulomb=0.02, sag=0.2,
                           bandwidth_hz=40.0, bandwidth_zeta=0.6)
TIMING = HeldoutReality("heldout-timing", "timing", jitter_p=0.2, drop_p=0.1, velocity_filter=0.008)
CONTACT = HeldoutReality("heldout-contact", "contact", bumps=0.02, damping_ratio=0.5, patches=(0.4, 1.0))
ALL = replace(ACTUATION, **{k: v for r in (TIMING, CONTACT) for k, v in r.__dict__.items()
                            if k not in ("name", "family") and v != getattr(NOMINAL, k)}, name="heldout-all", family="all")
REALITIES = (ACTUATION, TIMING, CONTACT, ALL)

MECHANISMS = {
    "actuation": ("backlash_time", "coulomb", "sag", "bandwidth_hz"),
    "timing": ("jitter_p", "drop_p", "velocity_filter"),
    "contact": ("bumps", "damping_ratio", "patches"),
}
"""Which fields make each family's mechanisms (tests check each changes the physics)."""

TERRAIN = ((-20.0, 180.0), (-20.0, 20.0), 0.1)
"""Heightfield extent along x and y [m] and cell size [m]: room for 1000 steps of a fast walker."""
FLAT_RADIUS = 1.0
"""[m] the terrain is flat within this distance of the start (no bump under the robot at reset)."""


def _velocity_slice(task, c) -> slice:
    """Where the observed velocities sit: gymnasium's planar walkers observe qpos[1:] then qvel,
    Ant qpos[2:] then qvel (then contact forces, if any)."""
    skip = {"Hopper": 1, "Walker2d": 1, "HalfCheetah": 1, "Ant": 2}.get(task.name)
    if skip is None:
        raise ValueError(f"held-out timing reality: no velocity layout known for task {task.name}")
    return slice(c.nq - skip, c.nq - skip + c.nv)


def _bumps(r: HeldoutReality, seed: int = 2026) -> tuple[np.ndarray, tuple]:
    """Heightfield elevations in [0, 1] (rows along y, columns along x) and its MuJoCo size."""
    from scipy.ndimage import gaussian_filter

    (x0, x1), (y0, y1), cell = TERRAIN
    xs, ys = np.arange(x0, x1 + cell / 2, cell), np.arange(y0, y1 + cell / 2, cell)
    rng = np.random.default_rng(seed)
    field = gaussian_filter(rng.normal(size=(len(ys), len(xs))), sigma=r.bump_length / cell)
    field = (field - field.min()) / (field.max() - field.min())
    dist = np.hypot(*np.meshgrid(xs, ys))
    field *= np.clip(dist - FLAT_RADIUS, 0.0, 1.0)  # flat at the start, full bumps 1 m further out
    size = ((x1 - x0) / 2, (y1 - y0) / 2, r.bumps, 0.1)
    return field, size


def _compile(scene, r: HeldoutReality):
    """The scene's MjModel; with bumps, its floor geom replaced by a heightfield (same geom index)."""
    if not r.bumps:
        return load_mujoco_model(scene)
    spec = mujoco.MjSpec.from_file(str(scene))
    field, size = _bumps(r)
    spec.add_hfield(name="heldout_bumps", size=list(size), nrow=field.shape[0], ncol=field.shape[1],
                    userdata=field.ravel().tolist())
    floor = spec.geom("floor")
    floor.type = mujoco.mjtGeom.mjGEOM_HFIELD
    floor.hfieldname = "heldout_bumps"
    (x0, x1), (y0, y1), _ = TERRAIN
    floor.pos = [(x0 + x1) / 2, (y0 + y1) / 2, 0.0]
    return spec.compile()


def build(harness, r: HeldoutReality):
    """(engine, model) of MuJoCo with ``r``'s model changes (terrain, contacts, joint friction)."""
    m = _compile(harness.scene, r)
    if harness.card is not None and harness.card.physics_timestep:
        m.opt.timestep = harness.card.physics_timestep
    act = harness.actuation
    if r.coulomb:
        peak = np.abs(act.gear) * np.maximum(np.abs(act.ctrl_low), np.abs(act.ctrl_high))
        m.dof_frictionloss[act.dof_index] = r.coulomb * peak
    if r.damping_ratio is not None:
        m.geom_solref[:, 0] = np.maximum(m.geom_solref[:, 0], 4 * m.opt.timestep)
        m.geom_solref[:, 1] = r.damping_ratio
    engine = EngineMuJoCo()
    model = engine.load(CompiledModel(harness.scene, m, ModelVariant()), EngineProfile("heldout", "mujoco"))
    return engine, model


class Actuator:
    """The actuation mechanisms, one physics step at a time: second-order response, voltage sag,
    then the gearbox (backlash). Torques in and out per actuated joint."""

    def __init__(self, r: HeldoutReality, peak: np.ndarray, dt: float):
        self.r, self.peak, self.dt = r, peak, dt
        if r.bandwidth_hz:
            from scipy.linalg import expm

            w, z = 2 * np.pi * r.bandwidth_hz, r.bandwidth_zeta
            a = np.array([[0.0, 1.0, 0.0], [-w * w, -2 * z * w, w * w], [0.0, 0.0, 0.0]])
            self.phi = expm(a * dt)  # exact step of [x, x', u] with the command held over dt
        self.reset()

    def reset(self) -> None:
        n = len(self.peak)
        self.x, self.v = np.zeros(n), np.zeros(n)
        self.load = 0.0
        self.side, self.gap_left = np.zeros(n), np.zeros(n)

    def __call__(self, tau: np.ndarray) -> np.ndarray:
        r = self.r
        if r.bandwidth_hz:
            p = self.phi
            x, v = self.x, self.v
            self.x, self.v = p[0, 0] * x + p[0, 1] * v + p[0, 2] * tau, p[1, 0] * x + p[1, 1] * v + p[1, 2] * tau
            tau = self.x
        if r.sag:
            draw = float(np.mean(np.minimum(np.abs(tau) / np.maximum(self.peak, 1e-9), 1.0)))
            self.load += (1.0 - np.exp(-self.dt / r.sag_tau)) * (draw - self.load)
            tau = tau * (1.0 - r.sag * self.load)
        if r.backlash_time:
            sign = np.sign(tau)
            flipped = (sign != 0) & (sign != self.side)
            self.gap_left[flipped & (self.side != 0)] = r.backlash_time
            self.side[sign != 0] = sign[sign != 0]
            engaged = 1.0 - np.clip(self.gap_left / self.dt, 0.0, 1.0)
            self.gap_left = np.maximum(self.gap_left - self.dt, 0.0)
            tau = tau * engaged
        return tau


def _patch_factors(r: HeldoutReality, seed: int = 7) -> np.ndarray:
    (x0, x1), (y0, y1), _ = TERRAIN
    n = int(np.ceil(max(x1 - x0, y1 - y0) / r.patch_length)) + 1
    return np.random.default_rng(seed).uniform(*r.patches, size=(n, n))


def patch_factor(r: HeldoutReality, factors: np.ndarray, x: float, y: float) -> float:
    """Friction factor of the ground patch under (x, y)."""
    (x0, _), (y0, _), _ = TERRAIN
    i = int(np.clip((x - x0) // r.patch_length, 0, factors.shape[0] - 1))
    j = int(np.clip((y - y0) // r.patch_length, 0, factors.shape[1] - 1))
    return float(factors[i, j])


def run_heldout(harness, policy, r: HeldoutReality, *, episode_seeds, max_steps: int | None = None) -> list[float]:
    """Returns of ``policy`` in held-out reality ``r``, one per seed (initial states drawn as
    crossval draws them). ``NOMINAL`` runs the same loop with no mechanism (the true drop's base)."""
    engine, model = build(harness, r)
    task, c, act = harness.task, harness.canonical, harness.actuation
    if act.mode != "motor":
        raise ValueError("held-out realities model torque motors (gymnasium tasks) only")
    m = model.mj
    dt = float(m.opt.timestep)
    peak = np.abs(act.gear) * np.maximum(np.abs(act.ctrl_low), np.abs(act.ctrl_high))
    actuator = Actuator(r, peak, dt)
    vel = _velocity_slice(task, c) if r.velocity_filter else None
    factors = _patch_factors(r) if r.patches else None
    base_friction = m.geom_friction[:, 0].copy()
    returns = []
    for seed in episode_seeds:
        rng = np.random.default_rng(seed)
        state = engine.reset(model, task.initial_state(c, rng))
        frame = engine.frame(model, state, contacts=task.needs_contacts)
        ts = task.reset(frame)
        policy.reset()
        actuator.reset()
        draws = np.random.default_rng([seed, 11])
        seen = task.observe(frame, ts)
        filtered = seen[vel].copy() if vel is not None else None
        total = 0.0
        for _ in range(max_steps or task.max_steps):
            if factors is not None:
                m.geom_friction[:, 0] = base_friction * patch_factor(r, factors, *frame.base_pos[:2])
            action = np.asarray(policy.act(seen), dtype=float)
            if harness.card is not None and harness.card.action.clip is not None:
                action = np.clip(action, *harness.card.action.clip)
            ctrl = act.target(action)
            n = task.frame_skip
            if r.jitter_p:
                u = draws.random()
                n += 1 if u < r.jitter_p else (-1 if u < 2 * r.jitter_p else 0)
            try:
                for _ in range(max(n, 1)):
                    q, qd = engine.joint_state(model, state)
                    tau = act.torques(ctrl, q, qd)
                    tau[act.joint_index] = actuator(tau[act.joint_index])
                    engine.step(model, state, tau, 1)
            except EngineFailure:  # the simulated robot blew up: the episode ends with what it earned
                break
            after = engine.frame(model, state, contacts=task.needs_contacts)
            if not after.is_finite():
                break
            step = task.step(frame, after, action, ts, max(n, 1) * dt)
            total += step.reward
            frame = after
            obs = task.observe(frame, ts)
            if vel is not None:
                filtered += (1.0 - np.exp(-max(n, 1) * dt / r.velocity_filter)) * (obs[vel] - filtered)
                obs[vel] = filtered
            if not (r.drop_p and draws.random() < r.drop_p):
                seen = obs
            if step.terminated:
                break
        returns.append(total)
    m.geom_friction[:, 0] = base_friction
    return returns
