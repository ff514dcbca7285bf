"""Velocity tracking for legged robots (G1, Go1, ...): the task users bring from Isaac Gym / MJX.

The robot (card ``robot``) starts at a keyframe or its model pose (with the card's
``start_pose`` on top), varied per episode by seeded reset events (``ResetEvents``, card
``task_options.reset``; docs/risk.md gives the defaults), and tracks a velocity command (vx, vy,
yaw rate): fixed, or drawn from ranges (``commands``), optionally with push disturbances
(``pushes``). An episode ends in a fall by the card's fall rule (``fall``; the step names why).
The reward is the usual tracking kernel; what matters for transfer are the metrics: forward
speed, linear and yaw tracking errors, falls, survival time, torque saturation, energy.
Observations come from the card's terms (crosssim.observations), not from the task. The options
beyond the command are parsed in crosssim.tasks.locomotion_options.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from crosssim.errors import CardError, CrossSimError
from crosssim.frame import InitialState, quat_to_matrix
from crosssim.tasks.base import StepResult, Task
from crosssim.tasks.locomotion_options import CommandRanges, FallRule, FootHeights, Pushes, StartPose


@dataclass(frozen=True)
class ResetEvents:
    """How each episode starts (Isaac-Lab-like reset events, card ``task_options.reset``), drawn from
    the episode's seeded generator in this order: joint positions, joint velocities, base yaw."""

    joint_pos_noise: float = 0.05
    """Half-width [rad or m] of the uniform offset added to every joint's start position."""
    joint_vel_noise: float = 0.1
    """Half-width [rad/s or m/s] of the uniform start velocity of every joint."""
    yaw_range: tuple[float, float] = (-math.pi, math.pi)
    """Range [rad] of the uniform heading of a free base (the command is in the heading frame)."""

    @classmethod
    def parse(cls, raw: dict) -> "ResetEvents":
        """From a card's ``task_options.reset`` mapping; CardError naming the bad key or value."""
        if not isinstance(raw, dict):
            raise CardError(f"task_options.reset must be a mapping (joint_pos_noise, joint_vel_noise, yaw_range), "
                            f"got {raw!r:.60}")
        known = [f.name for f in fields(cls)]
        for key in raw:
            if key not in known:
                raise CardError(f"task_options.reset.{key} is not a reset option; options: {', '.join(known)}")
        out = {}
        for key in ("joint_pos_noise", "joint_vel_noise"):
            if key in raw:
                v = raw[key]
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v >= 0):
                    raise CardError(f"task_options.reset.{key} must be a number >= 0, got {v!r}")
                out[key] = float(v)
        if "yaw_range" in raw:
            v = raw["yaw_range"]
            ok = (isinstance(v, (list, tuple)) and len(v) == 2
                  and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)
                  and v[0] <= v[1])
            if not ok:
                raise CardError(f"task_options.reset.yaw_range must be [low, high] radians with low <= high, got {v!r}")
            out["yaw_range"] = (float(v[0]), float(v[1]))
        return cls(**out)

    def sample(self, c, qpos: np.ndarray, rng: np.random.Generator) -> InitialState:
        """The start state around ``qpos`` (keyframe or model pose); the same ``rng`` state gives the same one."""
        qpos = qpos.copy()
        qvel = np.zeros(c.nv)
        if self.joint_pos_noise:
            qpos[c.joint_qposadr] += rng.uniform(-self.joint_pos_noise, self.joint_pos_noise, c.joint_count)
        if self.joint_vel_noise:
            qvel[c.joint_dofadr] = rng.uniform(-self.joint_vel_noise, self.joint_vel_noise, c.joint_count)
        lo, hi = self.yaw_range
        if c.free_base and hi > lo:
            # The free joint is the root body's, first in qpos: position (3) then quaternion w, x, y, z.
            yaw = rng.uniform(lo, hi)
            qpos[3:7] = _quat_mul(np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]), qpos[3:7])
        return InitialState(qpos, qvel)


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b of quaternions w, x, y, z."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw])


LOW_START = 0.05
"""[m] A start height under which a fall reason suggests another fall rule (base frame at the soles)."""


