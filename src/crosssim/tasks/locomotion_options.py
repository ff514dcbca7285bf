"""The Locomotion task's card options beyond the command: fall rule, start pose, command ranges.

Each option is a frozen dataclass parsed from the card's ``task_options`` mapping, with a
CardError naming ``task_options.<option>.<key>`` for anything it cannot mean. The ones that need
the robot (body and joint names, the policy's joint order) are resolved once by ``bind``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crosssim.errors import CardError

HEIGHT_REFERENCES = ("world", "start", "lowest_foot")


def _number(value, field: str, *, minimum: float | None = None, positive: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if ok and positive:
        ok = value > 0
    if ok and minimum is not None:
        ok = value >= minimum
    if not ok:
        rule = "a number > 0" if positive else f"a number >= {minimum:g}" if minimum is not None else "a finite number"
        raise CardError(f"field '{field}' must be {rule}, got {value!r:.40}")
    return float(value)


def _keys(raw, field: str, known: tuple[str, ...]) -> dict:
    from crosssim.strictload import did_you_mean

    if not isinstance(raw, dict):
        raise CardError(f"field '{field}' must be a mapping with keys {', '.join(known)}, got {raw!r:.60}")
    for key in raw:
        if key not in known:
            raise CardError(f"field '{field}.{key}' is not known; {did_you_mean(str(key), known, field + '.')}")
    return raw


def _range(value, field: str) -> tuple[float, float]:
    ok = (isinstance(value, (list, tuple)) and len(value) == 2
          and all(not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) for v in value)
          and value[0] <= value[1])
    if not ok:
        raise CardError(f"field '{field}' must be [low, high] with low <= high, got {value!r:.60}")
    return float(value[0]), float(value[1])


@dataclass(frozen=True)
class FallRule:
    """When an episode ends in a fall (card ``task_options.fall``).

    Height: the base's height above ``reference`` (the world's z = 0, the base's own start
    height, or the lowest of the ``feet`` bodies) is compared with ``min_height`` [m] or, when
    that is None, with ``fraction`` of the same height at the start. Tilt: the angle [rad]
    between the base's z axis and the world's. Either rule may be off (None).
    """

    reference: str | None = "world"
    """'world', 'start', 'lowest_foot', or None (no height rule)."""
    min_height: float | None = None
    """[m] fall below this height above the reference (may be negative with 'start')."""
    fraction: float = 0.5
    """Used when ``min_height`` is None: fall below this share of the start height above the reference."""
    max_tilt: float | None = 1.0
    """[rad] fall beyond this tilt; None: no tilt rule."""
    feet: tuple[str, ...] = ()
    """Bodies whose lowest one is the 'lowest_foot' reference."""

    @classmethod
    def parse(cls, raw, *, min_base_height=None, max_tilt=None) -> "FallRule":
        """From ``task_options.fall`` (or the older ``min_base_height`` / ``max_tilt`` options)."""
        if raw is None:
            tilt = 1.0 if max_tilt is None else _number(max_tilt, "task_options.max_tilt", positive=True)
            if min_base_height is None:
                return cls(max_tilt=tilt)
            return cls(min_height=_number(min_base_height, "task_options.min_base_height"), max_tilt=tilt)
        if min_base_height is not None or max_tilt is not None:
            raise CardError("field 'task_options.fall' replaces min_base_height and max_tilt; give only fall")
        raw = _keys(raw, "task_options.fall", ("height", "tilt", "feet"))
        out: dict = {}
        height = raw.get("height", {})
        if height is None or height == "none":
            out["reference"] = None
        else:
            height = _keys(height, "task_options.fall.height", ("above", "min", "fraction"))
            ref = height.get("above", "world")
            if ref not in HEIGHT_REFERENCES:
                raise CardError(f"field 'task_options.fall.height.above' is {ref!r}; one of {', '.join(HEIGHT_REFERENCES)}")
            out["reference"] = ref
            if "min" in height and "fraction" in height:
                raise CardError("field 'task_options.fall.height' takes min [m] or fraction of the start height, not both")
            if "min" in height:
                out["min_height"] = _number(height["min"], "task_options.fall.height.min")
            elif ref == "start":
                raise CardError("field 'task_options.fall.height' above 'start' needs min [m] (e.g. -0.3: the base sank "
                                "0.3 m below its start height); a fraction of a zero height cannot fall")
            if "fraction" in height:
                out["fraction"] = _number(height["fraction"], "task_options.fall.height.fraction", positive=True)
        tilt = raw.get("tilt", 1.0)
        out["max_tilt"] = None if tilt is None or tilt == "none" else _number(tilt, "task_options.fall.tilt",
                                                                            positive=True)
        feet = raw.get("feet", [])
        if not isinstance(feet, list) or not all(isinstance(f, str) for f in feet):
            raise CardError(f"field 'task_options.fall.feet' must be a list of body names, got {feet!r:.60}")
        if out.get("reference") == "lowest_foot" and not feet:
            raise CardError("field 'task_options.fall.feet' is required with height above 'lowest_foot' "
                            "(the robot's foot bodies, by MJCF name)")
        out["feet"] = tuple(feet)
        return cls(**out)

    def describe(self) -> str:
        """The rule in words (for reasons and reports)."""
        parts = []
        if self.reference is not None:
            above = {"world": "the world", "start": "its start height", "lowest_foot": "the lowest foot"}[self.reference]
            level = (f"{self.min_height:g} m" if self.min_height is not None
                     else f"{self.fraction:g} x its start height")
            parts.append(f"base height above {above} below {level}")
        if self.max_tilt is not None:
            parts.append(f"tilt over {self.max_tilt:g} rad")
        return " or ".join(parts) or "no fall rule"


class FootHeights:
    """Heights [m] of named bodies, from MuJoCo's kinematics on the canonical model at a frame's
    qpos (the same for every engine: qpos is canonical)."""

    def __init__(self, scene, feet: tuple[str, ...]):
        import mujoco

        from crosssim.scene import load_mujoco_model

        self._mj = mujoco
        self.m = load_mujoco_model(scene)
        self.d = mujoco.MjData(self.m)
        ids = [mujoco.mj_name2id(self.m, mujoco.mjtObj.mjOBJ_BODY, f) for f in feet]
        unknown = [f for f, i in zip(feet, ids) if i < 0]
        if unknown:
            names = [mujoco.mj_id2name(self.m, mujoco.mjtObj.mjOBJ_BODY, b) for b in range(1, self.m.nbody)]
            raise CardError(f"field 'task_options.fall.feet' names {unknown}, not bodies of {scene.name} "
                            f"(its bodies: {names})")
        self.ids = np.array(ids, dtype=int)

    def lowest(self, qpos: np.ndarray) -> float:
        self.d.qpos[:] = qpos
        self._mj.mj_kinematics(self.m, self.d)
        return float(self.d.xpos[self.ids, 2].min())


@dataclass(frozen=True)
class StartPose:
    """Where each episode starts before the reset events vary it (card ``task_options.start_pose``):
    joint values in the policy's joint order (a list) or by joint name (a mapping), and for a free
    base its height, position or orientation (w, x, y, z; also a ball joint's in the base). Unset
    parts keep the keyframe's (or the model's qpos0)."""

    joints: tuple | dict | None = None
    base_height: float | None = None
    base_pos: tuple[float, float, float] | None = None
    base_quat: tuple[float, float, float, float] | None = None

    @classmethod
    def parse(cls, raw) -> "StartPose | None":
        if raw is None:
            return None
        raw = _keys(raw, "task_options.start_pose", ("joints", "base_height", "base_pos", "base_quat"))
        out: dict = {}
        joints = raw.get("joints")
        if isinstance(joints, list):
            out["joints"] = tuple(_number(v, f"task_options.start_pose.joints[{k}]") for k, v in enumerate(joints))
        elif isinstance(joints, dict):
            out["joints"] = {str(k): _number(v, f"task_options.start_pose.joints.{k}") for k, v in joints.items()}
        elif joints is not None:
            raise CardError("field 'task_options.start_pose.joints' must be a list (policy joint order) or a mapping "
                            f"joint name -> value, got {joints!r:.60}")
        if "base_height" in raw and "base_pos" in raw:
            raise CardError("field 'task_options.start_pose' takes base_height or base_pos, not both")
        if "base_height" in raw:
            out["base_height"] = _number(raw["base_height"], "task_options.start_pose.base_height")
        for key, size in (("base_pos", 3), ("base_quat", 4)):
            if key in raw:
                v = raw[key]
                if not isinstance(v, list) or len(v) != size:
                    raise CardError(f"field 'task_options.start_pose.{key}' must be {size} numbers, got {v!r:.60}")
                out[key] = tuple(_number(x, f"task_options.start_pose.{key}") for x in v)
        if "base_quat" in out:
            norm = float(np.linalg.norm(out["base_quat"]))
            if norm < 1e-9:
                raise CardError("field 'task_options.start_pose.base_quat' is all zeros; write w, x, y, z")
            out["base_quat"] = tuple(float(x) / norm for x in out["base_quat"])
        return cls(**out)

    def apply(self, c, qpos: np.ndarray, policy_joints: np.ndarray) -> np.ndarray:
        """``qpos`` with this pose written into it; CardError naming the field that does not fit ``c``."""
        qpos = qpos.copy()
        if isinstance(self.joints, tuple):
            if len(self.joints) != len(policy_joints):
                raise CardError(f"field 'task_options.start_pose.joints' has {len(self.joints)} values for "
                                f"{len(policy_joints)} policy joints (card 'joints' order)")
            qpos[c.joint_qposadr[policy_joints]] = self.joints
        elif isinstance(self.joints, dict):
            unknown = [j for j in self.joints if j not in c.joint_names]
            if unknown:
                raise CardError(f"field 'task_options.start_pose.joints' names {unknown}, not joints of "
                                f"{c.path.name} (its joints: {list(c.joint_names)})")
            for name, value in self.joints.items():
                qpos[c.joint_qposadr[c.joint_names.index(name)]] = value
        base = [k for k in ("base_height", "base_pos", "base_quat") if getattr(self, k) is not None]
        if c.ball_joints and self.base_quat is not None:  # the base's orientation is its ball joint's
            base.remove("base_quat")
            adr = c.ball_qposadr[0]
            qpos[adr:adr + 4] = self.base_quat
        if base and not c.free_base:
            raise CardError(f"field 'task_options.start_pose.{base[0]}' needs a free-joint base; {c.path.name}'s base "
                            "moves on named joints: set them in start_pose.joints by name")
        if self.base_height is not None:
            qpos[2] = self.base_height
        if self.base_pos is not None:
            qpos[0:3] = self.base_pos
        if self.base_quat is not None and c.free_base:
            qpos[3:7] = self.base_quat
        return qpos


COMMAND_KEYS = ("lin_vel_x", "lin_vel_y", "ang_vel_z")


@dataclass(frozen=True)
class CommandRanges:
    """Velocity commands drawn per episode (card ``task_options.commands``, Isaac Lab's names):
    each component uniform in its [low, high] (a missing one: the fixed ``command``'s value),
    drawn at reset and again every ``resampling_time`` [s] (uniform in its range; None: once)."""

    ranges: tuple[tuple[float, float] | None, ...] = (None, None, None)
    resampling_time: tuple[float, float] | None = None

    @classmethod
    def parse(cls, raw) -> "CommandRanges | None":
        if raw is None:
            return None
        raw = _keys(raw, "task_options.commands", (*COMMAND_KEYS, "resampling_time"))
        ranges = tuple(_range(raw[k], f"task_options.commands.{k}") if k in raw else None for k in COMMAND_KEYS)
        if all(r is None for r in ranges):
            raise CardError(f"field 'task_options.commands' gives no range; set one of {', '.join(COMMAND_KEYS)}")
        resample = raw.get("resampling_time")
        if resample is not None:
            resample = _range(resample, "task_options.commands.resampling_time")
            if resample[0] <= 0:
                raise CardError("field 'task_options.commands.resampling_time' must be [low, high] seconds > 0")
        return cls(ranges, resample)

    def draw(self, fixed: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One command: the ranged components drawn from ``rng`` in order vx, vy, yaw rate."""
        cmd = fixed.copy()
        for k, r in enumerate(self.ranges):
            if r is not None:
                cmd[k] = rng.uniform(*r)
        return cmd

    def next_time(self, now: float, rng: np.random.Generator) -> float:
        """When the command is drawn again [s] (inf: never)."""
        return math.inf if self.resampling_time is None else now + rng.uniform(*self.resampling_time)


@dataclass(frozen=True)
class Pushes:
    """Push disturbances (card ``task_options.pushes``, as Isaac Lab's push_by_setting_velocity):
    every ``interval`` [s] (uniform in its range, first one after reset) the free base's
    linear velocity jumps by a vector drawn uniformly per world axis from ``velocity``."""

    interval: tuple[float, float] = (10.0, 15.0)
    velocity: tuple[tuple[float, float], ...] = ((-0.5, 0.5), (-0.5, 0.5), (0.0, 0.0))
    """[m/s] ranges for x, y, z."""

    @classmethod
    def parse(cls, raw) -> "Pushes | None":
        if raw is None:
            return None
        raw = _keys(raw, "task_options.pushes", ("interval", "velocity"))
        out: dict = {}
        if "interval" in raw:
            out["interval"] = _range(raw["interval"], "task_options.pushes.interval")
            if out["interval"][0] <= 0:
                raise CardError("field 'task_options.pushes.interval' must be [low, high] seconds > 0")
        if "velocity" in raw:
            v = _keys(raw["velocity"], "task_options.pushes.velocity", ("x", "y", "z"))
            out["velocity"] = tuple(_range(v[k], f"task_options.pushes.velocity.{k}") if k in v else (0.0, 0.0)
                                    for k in ("x", "y", "z"))
        return cls(**out)

    def next_time(self, now: float, rng: np.random.Generator) -> float:
        return now + rng.uniform(*self.interval)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        return np.array([rng.uniform(lo, hi) for lo, hi in self.velocity])
