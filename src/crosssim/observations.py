"""Observation terms: named functions of SimFrame + task state, shared by every engine.

A card lists the terms in order (``observation.terms``) with per-term scale, clip and options;
``ObservationBuilder`` turns a frame into the policy's input vector, including history stacking
in a stated layout. Terms use the names users know from Isaac Lab / legged_gym / Playground;
plugins add terms through the ``crosssim.observation_terms`` entry-point group (docs/extending.md).

History layouts (``observation.history``): with terms A (2 values), B (1 value) and length 2,
``frame_major`` is [A(t-1), B(t-1), A(t), B(t)] (whole frames, oldest first) and ``term_major``
is [A(t-1), A(t), B(t-1), B(t)] (each term's history, oldest first).
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from crosssim.errors import CardError, CrossSimError
from crosssim.frame import SimFrame, quat_to_matrix
from crosssim.observations_time import PHASE_LAYOUTS, TIME_ORIGINS, clock, gait_phase, gait_phase_size, time_feature
from crosssim.registry import Registry
from crosssim.strictload import did_you_mean


@dataclass
class TermContext:
    """What terms may read besides the frame: joints, default pose, command, last action, time."""

    qpos_index: np.ndarray
    """qpos address of each policy joint, in the card's joint order."""
    dof_index: np.ndarray
    default_pos: np.ndarray
    command: np.ndarray = field(default_factory=lambda: np.zeros(3))
    last_action: np.ndarray = field(default_factory=lambda: np.zeros(0))
    quaternion_order: str = "wxyz"
    """How the card reads the base quaternion: 'wxyz' (correct for SimFrame) or 'xyzw'."""
    sensors: "object" = None
    """SensorReader for MJCF sensors (sensor:<name>), or None."""
    first_call_time: float | None = None
    """Frame time [s] of the episode's first observation (set by ObservationBuilder)."""
    call_index: int = 0
    """Observations built before this one since reset (0 at the first policy call)."""
    joint_sensors: dict = field(default_factory=dict)
    """'jointpos' / 'jointvel' -> the sensor name of each policy joint (terms with ``source: sensors``)."""
    task_observation: "Callable | None" = None
    """frame -> the task's own observation (gymnasium layout), set per call by the harness's Observer."""


def _base_quat(frame: SimFrame, ctx: TermContext) -> np.ndarray:
    q = frame.base_quat
    if ctx.quaternion_order == "xyzw":  # what a card that assumes x,y,z,w storage computes
        q = np.array([q[3], q[0], q[1], q[2]])
    return q / max(np.linalg.norm(q), 1e-12)


def base_lin_vel(frame, ctx, **_):
    """Base linear velocity in the base frame [m/s]. Privileged: a real robot does not measure it."""
    return quat_to_matrix(_base_quat(frame, ctx)).T @ frame.base_lin_vel


def base_ang_vel(frame, ctx, **_):
    """Base angular velocity in the base frame [rad/s] (what an IMU gyro on the base reads)."""
    return quat_to_matrix(_base_quat(frame, ctx)).T @ frame.base_ang_vel


def projected_gravity(frame, ctx, **_):
    """Unit gravity direction in the base frame: [0, 0, -1] when upright."""
    return quat_to_matrix(_base_quat(frame, ctx)).T @ np.array([0.0, 0.0, -1.0])


def command(frame, ctx, **_):
    """Velocity command (vx [m/s], vy [m/s], yaw rate [rad/s])."""
    return ctx.command.copy()


def _from_sensors(frame, ctx, kind: str) -> np.ndarray:
    """Each policy joint's ``kind`` sensor (jointpos / jointvel), as MuJoCo computes it (cutoff included)."""
    return np.concatenate([ctx.sensors.read(name, frame) for name in ctx.joint_sensors[kind]])


def joint_pos_rel(frame, ctx, source: str = "state", **_):
    """Joint positions minus the default pose [rad], card joint order."""
    return joint_pos(frame, ctx, source) - ctx.default_pos


def joint_pos(frame, ctx, source: str = "state", **_):
    """Absolute joint positions [rad], card joint order; from the joint coordinates (``state``) or
    each joint's jointpos sensor (``sensors``)."""
    if source == "sensors":
        return _from_sensors(frame, ctx, "jointpos")
    return frame.qpos[ctx.qpos_index].copy()


