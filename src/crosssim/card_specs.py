"""What a card's ``observation``, ``action`` and ``task_options`` sections mean, built from their
validated models.

crosssim.card_schema has already checked their structure and value types; this module checks
what pydantic cannot say (finite numbers, reversed ranges, gains, fields the action mode would
ignore, history bounds) and turns each section into the frozen spec the harness reads. Every
error names the card file and the field, and says what would be accepted.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from crosssim.card_schema import MAX_HISTORY, ActionSection, ObservationSection
from crosssim.errors import CardError
from crosssim.normalize import ObservationNormalizer, normalizer_from_card

UNUSED_BY_MODE = {"motor": ("scale", "kp", "kd", "default_pos", "torque_limit"), "position": ("kp", "kd"), "pd": ()}
"""Action fields a mode would silently ignore: motor maps gear x action; position uses the MJCF's gains."""


@dataclass(frozen=True)
class ObservationSpec:
    terms: tuple = ()
    """TermSpec tuple; empty: the task's own observation (gymnasium layout)."""
    history: int = 1
    layout: str = "frame_major"
    quaternion_order: str = "wxyz"
    fill: str = "first_frame"
    """History before the first call: copies of the first frame, or zeros (one of HISTORY_FILLS)."""


@dataclass(frozen=True)
class ActionSpec:
    mode: str = "motor"
    """'motor': torque = gear x clip(action); 'pd': target = scale x action + default_pos with the
    card's kp/kd at physics rate; 'position': ctrl = scale x action + default_pos sent to the
    model's position actuators (their kp/kv and force range), set once per control step."""
    clip: tuple[float, float] | None = None
    """Clip the raw action to [lo, hi] before mapping."""
    scale: float | list[float] = 1.0
    kp: list[float] | None = None
    kd: list[float] | None = None
    default_pos: list[float] | str | None = None
    """Default joint angles [rad] in policy joint order, or "keyframe:<name>" (its joint angles)."""
    torque_limit: list[float] | None = None


class TaskOptions(Mapping):
    """A card's ``task_options``: read-only, compared as a mapping, passed as ``make_task(name, **options)``.

    Decision: the options stay a validated read-only mapping, not a typed model. A task declares its
    options as its constructor's keyword arguments (``Walker2d(version=..., ...)``,
    ``Locomotion(command=..., fall=..., ...)``), and some can only be checked against the robot
    (``fall.feet`` names bodies, ``start_pose.joints`` needs the policy's joints): the task class is
    their schema, checked when ``Harness.from_card`` makes the task, with CardErrors naming
    ``task_options.<key>``. The card's model checks that the section is a mapping with text keys;
    the values are a private deep copy of the YAML's (nested mappings stay plain dicts, which the
    tasks' parsers read)."""

    __slots__ = ("_options",)

    def __init__(self, options: Mapping | None = None):
        self._options = copy.deepcopy(dict(options or {}))

    def __getitem__(self, key):
        return self._options[key]

    def __iter__(self):
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)

    def __repr__(self) -> str:
        return f"TaskOptions({self._options!r})"

    def __reduce__(self):  # __slots__ without __getstate__: pickle through the constructor
        return TaskOptions, (self._options,)


def shown(value) -> str:
    """A number or list of numbers as the card wrote it (the model reads every number as a float:
    2.0 is shown as 2), for error messages."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


def finite(value, where: Path, name: str) -> list[float]:
    """A number or a non-empty list of numbers (already typed by the model) as finite floats."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise CardError(f"{where}: field '{name}' must be a number or a list of numbers, got {shown(value):.60}")
    if not all(math.isfinite(v) for v in values):
        raise CardError(f"{where}: field '{name}' has a non-finite number ({shown(value):.60}); write finite numbers")
    return [float(v) for v in values]


