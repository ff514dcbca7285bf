"""Policy cards: the YAML next to the weights that states what peers leave implicit.

The structure of version 1 (sections, keys, types) is the pydantic model in crosssim.card_schema,
checked first; this module checks what the values mean. README.md ("Policy cards") is generated
from the model. Every validation error names the card file and the field, and says what would be
accepted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crosssim.card_schema import ACTION_MODES, FIRST_CALLS, HISTORY_FILLS, MAX_HISTORY, check_structure
from crosssim.card_schema import FIELDS  # noqa: F401  (re-exported: every key a card may hold)
from crosssim.deployment import StatedDeployment
from crosssim.errors import CardError, CrossSimError
from crosssim.normalize import ObservationNormalizer as Normalization
from crosssim.normalize import normalizer_from_card
from crosssim.text import printable

CARD_NAMES = ("card.yaml", "card.yml", "policy.yaml")
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


@dataclass(frozen=True)
class Card:
    path: Path
    """The card file (every relative path in it is relative to its folder)."""
    name: str
    task: str
    policy_file: Path
    policy_format: str
    robot: str | None = None
    algo: str | None = None
    activation: str | None = None
    onnx_output: str | None = None
    module_id: str = "default_policy"
    """RLlib: which RLModule of a multi-module checkpoint."""
    normalization: Normalization | None = None
    action: ActionSpec = field(default_factory=ActionSpec)
    control_period: float | None = None
    """Seconds between two policy calls; checked against the task and engine timestep."""
    trained_in: str | None = None
    validated_in: tuple[str, ...] = ()
    claimed: dict = field(default_factory=dict)
    """Claimed performance: return, x_velocity [m/s], survival (fraction of full episodes)."""
    joints: tuple[str, ...] = ()
    """Policy joint order (action and joint terms) by joint name; empty: the model's actuator order."""
    observation: ObservationSpec = field(default_factory=ObservationSpec)
    task_options: dict = field(default_factory=dict)
    metric: str | None = None
    """The task metric drops and the verdict use (one the task declares); None: the task's primary."""
    physics_timestep: float | None = None
    """Physics step [s] replacing the MJCF's ``<option timestep>``; the control period stays, the
    frame skip follows. None: the MJCF's."""
    first_call: str = "reset"
    """When the policy is first called: at reset, or after one control period (FIRST_CALLS)."""
    deployment: StatedDeployment = field(default_factory=StatedDeployment)
    """The expected deployment gap the card states (merged with its file, checked); every key
    unstated: the robot class's default (crosssim.deployment.deployment_gap)."""
    replaces: str | None = None
    """The base branch's card this one replaces, relative to this card's folder (read by the gate only)."""
    raw: dict = field(default_factory=dict, repr=False)

    def reference_engine(self, engines) -> str:
        """The engine of ``engines`` (a run's, in order) the others are compared with: the first the
        card declares (where it was trained, then where it was validated), else the first run."""
        declared = [e for e in (self.trained_in, *self.validated_in) if e in engines]
        return declared[0] if declared else engines[0]


def find_card(path: str | Path) -> Path:
    """A card path from what a user typed: the card itself, its folder, or the weights beside it."""
    p = Path(path).expanduser()
    if not p.exists():
        raise CardError(f"{p}: no such file or folder (expected a policy card .yaml, its folder, or the weights)")
    if p.is_dir():
        for name in CARD_NAMES:
            if (p / name).is_file():
                return p / name
        raise CardError(f"{p}: folder has no policy card (looked for {', '.join(CARD_NAMES)})")
    if p.suffix in (".yaml", ".yml"):
        return p
    for candidate in [p.with_suffix(".yaml"), *(p.parent / n for n in CARD_NAMES)]:
        if candidate.is_file():
            return candidate
    raise CardError(f"{p}: no policy card next to these weights (looked for {p.with_suffix('.yaml').name} "
                    f"and {', '.join(CARD_NAMES)}); see docs/cards.md")


def _get(d: dict, key: str, types, where: Path, required=False, default=None, prefix=""):
    if key not in d or d[key] is None:
        if required:
            raise CardError(f"{where}: missing required field '{prefix}{key}'")
        return default
    value = d[key]
    if not isinstance(value, types) or isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        names = "/".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        raise CardError(f"{where}: field '{prefix}{key}' must be {names}, got {type(value).__name__} {value!r:.60}")
    return value


