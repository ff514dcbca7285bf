"""Gymnasium's MuJoCo locomotion tasks (v5 semantics), computed from SimFrames only.

Observation, reward terms, termination and reset noise follow gymnasium 1.x ``Hopper-v5``,
``Walker2d-v5``, ``HalfCheetah-v5`` and ``Ant-v5`` with default arguments, so policies trained
there (and in the mujoco-py ``-v3`` versions, same layouts) run unchanged. The equivalence is a
test (tests/test_gym_equivalence.py), not a claim.
"""

from __future__ import annotations

import numpy as np

from crosssim.frame import SimFrame
from crosssim.scene import CanonicalModel
from crosssim.tasks.base import ResetNoise, StepResult, Task


class PlanarLocomotion(Task):
    """Hopper, Walker2d, HalfCheetah: root joints rootx, rootz, rooty; run forward along x."""

    forward_weight = 1.0
    ctrl_cost_weight = 1e-3
    healthy_reward = 1.0
    healthy_z: tuple[float, float] | None = None
    healthy_angle: tuple[float, float] | None = None
    healthy_state: tuple[float, float] | None = None
    reset_noise = ResetNoise(5e-3)
    clip_qvel: float | None = None
    success_survival = 0.1  # not 1.0: docs/risk.md (the project's own 150k-step hoppers fall at 200-400 steps)

    def observation_size(self, c: CanonicalModel) -> int:
        return c.nq - 1 + c.nv

    def initial_state(self, c, rng):
        return self.reset_noise.sample(c.qpos0, c.nv, rng)

    def observe(self, frame: SimFrame, state: dict) -> np.ndarray:
        qvel = frame.qvel
        if self.clip_qvel is not None:  # np.minimum/maximum: several times cheaper than np.clip here
            qvel = np.minimum(np.maximum(qvel, -self.clip_qvel), self.clip_qvel)
        return np.concatenate((frame.qpos[1:], qvel))

    def healthy(self, frame: SimFrame) -> bool:
        z, angle = frame.qpos[1], frame.qpos[2]
        ok = True
        if self.healthy_state is not None:
            lo, hi = self.healthy_state
            x = np.concatenate((frame.qpos[2:], frame.qvel))
            ok = bool(lo < x.min() and x.max() < hi)
        if self.healthy_z is not None:
            ok = ok and self.healthy_z[0] < z < self.healthy_z[1]
        if self.healthy_angle is not None:
            ok = ok and self.healthy_angle[0] < angle < self.healthy_angle[1]
        return bool(ok)

    def step(self, before, after, action, state, dt):
        x_velocity = (after.qpos[0] - before.qpos[0]) / dt
        forward = self.forward_weight * x_velocity
        ctrl = self.ctrl_cost_weight * float(action @ action)
        terms = {"forward": forward, "ctrl": -ctrl, "x_velocity": x_velocity}
        terminated = False
        if self.healthy_z is not None:
            healthy = self.healthy(after)
            terms["survive"] = float(healthy) * self.healthy_reward
            terminated = not healthy
        reward = forward + terms.get("survive", 0.0) - ctrl
        return StepResult(reward, terms, terminated)


class Hopper(PlanarLocomotion):
    name = "Hopper"
    scene = "gymnasium:hopper.xml"
    frame_skip = 4
    healthy_z = (0.7, float("inf"))
    healthy_angle = (-0.2, 0.2)
    healthy_state = (-100.0, 100.0)
    clip_qvel = 10.0


class Walker2d(PlanarLocomotion):
    name = "Walker2d"
    scene = "gymnasium:walker2d_v5.xml"
    frame_skip = 4
    healthy_z = (0.8, 2.0)
    healthy_angle = (-1.0, 1.0)
    clip_qvel = 10.0


class HalfCheetah(PlanarLocomotion):
    name = "HalfCheetah"
    scene = "gymnasium:half_cheetah.xml"
    frame_skip = 5
    ctrl_cost_weight = 0.1
    reset_noise = ResetNoise(0.1, qvel="normal")


class Ant(Task):
    """Ant-v5: free-floating quadruped; the observation includes clipped contact wrenches."""

    name = "Ant"
    scene = "gymnasium:ant.xml"
    frame_skip = 5
    needs_contacts = True
    reset_noise = ResetNoise(0.1, qvel="normal")
    ctrl_cost_weight = 0.5
    contact_cost_weight = 5e-4
    healthy_z = (0.2, 1.0)
    success_survival = 0.1  # as PlanarLocomotion

    def observation_size(self, c):
        return c.nq - 2 + c.nv + 6 * len(c.body_names)

    def initial_state(self, c, rng):
        return self.reset_noise.sample(c.qpos0, c.nv, rng)

    def observe(self, frame, state):
        contact = np.clip(frame.body_ext_wrench, -1.0, 1.0).ravel()
        return np.concatenate((frame.qpos[2:], frame.qvel, contact))

    def step(self, before, after, action, state, dt):
        velocity = (after.base_pos[:2] - before.base_pos[:2]) / dt
        healthy = bool(np.isfinite(np.concatenate((after.qpos, after.qvel))).all()
                       and self.healthy_z[0] <= after.qpos[2] <= self.healthy_z[1])
        ctrl = self.ctrl_cost_weight * float(np.sum(np.square(action)))
        contact = self.contact_cost_weight * float(np.sum(np.square(np.clip(after.body_ext_wrench, -1.0, 1.0))))
        terms = {"forward": velocity[0], "ctrl": -ctrl, "contact": -contact, "survive": float(healthy),
                 "x_velocity": velocity[0]}
        return StepResult(velocity[0] + float(healthy) - ctrl - contact, terms, not healthy)