def joint_vel(frame, ctx, source: str = "state", **_):
    """Joint velocities [rad/s], card joint order; from the state or each joint's jointvel sensor."""
    if source == "sensors":
        return _from_sensors(frame, ctx, "jointvel")
    return frame.qvel[ctx.dof_index].copy()


def last_action(frame, ctx, **_):
    """The previous raw policy output (zeros at the first step)."""
    return ctx.last_action.copy()


EULER_ORDERS = ("xyz", "xzy", "yxz", "yzx", "zxy", "zyx")


def base_euler(frame, ctx, order: str = "xyz", convention: str = "extrinsic", **_):
    """Base orientation as three angles [rad] about the world (extrinsic) or body (intrinsic)
    axes, applied in ``order``; values in the same order. Default extrinsic xyz: [roll, pitch,
    yaw] with R = Rz(yaw) Ry(pitch) Rx(roll), roll and yaw in (-pi, pi], pitch in [-pi/2, pi/2]."""
    from scipy.spatial.transform import Rotation

    w, x, y, z = _base_quat(frame, ctx)
    seq = order if convention == "extrinsic" else order.upper()  # scipy: lower case = extrinsic
    with warnings.catch_warnings():  # at pitch +-90 deg scipy warns and sets the third angle to 0
        warnings.simplefilter("ignore")
        return Rotation.from_quat([x, y, z, w]).as_euler(seq)


def base_height(frame, ctx, **_):
    """Base height above the world origin [m]. Privileged."""
    return frame.base_pos[2:3].copy()


@dataclass(frozen=True)
class Option:
    """One card key a term accepts besides name/scale/clip: what values it takes and its default."""

    kind: str = "positive"
    """'positive' (number > 0), 'nonnegative', 'count' (integer >= 1), 'bool', 'choice' (one of
    ``choices``), 'numbers' (a non-empty list of finite numbers) or 'vector' (a finite number or
    such a list)."""
    default: object = None
    """Passed to the term when the card omits the key; None: not passed (the function's default)."""
    choices: tuple = ()

    def check(self, value):
        """The value as the term receives it; ValueError saying what would be accepted."""
        kind = self.kind
        if kind == "bool":
            if not isinstance(value, bool):
                raise ValueError("must be true or false")
            return value
        if kind == "choice":
            if value not in self.choices:
                raise ValueError(f"must be one of {', '.join(map(str, self.choices))}")
            return value
        if kind == "numbers":
            ok = isinstance(value, list) and value and all(_finite(v) for v in value)
            if not ok:
                raise ValueError("must be a non-empty list of numbers")
            return tuple(float(v) for v in value)
        if kind == "vector":
            if isinstance(value, list):
                return Option("numbers").check(value)
            if not _finite(value):
                raise ValueError("must be a number or a list of numbers")
            return float(value)
        if kind == "count":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError("must be an integer >= 1")
            return value
        if not _finite(value) or not (value > 0 if kind == "positive" else value >= 0):
            raise ValueError("must be a positive number" if kind == "positive" else "must be a number >= 0")
        return float(value)


