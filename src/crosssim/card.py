"""Policy cards: the YAML next to the weights that states what peers leave implicit.

Schema (version 1) is documented in README.md ("Policy cards"). Every validation error names
the card file and the field, and says what would be accepted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crosssim.errors import CardError
from crosssim.normalize import ObservationNormalizer as Normalization
from crosssim.text import printable

ACTION_MODES = ("motor", "pd", "position")
CARD_NAMES = ("card.yaml", "card.yml", "policy.yaml")


@dataclass(frozen=True)
class ObservationSpec:
    terms: tuple = ()
    """TermSpec tuple; empty: the task's own observation (gymnasium layout)."""
    history: int = 1
    layout: str = "frame_major"
    quaternion_order: str = "wxyz"


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
                    f"and {', '.join(CARD_NAMES)}); see README 'Policy cards'")


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
    try:
        arr = [float(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    except (TypeError, ValueError):
        raise CardError(f"{where}: field '{name}' must be a number or a list of numbers, got {value!r:.60}") from None
    if not all(np.isfinite(arr)):
        raise CardError(f"{where}: field '{name}' has a non-finite number")
    if size is not None and len(arr) != size:
        raise CardError(f"{where}: field '{name}' has {len(arr)} values, expected {size}")
    return arr


def load_card(path: str | Path) -> Card:
    """Parse and validate a card; raise CardError naming the file and the field."""
    import yaml

    where = find_card(path)
    try:
        raw = yaml.safe_load(where.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise CardError(f"{where}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise CardError(f"{where}: a card is a YAML mapping (name: ..., task: ..., policy: ...), got {type(raw).__name__}")
    version = raw.get("card_version", 1)
    if version != 1:
        raise CardError(f"{where}: field 'card_version' is {version!r}; this crosssim reads version 1")
    base = where.parent
    name = printable(str(_get(raw, "name", str, where, default=base.name)))
    task = _get(raw, "task", str, where, required=True)
    from crosssim.tasks import registered_tasks

    if task not in registered_tasks():
        raise CardError(f"{where}: field 'task' is {task!r}; known tasks: {sorted(registered_tasks())}")
    pol = _get(raw, "policy", dict, where, required=True)
    fmt = _get(pol, "format", str, where, required=True, prefix="policy.")
    from crosssim.policies.formats import policy_formats  # the registry: built-ins and plugins

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
        from crosssim.errors import CrossSimError

        try:
            robot = str(resolve_scene(robot, base_dir=base))
        except CrossSimError as exc:
            raise CardError(f"{where}: field 'robot': {exc}") from None
    obs = _get(raw, "observation", dict, where, default={})
    normalization = None
    norm = _get(obs, "normalize", dict, where, prefix="observation.")
    if norm is not None:
        stats = dict(norm)
        if "file" in norm:
            stats_path = (base / str(norm["file"])).resolve()
            try:
                loaded = json.loads(stats_path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise CardError(f"{where}: field 'observation.normalize.file': cannot read {stats_path} as JSON ({exc})") from None
            stats = {"mean": loaded.get("obs_mean", loaded.get("mean")), "var": loaded.get("obs_var", loaded.get("var")),
                     "clip": loaded.get("clip_obs", loaded.get("clip", 10.0)), "epsilon": loaded.get("epsilon", 1e-8),
                     **{k: v for k, v in norm.items() if k != "file"}}
        for key in ("mean", "var"):
            if stats.get(key) is None:
                raise CardError(f"{where}: field 'observation.normalize.{key}' is missing (or give 'file')")
        mean = _floats(stats["mean"], where, "observation.normalize.mean")
        var = _floats(stats["var"], where, "observation.normalize.var", len(mean))
        if min(var) < 0:
            raise CardError(f"{where}: field 'observation.normalize.var' has a negative variance")
        normalization = Normalization(np.array(mean), np.array(var), float(stats.get("clip", 10.0)),
                                      float(stats.get("epsilon", 1e-8)))
    act = _get(raw, "action", dict, where, default={})
    mode = _get(act, "mode", str, where, default="motor", prefix="action.")
    if mode not in ACTION_MODES:
        raise CardError(f"{where}: field 'action.mode' is {mode!r}; one of {', '.join(ACTION_MODES)}")
    clip = act.get("clip")
    if clip is not None:
        clip = tuple(_floats(clip, where, "action.clip", 2))
    optional = {k: (_floats(act[k], where, f"action.{k}") if act.get(k) is not None else None)
                for k in ("kp", "kd", "torque_limit")}
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
    scale = _floats(act.get("scale", 1.0), where, "action.scale")
    action = ActionSpec(mode=mode, clip=clip, scale=scale[0] if len(scale) == 1 else scale, **optional)
    period = _get(raw, "control_period", (int, float), where)
    if period is not None and not period > 0:
        raise CardError(f"{where}: field 'control_period' must be > 0 seconds, got {period}")
    trained = _get(raw, "trained_in", str, where)
    validated = _get(raw, "validated_in", (list, str), where, default=[])
    validated = (validated,) if isinstance(validated, str) else tuple(map(str, validated))
    claimed = _get(raw, "claimed", dict, where, default={})
    for key in claimed:
        if key not in ("return", "x_velocity", "survival"):
            raise CardError(f"{where}: field 'claimed.{key}' is not known; use return, x_velocity or survival")
        _get(claimed, key, (int, float), where, prefix="claimed.")
    joints = _get(raw, "joints", list, where, default=[])
    if not all(isinstance(j, str) for j in joints) or len(set(joints)) != len(joints):
        raise CardError(f"{where}: field 'joints' must be a list of distinct joint names")
    task_options = _get(raw, "task_options", dict, where, default={})
    history = _get(obs, "history", (int, dict), where, default=1, prefix="observation.")
    if isinstance(history, int):
        history = {"length": history}
    length = history.get("length", 1)
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise CardError(f"{where}: field 'observation.history.length' must be a positive integer")
    layout = history.get("layout", "frame_major")
    if layout not in ("frame_major", "term_major"):
        raise CardError(f"{where}: field 'observation.history.layout' is {layout!r}; use frame_major or term_major")
    quat_order = _get(obs, "quaternion_order", str, where, default="wxyz", prefix="observation.")
    if quat_order not in ("wxyz", "xyzw"):
        raise CardError(f"{where}: field 'observation.quaternion_order' is {quat_order!r}; use wxyz or xyzw")
    terms = ()
    if obs.get("terms") is not None:
        from crosssim.observations import parse_terms

        terms = parse_terms(obs["terms"], where)
    observation = ObservationSpec(terms, length, layout, quat_order)
    return Card(
        path=where, name=name, task=task, policy_file=policy_file, policy_format=fmt, robot=robot,
        algo=_get(pol, "algo", str, where, prefix="policy."),
        activation=_get(pol, "activation", str, where, prefix="policy."),
        onnx_output=_get(pol, "output", str, where, prefix="policy."),
        module_id=_get(pol, "module_id", str, where, default="default_policy", prefix="policy."),
        normalization=normalization, action=action,
        control_period=None if period is None else float(period),
        trained_in=trained, validated_in=validated,
        claimed={k: float(v) for k, v in claimed.items()}, joints=tuple(joints), observation=observation,
        task_options=dict(task_options), raw=raw,
    )
