"""Held-out "realities" for the risk validation: simulated real robots the pipeline never sees.

Each reality is MuJoCo with mechanisms crosssim's perturbation sweeps do not use (and other
values where a mechanism overlaps): a DC-motor torque-speed limit with a gearbox dead zone; sensor
readings that arrive late with a per-episode calibration bias and control that starts mid-period;
soft contacts with elliptic friction cones, less friction and a payload bolted to the base.
Nothing in src/crosssim imports this module.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

import mujoco
import numpy as np

from crosssim.engines.settings import EngineProfile
from crosssim.engines.mujoco import EngineMuJoCo
from crosssim.variant import compile_model


@dataclass(frozen=True)
class Reality:
    name: str
    family: str
    free_speed: float | None = None
    """Motor free speed at the joint [rad/s]: available torque falls linearly to 0 there."""
    deadzone: float = 0.0
    """Commands with |ctrl| below this give no torque (gearbox backlash / stiction)."""
    obs_delay: int = 0
    """Sensor readings are this many control steps old."""
    obs_bias: float = 0.0
    """Std of a constant per-episode offset on every observation value (calibration error)."""
    start_lag: int = 0
    """A new command reaches the motors this many physics steps into the control period."""
    solref_timeconst: float | None = None
    """Contact stiffness time constant [s] (MuJoCo default 0.02; larger is softer)."""
    friction: float = 1.0
    elliptic: bool = False
    payload: float = 0.0
    """Fraction of the robot's mass bolted to the root body, 5 cm off its centre of mass."""


ACTUATION = Reality("real-actuation", "actuation", free_speed=14.0, deadzone=0.06)
TIMING = Reality("real-timing", "timing", obs_delay=1, obs_bias=0.02, start_lag=1)
CONTACT = Reality("real-contact", "contact", solref_timeconst=0.035, friction=0.6, elliptic=True, payload=0.12)
ALL = replace(Reality("real-all", "all"), **{k: v for r in (ACTUATION, TIMING, CONTACT)
                                              for k, v in r.__dict__.items() if k not in ("name", "family")
                                              and v != getattr(Reality("", ""), k)})
REALITIES = (ACTUATION, TIMING, CONTACT, ALL)


def _build(harness, r: Reality):
    engine = EngineMuJoCo()
    model = engine.load(compile_model(harness.scene), EngineProfile("reality", "mujoco"))
    m = model.mj
    if r.solref_timeconst is not None:
        m.geom_solref[:, 0] = r.solref_timeconst
    if r.friction != 1.0:
        m.geom_friction[:, 0] *= r.friction
    if r.elliptic:
        m.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    if r.payload:
        extra = r.payload * float(m.body_mass[1:].sum())
        total = m.body_mass[1] + extra
        offset = np.array([0.05, 0.0, 0.0])
        m.body_ipos[1] = (m.body_mass[1] * m.body_ipos[1] + extra * (m.body_ipos[1] + offset)) / total
        m.body_inertia[1] += extra * 0.05**2
        m.body_mass[1] = total
    return engine, model


def run_reality(harness, policy, r: Reality, *, episode_seeds, max_steps: int | None = None) -> list[float]:
    """Returns of ``policy`` in reality ``r``, one per seed (same initial states as crossval)."""
    engine, model = _build(harness, r)
    task, c, act = harness.task, harness.canonical, harness.actuation
    peak = np.abs(act.gear) * np.maximum(np.abs(act.ctrl_low), np.abs(act.ctrl_high))
    dofs = act.dof_index
    dt = task.frame_skip * c.timestep
    returns = []
    for seed in episode_seeds:
        rng = np.random.default_rng(seed)
        state = engine.reset(model, task.initial_state(c, rng))
        frame = engine.frame(model, state, contacts=task.needs_contacts)
        ts = task.reset(frame)
        policy.reset()
        noise = np.random.default_rng([seed, 7])
        bias = noise.normal(0.0, r.obs_bias, harness.obs_size) if r.obs_bias else 0.0
        history = deque([task.observe(frame, ts)] * (r.obs_delay + 1), maxlen=r.obs_delay + 1)
        previous = np.zeros(c.joint_count)
        total = 0.0
        for t in range(max_steps or task.max_steps):
            action = np.asarray(policy.act(history[0] + bias), dtype=float)
            if harness.card.action.clip is not None:
                action = np.clip(action, *harness.card.action.clip)
            ctrl = act.target(action)
            if r.deadzone:
                ctrl = np.where(np.abs(ctrl) < r.deadzone, 0.0, ctrl - np.sign(ctrl) * r.deadzone) / (1 - r.deadzone)
            for k in range(task.frame_skip):
                q, qd = engine.joint_state(model, state)
                tau = act.torques(ctrl, q, qd)
                if r.free_speed:
                    limit = peak * np.clip(1.0 - np.abs(qd[dofs]) / r.free_speed, 0.0, 1.0)
                    tau[act.joint_index] = np.clip(tau[act.joint_index], -limit, limit)
                engine.step(model, state, previous if k < r.start_lag else tau, 1)
                if k >= r.start_lag:
                    previous = tau
            after = engine.frame(model, state, contacts=task.needs_contacts)
            if not after.is_finite():
                break
            step = task.step(frame, after, action, ts, dt)
            total += step.reward
            frame = after
            history.append(task.observe(frame, ts))
            if step.terminated:
                break
        returns.append(total)
    return returns