def _floats(value, where: Path, name: str, size: int | None = None) -> list[float]:
    values = value if isinstance(value, (list, tuple)) else [value]
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        raise CardError(f"{where}: field '{name}' must be a number or a list of numbers, got {value!r:.60}")
    arr = [float(v) for v in values]
    if not all(math.isfinite(v) for v in arr):
        raise CardError(f"{where}: field '{name}' has a non-finite number ({value!r:.60}); write finite numbers")
    if size is not None and len(arr) != size:
        raise CardError(f"{where}: field '{name}' has {len(arr)} values, expected {size}")
    return arr


def _repo_root(folder: Path) -> Path | None:
    for p in (folder, *folder.parents):
        if (p / ".git").exists():
            return p
    return None


def _check_link(where: Path) -> None:
    """A card that is a symlink must point inside its repository (or its own folder outside one):
    a pull request could otherwise make crosssim read any file on the runner as a card."""
    if not where.is_symlink():
        return
    target = where.resolve()
    folder = where.absolute().parent
    root = _repo_root(folder) or folder
    if not target.is_relative_to(root.resolve()):
        raise CardError(f"{where}: the card is a symlink to {target}, outside {root}; commit the card file itself")


def _load_raw(where: Path) -> dict:
    from crosssim.strictload import bad_text, load_yaml

    _check_link(where)
    try:
        raw = load_yaml(where, what="card")
    except CrossSimError as exc:
        raise CardError(str(exc)) from None
    if not isinstance(raw, dict):
        raise CardError(f"{where}: a card is a YAML mapping (name: ..., task: ..., policy: ...), got {type(raw).__name__}")
    found = bad_text(raw)
    if found:
        raise CardError(f"{where}: field '{found[0]}' holds {found[1]}; write it as plain UTF-8 text")
    check_structure(raw, where)  # sections, keys and types (crosssim.card_schema); meanings below
    return raw


def _action(act: dict, where: Path) -> ActionSpec:
    mode = _get(act, "mode", str, where, default="motor", prefix="action.")
    if mode not in ACTION_MODES:
        raise CardError(f"{where}: field 'action.mode' is {mode!r}; one of {', '.join(ACTION_MODES)}")
    ignored = [k for k in UNUSED_BY_MODE[mode] if act.get(k) is not None]
    if ignored:
        why = ("torque = gear x action" if mode == "motor" else "the MJCF's position actuators bring their own gains")
        raise CardError(f"{where}: field 'action.{ignored[0]}' has no effect when action.mode is {mode!r} ({why}); "
                        f"remove it{', or use mode: pd' if mode == 'motor' else ''}")
    clip = act.get("clip")
    if clip is not None:
        clip = tuple(_floats(clip, where, "action.clip", 2))
        if not clip[0] < clip[1]:
            raise CardError(f"{where}: field 'action.clip' is [{clip[0]:g}, {clip[1]:g}]: the low bound must be below "
                            f"the high bound, e.g. [{min(clip):g}, {max(clip):g}]")
    optional = {k: (_floats(act[k], where, f"action.{k}") if act.get(k) is not None else None)
                for k in ("kp", "kd", "torque_limit")}
    for k, ok, rule in (("kp", lambda v: v >= 0, ">= 0"), ("kd", lambda v: v >= 0, ">= 0"),
                        ("torque_limit", lambda v: v > 0, "> 0 [N m]")):
        if optional[k] is not None and not all(map(ok, optional[k])):
            raise CardError(f"{where}: field 'action.{k}' must be {rule} for every joint, got {act[k]!r:.60}")
    default_pos = act.get("default_pos")
    if isinstance(default_pos, str):
        if not default_pos.startswith("keyframe:"):
            raise CardError(f"{where}: field 'action.default_pos' must be a list of angles or 'keyframe:<name>'")
        optional["default_pos"] = default_pos
    else:
        optional["default_pos"] = None if default_pos is None else _floats(default_pos, where, "action.default_pos")
    if mode == "pd":
        for k in ("kp", "kd"):
            if optional[k] is None:
                raise CardError(f"{where}: field 'action.{k}' is required when action.mode is 'pd'")
    scale = _floats(act["scale"] if act.get("scale") is not None else 1.0, where, "action.scale")
    if 0.0 in scale:
        raise CardError(f"{where}: field 'action.scale' has a 0: the policy would have no effect on that joint")
    return ActionSpec(mode=mode, clip=clip, scale=scale[0] if len(scale) == 1 else scale, **optional)


