"""Gymnasium's MuJoCo locomotion tasks at version v4 or v5, computed from SimFrames only.

Observation, reward terms, termination and reset noise follow gymnasium 1.x ``Hopper``,
``Walker2d``, ``HalfCheetah`` and ``Ant`` ``-v4`` and ``-v5`` with default arguments (v5 unless
the card chooses; crosssim.tasks.gym_base), so policies trained there run unchanged. What differs
between versions: Walker2d's model (v4 and the mujoco-py v3: right foot friction 0.9; v5: 1.9) and
Ant's observation (v4: 27 values, or 111 with ``contact_forces: on`` or ``zeroed``; v5: 105).
The equivalence is a test (tests/test_gym_equivalence.py), not a claim.
"""

from __future__ import annotations

import numpy as np

from crosssim.frame import SimFrame
from crosssim.scene import CanonicalModel
from crosssim.errors import CardError
from crosssim.tasks.base import ResetNoise, StepResult
from crosssim.tasks.gym_base import GymTask


class PlanarLocomotion(GymTask):
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
            # v4 pays the healthy reward on the step that ends the episode too; v5 does not.
            terms["survive"] = float(healthy or self.version == "v4") * self.healthy_reward
            terminated = not healthy
        reward = forward + terms.get("survive", 0.0) - ctrl
        return StepResult(reward, terms, terminated, self.unhealthy_reason(after) if terminated else None)

    def unhealthy_reason(self, frame: SimFrame) -> str:
        """Which of gymnasium's healthy ranges the frame left, in words."""
        z, angle = frame.qpos[1], frame.qpos[2]
        if self.healthy_z is not None and not self.healthy_z[0] < z < self.healthy_z[1]:
            return f"unhealthy: torso height {z:.3f} m outside ({self.healthy_z[0]:g}, {self.healthy_z[1]:g})"
        if self.healthy_angle is not None and not self.healthy_angle[0] < angle < self.healthy_angle[1]:
            return f"unhealthy: torso angle {angle:.3f} rad outside ({self.healthy_angle[0]:g}, {self.healthy_angle[1]:g})"
        return f"unhealthy: a state value outside ({self.healthy_state[0]:g}, {self.healthy_state[1]:g})"


class Hopper(PlanarLocomotion):
    name = "Hopper"
    scene = "gymnasium:hopper.xml"
    versions = {"v4": scene, "v5": scene}  # the same model and layout
    frame_skip = 4
    healthy_z = (0.7, float("inf"))
    healthy_angle = (-0.2, 0.2)
    healthy_state = (-100.0, 100.0)
    clip_qvel = 10.0


class Walker2d(PlanarLocomotion):
    name = "Walker2d"
    scene = "gymnasium:walker2d_v5.xml"
    versions = {"v4": "gymnasium:walker2d.xml", "v5": scene}  # right foot friction 0.9 / 1.9
    frame_skip = 4
    healthy_z = (0.8, 2.0)
    healthy_angle = (-1.0, 1.0)
    clip_qvel = 10.0


class HalfCheetah(PlanarLocomotion):
    name = "HalfCheetah"
    scene = "gymnasium:half_cheetah.xml"
    versions = {"v4": scene, "v5": scene}
    frame_skip = 5
    ctrl_cost_weight = 0.1
    reset_noise = ResetNoise(0.1, qvel="normal")


CONTACT_FORCES = ("on", "off", "zeroed")
DEFAULT_CONTACT_FORCES = {"v4": "off", "v5": "on"}
"""Ant's contact-force block by version, as gymnasium's defaults (v4 ``use_contact_forces=False``)."""


class Ant(GymTask):
    """Ant: free-floating quadruped; its observation may end with clipped contact wrenches.

    ``contact_forces``: ``on`` appends the clipped wrench of every body (v4: 14 bodies, the world's
    row included, as ``use_contact_forces=True``; v5: 13), ``zeroed`` appends as many zeros (what
    the mujoco-py ``Ant-v3`` gave its agents: mujoco-py never filled ``cfrc_ext``), ``off`` none.
    The reward's contact cost follows gymnasium: v5 always charges it; v4 only with ``on``.
    """

    name = "Ant"
    scene = "gymnasium:ant.xml"
    versions = {"v4": scene, "v5": scene}
    option_choices = {"contact_forces": CONTACT_FORCES}
    frame_skip = 5
    reset_noise = ResetNoise(0.1, qvel="normal")
    ctrl_cost_weight = 0.5
    contact_cost_weight = 5e-4
    healthy_z = (0.2, 1.0)
    success_survival = 0.1  # as PlanarLocomotion

    def __init__(self, *, version: str | int | None = None, contact_forces: str | None = None):
        super().__init__(version=version)
        if contact_forces is None:
            contact_forces = DEFAULT_CONTACT_FORCES[self.version]
        if contact_forces not in CONTACT_FORCES:
            raise CardError(f"task_options.contact_forces {contact_forces!r}: one of {', '.join(CONTACT_FORCES)}")
        self.contact_forces = contact_forces
        self.contact_cost = self.version != "v4" or contact_forces == "on"
        self.needs_contacts = contact_forces == "on" or self.contact_cost
        self.world_row = self.version == "v4"  # v4 observed cfrc_ext[0], the world's (always zero)

    @property
    def options_note(self) -> str:
        """The contact-force option in words, for ``crosssim tasks``."""
        return f"task_options.contact_forces: {self.contact_forces}; on, off or zeroed"

    def contact_rows(self, c) -> int:
        return 0 if self.contact_forces == "off" else len(c.body_names) + self.world_row

    def observation_size(self, c):
        return c.nq - 2 + c.nv + 6 * self.contact_rows(c)

    def initial_state(self, c, rng):
        self.body_count = len(c.body_names)  # the zeroed block's size (observe sees frames only)
        return self.reset_noise.sample(c.qpos0, c.nv, rng)

    def sensed(self, c):
        """The joint state; the contact-force block (clipped wrenches or zeros) is not a sensor's."""
        joint = c.nq - 2 + c.nv
        return np.concatenate((np.ones(joint), np.zeros(self.observation_size(c) - joint)))

    def observe(self, frame, state):
        parts = [frame.qpos[2:], frame.qvel]
        if self.world_row and self.contact_forces != "off":
            parts.append(np.zeros(6))
        if self.contact_forces == "on":
            parts.append(np.clip(frame.body_ext_wrench, -1.0, 1.0).ravel())
        elif self.contact_forces == "zeroed":
            parts.append(np.zeros(6 * self.body_count))
        return np.concatenate(parts)

    def step(self, before, after, action, state, dt):
        velocity = (after.base_pos[:2] - before.base_pos[:2]) / dt
        healthy = bool(np.isfinite(np.concatenate((after.qpos, after.qvel))).all()
                       and self.healthy_z[0] <= after.qpos[2] <= self.healthy_z[1])
        ctrl = self.ctrl_cost_weight * float(np.sum(np.square(action)))
        contact = self.contact_cost_weight * float(np.sum(np.square(np.clip(after.body_ext_wrench, -1.0, 1.0)))) \
            if self.contact_cost else 0.0
        survive = float(healthy or self.version == "v4")  # as PlanarLocomotion
        terms = {"forward": velocity[0], "ctrl": -ctrl, "contact": -contact, "survive": survive,
                 "x_velocity": velocity[0]}
        reason = None if healthy else (f"unhealthy: torso height {after.qpos[2]:.3f} m outside "
                                       f"[{self.healthy_z[0]:g}, {self.healthy_z[1]:g}] (or a non-finite state)")
        return StepResult(velocity[0] + survive - ctrl - contact, terms, not healthy, reason)