def action_spec(act: ActionSection | None, where: Path) -> ActionSpec:
    """The ``action`` section's meaning (None: the default, motor mode)."""
    if act is None:
        return ActionSpec()
    mode = act.mode or "motor"
    ignored = [k for k in UNUSED_BY_MODE[mode] if getattr(act, k) is not None]
    if ignored:
        why = ("torque = gear x action" if mode == "motor" else "the MJCF's position actuators bring their own gains")
        raise CardError(f"{where}: field 'action.{ignored[0]}' has no effect when action.mode is {mode!r} ({why}); "
                        f"remove it{', or use mode: pd' if mode == 'motor' else ''}")
    clip = None
    if act.clip is not None:  # two numbers (the model)
        clip = tuple(finite(act.clip, where, "action.clip"))
        if not clip[0] < clip[1]:
            raise CardError(f"{where}: field 'action.clip' is [{clip[0]:g}, {clip[1]:g}]: the low bound must be below "
                            f"the high bound, e.g. [{min(clip):g}, {max(clip):g}]")
    optional = {k: (None if getattr(act, k) is None else finite(getattr(act, k), where, f"action.{k}"))
                for k in ("kp", "kd", "torque_limit")}
    for k, ok, rule in (("kp", lambda v: v >= 0, ">= 0"), ("kd", lambda v: v >= 0, ">= 0"),
                        ("torque_limit", lambda v: v > 0, "> 0 [N m]")):
        if optional[k] is not None and not all(map(ok, optional[k])):
            raise CardError(f"{where}: field 'action.{k}' must be {rule} for every joint, "
                            f"got {shown(getattr(act, k)):.60}")
    if isinstance(act.default_pos, str):
        if not act.default_pos.startswith("keyframe:"):
            raise CardError(f"{where}: field 'action.default_pos' must be a list of angles or 'keyframe:<name>'")
        optional["default_pos"] = act.default_pos
    else:
        optional["default_pos"] = (None if act.default_pos is None
                                   else finite(act.default_pos, where, "action.default_pos"))
    if mode == "pd":
        for k in ("kp", "kd"):
            if optional[k] is None:
                raise CardError(f"{where}: field 'action.{k}' is required when action.mode is 'pd'")
    scale = finite(1.0 if act.scale is None else act.scale, where, "action.scale")
    if 0.0 in scale:
        raise CardError(f"{where}: field 'action.scale' has a 0: the policy would have no effect on that joint")
    return ActionSpec(mode=mode, clip=clip, scale=scale[0] if len(scale) == 1 else scale, **optional)


def observation_spec(obs: ObservationSection | None,
                     where: Path) -> tuple[ObservationSpec, ObservationNormalizer | None, Path | None]:
    """The ``observation`` section's meaning: its spec, its normalizer (None: none) and the
    statistics file the normalizer read (the card's folder / ``normalize.file``; None: inline)."""
    if obs is None:
        return ObservationSpec(), None, None
    normalization = stats_file = None
    if obs.normalize is not None:
        normalization = normalizer_from_card(obs.normalize.model_dump(exclude_none=True), where)
        stats_file = None if obs.normalize.file is None else where.parent / obs.normalize.file
    history = obs.history
    if history is None or isinstance(history, int):
        length, layout, fill = (1 if history is None else history), "frame_major", "first_frame"
    else:  # the model checked layout and fill
        length = 1 if history.length is None else history.length
        layout, fill = history.layout or "frame_major", history.fill or "first_frame"
    if not 1 <= length <= MAX_HISTORY:
        raise CardError(f"{where}: field 'observation.history.length' must be an integer from 1 to {MAX_HISTORY}, "
                        f"got {length!r:.30}")
    terms = ()
    if obs.terms is not None:
        from crosssim.observations import parse_terms

        terms = parse_terms([t if isinstance(t, str) else t.model_dump(exclude_unset=True) for t in obs.terms], where)
    return ObservationSpec(terms, length, layout, obs.quaternion_order or "wxyz", fill), normalization, stats_file