def _claims(raw: dict, where: Path) -> dict[str, float]:
    claimed = _get(raw, "claimed", dict, where, default={})
    out = {}
    for key in claimed:
        value = _get(claimed, key, (int, float), where, prefix="claimed.")
        if value is None:
            continue
        if not math.isfinite(value):
            raise CardError(f"{where}: field 'claimed.{key}' is {value}; a claim is a finite number")
        if key == "survival" and not 0 <= value <= 1:
            raise CardError(f"{where}: field 'claimed.survival' is {value}; it is the fraction of full episodes, 0 to 1")
        out[key] = float(value)
    return out


def _observation(obs: dict, where: Path) -> tuple[ObservationSpec, Normalization | None]:
    norm = _get(obs, "normalize", dict, where, prefix="observation.")
    normalization = None
    if norm is not None:
        normalization = normalizer_from_card(norm, where)
    history = _get(obs, "history", (int, dict), where, default=1, prefix="observation.")
    if isinstance(history, int):
        history = {"length": history}
    length = history.get("length", 1)
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_HISTORY:
        raise CardError(f"{where}: field 'observation.history.length' must be an integer from 1 to {MAX_HISTORY}, "
                        f"got {length!r:.30}")
    layout = history.get("layout", "frame_major")
    if layout not in ("frame_major", "term_major"):
        raise CardError(f"{where}: field 'observation.history.layout' is {layout!r}; use frame_major or term_major")
    fill = history.get("fill", "first_frame")
    if fill not in HISTORY_FILLS:
        raise CardError(f"{where}: field 'observation.history.fill' is {fill!r:.40}; use {' or '.join(HISTORY_FILLS)}")
    quat_order = _get(obs, "quaternion_order", str, where, default="wxyz", prefix="observation.")
    if quat_order not in ("wxyz", "xyzw"):
        raise CardError(f"{where}: field 'observation.quaternion_order' is {quat_order!r}; use wxyz or xyzw")
    terms = ()
    if obs.get("terms") is not None:
        from crosssim.observations import parse_terms

        terms = parse_terms(obs["terms"], where)
    return ObservationSpec(terms, length, layout, quat_order, fill), normalization


