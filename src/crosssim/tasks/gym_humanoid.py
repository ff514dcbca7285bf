"""Gymnasium's Humanoid (v5): a 17-joint humanoid runs forward; its observation holds every body's
com-frame inertia and velocity, the actuator torques and the contact wrenches.

Observation, reward, termination and reset follow gymnasium 1.x ``Humanoid-v5`` and ``-v4`` with
default arguments (body quantities through crosssim.kinematics); tests/test_gym_equivalence.py
checks it step for step.
"""

from __future__ import annotations

import numpy as np

from crosssim.tasks.base import ResetNoise, StepResult
from crosssim.tasks.gym_base import GymTask
from crosssim.kinematics import kinematics_of


class Humanoid(GymTask):
    """qpos: free base (7) then 17 hinges; the forward speed is that of the whole body's centre of mass.

    v4 (the mujoco-py v3 layout, 376 values) keeps the world's rows of the body blocks and the free
    joint's six (zero) actuator forces, pays the healthy reward on the step that ends the episode,
    and charges no contact cost."""

    name = "Humanoid"
    scene = "gymnasium:humanoid.xml"
    versions = {"v4": scene, "v5": scene}
    frame_skip = 5
    needs_contacts = True
    needs_derived = True
    forward_weight = 1.25
    ctrl_cost_weight = 0.1
    contact_cost_weight = 5e-7
    contact_cost_max = 10.0
    healthy_reward = 5.0
    healthy_z = (1.0, 2.0)
    reset_noise = ResetNoise(1e-2)
    success_survival = 0.1  # as the other locomotion tasks

    def observation_size(self, c):
        rows = len(c.body_names) + (self.version == "v4")  # v4 keeps the world's rows
        actuated = c.nv if self.version == "v4" else c.nv - 6
        return (c.nq - 2) + c.nv + 10 * rows + 6 * rows + actuated + 6 * rows

    def initial_state(self, c, rng):
        return self.reset_noise.sample(c.qpos0, c.nv, rng)

    def sensed(self, c):
        """The joint state; body inertias (model constants), body velocities, actuator forces
        (commanded) and external wrenches are not a sensor's readings."""
        joint = c.nq - 2 + c.nv
        return np.concatenate((np.ones(joint), np.zeros(self.observation_size(c) - joint)))

    def observe(self, frame, state):
        k = kinematics_of(self.scene).of(frame)
        if self.version == "v4":  # the world's rows and the free joint's dofs, all zero, stay in
            return np.concatenate((frame.qpos[2:], frame.qvel, k["cinert"].ravel(), k["cvel"].ravel(), np.zeros(6),
                                   frame.joint_torque, np.zeros(6), frame.body_ext_wrench.ravel()))
        return np.concatenate((frame.qpos[2:], frame.qvel, k["cinert"][1:].ravel(), k["cvel"][1:].ravel(),
                               frame.joint_torque, frame.body_ext_wrench.ravel()))

    def _mass_center(self, frame) -> np.ndarray:
        kin = kinematics_of(self.scene)
        mass = kin.m.body_mass[:, None]
        return (mass * kin.of(frame)["xipos"]).sum(axis=0)[:2] / mass.sum()

    def step(self, before, after, action, state, dt):
        x_velocity = float((self._mass_center(after)[0] - self._mass_center(before)[0]) / dt)
        forward = self.forward_weight * x_velocity
        healthy = bool(self.healthy_z[0] < after.qpos[2] < self.healthy_z[1])
        survive = self.healthy_reward * float(healthy or self.version == "v4")
        ctrl = self.ctrl_cost_weight * float(np.sum(np.square(action)))
        # The world's row of cfrc_ext, which gymnasium sums too, is always zero.
        contact = 0.0 if self.version == "v4" else \
            min(self.contact_cost_weight * float(np.sum(np.square(after.body_ext_wrench))), self.contact_cost_max)
        terms = {"forward": forward, "survive": survive, "ctrl": -ctrl, "contact": -contact, "x_velocity": x_velocity}
        reason = None if healthy else (f"unhealthy: torso height {after.qpos[2]:.3f} m outside "
                                       f"({self.healthy_z[0]:g}, {self.healthy_z[1]:g})")
        return StepResult(forward + survive - ctrl - contact, terms, not healthy, reason)
