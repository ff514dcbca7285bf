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

from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from crosssim.errors import CardError, CrossSimError
from crosssim.frame import SimFrame, quat_to_matrix
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


def joint_pos_rel(frame, ctx, **_):
    """Joint positions minus the default pose [rad], card joint order."""
    return frame.qpos[ctx.qpos_index] - ctx.default_pos


def joint_pos(frame, ctx, **_):
    """Absolute joint positions [rad], card joint order."""
    return frame.qpos[ctx.qpos_index].copy()


def joint_vel(frame, ctx, **_):
    """Joint velocities [rad/s], card joint order."""
    return frame.qvel[ctx.dof_index].copy()


def last_action(frame, ctx, **_):
    """The previous raw policy output (zeros at the first step)."""
    return ctx.last_action.copy()


def gait_phase(frame, ctx, period: float = 0.8, **_):
    """sin and cos of 2 pi t / period, t counted from episode start [s]."""
    phase = 2 * np.pi * (frame.time % period) / period
    return np.array([np.sin(phase), np.cos(phase)])


def base_height(frame, ctx, **_):
    """Base height above the world origin [m]. Privileged."""
    return frame.base_pos[2:3].copy()


@dataclass(frozen=True)
class ObservationTerm:
    """A named observation term: ``fn(frame, ctx, **options) -> values``, and what a card needs to know."""

    fn: Callable[..., np.ndarray]
    size: int | None
    """Values it produces; None: one per policy joint (card joint order)."""
    options: frozenset[str] = frozenset()
    """Extra card keys passed to ``fn`` as keywords, each a positive number (e.g. gait_phase's period [s])."""

    def __call__(self, frame: SimFrame, ctx: TermContext, **options) -> np.ndarray:
        return self.fn(frame, ctx, **options)


BUILTIN_TERMS: dict[str, ObservationTerm] = {
    "base_lin_vel": ObservationTerm(base_lin_vel, 3),
    "base_ang_vel": ObservationTerm(base_ang_vel, 3),
    "projected_gravity": ObservationTerm(projected_gravity, 3),
    "command": ObservationTerm(command, 3),
    "joint_pos_rel": ObservationTerm(joint_pos_rel, None),
    "joint_pos": ObservationTerm(joint_pos, None),
    "joint_vel": ObservationTerm(joint_vel, None),
    "last_action": ObservationTerm(last_action, None),
    "gait_phase": ObservationTerm(gait_phase, 2, frozenset({"period"})),
    "base_height": ObservationTerm(base_height, 1),
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
    clip: float | None = None
    options: dict = field(default_factory=dict)


def parse_terms(raw, where) -> tuple[TermSpec, ...]:
    """Validate the card's ``observation.terms`` list (CardError names the card and the term)."""
    if not isinstance(raw, list) or not raw:
        raise CardError(f"{where}: field 'observation.terms' must be a non-empty list of terms")
    out, known = [], TERMS.names()
    for k, item in enumerate(raw):
        item = {"name": item} if isinstance(item, str) else item
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise CardError(f"{where}: observation.terms[{k}] must be a term name or a mapping with 'name'")
        name = item["name"]
        if name not in known and not name.startswith("sensor:"):
            raise CardError(f"{where}: observation.terms[{k}] is {name!r}, not a known term; "
                            f"{did_you_mean(name, known)} (or sensor:<MJCF sensor name>)")
        allowed = set() if name.startswith("sensor:") else _term(name, where).options
        unknown = set(item) - {"name", "scale", "clip"} - allowed
        if unknown:
            raise CardError(f"{where}: observation.terms[{k}] ({name}) has unknown keys {sorted(unknown, key=str)}; "
                            f"{did_you_mean(sorted(unknown, key=str)[0], ['name', 'scale', 'clip', *sorted(allowed)])}")
        scale = item.get("scale", 1.0)
        try:
            scale = np.asarray(scale, dtype=float)
        except (TypeError, ValueError):
            raise CardError(f"{where}: observation.terms[{k}].scale must be a number or a list of numbers") from None
        if not np.isfinite(scale).all():
            raise CardError(f"{where}: observation.terms[{k}].scale is not finite")
        clip = item.get("clip")
        if clip is not None and (isinstance(clip, bool) or not isinstance(clip, (int, float)) or not clip > 0):
            raise CardError(f"{where}: observation.terms[{k}].clip must be a positive number")
        options = {o: item[o] for o in sorted(allowed) if o in item}
        for o, v in options.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise CardError(f"{where}: observation.terms[{k}].{o} must be a positive number")
        out.append(TermSpec(name, scale if scale.ndim else float(scale), None if clip is None else float(clip), options))
    return tuple(out)


class ObservationBuilder:
    """Frame -> policy input: terms in card order, scaled, clipped, stacked over history."""

    def __init__(self, terms: tuple[TermSpec, ...], *, history: int = 1, layout: str = "frame_major"):
        if layout not in ("frame_major", "term_major"):
            raise CardError(f"history layout {layout!r}: use 'frame_major' or 'term_major'")
        self.terms, self.history, self.layout = terms, max(1, int(history)), layout
        # Looked up once: a registry lookup per control step would cost more than the terms.
        self._terms = [None if spec.name.startswith("sensor:") else _term(spec.name) for spec in terms]
        self._buffer: deque = deque(maxlen=self.history)

    def reset(self) -> None:
        self._buffer.clear()

    def single(self, frame: SimFrame, ctx: TermContext) -> list[np.ndarray]:
        parts = []
        for spec, term in zip(self.terms, self._terms):
            if term is None:
                value = ctx.sensors.read(spec.name[len("sensor:"):], frame)
            else:
                value = term(frame, ctx, **spec.options)
            value = np.asarray(value, dtype=float) * spec.scale
            if spec.clip is not None:
                value = np.clip(value, -spec.clip, spec.clip)
            parts.append(np.atleast_1d(value))
        return parts

    def __call__(self, frame: SimFrame, ctx: TermContext) -> np.ndarray:
        parts = self.single(frame, ctx)
        if not self._buffer:  # first step: history filled with the first frame
            for _ in range(self.history):
                self._buffer.append(parts)
        else:
            self._buffer.append(parts)
        frames = list(self._buffer)
        if self.layout == "frame_major":
            return np.concatenate([np.concatenate(f) for f in frames])
        return np.concatenate([frames[h][k] for k in range(len(self.terms)) for h in range(len(frames))])

    def size(self, joint_count: int, sensors: "object" = None) -> int:
        """Length of the stacked observation, known without a frame."""
        total = 0
        for spec, term in zip(self.terms, self._terms):
            if term is None:
                s = sensors.types[spec.name[len("sensor:"):]][0]
                total += int(sensors.m.sensor_dim[s])
            else:
                total += joint_count if term.size is None else term.size
        return self.history * total