def load_card(path: str | Path) -> Card:
    """Parse and validate a card; raise CardError naming the file and the field.

    Strict: unknown or repeated keys, values a field cannot mean (reversed ranges, NaN, negative
    gains) and fields the action mode would ignore are errors, never silently dropped.
    """
    where = find_card(path)
    raw = _load_raw(where)
    version = raw.get("card_version", 1)
    if type(version) is not int or version != 1:
        raise CardError(f"{where}: field 'card_version' is {version!r}; this crosssim reads version 1")
    base = where.parent
    name = card_name(_get(raw, "name", str, where), base)
    task = _get(raw, "task", str, where, required=True)
    from crosssim.tasks import registered_tasks, task_class

    try:
        task_cls = task_class(task)  # a name or name-version (Walker2d-v4)
    except CrossSimError as exc:
        detail = f"known tasks: {sorted(registered_tasks())}" if str(exc).startswith("unknown task") else str(exc)
        raise CardError(f"{where}: field 'task' is {task!r}; {detail}") from None
    pol = _get(raw, "policy", dict, where, required=True)
    fmt = _get(pol, "format", str, where, required=True, prefix="policy.")
    from crosssim.policy_formats import policy_formats  # the registry: built-ins and plugins

    if fmt not in policy_formats():
        raise CardError(f"{where}: field 'policy.format' is {fmt!r}; one of {', '.join(policy_formats())}")
    file = _get(pol, "file", str, where, required=True, prefix="policy.")
    policy_file = Path(file) if fmt == "callable" else (base / file).resolve()
    if fmt == "rllib" and not policy_file.is_dir():
        raise CardError(f"{where}: field 'policy.file' points to {policy_file}, which is not a folder "
                        "(an RLlib checkpoint is the folder algo.save_to_path() wrote)")
    single_file = fmt in ("sb3", "torchscript", "onnx")  # a plugin's format may be a file or a folder
    if fmt != "callable" and not (policy_file.is_file() if single_file else policy_file.exists()):
        raise CardError(f"{where}: field 'policy.file' points to {policy_file}, which does not exist")
    robot = _get(raw, "robot", str, where)
    if robot is not None:
        from crosssim.scene import resolve_scene

        try:
            robot = str(resolve_scene(robot, base_dir=base))
        except CrossSimError as exc:
            raise CardError(f"{where}: field 'robot': {exc}") from None
    observation, normalization = _observation(_get(raw, "observation", dict, where, default={}), where)
    action = _action(_get(raw, "action", dict, where, default={}), where)
    period = _get(raw, "control_period", (int, float), where)
    if period is not None and not (math.isfinite(period) and period > 0):
        raise CardError(f"{where}: field 'control_period' must be > 0 seconds, got {period}")
    trained = _get(raw, "trained_in", str, where)
    validated = _get(raw, "validated_in", (list, str), where, default=[])
    validated = [validated] if isinstance(validated, str) else validated
    if not all(isinstance(v, str) for v in validated):
        raise CardError(f"{where}: field 'validated_in' must be a list of engine names, got {validated!r:.60}")
    claimed = _claims(raw, where)
    physics_dt, first_call = _timing(raw, where)
    joints = _get(raw, "joints", list, where, default=[])
    if not all(isinstance(j, str) for j in joints) or len(set(joints)) != len(joints):
        raise CardError(f"{where}: field 'joints' must be a list of distinct joint names")
    task_options = _get(raw, "task_options", dict, where, default={})
    _get(raw, "training", dict, where)
    metric = _get(raw, "metric", str, where)
    declared = task_cls.metrics
    if metric is not None and metric not in declared:
        raise CardError(f"{where}: field 'metric' is {metric!r}; task {task} declares: {', '.join(declared)}")
    deployment = StatedDeployment()
    if raw.get("deployment") is not None:
        from crosssim.deployment import parse_deployment

        deployment = parse_deployment(raw["deployment"], where)
    return Card(
        path=where, name=name, task=task, policy_file=policy_file, policy_format=fmt, robot=robot,
        algo=_get(pol, "algo", str, where, prefix="policy."),
        activation=_get(pol, "activation", str, where, prefix="policy."),
        onnx_output=_get(pol, "output", str, where, prefix="policy."),
        module_id=_get(pol, "module_id", str, where, default="default_policy", prefix="policy."),
        normalization=normalization, action=action,
        control_period=None if period is None else float(period),
        trained_in=trained, validated_in=tuple(validated),
        claimed=claimed, joints=tuple(joints), observation=observation,
        task_options=dict(task_options), metric=metric, physics_timestep=physics_dt, first_call=first_call,
        deployment=deployment, replaces=_get(raw, "replaces", str, where), raw=raw,
    )


def card_name(name, folder: Path) -> str:
    """What results are filed under: the card's ``name`` as one printable line, else its folder's name."""
    return " ".join(printable(str(name if name is not None else folder.name)).split()) or printable(folder.name)


def _timing(raw: dict, where: Path) -> tuple[float | None, str]:
    """``physics_timestep`` [s] (> 0, finite) and ``first_call`` (one of FIRST_CALLS)."""
    dt = _get(raw, "physics_timestep", (int, float), where)
    if dt is not None and not (math.isfinite(dt) and 0 < dt <= 1):
        raise CardError(f"{where}: field 'physics_timestep' must be seconds in (0, 1], got {dt}")
    first = _get(raw, "first_call", str, where, default="reset")
    if first not in FIRST_CALLS:
        raise CardError(f"{where}: field 'first_call' is {first!r:.40}; use {' or '.join(FIRST_CALLS)}")
    return (None if dt is None else float(dt)), first
