"""The control step every consumer shares: latency, actuation chain, engine substeps, noise.

``run_episode`` (evaluation) and ``CrossSimEnv`` (training) both drive engines through this one
class, so a perturbation means the same thing in both.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from crosssim.engines.base import check_finite
from crosssim.errors import CrossSimError
from crosssim.frame import InitialState, SimFrame
from crosssim.perturb import ActuatorChain, Perturbation, with_profile


class ControlStepper:
    def __init__(self, engine, model, harness, perturbation: Perturbation | None = None, *, name: str | None = None):
        self.engine, self.model, self.harness = engine, model, harness
        # A profile's harness-level settings (a calibrated motor strength, latency) act like a
        # perturbation that every condition starts from.
        profile = getattr(model, "profile", None)
        self.p = with_profile(perturbation or Perturbation(), getattr(profile, "settings", None))
        self.name = name or engine.name
        c, task = harness.canonical, harness.task
        self.substeps = task.frame_skip * self.p.dt_divisor
        self.physics_dt = c.timestep / self.p.dt_divisor
        self.control_dt = task.frame_skip * c.timestep
        self.state = None
        self._noise: np.random.Generator | None = None  # set at reset when observations are noisy
        self._pending: deque = deque()
        self._chain = ActuatorChain(self.p, harness.max_torque, self.physics_dt, c.joint_count)
        self.observer = harness.observer()

    def reset(self, initial: InitialState, noise_seed) -> tuple[SimFrame, dict]:
        """Reset engine, task and observation state; return the first frame and the task state."""
        h = self.harness
        if self.state is not None and self.engine.capabilities.reset_into:
            self.state = self.engine.reset_into(self.model, self.state, initial)
        else:
            self.state = self.engine.reset(self.model, initial)
        if self.p.obs_noise > 0:  # its own stream: noise never shifts initial states
            self._noise = np.random.default_rng(noise_seed)
        self._chain = ActuatorChain(self.p, h.max_torque, self.physics_dt, h.canonical.joint_count)
        self._pending = deque(np.zeros(h.action_size) for _ in range(self.p.action_latency))
        frame = self.frame()
        task_state = h.task.reset(frame)
        self.observer.reset(task_state)
        return frame, task_state

    def frame(self) -> SimFrame:
        return self.engine.frame(self.model, self.state, contacts=self.harness.task.needs_contacts)

    def observe(self, frame: SimFrame, task_state: dict) -> np.ndarray:
        obs = self.observer(frame, task_state)
        if self.p.obs_noise > 0:
            obs = obs + self._noise.normal(0.0, self.p.obs_noise, obs.shape)
        return obs

    def check_action(self, action, t: int) -> np.ndarray:
        h = self.harness
        action = np.asarray(action, dtype=float)
        if action.shape != (h.action_size,):
            raise CrossSimError(f"policy returned an action of shape {action.shape}, expected ({h.action_size},)")
        if not np.isfinite(action).all():
            raise CrossSimError(f"policy returned a non-finite action at step {t}: {action}")
        if h.card is not None and h.card.action.clip is not None:
            action = np.clip(action, *h.card.action.clip)
        return action

    def step(self, action: np.ndarray) -> SimFrame:
        """Apply one (checked) action for one control period; return the new frame (finite)."""
        engine, model, act = self.engine, self.model, self.harness.actuation
        self.observer.acted(action)
        if self.p.action_latency:
            self._pending.append(action)
            action = self._pending.popleft()
        target = act.target(action)
        if act.constant_over_substeps and not self._chain.stateful:
            q, qd = engine.joint_state(model, self.state)
            engine.step(model, self.state, self._chain(act.torques(target, q, qd)), self.substeps)
        else:
            for _ in range(self.substeps):
                q, qd = engine.joint_state(model, self.state)
                engine.step(model, self.state, self._chain(act.torques(target, q, qd)), 1)
        after = self.frame()
        check_finite(after, self.name)
        return after
