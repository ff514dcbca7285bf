"""Held-out realities of the second untouched part (bench/train_population.py's ``untouched2``:
Walker2d, Ant and InvertedDoublePendulum policies nobody has looked at). Mechanisms that neither
crosssim's sweeps, nor the selection realities (bench/realities.py), nor the first held-out
realities (bench/realities_heldout.py) use, because the next design round may add those to its
ladders: this part must stay a test of mechanisms the design never saw.

- actuation: a continuous-torque limit below the peak the policy trained with (saturation: small
  commands pass, large ones are clipped), a fixed per-motor gain mismatch (manufacturing spread)
  and cogging torque ripple (the torque varies with the joint's angle).
- timing: encoder quantization (every joint coordinate is read to a resolution, and joint
  velocities are the finite difference of the quantized positions over the control period, as an
  encoder-only robot computes them) and controller overruns (a period whose policy output misses
  its deadline: the previous action is held once more).
- contact: a slope (gravity tilted, the robot walks uphill along +x; the cart-pole's rail tilts)
  and ridges across the path (low boxes every 1.5 m, from 1.5 m ahead of the start).
- all: every mechanism at once.

Values from physical reasoning, not from any policy's result: a continuous torque at 75 % of peak,
a 15 % gain spread, a 15 % ripple with a period of 0.16 rad, a 5 mrad (or 5 mm) encoder step (a
low-end 10-bit servo encoder), 15 % overrun periods, a 3 degree slope, 1.5 cm ridges. Looked at
once, on five choosing-part policies (policies/hopper-*, selection hopper-ppo-150k-dr-s0 and
halfcheetah-ppo-150k-nodr-s0, 3 episodes), under a rule fixed before: change a family's values
only if it costs all of them 90 % or more, or diverges. The hoppers lost 0-0.84 per family, the
HalfCheetah 0.09 (contact) to more than its whole return (actuation, "all"); nothing changed. Committed, sealed, before
any run of an untouched policy in them. Nothing in src/crosssim imports this module.
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
class Heldout2Reality:
    name: str
    family: str
    # actuation
    saturation: float | None = None
    """Each motor's torque is clipped at this share of its peak (gear x ctrl limit)."""
    gain_spread: float = 0.0
    """Each motor's torque is scaled by a fixed factor drawn uniformly in 1 +- this (seed 2027)."""
    ripple: float = 0.0
    """Cogging: torque x (1 + ripple x sin(ripple_k x q + phase)), a fixed phase per motor."""
    ripple_k: float = 40.0
    """[1/rad or 1/m] spatial frequency of the ripple (period 2 pi / 40 = 0.16 rad)."""
    # timing
    encoder_step: float = 0.0
    """[rad or m] resolution every joint coordinate is read to; velocities then come from the
    quantized positions' finite difference over the control period."""
    overrun_p: float = 0.0
    """Probability that a control period's action misses its deadline (the previous one is held)."""
    # contact
    slope_deg: float = 0.0
    """Ground slope [degrees], uphill along +x (gravity tilted towards -x)."""
    ridge_height: float = 0.0
    """[m] height of the ridges across the path (0: none)."""


NOMINAL = Heldout2Reality("heldout2-nominal", "none")
ACTUATION = Heldout2Reality("heldout2-actuation", "actuation", saturation=0.75, gain_spread=0.15, ripple=0.15)
TIMING = Heldout2Reality("heldout2-timing", "timing", encoder_step=0.005, overrun_p=0.15)
CONTACT = Heldout2Reality("heldout2-contact", "contact", slope_deg=3.0, ridge_height=0.015)
ALL = replace(ACTUATION, **{k: v for r in (TIMING, CONTACT) for k, v in r.__dict__.items()
                            if k not in ("name", "family") and v != getattr(NOMINAL, k)}, name="heldout2-all", family="all")
REALITIES = (ACTUATION, TIMING, CONTACT, ALL)

MECHANISMS = {
    "actuation": ("saturation", "gain_spread", "ripple"),
    "timing": ("encoder_step", "overrun_p"),
    "contact": ("slope_deg", "ridge_height"),
}
"""Which fields make each family's mechanisms (tests check each changes the physics)."""

RIDGES = (1.5, 160.0, 1.5, 0.2, 20.0)
"""Ridges: first x, last x, spacing, depth along x [m] and half-width along y [m]."""


def _compile(scene, r: Heldout2Reality):
    """The scene's MjModel; with ridges, low boxes on the floor across the path."""
    if not r.ridge_height:
        m = load_mujoco_model(scene)
    else:
        spec = mujoco.MjSpec.from_file(str(scene))
        floor_z = float(spec.geom("floor").pos[2])
        first, last, spacing, depth, half_width = RIDGES
        for k, x in enumerate(np.arange(first, last + spacing / 2, spacing)):
            spec.worldbody.add_geom(name=f"heldout2_ridge{k}", type=mujoco.mjtGeom.mjGEOM_BOX,
                                    size=[depth / 2, half_width, r.ridge_height / 2],
                                    pos=[float(x), 0.0, floor_z + r.ridge_height / 2])
        m = spec.compile()
    if r.slope_deg:
        g = float(np.linalg.norm(m.opt.gravity))
        a = np.deg2rad(r.slope_deg)
        m.opt.gravity[:] = (-g * np.sin(a), 0.0, -g * np.cos(a))
    return m


