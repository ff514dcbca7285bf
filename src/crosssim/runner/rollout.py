"""One closed-loop episode through the shared harness: task, actuation, policy, one engine."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crosssim.actuation import Actuation
from crosssim.card import Card
from crosssim.engines.base import Engine, EngineProfile, get_engine
from crosssim.errors import CrossSimError, EngineFailure
from crosssim.perturb import Perturbation
from crosssim.runner.stepper import ControlStepper
from crosssim.policies.base import Policy
from crosssim.scene import CanonicalModel, canonical_model, resolve_scene
from crosssim.tasks.base import Task


@dataclass
class EpisodeResult:
    engine: str
    episode: int
    seed: int
    ret: float = 0.0
    length: int = 0
    terminated: bool = False
    failure: str | None = None
    x_velocity: float = float("nan")
    """Mean forward velocity over the episode [m/s]."""
    trajectory: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Harness:
    """Everything engine-independent about one policy: task, scene, actuation, control timing."""

    card: Card | None
    """None when built for a bare task (training), with gymnasium's motor semantics."""
    task: Task
    scene: Path
    canonical: CanonicalModel
    actuation: Actuation

    @classmethod
    def from_card(cls, card: Card) -> "Harness":
        from crosssim.tasks import make_task

        task = make_task(card.task)
        scene = resolve_scene(card.robot or task.scene, base_dir=card.path.parent)
        c = canonical_model(scene)
        if card.action.mode == "motor":
            actuation = Actuation.motors(c)
        else:
            a = Actuation.motors(c)
            n = c.actuator_count
            vec = lambda v, d: np.broadcast_to(np.asarray(d if v is None else v, float), (n,)).copy()  # noqa: E731
            actuation = Actuation("pd", a.joint_index, a.dof_index, a.qpos_index, c.joint_count, a.gear,
                                  a.ctrl_low, a.ctrl_high, kp=vec(card.action.kp, 0), kd=vec(card.action.kd, 0),
                                  scale=vec(card.action.scale, 1), default_pos=vec(card.action.default_pos, 0),
                                  torque_limit=None if card.action.torque_limit is None else vec(card.action.torque_limit, 0))
        h = cls(card, task, scene, c, actuation)
        if card.control_period is not None:
            period = task.frame_skip * c.timestep
            if not math.isclose(card.control_period, period, rel_tol=1e-6):
                raise CrossSimError(
                    f"{card.path}: control_period {card.control_period} s does not match task {task.name}: "
                    f"{task.frame_skip} x {c.timestep} s = {period} s")
        return h

    @classmethod
    def for_task(cls, name: str) -> "Harness":
        """A harness for a task with no card: the task's scene and gymnasium's motors."""
        from crosssim.tasks import make_task

        task = make_task(name)
        scene = resolve_scene(task.scene)
        c = canonical_model(scene)
        return cls(None, task, scene, c, Actuation.motors(c))

    @property
    def max_torque(self) -> np.ndarray:
        """Largest torque each canonical joint's actuator can give [N m or N] (inf: unactuated)."""
        out = np.full(self.canonical.joint_count, np.inf)
        a = self.actuation
        if a.mode == "motor":
            peak = np.abs(a.gear) * np.maximum(np.abs(a.ctrl_low), np.abs(a.ctrl_high))
        else:
            peak = a.torque_limit if a.torque_limit is not None else np.full(len(a.joint_index), np.inf)
        out[a.joint_index] = peak
        return out

    @property
    def obs_size(self) -> int:
        return self.task.observation_size(self.canonical)

    @property
    def action_size(self) -> int:
        return self.task.action_size(self.canonical)


def run_episode(engine: Engine, model, harness: Harness, policy: Policy, *, episode: int, seed: int,
                max_steps: int | None = None, record: bool = False, profile_name: str | None = None,
                perturbation: Perturbation | None = None) -> EpisodeResult:
    """Run one episode; engine or policy failures become ``result.failure``, never exceptions.

    ``perturbation``'s harness-level parts act here; its model-level parts must already be in
    the engine's model (``open_engine(..., perturbation)``).
    """
    task, c = harness.task, harness.canonical
    name = profile_name or engine.name
    result = EpisodeResult(name, episode, seed)
    stepper = ControlStepper(engine, model, harness, perturbation, name=name)
    steps = max_steps or task.max_steps
    traj: dict[str, list] = {"t": [], "base_z": [], "base_x": [], "qpos": []} if record else {}
    x_vel = []
    try:
        frame = stepper.reset(task.initial_state(c, np.random.default_rng(seed)), [seed, 1])
        task_state = task.reset(frame)
        policy.reset()
        for t in range(steps):
            action = stepper.check_action(policy.act(stepper.observe(frame, task_state)), t)
            after = stepper.step(action)
            step = task.step(frame, after, action, task_state, stepper.control_dt)
            result.ret += step.reward
            result.length = t + 1
            x_vel.append(step.terms.get("x_velocity", np.nan))
            frame = after
            if record:
                traj["t"].append(frame.time)
                traj["base_z"].append(frame.base_pos[2])
                traj["base_x"].append(frame.base_pos[0])
                traj["qpos"].append(frame.qpos.copy())
            if step.terminated:
                result.terminated = True
                break
    except EngineFailure as exc:
        result.failure = str(exc)
    except CrossSimError as exc:
        result.failure = f"{name}: {exc}"
    except Exception as exc:  # an engine blowing up must not lose the other rows
        result.failure = f"{name}: {type(exc).__name__}: {str(exc)[:300]}"
    result.x_velocity = float(np.nanmean(x_vel)) if x_vel and not np.isnan(x_vel).all() else float("nan")
    if record:
        result.trajectory = {k: np.asarray(v) for k, v in traj.items()}
    return result


def open_engine(profile: EngineProfile, harness: Harness, perturbation: Perturbation | None = None):
    """(engine, model) for a profile, with the perturbation's model-level settings applied.

    EngineUnavailable propagates with its install hint.
    """
    engine = get_engine(profile.engine)
    if perturbation is not None and perturbation.model_settings():
        profile = EngineProfile(profile.name, profile.engine, {**profile.settings, **perturbation.model_settings()})
    return engine, engine.load(harness.scene, profile)
