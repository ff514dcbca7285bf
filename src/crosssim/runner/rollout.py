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
    sums: dict[str, float] = {}
    try:
        frame, task_state = stepper.reset(task.initial_state(c, np.random.default_rng(seed)), [seed, 1])
        policy.reset()
        for t in range(steps):
            action = stepper.check_action(policy.act(stepper.observe(frame, task_state)), t)
            after = stepper.step(action)
            step = task.step(frame, after, action, task_state, stepper.control_dt)
            result.ret += step.reward
            result.length = t + 1
            for k, v in step.terms.items():
                sums[k] = sums.get(k, 0.0) + float(v)
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
    if result.length:
        result.metrics = {k: v / result.length for k, v in sums.items()}
        result.x_velocity = result.metrics.get("x_velocity", float("nan"))
    result.metrics["survival_time"] = result.length * stepper.control_dt
    if record:
        result.trajectory = {k: np.asarray(v) for k, v in traj.items()}
    return result


def open_engine(profile: EngineProfile, harness: Harness, perturbation: Perturbation | None = None):
    """(engine, model) for a profile, with the perturbation's model-level settings applied.

    EngineUnavailable propagates with its install hint.
    """
    engine = get_engine(profile.engine)
    if perturbation is not None and perturbation.model_settings():
        profile = EngineProfile(profile.name, profile.engine, merge_model_settings(profile.settings, perturbation))
    return engine, engine.load(harness.scene, profile)
