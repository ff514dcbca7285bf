"""One closed-loop episode through the shared harness: task, actuation, policy, one engine."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from crosssim.errors import CrossSimError, EngineFailure
from crosssim.policies.base import Policy
from crosssim.runner.episode import Episode, play, policy_actions
from crosssim.runner.harness import Harness
from crosssim.runner.recording import Recording
from crosssim.runner.simulator import Simulator
from crosssim.runner.stepper import ControlStepper


@dataclass
class EpisodeResult:
    engine: str
    episode: int
    seed: int
    ret: float = 0.0
    length: int = 0
    terminated: bool = False
    failure: str | None = None
    termination_reason: str | None = None
    """How the episode ended: "time_limit", the task's reason ("fall: ...", "unhealthy: ..."), or
    "failure" (the text is in ``failure``)."""
    x_velocity: float = float("nan")
    """Mean forward velocity over the episode [m/s]."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Per-episode means of the task's step terms, plus survival_time [s]."""
    trajectory: dict[str, np.ndarray] = field(default_factory=dict)


class EpisodeAccount:
    """Accumulates one episode's rows: return, length, per-step task terms, optional trajectory."""

    def __init__(self, name: str, episode: int, seed: int, record: bool, recording: Recording | None = None):
        """``recording``: the torques and foot contacts to keep besides the pose (``record`` only)."""
        self.name, self.record = name, record
        self.recording = recording if record else None
        self.result = EpisodeResult(name, episode, seed)
        self.sums: dict[str, float] = {}
        self.traj: dict[str, list] = {"t": [], "base_z": [], "base_x": [], "qpos": []} if record else {}
        self.extra: dict[str, list] = self.recording.start() if self.recording is not None else {}

    def add(self, ep, step) -> None:
        """``play``'s per-step hook: account for the step ``ep`` just took."""
        frame = ep.frame
        self._last = ep
        self.result.ret += step.reward
        self.result.length = ep.t
        for k, v in step.terms.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(v)
        if self.record:
            self.traj["t"].append(frame.time)
            self.traj["base_z"].append(frame.base_pos[2])
            self.traj["base_x"].append(frame.base_pos[0])
            self.traj["qpos"].append(frame.qpos.copy())
            if self.recording is not None:
                self.recording.add(self.extra, frame)
        if step.terminated:
            self.result.terminated = True
            self.result.termination_reason = step.reason or f"terminated by task {ep.task.name}"

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
        if result.failure is not None:
            result.termination_reason = "failure"
        elif result.termination_reason is None:
            result.termination_reason = "time_limit"
        if result.length:
            result.metrics = {k: v / result.length for k, v in self.sums.items()}
            result.x_velocity = result.metrics.get("x_velocity", float("nan"))
        ep = getattr(self, "_last", None)
        if ep is not None:  # the task's own account of the episode (success, time to success, why it failed)
            extra, reason = ep.task.episode_outcome(ep.task_state)
            result.metrics.update(extra)
            if reason is not None and result.failure is None and not result.terminated:
                result.termination_reason = reason
        result.metrics["survival_time"] = result.length * control_dt
        if self.record:
            result.trajectory = {k: np.asarray(v) for k, v in self.traj.items()}
            if self.recording is not None:
                result.trajectory |= self.recording.finish(self.extra)
        return result


def run_episode(sim: Simulator, harness: Harness, policy: Policy, *, episode: int, seed: int,
                max_steps: int | None = None, record: bool = False) -> EpisodeResult:
    """Run one episode of ``policy`` in ``sim`` (its variant: the model part already compiled
    into the engine, the harness part acting here); engine or policy failures become
    ``result.failure``, never exceptions."""
    account = EpisodeAccount(sim.name, episode, seed, record, Recording.of(harness) if record else None)
    try:
        ep = Episode(ControlStepper(sim, harness, contacts=record))
        ep.start(seed)
        policy.reset()
        play(ep, policy_actions(policy), max_steps or harness.task.max_steps, on_step=account.add)
    except Exception as exc:
        account.fail(exc)
    return account.finish(harness.control_dt)
