"""Policy cards: the YAML next to the weights that states what peers leave implicit.

A card is read once: its YAML is validated through the pydantic model of version 1
(crosssim.card_schema.CardModel: sections, keys, value types), and ``Card`` is built from that typed
model, never from the raw mapping. What pydantic cannot say is checked here while building it: files
exist, the task and the policy format are registered, the metric is one the task declares, the
robot's scene resolves, numbers are finite and in range, joints are distinct (crosssim.card_specs
does the observation and action sections). docs/cards.md ("Policy cards") is generated from the
model. Every validation error names the card file and the field, and says what would be accepted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from crosssim.card_schema import FIELDS  # noqa: F401  (re-exported: every key a card may hold)
from crosssim.card_schema import CardModel, ClaimedSection, check_structure
from crosssim.card_specs import (UNUSED_BY_MODE, ActionSpec, ObservationSpec, TaskOptions, action_spec,
                                 observation_spec, shown)
from crosssim.deployment import StatedDeployment
from crosssim.errors import CardError, CrossSimError
from crosssim.normalize import ObservationNormalizer as Normalization
from crosssim.text import printable

__all__ = ["CARD_NAMES", "UNUSED_BY_MODE", "ActionSpec", "Card", "ObservationSpec", "TaskOptions", "card_name",
           "find_card", "load_card"]

CARD_NAMES = ("card.yaml", "card.yml", "policy.yaml")


@dataclass(frozen=True)
class Card:
    """A loaded, checked card: every field typed (paths resolved, sections turned into specs)."""

    path: Path
    """The card file (every relative path in it is relative to its folder)."""
    name: str
    task: str
    policy_file: Path
    policy_format: str
    robot: str | None = None
    """The resolved scene file of ``robot`` (None: the task's own scene)."""
    algo: str | None = None
    activation: str | None = None
    onnx_output: str | None = None
    module_id: str = "default_policy"
    """RLlib: which RLModule of a multi-module checkpoint."""
    normalization: Normalization | None = None
    normalization_file: Path | None = None
    """The statistics file ``observation.normalize.file`` names (the card's folder / the name, not
    resolved); None: inline statistics or none."""
    action: ActionSpec = field(default_factory=ActionSpec)
    control_period: float | None = None
    """Seconds between two policy calls; checked against the task and engine timestep."""
    trained_in: str | None = None
    validated_in: tuple[str, ...] = ()
    claimed: dict[str, float] = field(default_factory=dict)
    """Claimed performance: return, x_velocity [m/s], survival (fraction of full episodes)."""
    joints: tuple[str, ...] = ()
    """Policy joint order (action and joint terms) by joint name; empty: the model's actuator order."""
    observation: ObservationSpec = field(default_factory=ObservationSpec)
    task_options: TaskOptions = field(default_factory=TaskOptions)
    """The task's constructor options (see TaskOptions for why a mapping)."""
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
    document: CardModel | None = field(default=None, repr=False, compare=False)
    """The card as its author wrote it, validated (relative paths, unstated keys unset). Only tools
    that write a derived card read it (``as_written``): every field it has is typed above. None: a
    Card built in code."""

    def reference_engine(self, engines) -> str:
        """The engine of ``engines`` (a run's, in order) the others are compared with: the first the
        card declares (where it was trained, then where it was validated), else the first run."""
        declared = [e for e in (self.trained_in, *self.validated_in) if e in engines]
        return declared[0] if declared else engines[0]

    def as_written(self) -> dict:
        """A fresh mapping of the card as written (keys its author set, paths as written, numbers
        read as floats), for writing a derived card: the comparison card, a corrected policy's card."""
        if self.document is None:
            raise ValueError(f"{self.path}: this Card was built in code, not read from a file")
        return self.document.model_dump(by_alias=True, exclude_unset=True)


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


def repo_root(folder: Path) -> Path | None:
    """The nearest folder at or above ``folder`` holding ``.git`` (a checkout), or None."""
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
    root = repo_root(folder) or folder
    if not target.is_relative_to(root.resolve()):
        raise CardError(f"{where}: the card is a symlink to {target}, outside {root}; commit the card file itself")


def _load_model(where: Path) -> CardModel:
    """The card file read once: safe YAML, plain text, then the typed model (crosssim.card_schema)."""
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
    return check_structure(raw, where)  # sections, keys and types; load_card checks the meanings


def load_card(path: str | Path) -> Card:
    """Parse and validate a card; raise CardError naming the file and the field.

    Strict: unknown or repeated keys, values a field cannot mean (reversed ranges, NaN, negative
    gains) and fields the action mode would ignore are errors, never silently dropped. A key
    written as ``null`` is a key not written.
    """
    where = find_card(path)
    model = _load_model(where)
    if model.card_version not in (None, 1):
        raise CardError(f"{where}: field 'card_version' is {model.card_version!r}; this crosssim reads version 1")
    base = where.parent
    name = card_name(model.name, base)
    metrics = _task_metrics(model.task, where)
    pol = model.policy
    policy_file = _policy_file(pol.file, pol.format, where)
    robot = None
    if model.robot is not None:
        from crosssim.scene import resolve_scene

        try:
            robot = str(resolve_scene(model.robot, base_dir=base))
        except CrossSimError as exc:
            raise CardError(f"{where}: field 'robot': {exc}") from None
    observation, normalization, stats_file = observation_spec(model.observation, where)
    action = action_spec(model.action, where)
    period = model.control_period
    if period is not None and not (math.isfinite(period) and period > 0):
        raise CardError(f"{where}: field 'control_period' must be > 0 seconds, got {shown(period)}")
    validated = model.validated_in or []
    claimed = _claims(model.claimed, where)
    dt = model.physics_timestep
    if dt is not None and not (math.isfinite(dt) and 0 < dt <= 1):
        raise CardError(f"{where}: field 'physics_timestep' must be seconds in (0, 1], got {shown(dt)}")
    joints = tuple(model.joints or ())
    if len(set(joints)) != len(joints):
        raise CardError(f"{where}: field 'joints' must be a list of distinct joint names")
    if model.metric is not None and model.metric not in metrics:
        raise CardError(f"{where}: field 'metric' is {model.metric!r}; task {model.task} declares: "
                        f"{', '.join(metrics)}")
    deployment = StatedDeployment()
    if model.deployment is not None:
        from crosssim.deployment import parse_deployment

        deployment = parse_deployment(model.deployment.model_dump(exclude_none=True), where)
    return Card(
        path=where, name=name, task=model.task, policy_file=policy_file, policy_format=pol.format, robot=robot,
        algo=pol.algo, activation=pol.activation, onnx_output=pol.output, module_id=pol.module_id or "default_policy",
        normalization=normalization, normalization_file=stats_file, action=action, control_period=period,
        trained_in=model.trained_in, validated_in=(validated,) if isinstance(validated, str) else tuple(validated),
        claimed=claimed, joints=joints, observation=observation, task_options=TaskOptions(model.task_options),
        metric=model.metric, physics_timestep=dt, first_call=model.first_call or "reset",
        deployment=deployment, replaces=model.replaces, document=model,
    )


def _task_metrics(task: str, where: Path) -> tuple[str, ...]:
    """The metrics of the registered task ``task`` (a name or name-version: Walker2d-v4)."""
    from crosssim.tasks import registered_tasks, task_class

    try:
        return task_class(task).metrics
    except CrossSimError as exc:
        detail = f"known tasks: {sorted(registered_tasks())}" if str(exc).startswith("unknown task") else str(exc)
        raise CardError(f"{where}: field 'task' is {task!r}; {detail}") from None


def _policy_file(file: str, fmt: str, where: Path) -> Path:
    """The weights ``policy.file`` names, resolved and checked for format ``fmt`` (a registered one)."""
    from crosssim.policy_formats import policy_formats  # the registry: built-ins and plugins

    if fmt not in policy_formats():
        raise CardError(f"{where}: field 'policy.format' is {fmt!r}; one of {', '.join(policy_formats())}")
    policy_file = Path(file) if fmt == "callable" else (where.parent / file).resolve()
    if fmt == "rllib" and not policy_file.is_dir():
        raise CardError(f"{where}: field 'policy.file' points to {policy_file}, which is not a folder "
                        "(an RLlib checkpoint is the folder algo.save_to_path() wrote)")
    single_file = fmt in ("sb3", "torchscript", "onnx")  # a plugin's format may be a file or a folder
    if fmt != "callable" and not (policy_file.is_file() if single_file else policy_file.exists()):
        raise CardError(f"{where}: field 'policy.file' points to {policy_file}, which does not exist")
    return policy_file


def _claims(claimed: ClaimedSection | None, where: Path) -> dict[str, float]:
    out = claimed.model_dump(by_alias=True, exclude_none=True) if claimed is not None else {}
    for key, value in out.items():
        if not math.isfinite(value):
            raise CardError(f"{where}: field 'claimed.{key}' is {shown(value)}; a claim is a finite number")
        if key == "survival" and not 0 <= value <= 1:
            raise CardError(f"{where}: field 'claimed.survival' is {shown(value)}; it is the fraction of full "
                            "episodes, 0 to 1")
    return out

def card_name(name, folder: Path) -> str:
    """What results are filed under: the card's ``name`` as one printable line, else its folder's name."""
    return " ".join(printable(str(name if name is not None else folder.name)).split()) or printable(folder.name)