def _finite(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


@dataclass(frozen=True)
class ObservationTerm:
    """A named observation term: ``fn(frame, ctx, **options) -> values``, and what a card needs to know."""

    fn: Callable[..., np.ndarray]
    size: int | None | str | Callable[[dict], int]
    """Values it produces; None: one per policy joint (card joint order); "task": the task's own
    observation size; a function: of the options."""
    options: frozenset[str] | Mapping[str, Option] = frozenset()
    """Extra card keys passed to ``fn`` as keywords: names (each a positive number, e.g. a period
    [s]) or a mapping name -> Option."""
    floating_base: bool = False
    """Reads the base's orientation or motion: refused on a robot whose base is fixed."""
    sensed: bool = True
    """A sensor measures it on the robot (joint encoders, IMU): the variant's sensor noise
    (``obs_noise``) lands on it, in its own units before scale and clip. False for what the
    controller is given or computes (commands, clocks, phases, the previous action)."""

    def __post_init__(self):
        if not isinstance(self.options, Mapping):
            object.__setattr__(self, "options", {name: Option() for name in sorted(self.options)})

    def __call__(self, frame: SimFrame, ctx: TermContext, **options) -> np.ndarray:
        return self.fn(frame, ctx, **options)

    def count(self, joint_count: int, options: dict, task_size: int = 0) -> int:
        """Values produced for a robot with ``joint_count`` policy joints and these card options
        (``task_size``: the task's own observation size, for a term of size "task")."""
        if self.size is None:
            return joint_count
        if self.size == "task":
            return task_size
        return self.size(options) if callable(self.size) else self.size


def task_observation(frame, ctx, **_):
    """The task's own observation (a gymnasium task's layout), so that terms such as ``time_feature``
    can follow it as RL-Zoo's wrappers append theirs."""
    if ctx.task_observation is None:
        raise CardError("observation term 'task_observation' needs a task with its own observation")
    return np.asarray(ctx.task_observation(frame), dtype=float)


SENSOR_OPTIONS = {"offset": Option("vector")}
"""Keys a ``sensor:<name>`` term accepts besides name/scale/clip: offset (subtracted from the reading)."""
_ORIGIN = Option("choice", "episode_start", TIME_ORIGINS)
_SOURCE = Option("choice", None, ("state", "sensors"))
"""Where joint terms read: the joint coordinates (``state``, the default) or the MJCF's jointpos /
jointvel sensor of each joint (``sensors``). No default passed, so plugins see the old call."""
BUILTIN_TERMS: dict[str, ObservationTerm] = {
    "base_lin_vel": ObservationTerm(base_lin_vel, 3, floating_base=True),
    "base_ang_vel": ObservationTerm(base_ang_vel, 3, floating_base=True),
    "projected_gravity": ObservationTerm(projected_gravity, 3, floating_base=True),
    "base_euler": ObservationTerm(base_euler, 3, {"order": Option("choice", "xyz", EULER_ORDERS),
                                                  "convention": Option("choice", "extrinsic",
                                                                       ("extrinsic", "intrinsic"))},
                                  floating_base=True),
    "command": ObservationTerm(command, 3, sensed=False),
    "joint_pos_rel": ObservationTerm(joint_pos_rel, None, {"source": _SOURCE}),
    "joint_pos": ObservationTerm(joint_pos, None, {"source": _SOURCE}),
    "joint_vel": ObservationTerm(joint_vel, None, {"source": _SOURCE}),
    "last_action": ObservationTerm(last_action, None, sensed=False),
    "gait_phase": ObservationTerm(gait_phase, gait_phase_size, {
        "period": Option("positive", 0.8), "offsets": Option("numbers", (0.0,)),
        "layout": Option("choice", "interleaved", PHASE_LAYOUTS), "cos_first": Option("bool", False),
        "frequency_gain": Option("nonnegative", 0.0), "freeze_below": Option("nonnegative", 0.0),
        "frozen_phase": Option("nonnegative", 0.5), "time_origin": _ORIGIN}, sensed=False),
    "clock": ObservationTerm(clock, 1, {"time_origin": _ORIGIN}, sensed=False),
    "time_feature": ObservationTerm(time_feature, 1, {"max_steps": Option("count", 1000),
                                                      "test_mode": Option("bool", False)}, sensed=False),
    "base_height": ObservationTerm(base_height, 1),
    "task_observation": ObservationTerm(task_observation, "task"),
}
"""crosssim's own terms; plugins add theirs through the ``crosssim.observation_terms`` entry-point
group, each entry naming an ObservationTerm (docs/extending.md)."""

TERMS = Registry("observation term", "crosssim.observation_terms", BUILTIN_TERMS)


def observation_terms() -> dict[str, ObservationTerm]:
    """Every observation term by name: built-ins, then plugins (a plugin may replace a built-in)."""
    return {name: _term(name) for name in TERMS.names()}


def _term(name: str, where: object = "observation terms") -> ObservationTerm:
    try:
        term = TERMS.load(name)
    except CrossSimError as exc:
        raise CardError(f"{where}: {exc}") from None
    if not isinstance(term, ObservationTerm):
        raise CardError(f"{where}: observation term {name!r} ({TERMS.targets()[name]}) is a {type(term).__name__}, "
                        "not a crosssim.observations.ObservationTerm")
    return term


@dataclass(frozen=True)
class TermSpec:
    name: str
    scale: np.ndarray | float = 1.0
    clip: tuple[float, float] | None = None
    """Clip each scaled value to [low, high]; a single number c (card or caller) means [-c, c]."""
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.clip is not None and np.ndim(self.clip) == 0:
            object.__setattr__(self, "clip", (-float(self.clip), float(self.clip)))


def _clip(value, where: str) -> tuple[float, float] | None:
    if value is None:
        return None
    if _finite(value) and value > 0:
        return (-float(value), float(value))
    if isinstance(value, list) and len(value) == 2 and all(_finite(v) for v in value) and value[0] < value[1]:
        return (float(value[0]), float(value[1]))
    raise CardError(f"{where}.clip must be a positive number c (clip to [-c, c]) or [low, high] with low < high, "
                    f"got {value!r:.40}")


def parse_terms(raw, where) -> tuple[TermSpec, ...]:
    """Validate the card's ``observation.terms`` list (CardError names the card and the term)."""
    if not isinstance(raw, list) or not raw:
        raise CardError(f"{where}: field 'observation.terms' must be a non-empty list of terms")
    out, known = [], TERMS.names()
    for k, item in enumerate(raw):
        item = {"name": item} if isinstance(item, str) else item
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise CardError(f"{where}: observation.terms[{k}] must be a term name or a mapping with 'name'")
        name, field_name = item["name"], f"{where}: observation.terms[{k}]"
        if name not in known and not name.startswith("sensor:"):
            raise CardError(f"{field_name} is {name!r}, not a known term; "
                            f"{did_you_mean(name, known)} (or sensor:<MJCF sensor name>)")
        allowed = SENSOR_OPTIONS if name.startswith("sensor:") else _term(name, where).options
        unknown = sorted(set(item) - {"name", "scale", "clip"} - set(allowed), key=str)
        if unknown:
            raise CardError(f"{field_name} ({name}) has unknown keys {unknown}; "
                            f"{did_you_mean(unknown[0], ['name', 'scale', 'clip', *sorted(allowed)])}")
        scale = item.get("scale", 1.0)
        try:
            scale = np.asarray(scale, dtype=float)
        except (TypeError, ValueError):
            raise CardError(f"{field_name}.scale must be a number or a list of numbers") from None
        if not np.isfinite(scale).all():
            raise CardError(f"{field_name}.scale is not finite")
        options = {}
        for o, opt in sorted(allowed.items()):
            if o in item:
                try:
                    options[o] = opt.check(item[o])
                except ValueError as exc:
                    raise CardError(f"{field_name}.{o} {exc}, got {item[o]!r:.40}") from None
            elif opt.default is not None:
                options[o] = opt.default
        out.append(TermSpec(name, scale if scale.ndim else float(scale), _clip(item.get("clip"), field_name), options))
    return tuple(out)


def check_terms(terms: tuple[TermSpec, ...], scene, where, sensors: "object" = None) -> None:
    """Refuse what the robot cannot give: a sensor offset whose length is not the sensor's (with
    ``sensors``, a SensorReader that has every named sensor), and terms that read the base's
    orientation or motion on a robot whose root body has no joint (welded to the world: the
    values would be constants)."""
    for k, spec in enumerate(terms):
        offset = spec.options.get("offset")
        if sensors is not None and spec.name.startswith("sensor:") and isinstance(offset, tuple):
            dim = int(sensors.m.sensor_dim[sensors.types[spec.name[len("sensor:"):]][0]])
            if len(offset) != dim:
                raise CardError(f"{where}: field 'observation.terms[{k}].offset' has {len(offset)} values; "
                                f"{spec.name} gives {dim} (give {dim} numbers, or one for all)")
    wanted = [(k, s.name) for k, s in enumerate(terms) if not s.name.startswith("sensor:") and _term(s.name).floating_base]
    if not wanted:
        return
    from crosssim.scene import load_mujoco_model

    m = load_mujoco_model(scene)
    if m.nbody > 1 and int(m.body_jntnum[1]) == 0:
        k, name = wanted[0]
        raise CardError(f"{where}: field 'observation.terms[{k}]' ({name}) reads the floating base, but "
                        f"{getattr(scene, 'name', scene)}'s root body has no joint (a fixed base); remove the "
                        "term or give the robot a free joint")


class ObservationBuilder:
    """Frame -> policy input: terms in card order, scaled, clipped, stacked over history."""

    def __init__(self, terms: tuple[TermSpec, ...], *, history: int = 1, layout: str = "frame_major",
                 fill: str = "first_frame"):
        """``fill``: what the history holds before the first call, copies of the first frame
        (``first_frame``) or zeros (``zeros``, as buffers that start empty)."""
        if layout not in ("frame_major", "term_major"):
            raise CardError(f"history layout {layout!r}: use 'frame_major' or 'term_major'")
        if fill not in ("first_frame", "zeros"):
            raise CardError(f"history fill {fill!r}: use 'first_frame' or 'zeros'")
        self.terms, self.history, self.layout, self.fill = terms, max(1, int(history)), layout, fill
        # Looked up once: a registry lookup per control step would cost more than the terms.
        self._terms = [None if spec.name.startswith("sensor:") else _term(spec.name) for spec in terms]
        self._buffer: deque = deque(maxlen=self.history)
        self.term_noise: tuple[dict[int, float | np.ndarray], np.random.Generator] | None = None
        """Sensor noise ({term index: std in the term's units, one or per value}, generator), set by
        the control step for a noisy variant; added once per frame, before the term's scale and
        clip (a history keeps each frame's draw)."""
        self.term_bias: dict[int, np.ndarray] | None = None
        """Constant sensor bias ({term index: bias in the term's units, per value}, an IMU's), set by
        the control step per episode; added with the noise, before the term's scale and clip."""

    @property
    def term_objects(self) -> list[ObservationTerm | None]:
        """The registered term of each card term, in card order (None: a ``sensor:`` term)."""
        return list(self._terms)

    def reset(self) -> None:
        self._buffer.clear()

    def single(self, frame: SimFrame, ctx: TermContext) -> list[np.ndarray]:
        """One frame's terms, scaled and clipped (no history, no change to the context)."""
        parts = []
        for k, (spec, term) in enumerate(zip(self.terms, self._terms)):
            if term is None:
                value = ctx.sensors.read(spec.name[len("sensor:"):], frame) - np.asarray(spec.options.get("offset", 0.0))
            else:
                value = term(frame, ctx, **spec.options)
            value = np.asarray(value, dtype=float)
            if self.term_noise is not None and k in self.term_noise[0]:
                value = value + self.term_noise[1].normal(0.0, self.term_noise[0][k], value.shape)
            if self.term_bias is not None and k in self.term_bias:
                value = value + self.term_bias[k]
            value = value * spec.scale
            if spec.clip is not None:
                value = np.clip(value, *spec.clip)
            parts.append(np.atleast_1d(value))
        return parts

    def __call__(self, frame: SimFrame, ctx: TermContext) -> np.ndarray:
        """The stacked observation; the first call after reset sets ``ctx``'s time origin and call count."""
        if not self._buffer:
            ctx.first_call_time, ctx.call_index = float(frame.time), 0
        parts = self.single(frame, ctx)
        if not self._buffer:  # first step: the older frames are copies of this one, or zeros
            older = parts if self.fill == "first_frame" else [np.zeros_like(p) for p in parts]
            for _ in range(self.history - 1):
                self._buffer.append(older)
            self._buffer.append(parts)
        else:
            self._buffer.append(parts)
        ctx.call_index += 1
        frames = list(self._buffer)
        if self.layout == "frame_major":
            return np.concatenate([np.concatenate(f) for f in frames])
        return np.concatenate([frames[h][k] for k in range(len(self.terms)) for h in range(len(frames))])

    def size(self, joint_count: int, sensors: "object" = None, task_size: int = 0) -> int:
        """Length of the stacked observation, known without a frame (``task_size``: the task's own
        observation size, which ``task_observation`` gives)."""
        total = 0
        for spec, term in zip(self.terms, self._terms):
            if term is None:
                s = sensors.types[spec.name[len("sensor:"):]][0]
                total += int(sensors.m.sensor_dim[s])
            else:
                total += term.count(joint_count, spec.options, task_size)
        return self.history * total