def build(harness, r: Heldout2Reality):
    """(engine, model) of MuJoCo with ``r``'s model changes (slope, ridges)."""
    m = _compile(harness.scene, r)
    if harness.card is not None and harness.card.physics_timestep:
        m.opt.timestep = harness.card.physics_timestep
    engine = EngineMuJoCo()
    return engine, engine.load(CompiledModel(harness.scene, m, ModelVariant()), EngineProfile("heldout2", "mujoco"))


class Actuator:
    """Gain mismatch, ripple, then the continuous-torque limit, per physics step: torques and joint
    positions of the actuated joints in, torques out."""

    def __init__(self, r: Heldout2Reality, peak: np.ndarray):
        rng = np.random.default_rng(2027)
        self.r, self.peak = r, peak
        self.gain = 1.0 + rng.uniform(-r.gain_spread, r.gain_spread, len(peak))
        self.phase = rng.uniform(0.0, 2 * np.pi, len(peak))

    def __call__(self, tau: np.ndarray, q: np.ndarray) -> np.ndarray:
        r = self.r
        tau = tau * self.gain
        if r.ripple:
            tau = tau * (1.0 + r.ripple * np.sin(r.ripple_k * q + self.phase))
        if r.saturation is not None:
            limit = r.saturation * self.peak
            tau = np.clip(tau, -limit, limit)
        return tau


class Encoder:
    """What an encoder-only robot reads: joint coordinates quantized, joint velocities the finite
    difference of the quantized coordinates over the time since the last reading."""

    def __init__(self, r: Heldout2Reality, c):
        self.step, self.qadr, self.dadr = r.encoder_step, np.asarray(c.joint_qposadr), np.asarray(c.joint_dofadr)
        self.last = None

    def reset(self) -> None:
        self.last = None

    def __call__(self, frame, elapsed: float):
        if not self.step:
            return frame
        qpos, qvel = frame.qpos.copy(), frame.qvel.copy()
        read = np.round(qpos[self.qadr] / self.step) * self.step
        qvel[self.dadr] = 0.0 if self.last is None else (read - self.last) / elapsed
        qpos[self.qadr] = read
        self.last = read
        return replace(frame, qpos=qpos, qvel=qvel, derived=None)


def run_heldout(harness, policy, r: Heldout2Reality, *, episode_seeds, max_steps: int | None = None) -> list[float]:
    """Returns of ``policy`` in held-out reality ``r``, one per seed (initial states drawn as
    crossval draws them). ``NOMINAL`` runs the same loop with no mechanism (the true drop's base)."""
    engine, model = build(harness, r)
    task, c, act = harness.task, harness.canonical, harness.actuation
    if act.mode != "motor":
        raise ValueError("held-out realities model torque motors (gymnasium tasks) only")
    dt = float(model.mj.opt.timestep)
    peak = np.abs(act.gear) * np.maximum(np.abs(act.ctrl_low), np.abs(act.ctrl_high))
    actuator, encoder = Actuator(r, peak), Encoder(r, c)
    qadr = c.joint_qposadr[act.joint_index]
    returns = []
    for seed in episode_seeds:
        rng = np.random.default_rng(seed)
        state = engine.reset(model, task.initial_state(c, rng))
        frame = engine.frame(model, state, contacts=task.needs_contacts)
        ts = task.reset(frame)
        policy.reset()
        encoder.reset()
        draws = np.random.default_rng([seed, 13])
        seen = task.observe(encoder(frame, task.frame_skip * dt), ts)
        held, total = None, 0.0
        for _ in range(max_steps or task.max_steps):
            action = np.asarray(policy.act(seen), dtype=float)
            if harness.card is not None and harness.card.action.clip is not None:
                action = np.clip(action, *harness.card.action.clip)
            if held is not None and r.overrun_p and draws.random() < r.overrun_p:
                action = held  # this period's output came too late: the motors keep the last one
            held = action
            ctrl = act.target(action)
            try:
                for _ in range(task.frame_skip):
                    q, qd = engine.joint_state(model, state)
                    tau = act.torques(ctrl, q, qd)
                    tau[act.joint_index] = actuator(tau[act.joint_index], q[qadr])
                    engine.step(model, state, tau, 1)
            except EngineFailure:  # the simulated robot blew up: the episode ends with what it earned
                break
            after = engine.frame(model, state, contacts=task.needs_contacts)
            if not after.is_finite():
                break
            step = task.step(frame, after, action, ts, task.frame_skip * dt)
            total += step.reward
            frame = after
            seen = task.observe(encoder(frame, task.frame_skip * dt), ts)
            if step.terminated:
                break
        returns.append(total)
    return returns
