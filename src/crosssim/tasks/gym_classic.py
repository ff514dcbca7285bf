"""Gymnasium's small MuJoCo tasks: Swimmer, InvertedPendulum, InvertedDoublePendulum, Reacher.

Observation, reward, termination and reset distribution follow gymnasium 1.x ``<Task>-v5`` and
``-v4`` (the layouts of the mujoco-py v2/v3 agents, as RL-Zoo's) with default arguments, computed from SimFrames only (body positions through crosssim.kinematics);
tests/test_gym_equivalence.py holds them to gymnasium step for step.
"""

from __future__ import annotations

import numpy as np

from crosssim.frame import InitialState
from crosssim.tasks.base import ResetNoise, StepResult
from crosssim.tasks.gym_base import GymTask
from crosssim.kinematics import kinematics_of


class Swimmer(GymTask):
    """A three-link swimmer in a viscous fluid (MuJoCo's fluid model: ``viscosity``, ``density``):
    swim forward along x. An engine without that fluid model cannot run it (its adapter says so)."""

    name = "Swimmer"
    scene = "gymnasium:swimmer.xml"
    versions = {"v4": scene, "v5": scene}  # the same task
    frame_skip = 4
    forward_weight = 1.0
    ctrl_cost_weight = 1e-4
    reset_noise = ResetNoise(0.1)

    def observation_size(self, c):
        return c.nq - 2 + c.nv

    def initial_state(self, c, rng):
        return self.reset_noise.sample(c.qpos0, c.nv, rng)

    def observe(self, frame, state):
        return np.concatenate((frame.qpos[2:], frame.qvel))

    def step(self, before, after, action, state, dt):
        x_velocity = (after.qpos[0] - before.qpos[0]) / dt
        forward = self.forward_weight * x_velocity
        ctrl = self.ctrl_cost_weight * float(np.sum(np.square(action)))
        return StepResult(forward - ctrl, {"forward": forward, "ctrl": -ctrl, "x_velocity": x_velocity}, False)


class InvertedPendulum(GymTask):
    """A pole on a cart: 1 per step while the pole stays within 0.2 rad of upright."""

    name = "InvertedPendulum"
    scene = "gymnasium:inverted_pendulum.xml"
    versions = {"v4": scene, "v5": scene}  # v4 pays 1 on the step that ends the episode too
    frame_skip = 2
    reset_noise = ResetNoise(0.01)
    max_angle = 0.2

    def observation_size(self, c):
        return c.nq + c.nv

    def initial_state(self, c, rng):
        return self.reset_noise.sample(c.qpos0, c.nv, rng)

    def observe(self, frame, state):
        return np.concatenate((frame.qpos, frame.qvel))

    def step(self, before, after, action, state, dt):
        obs = self.observe(after, state)
        terminated = bool(not np.isfinite(obs).all() or abs(after.qpos[1]) > self.max_angle)
        reward = float(not terminated or self.version == "v4")
        reason = (f"unhealthy: pole angle {after.qpos[1]:.3f} rad beyond {self.max_angle:g} (or a non-finite state)"
                  if terminated else None)
        return StepResult(reward, {"survive": reward, "angle": float(after.qpos[1])}, terminated, reason)


class InvertedDoublePendulum(GymTask):
    """Two poles on a cart: keep the tip (site ``tip``) high; the episode ends when it drops to 1 m.

    The observation ends with constraint forces (v5: the cart slider's, its range limit; v4: every
    joint's): MuJoCo's own where the engine hands them over, else 0 (only the engine's solver
    knows them). v4 also pays the alive bonus on the step that ends the episode."""

    name = "InvertedDoublePendulum"
    scene = "gymnasium:inverted_double_pendulum.xml"
    versions = {"v4": scene, "v5": scene}
    frame_skip = 5
    needs_derived = True
    healthy_reward = 10.0
    reset_noise = ResetNoise(0.1, qvel="normal")

    def observation_size(self, c):
        return 1 + 2 * (c.nq - 1) + c.nv + (c.nv if self.version == "v4" else 1)

    def initial_state(self, c, rng):
        return self.reset_noise.sample(c.qpos0, c.nv, rng)

    def observe(self, frame, state):
        k = kinematics_of(self.scene).of(frame)
        return np.concatenate((frame.qpos[:1], np.sin(frame.qpos[1:]), np.cos(frame.qpos[1:]),
                               np.clip(frame.qvel, -10, 10),
                               np.clip(k["qfrc_constraint"], -10, 10)[:None if self.version == "v4" else 1]))

    def step(self, before, after, action, state, dt):
        x, _, y = kinematics_of(self.scene).of(after)["site_xpos"][0]
        terminated = bool(y <= 1)
        v1, v2 = after.qvel[1:3]
        dist = 0.01 * x**2 + (y - 2) ** 2
        vel = 1e-3 * v1**2 + 5e-3 * v2**2
        alive = self.healthy_reward * float(not terminated or self.version == "v4")
        return StepResult(alive - dist - vel, {"survive": alive, "distance": -dist, "velocity": -vel,
                                               "tip_height": float(y)}, terminated,
                          f"unhealthy: tip height {y:.3f} m <= 1 m" if terminated else None)


class Reacher(GymTask):
    """A two-link arm reaching a random target in the plane (target joints: the last two qpos).

    v4 observes the fingertip-to-target vector with its (zero) z component, 11 values, and rewards
    the distance before the step rather than after it."""

    name = "Reacher"
    scene = "gymnasium:reacher.xml"
    versions = {"v4": scene, "v5": scene}
    frame_skip = 2
    max_steps = 50
    needs_derived = True
    dist_weight = 1.0
    ctrl_weight = 1.0

    def observation_size(self, c):
        return 2 + 2 + (c.nq - 2) + 2 + (3 if self.version == "v4" else 2)

    def initial_state(self, c, rng):
        # Gymnasium's draw order: qpos noise, then the goal (rejection sampled), then qvel noise.
        qpos = rng.uniform(-0.1, 0.1, size=c.nq) + c.qpos0
        while True:
            goal = rng.uniform(-0.2, 0.2, size=2)
            if np.linalg.norm(goal) < 0.2:
                break
        qpos[-2:] = goal
        qvel = np.zeros(c.nv) + rng.uniform(-0.005, 0.005, size=c.nv)
        qvel[-2:] = 0
        return InitialState(qpos=qpos, qvel=qvel)

    def nominal_initial_state(self, c):
        qpos = c.qpos0.copy()
        qpos[-2:] = (0.1, 0.1)
        return InitialState(qpos=qpos, qvel=np.zeros(c.nv))

    def _to_target(self, frame) -> np.ndarray:
        k = kinematics_of(self.scene)
        xpos = k.of(frame)["xpos"]
        return xpos[k.body_id("fingertip")] - xpos[k.body_id("target")]

    def observe(self, frame, state):
        theta = frame.qpos[:2]
        return np.concatenate((np.cos(theta), np.sin(theta), frame.qpos[2:], frame.qvel[:2],
                               self._to_target(frame)[:3 if self.version == "v4" else 2]))

    def step(self, before, after, action, state, dt):
        distance = float(np.linalg.norm(self._to_target(before if self.version == "v4" else after)))
        dist = -distance * self.dist_weight
        ctrl = -float(np.sum(np.square(action))) * self.ctrl_weight
        return StepResult(dist + ctrl, {"distance": dist, "ctrl": ctrl}, False)
