"""Gymnasium's Pusher (v5): a 7-joint arm pushes a cylinder to a goal on a table. crosssim's first
manipulation task: the reward depends on contact between the arm and an object it does not drive.

Observation, reward and reset follow gymnasium 1.x ``Pusher-v5`` with default arguments (body
positions through crosssim.kinematics); tests/test_gym_equivalence.py checks it step for step.
"""

from __future__ import annotations

import numpy as np

from crosssim.frame import InitialState
from crosssim.tasks.base import StepResult
from crosssim.tasks.gym_base import GymTask
from crosssim.kinematics import kinematics_of


class Pusher(GymTask):
    """qpos: the arm's 7 joints, then the object's and the goal's x, y slides (the last four)."""

    name = "Pusher"
    scene = "gymnasium:pusher_v5.xml"
    versions = {"v5": scene}
    unavailable_versions = {"v4": "gymnasium refuses Pusher-v4 under mujoco >= 3 (its 1.3e-8 kg object is passed "
                                  "through by the arm there; gymnasium issue 950), and Pusher-v5 is the same task "
                                  "with the object 500x heavier"}
    frame_skip = 5
    max_steps = 100
    needs_derived = True
    near_weight = 0.5
    dist_weight = 1.0
    ctrl_weight = 0.1
    arm_joints = 7

    def observation_size(self, c):
        return 2 * self.arm_joints + 9

    def initial_state(self, c, rng):
        # Gymnasium's draw order: the object's start (rejection sampled away from the goal), then qvel.
        qpos = c.qpos0.copy()
        goal = np.zeros(2)
        while True:
            start = np.concatenate((rng.uniform(-0.3, 0, size=1), rng.uniform(-0.2, 0.2, size=1)))
            if np.linalg.norm(start - goal) > 0.17:
                break
        qpos[-4:-2], qpos[-2:] = start, goal
        qvel = np.zeros(c.nv) + rng.uniform(-0.005, 0.005, size=c.nv)
        qvel[-4:] = 0
        return InitialState(qpos=qpos, qvel=qvel)

    def nominal_initial_state(self, c):
        qpos = c.qpos0.copy()
        qpos[-4:-2], qpos[-2:] = (-0.15, 0.2), (0.0, 0.0)
        return InitialState(qpos=qpos, qvel=np.zeros(c.nv))

    def _bodies(self, frame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = kinematics_of(self.scene)
        xpos = k.of(frame)["xpos"]
        return xpos[k.body_id("tips_arm")], xpos[k.body_id("object")], xpos[k.body_id("goal")]

    def sensed(self, c):
        """Everything but the goal's position (the last three values: given, not measured)."""
        size = self.observation_size(c)
        return np.concatenate((np.ones(size - 3), np.zeros(3)))

    def observe(self, frame, state):
        n = self.arm_joints
        return np.concatenate((frame.qpos[:n], frame.qvel[:n], *self._bodies(frame)))

    def step(self, before, after, action, state, dt):
        tip, obj, goal = self._bodies(after)
        near = -float(np.linalg.norm(obj - tip)) * self.near_weight
        dist = -float(np.linalg.norm(obj - goal)) * self.dist_weight
        ctrl = -float(np.sum(np.square(action))) * self.ctrl_weight
        return StepResult(near + dist + ctrl, {"near": near, "distance": dist, "ctrl": ctrl}, False)
