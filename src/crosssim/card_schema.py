"""The structure of a version-1 policy card as a pydantic model: sections, keys and value types.

``check_structure`` turns every card's YAML into this model, once (crosssim.card.load_card builds
the Card from it), so an unknown key, a mapping where a number belongs or a missing required field
is one line naming the card and the field path, with "did you mean" for a near miss; what a value
*means* (ranges, files, the task's metrics) is checked while the Card is built (crosssim.card). ``json_schema`` is the same model as a JSON
Schema for editors (``crosssim card schema``), and ``reference_rows`` the README's card reference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, Strict, StrictInt, StrictStr, ValidationError

from crosssim.errors import CardError

MAX_HISTORY = 1000
"""Most frames an observation history may stack (deployed policies use up to a few dozen)."""
ACTION_MODES = ("motor", "pd", "position")
FIRST_CALLS = ("reset", "after_one_period")
"""``first_call``: the policy's first call at reset (t = 0), or after one control period holding a
zero action (Unitree's deploy_mujoco.py steps ``control_decimation`` physics steps first)."""
HISTORY_FILLS = ("first_frame", "zeros")
"""``observation.history.fill``: what the history holds before the first call."""

# Strict: YAML's `true` is not the number 1 and "0.5" is not a number; an int is a float.
Number = Annotated[float, Strict()]
Numbers = Union[Number, list[Number]]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class PolicySection(_Section):
    file: StrictStr
    """Weights, relative to the card (rllib: the checkpoint folder; callable: "module:function")."""
    format: StrictStr
    """sb3 | torchscript | onnx | rllib | callable (trusted only) | a plugin's format."""
    algo: StrictStr | None = None
    """sb3: the algorithm, only needed for --trust-policy-code (SB3's own loader)."""
    activation: StrictStr | None = None
    """sb3: the activation; read from the zip's plain-text metadata otherwise."""
    output: StrictStr | None = None
    """onnx: the output's name (default: the first output)."""
    module_id: StrictStr | None = None
    """rllib: which RLModule of a multi-module checkpoint (default: default_policy)."""


class NormalizeSection(_Section):
    file: StrictStr | None = None
    """JSON with obs_mean, obs_var, clip_obs, epsilon (VecNormalize statistics), relative to the card."""
    mean: list[Number] | None = None
    """Inline observation mean, one per observation value."""
    var: list[Number] | None = None
    """Inline observation variance, one per mean."""
    clip: Number | None = Field(None, json_schema_extra={"exclusiveMinimum": 0})
    """Normalised observations are clipped to [-clip, clip] (> 0)."""
    epsilon: Number | None = Field(None, json_schema_extra={"minimum": 0})
    """Added to the variance before the square root (>= 0)."""


class HistorySection(_Section):
    length: StrictInt | None = Field(None, json_schema_extra={"minimum": 1, "maximum": MAX_HISTORY})
    """Frames stacked, 1 to 1000."""
    layout: Literal["frame_major", "term_major"] | None = None
    """frame_major: whole frames one after another; term_major: each term's history together."""
    fill: Literal[HISTORY_FILLS] | None = None  # type: ignore[valid-type]
    """What the history holds before the first call: copies of the first frame, or zeros."""


class TermEntry(BaseModel):
    """One observation term; its own options (crosssim.observations) are checked by the term."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)
    name: StrictStr
    """A term name (`crosssim tasks` lists them) or sensor:<MJCF sensor name>."""
    scale: Numbers | None = None
    """Multiplies the term's values."""
    clip: Any = None
    """Clip of the scaled values."""


class ObservationSection(_Section):
    normalize: NormalizeSection | None = None
    """VecNormalize statistics: clip((o - mean) / sqrt(var + epsilon)); a file or inline."""
    terms: list[Union[StrictStr, TermEntry]] | None = None
    """Observation terms in order (names or mappings with name, scale, clip, options); empty: the task's."""
    history: Union[StrictInt, HistorySection, None] = None
    """Frames stacked: a length, or a mapping with length, layout and fill."""
    quaternion_order: Literal["wxyz", "xyzw"] | None = None
    """Order of quaternion terms (default wxyz)."""


class ActionSection(_Section):
    mode: Literal[ACTION_MODES] | None = None  # type: ignore[valid-type]
    """motor: torque = gear x clip(action); pd: target = scale x action + default_pos with kp/kd; position:
    the MJCF's position actuators (default motor)."""
    clip: list[Number] | None = Field(None, min_length=2, max_length=2)
    """[low, high] clip of the raw action (also the SB3 action box)."""
    scale: Numbers | None = None
    """pd/position: action scale, one or one per joint (no 0)."""
    kp: Numbers | None = None
    """pd: proportional gains [N m/rad], >= 0."""
    kd: Numbers | None = None
    """pd: damping gains [N m s/rad], >= 0."""
    default_pos: Union[list[Number], StrictStr, None] = None
    """pd/position: default joint angles [rad] in policy joint order, or "keyframe:<name>"."""
    torque_limit: Numbers | None = None
    """pd: torque limits [N m], > 0."""


class ClaimedSection(_Section):
    return_: Number | None = Field(None, alias="return")
    """The episode return the authors claim."""
    x_velocity: Number | None = None
    """Forward speed the authors claim [m/s]."""
    survival: Number | None = Field(None, json_schema_extra={"minimum": 0, "maximum": 1})
    """Fraction of full-length episodes, 0 to 1."""


class DeploymentSection(_Section):
    file: StrictStr | None = None
    """A YAML file with the same keys (keys in the card win)."""
    latency: Number | None = Field(None, json_schema_extra={"minimum": 0, "maximum": 1})
    """Sensing-to-actuation latency [s]."""
    latency_steps: Number | None = Field(None, json_schema_extra={"minimum": 0})
    """The latency in control steps (wins over latency)."""
    motor_strength: Number | None = Field(None, json_schema_extra={"minimum": 0, "maximum": 0.95})
    """Share of the commanded torque the real motors may lack (0.1: up to 10 % weaker)."""
    motor_lag: Number | None = Field(None, json_schema_extra={"minimum": 0})
    """Torque rise time constant of the real motors [s]."""
    obs_noise: Number | None = Field(None, json_schema_extra={"minimum": 0})
    """Standard deviation of sensor noise on every sensed observation value, in its own units (rad, rad/s, m/s, ...) before scale, clip and normalisation; never on commands, clocks, phases or the previous action."""
    friction: Numbers | None = None
    """Lowest friction expected as a scale (0.7: 30 % more slippery), or a [low, high] range."""
    added_mass: Number | None = Field(None, json_schema_extra={"minimum": 0})
    """Payload or mass error as a share of the robot's mass."""
    contact_timeconst: Number | None = Field(None, json_schema_extra={"minimum": 0.001, "maximum": 1})
    """Softest ground contact expected: MuJoCo's solref time constant [s] (simulated: 0.02; larger is softer)."""
    push: Number | None = Field(None, json_schema_extra={"minimum": 0})
    """Horizontal push impulse [N s] the robot must take (opt-in family push; free base)."""
    motor_free_speed: Number | None = Field(None, json_schema_extra={"exclusiveMinimum": 0})
    """Real motors' free speed [rad/s] (opt-in family dc_motor)."""
    actuator: StrictStr | None = None
    """Actuator model file of the real motors (opt-in family actuator_net)."""
    obs_noise_terms: dict[str, Number] | None = None
    """Noise std per observation term, in the term's units (opt-in families noise:<term>)."""
    margins: list[StrictStr] | None = None
    """Opt-in families swept with no gap stated: margins reported, verdict unaffected."""
    uncertainty: dict[str, Number] | None = None
    """1-sigma uncertainty per stated key (a calibration's); the verdict uses value + 2 sigma."""
    calibration: dict[str, Any] | None = None
    """How crosssim calibrate measured the values (kept, never read)."""
    encoder_offset: Number | None = Field(None, json_schema_extra={"minimum": 0})
    """Largest encoder calibration error [rad], drawn per joint and episode (observation and servo PD read it)."""
    joint_friction: Number | None = Field(None, json_schema_extra={"minimum": 0})
    """Coulomb friction [N m] of the real joints beyond the simulated model's."""
    deadband: Number | None = Field(None, json_schema_extra={"minimum": 0})
    """Motor driver dead band [N m]: commanded torque magnitude that never reaches the joint."""
    action_drop: Number | None = Field(None, json_schema_extra={"minimum": 0, "maximum": 0.95})
    """Probability per control period that a command frame is lost (the previous one is kept)."""
    action_jitter: Number | None = Field(None, json_schema_extra={"minimum": 0, "maximum": 1})
    """Largest extra delay of a command [control periods], drawn per period."""
    imu_bias: Number | None = Field(None, json_schema_extra={"minimum": 0})
    """Largest constant IMU bias per component [rad/s on base_ang_vel; about rad of tilt on projected_gravity]."""
    ground_slope: Number | None = Field(None, json_schema_extra={"minimum": 0, "maximum": 0.5})
    """Steepest ground expected [rad], uphill along the walking direction (+x): gravity tilted in every engine."""


class CardModel(_Section):
    """A crosssim policy card (version 1): the YAML next to the weights."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, title="crosssim policy card")
    card_version: StrictInt | None = Field(None, json_schema_extra={"enum": [1]})
    """Optional; this crosssim reads version 1."""
    name: StrictStr | None = None
    """Results and reports are named after it (default: the card's folder)."""
    task: StrictStr
    """crosssim task, optionally with its version: Walker2d-v4 (see `crosssim tasks`)."""
    robot: StrictStr | None = None
    """MJCF path (or gymnasium:<file>); default: the task's scene."""
    policy: PolicySection
    """The weights and how to load them."""
    observation: ObservationSection | None = None
    """Observation terms, normalisation, history layout."""
    action: ActionSection | None = None
    """Action semantics: mode, clip, scale, gains, default pose."""
    control_period: Number | None = Field(None, json_schema_extra={"exclusiveMinimum": 0})
    """Seconds between policy calls; checked against the task."""
    physics_timestep: Number | None = Field(None, json_schema_extra={"exclusiveMinimum": 0, "maximum": 1})
    """Replaces the MJCF's <option timestep> [s]; it must divide the control period."""
    first_call: Literal[FIRST_CALLS] | None = None  # type: ignore[valid-type]
    """reset, or after_one_period (hold a zero action for one period first)."""
    trained_in: StrictStr | None = None
    """The engine the policy was trained in: the reference engine for drops."""
    validated_in: Union[list[StrictStr], StrictStr, None] = None
    """Engines the authors validated the policy in."""
    claimed: ClaimedSection | None = None
    """The performance the authors claim."""
    joints: list[StrictStr] | None = None
    """Policy joint order by joint name; default: the model's actuator order."""
    task_options: dict[str, Any] | None = None
    """Options of the task (checked by the task), e.g. version: v4."""
    training: dict[str, Any] | None = None
    """Free-form provenance (not read by crosssim)."""
    metric: StrictStr | None = None
    """The task metric drops and the verdict use (default: the task's primary)."""
    deployment: DeploymentSection | None = None
    """The expected deployment gap (default: the robot class's, docs/risk.md)."""
    replaces: StrictStr | None = None
    """The gate: the base branch's card (or its folder) this policy replaces, relative to this card, when it is
    renamed or moved; paired by name or weights otherwise (docs/security.md)."""


def _sections() -> dict[str, type[BaseModel]]:
    out: dict[str, type[BaseModel]] = {}

    def walk(model, prefix):
        out[prefix] = model
        for name, info in model.model_fields.items():
            key = info.alias or name
            for sub in _models_in(info.annotation):
                if sub is not TermEntry:
                    walk(sub, f"{prefix}.{key}" if prefix else key)

    walk(CardModel, "")
    return out


def _models_in(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models_in(arg)]


SECTIONS = _sections()
"""Section path ("" for the top level, "observation.history") -> its model."""
FIELDS = {path: tuple(info.alias or name for name, info in model.model_fields.items())
          for path, model in SECTIONS.items()}
"""Every key a version-1 card may hold, per section (``training`` and ``task_options`` are free-form
here: training is provenance only, task options are checked by the task)."""

_TYPE_NAMES = {"int_type": "an integer", "float_type": "a number", "string_type": "text", "list_type": "a list",
               "model_type": "a mapping", "dict_type": "a mapping", "model_attributes_type": "a mapping",
               "literal_error": None, "missing": None}


def _path(loc, keep_last: bool = False) -> list:
    """The card's field path of a pydantic error location, without pydantic's union-member tags."""
    tags = {"int", "float", "str", "dict[str,any]"} | {m.__name__ for m in (*SECTIONS.values(), TermEntry)}
    out = []
    for k, part in enumerate(loc):
        # The last part of an unknown key's location is the user's key, whatever it says ("int:").
        if isinstance(part, str) and (part in tags or "[" in part) and not (keep_last and k == len(loc) - 1):
            continue
        out.append(part)
    return out


def _show(path: list) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _message(errors: list[dict]) -> str:
    from crosssim.strictload import did_you_mean
    from crosssim.text import printable

    # A union reports one error per member: the deepest path is the member whose shape matched.
    # An unknown key goes first: beside a missing required field it is usually its typo (tsak: -> task).
    errors = [e for e in errors if e["type"] == "extra_forbidden"] or errors
    paths = [_path(e["loc"], keep_last=e["type"] in ("extra_forbidden", "invalid_key")) for e in errors]
    depth = max(len(p) for p in paths)
    first = next(i for i, p in enumerate(paths) if len(p) == depth)
    error, path = errors[first], paths[first]
    kind, value = error["type"], error.get("input")
    if kind == "extra_forbidden":
        section = _show([p for p in path[:-1] if not isinstance(p, int)])
        known = FIELDS.get(section, ())
        key = printable(str(path[-1]), 60)
        return f"field '{_show(path)}' is not known; {did_you_mean(key, known, section + '.' if section else '')}"
    if kind == "invalid_key":
        return f"key {printable(repr(path[-1]), 60)} in '{_show(path[:-1]) or 'the card'}' is not text; write a field name"
    if kind == "missing" or value is None:
        return f"missing required field '{_show(path)}'"
    if kind == "literal_error":
        choices = error["ctx"]["expected"].replace("'", "")  # 'a' or 'b' -> a or b, as the README writes them
        return f"field '{_show(path)}' is {value!r:.40}; use {choices}"
    if kind in ("too_short", "too_long"):
        size = error["ctx"].get("min_length", error["ctx"].get("max_length"))
        return f"field '{_show(path)}' has {len(value)} values, expected {size}"
    wanted = []
    for e, p in zip(errors, paths):
        name = _TYPE_NAMES.get(e["type"])
        if p == path and name and name not in wanted:
            wanted.append(name)
    return (f"field '{_show(path)}' must be {' or '.join(wanted) or 'something else'}, "
            f"got {type(value).__name__} {printable(repr(value), 60)}")


def check_structure(raw: dict, where: Path) -> CardModel:
    """``raw`` (a card's YAML mapping) as the typed model; CardError (one line: the card, the field
    path, the fix) when it does not have the structure of a version-1 card: unknown keys, wrong value
    types, missing required fields. crosssim.card builds the Card from the model this returns."""
    try:
        return CardModel.model_validate(raw)
    except ValidationError as exc:
        raise CardError(f"{where}: {_message(exc.errors(include_url=False))}") from None


def json_schema() -> dict:
    """The card's JSON Schema (draft 2020-12), for editors such as yaml-language-server."""
    schema = CardModel.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=False) + "\n"


def reference_rows() -> list[tuple[str, str, str]]:
    """(field path, type, description) of every field, section by section, for the README."""
    rows = []
    for section, model in SECTIONS.items():
        for name, info in model.model_fields.items():
            key = info.alias or name
            path = f"{section}.{key}" if section else key
            kind = _type_text(info.annotation)
            required = info.is_required()
            doc = " ".join((info.description or "").split())
            rows.append((path, kind + (" (required)" if required else ""), doc))
    return rows


def _type_text(annotation) -> str:
    names = {str: "text", int: "integer", float: "number", dict: "mapping", type(None): None}
    args = getattr(annotation, "__args__", None)
    origin = getattr(annotation, "__origin__", None)
    if origin is Literal:
        return " \\| ".join(str(a) for a in args)
    if annotation in names:
        return names[annotation]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    if origin is list:
        return f"list of {_type_text(args[0])}"
    if origin is dict:
        return "mapping"
    if origin is Annotated or hasattr(annotation, "__metadata__"):
        return _type_text(annotation.__origin__)
    if args:
        parts = []
        for a in args:
            t = _type_text(a)
            if t and t not in parts:
                parts.append(t)
        return " \\| ".join(parts)
    return "any"


REFERENCE_MARKERS = ("<!-- card-reference:start (scripts/card_reference.py writes this table) -->",
                     "<!-- card-reference:end -->")
"""The lines around the generated card reference in README.md."""


def reference_markdown() -> str:
    """The card reference table (Markdown), one row per field, generated from CardModel."""
    lines = ["| field | type | meaning |", "|---|---|---|"]
    for path, kind, doc in reference_rows():
        doc = doc.replace("|", "\\|").replace("<", "&lt;")  # a table cell, not HTML
        lines.append(f"| `{path}` | {kind} | {doc} |")
    return "\n".join(lines) + "\n"


def with_reference(page: str) -> str:
    """``page`` (docs/cards.md) with the text between REFERENCE_MARKERS replaced by ``reference_markdown()``."""
    start, end = REFERENCE_MARKERS
    if page.count(start) != 1 or page.count(end) != 1:
        raise ValueError(f"docs/cards.md needs one '{start}' line and one '{end}' line")
    head, rest = page.split(start)
    _, tail = rest.split(end)
    return f"{head}{start}\n{reference_markdown()}{end}{tail}"