class Locomotion(Task):
    name = "Locomotion"
    scene = ""  # the card's robot
    max_steps = 1000

    def __init__(self, *, command=(0.5, 0.0, 0.0), episode_seconds: float = 20.0, keyframe: str | None = None,
                 min_base_height: float | None = None, max_tilt: float | None = None, reset_noise: float | None = None,
                 reset: dict | None = None, tracking_sigma: float = 0.25, fall: dict | str | None = None,
                 start_pose: dict | None = None, commands: dict | None = None, pushes: dict | None = None):
        cmd = np.asarray(command, dtype=float)
        if cmd.shape != (3,) or not np.isfinite(cmd).all():
            raise CardError(f"task_options.command must be [vx, vy, yaw_rate], got {command!r}")
        seconds = episode_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < 1e6:
            # 0 or below would silently run one-step episodes that count as survived
            raise CardError(f"task_options.episode_seconds must be a duration in seconds above 0 (and below 1e6), "
                            f"got {seconds!r:.40}")
        self.command, self.episode_seconds, self.keyframe = cmd, float(seconds), keyframe
        self.fall = FallRule.parse({"height": None, "tilt": None} if fall == "none" else fall,
                                   min_base_height=min_base_height, max_tilt=max_tilt)
        self.start_pose = StartPose.parse(start_pose)
        self.commands = CommandRanges.parse(commands)
        self.pushes = Pushes.parse(pushes)
        self.sigma = float(tracking_sigma)
        if reset_noise is not None and reset is not None:
            raise CardError("task_options: give either reset (joint_pos_noise, ...) or the older reset_noise, not both")
        # reset_noise (the first option, joint positions only) keeps its old meaning exactly.
        self.reset_events = (ResetEvents(joint_pos_noise=float(reset_noise), joint_vel_noise=0.0, yaw_range=(0.0, 0.0))
                             if reset_noise is not None else ResetEvents.parse(reset or {}))
        self._start_qpos: np.ndarray | None = None  # set by bind: keyframe or qpos0 with start_pose applied
        self._feet: FootHeights | None = None

    def bind(self, c, joints: np.ndarray) -> None:
        """Resolve what needs the robot: the keyframe, the start pose (policy joint order
        ``joints``) and the fall rule's feet; CardError naming the field."""
        if self.keyframe is not None and self.keyframe not in c.keyframes:
            raise CardError(f"task_options.keyframe {self.keyframe!r} is not in {c.path.name}; "
                            f"keyframes: {sorted(c.keyframes)}")
        qpos = (c.keyframes[self.keyframe] if self.keyframe is not None else c.qpos0).copy()
        self._start_qpos = qpos if self.start_pose is None else self.start_pose.apply(c, qpos, joints)
        if self.fall.reference == "lowest_foot":
            self._feet = FootHeights(c.path, self.fall.feet)
        if self.pushes is not None and not c.free_base:
            raise CardError(f"field 'task_options.pushes' needs a free-joint base; {c.path.name}'s base moves on "
                            "named joints")

    period_from_card = True
    metrics = ("tracking", "return", "survival")
    primary_metric = "tracking"
    """A fall is a failure whatever the return; see ``metric_values``."""

    def metric_values(self, rows, name: str) -> np.ndarray:
        """``tracking``: 0 for an episode that fell, else the share of the commanded planar velocity
        delivered, 1 - mean |v_xy - command_xy| / max(|command_xy|, 0.1 m/s), in [0, 1] (with
        command ranges, |command_xy| is the episode's mean commanded speed)."""
        if name != "tracking":
            return super().metric_values(rows, name)
        speed = np.maximum(rows["metric_command_speed"].to_numpy(float) if "metric_command_speed" in rows
                           else float(np.linalg.norm(self.command[:2])), 0.1)
        err = rows["metric_lin_vel_error"].to_numpy(float) if "metric_lin_vel_error" in rows else np.nan
        values = np.where(rows["terminated"].to_numpy(bool), 0.0, np.clip(1.0 - err / speed, 0.0, 1.0))
        return np.where(rows["failure"].isna().to_numpy(), values, np.nan)

    def configure(self, control_period: float, timestep: float) -> None:
        """Set frame skip and episode length from the card's control period."""
        skip = control_period / timestep
        if not math.isclose(skip, round(skip), rel_tol=1e-6) or round(skip) < 1:
            raise CrossSimError(f"control_period {control_period} s is not a whole number of physics steps of "
                                f"{timestep} s")
        self.frame_skip = int(round(skip))
        self.max_steps = max(1, int(round(self.episode_seconds / control_period)))

    def observation_size(self, c) -> int:  # observations come from the card's terms
        raise CardError("the Locomotion task needs observation.terms in the card")

    def initial_state(self, c, rng, *, events: ResetEvents | None = None) -> InitialState:
        if self._start_qpos is None:  # a task used without a harness: no start pose to apply
            self.bind(c, c.actuator_joint)
        return (events or self.reset_events).sample(c, self._start_qpos, rng)

    def nominal_initial_state(self, c) -> InitialState:
        return self.initial_state(c, None, events=ResetEvents(0.0, 0.0, (0.0, 0.0)))

    def reset(self, frame):
        start = self._height(frame)
        level = None
        if self.fall.reference is not None:
            level = self.fall.min_height if self.fall.min_height is not None else self.fall.fraction * start
        return {"command": self.command.copy(), "min_height": level, "start_height": start}

    def start_episode(self, state, rng) -> None:
        """Draw this episode's command (and when it is drawn again) and its first push time from
        ``rng``, in that order, where the card asks for them; nothing is drawn otherwise."""
        if self.commands is not None:
            state["command"] = self.commands.draw(self.command, rng)
            state["resample_at"] = self.commands.next_time(0.0, rng)
        if self.pushes is not None:
            state["push_at"] = self.pushes.next_time(0.0, rng)
        state["rng"] = rng

    def _height(self, frame) -> float:
        """The base's height above the fall rule's reference [m] (start: the world's, read at reset)."""
        z = float(frame.base_pos[2])
        if self.fall.reference == "lowest_foot":
            return z - self._feet.lowest(frame.qpos)
        return z

    def observe(self, frame, state):
        raise CardError("the Locomotion task needs observation.terms in the card")

    def _fallen(self, frame, tilt: float, state) -> str | None:
        """The reason this frame is a fall, or None."""
        rule = self.fall
        if rule.max_tilt is not None and tilt > rule.max_tilt:
            return f"fall: tilt {tilt:.3f} rad > {rule.max_tilt:g} rad"
        if rule.reference is not None:
            height = self._height(frame)
            if rule.reference == "start":
                height -= state["start_height"]
            if height < state["min_height"]:
                above = {"world": "the world", "start": "its start height", "lowest_foot": "the lowest foot"}
                level = (f"{rule.min_height:g} m" if rule.min_height is not None
                         else f"{state['min_height']:.3f} m ({rule.fraction:g} x the start)")
                hint = ""
                if rule.min_height is None and state["start_height"] < LOW_START:
                    # a base frame at the soles: any sinking is a "fall" under a fraction of ~0
                    hint = "; the base started near 0 m: set task_options.fall (e.g. height above start)"
                return f"fall: base height {height:.3f} m above {above[rule.reference]} < {level}{hint}"
        return None

    def step(self, before, after, action, state, dt):
        cmd = state["command"]
        R = quat_to_matrix(after.base_quat)
        v_body = R.T @ after.base_lin_vel
        # Heading frame: yaw only, so a pitching base does not change what "forward" means.
        yaw = np.arctan2(R[1, 0], R[0, 0])
        c, s = np.cos(yaw), np.sin(yaw)
        v_head = np.array([c * after.base_lin_vel[0] + s * after.base_lin_vel[1],
                           -s * after.base_lin_vel[0] + c * after.base_lin_vel[1]])
        lin_err = float(np.linalg.norm(v_head - cmd[:2]))
        yaw_err = float(abs(after.base_ang_vel[2] - cmd[2]))
        reward = np.exp(-lin_err**2 / self.sigma) + 0.5 * np.exp(-yaw_err**2 / self.sigma)
        tilt = float(np.arccos(np.clip(R[2, 2], -1.0, 1.0)))
        reason = self._fallen(after, tilt, state)
        energy = float(np.sum(np.abs(after.joint_torque * after.qvel[self._dofs(after)]))) * dt \
            if after.joint_torque.size else 0.0
        terms = {"x_velocity": float(v_head[0]), "lin_vel_error": lin_err, "yaw_rate_error": yaw_err,
                 "tilt": tilt, "energy": energy, "body_vx": float(v_body[0])}
        if self.commands is not None:
            terms["command_speed"] = float(np.linalg.norm(cmd[:2]))
            if after.time + 1e-9 >= state["resample_at"]:  # the next step tracks a new command (1e-9: summed dt)
                state["command"] = self.commands.draw(self.command, state["rng"])
                state["resample_at"] = self.commands.next_time(after.time, state["rng"])
        if self.pushes is not None and after.time + 1e-9 >= state["push_at"]:  # the episode loop applies it
            state["push"] = self.pushes.draw(state["rng"])
            state["push_at"] = self.pushes.next_time(after.time, state["rng"])
        return StepResult(float(reward), terms, reason is not None, reason)

    def _dofs(self, frame):
        n = frame.joint_torque.size
        return np.arange(frame.qvel.size - n, frame.qvel.size)
