"""One closed-loop episode through the shared harness: task, actuation, policy, one engine."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from crosssim.engines.base import Engine, EngineProfile, get_engine
from crosssim.errors import CrossSimError, EngineFailure
from crosssim.perturb import Perturbation, merge_model_settings
from crosssim.runner.harness import Harness
from crosssim.runner.stepper import ControlStepper
from crosssim.policies.base import Policy


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
    metrics: dict[str, float] = field(default_factory=dict)
    """Per-episode means of the task's step terms, plus survival_time [s]."""
    trajectory: dict[str, np.ndarray] = field(default_factory=dict)


class EpisodeAccount:
    """Accumulates one episode's rows: return, length, per-step task terms, optional trajectory."""

    def __init__(self, name: str, episode: int, seed: int, record: bool):
        self.name, self.record = name, record
        self.result = EpisodeResult(name, episode, seed)
        self.sums: dict[str, float] = {}
        self.traj: dict[str, list] = {"t": [], "base_z": [], "base_x": [], "qpos": []} if record else {}

    def add(self, t: int, step, frame) -> None:
        self.result.ret += step.reward
        self.result.length = t + 1
        for k, v in step.terms.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(v)
        if self.record:
            self.traj["t"].append(frame.time)
            self.traj["base_z"].append(frame.base_pos[2])
            self.traj["base_x"].append(frame.base_pos[0])
            self.traj["qpos"].append(frame.qpos.copy())
        if step.terminated:
            self.result.terminated = True

    def fail(self, exc: Exception) -> None:
        """Engine or policy failures become ``result.failure``, never exceptions."""
        if isinstance(exc, EngineFailure):
            self.result.failure = str(exc)
        elif isinstance(exc, CrossSimError):
            self.result.failure = f"{self.name}: {exc}"
        else:  # an engine blowing up must not lose the other rows
            self.result.failure = f"{self.name}: {type(exc).__name__}: {str(exc)[:300]}"

    def finish(self, control_dt: float) -> EpisodeResult:
        result = self.result
        if result.length:
            result.metrics = {k: v / result.length for k, v in self.sums.items()}
            result.x_velocity = result.metrics.get("x_velocity", float("nan"))
        result.metrics["survival_time"] = result.length * control_dt
        if self.record:
            result.trajectory = {k: np.asarray(v) for k, v in self.traj.items()}
        return result


def run_episode(engine: Engine, model, harness: Harness, policy: Policy, *, episode: int, seed: int,
                max_steps: int | None = None, record: bool = False, profile_name: str | None = None,
                perturbation: Perturbation | None = None) -> EpisodeResult:
    """Run one episode; engine or policy failures become ``result.failure``, never exceptions.

    ``perturbation``'s harness-level parts act here; its model-level parts must already be in
    the engine's model (``open_engine(..., perturbation)``).
    """
    task, c = harness.task, harness.canonical
    name = profile_name or engine.name
    account = EpisodeAccount(name, episode, seed, record)
    stepper = ControlStepper(engine, model, harness, perturbation, name=name)
    try:
        frame, task_state = stepper.reset(task.initial_state(c, np.random.default_rng(seed)), [seed, 1])
        policy.reset()
        for t in range(max_steps or task.max_steps):
            action = stepper.check_action(policy.act(stepper.observe(frame, task_state)), t)
            after = stepper.step(action)
            step = task.step(frame, after, action, task_state, stepper.control_dt)
            account.add(t, step, after)
            frame = after
            if step.terminated:
                break
    except Exception as exc:
        account.fail(exc)
    return account.finish(stepper.control_dt)


def open_engine(profile: EngineProfile, harness: Harness, perturbation: Perturbation | None = None):
    """(engine, model) for a profile, with the perturbation's model-level settings applied.

    EngineUnavailable propagates with its install hint.
    """
    engine = get_engine(profile.engine)
    if perturbation is not None and perturbation.model_settings():
        profile = EngineProfile(profile.name, profile.engine, merge_model_settings(profile.settings, perturbation))
    return engine, engine.load(harness.scene, profile)
