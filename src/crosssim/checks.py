"""Parity checks shipped as library code (the tests call the same functions).

``check_engines_match`` drives two engines with the same torque sequence from the same state
and compares joint trajectories with explicit per-quantity tolerances; ``check_audit`` turns an
audit into a pass/fail. Both can fail, and the tests show a broken case failing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crosssim.engines.registry import get_engine
from crosssim.engines.settings import EngineProfile
from crosssim.frame import InitialState
from crosssim.scene import canonical_model
from crosssim.variant import compile_model


@dataclass(frozen=True)
class Tolerances:
    """Maximum absolute difference allowed over the whole trajectory, per quantity."""

    qpos: float = 0.01
    """Joint positions [rad or m]."""
    qvel: float = 0.1
    """Joint velocities [rad/s or m/s]; looser, velocities amplify small timing differences."""


@dataclass
class MatchReport:
    engines: tuple[str, str]
    steps: int
    max_error: dict[str, np.ndarray] = field(default_factory=dict)
    """Per quantity, the largest |a - b| of each joint over the trajectory."""
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def suspended_initial_state(scene: Path, height: float = 5.0) -> InitialState:
    """Default pose lifted ``height`` metres so nothing touches the ground (contact-free motion)."""
    c = canonical_model(Path(scene))
    qpos = c.qpos0.copy()
    if c.root_body != "world" and not c.free_base and "slide" not in c.joint_type:
        return InitialState(qpos, np.zeros(c.nv))  # fixed base: already hanging free
    if c.free_base:
        qpos[2] += height
    else:
        vertical = [k for k, t in enumerate(c.joint_type) if t == "slide"]
        if not vertical:
            raise ValueError(f"{scene}: no free base or slide joint to lift the robot by")
        qpos[c.joint_qposadr[vertical[-1]]] += height
    return InitialState(qpos, np.zeros(c.nv))


def check_engines_match(scene: Path, engine_a: str, engine_b: str, *, steps: int = 250, torque_scale: float = 0.02,
                        seed: int = 0, tolerances: Tolerances = Tolerances(), initial: InitialState | None = None,
                        models: tuple | None = None) -> MatchReport:
    """Same initial state, same random actuator torques, two engines: do joint trajectories agree?

    ``models`` may pass already-loaded (engine, model) pairs, e.g. with a deliberate fault.
    """
    c = canonical_model(Path(scene))
    initial = initial or suspended_initial_state(scene)
    torques = np.random.default_rng(seed).uniform(-1, 1, (steps, c.actuator_count)) * torque_scale * c.actuator_gear
    traj = {}
    pairs = models or tuple((get_engine(n), None) for n in (engine_a, engine_b))
    for name, (engine, model) in zip((engine_a, engine_b), pairs):
        model = model or engine.load(compile_model(Path(scene)), EngineProfile(name, name))
        state = engine.reset(model, initial)
        q, qd = [], []
        for t in range(steps):
            tau = np.zeros(c.joint_count)
            np.add.at(tau, c.actuator_joint, torques[t])
            engine.step(model, state, tau, 1)
            a, b = engine.joint_state(model, state)
            q.append(np.array(a[c.joint_qposadr]))
            qd.append(np.array(b[c.joint_dofadr]))
        traj[name] = (np.array(q), np.array(qd))
    report = MatchReport((engine_a, engine_b), steps)
    for k, quantity in enumerate(("qpos", "qvel")):
        err = np.abs(traj[engine_a][k] - traj[engine_b][k]).max(axis=0)
        report.max_error[quantity] = err
        tol = getattr(tolerances, quantity)
        for j, e in enumerate(err):
            if not e <= tol:  # NaN fails too
                report.failures.append(f"{quantity} of {c.joint_names[j]}: max |{engine_a} - {engine_b}| = {e:.4g} > {tol}")
    return report


def check_audit(rows) -> list[str]:
    """Messages for every audited parameter that differs beyond tolerance (empty = all match)."""
    return [f"{r.quantity} {r.item}: canonical {r.canonical:.6g}, engine {r.engine:.6g} (tol {r.tolerance:.2g})"
            for r in rows if r.status == "MISMATCH"]
