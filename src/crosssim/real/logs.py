"""Real robot logs: an engine-neutral format (docs/real.md), read, validated and written here.

One log is one run of the robot: a table (Parquet, or CSV) with one row per control step, and a
JSON sidecar with the same stem. Row k holds the state measured at ``time[k]``, the policy's
inputs at that instant, the raw action it returned and the command it was tracking. Columns are
named by joint, so a log never depends on an engine's joint order. The format is declared once,
below: ``COLUMN_GROUPS`` (table columns) and ``SIDECAR_FIELDS`` (sidecar keys); adding a field is
one entry there and one attribute on ``RealLog``, and validation, reading, resampling and the
documentation table follow from the entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from crosssim.errors import CrossSimError
from crosssim.real.timing import Timing, check_timing, grid_times, hermite, interpolate, step_rows

FORMAT, VERSION = "crosssim-log", 1
DATA_SUFFIXES = (".parquet", ".csv")
JOINTS = None
"""``ColumnGroup.keys`` for a group with one column per joint of the sidecar's ``joints``."""


@dataclass(frozen=True)
class ColumnGroup:
    """Columns ``<name>.<key>``, given whole or not at all; ``RealLog.<name>`` holds them as (T, n)."""

    name: str
    keys: tuple[str, ...] | None
    """Column suffixes; JOINTS: one per joint of the sidecar's ``joints``, in that order."""
    unit: str
    label: str
    """Short name in messages."""
    doc: str
    required: bool = False
    floating_base: bool = False
    """Required when the robot has a floating base (checked against the policy's card)."""
    per_step: bool = False
    """A value of the control step (action, command), not a measurement at ``time``: taken from
    the step running at each grid point when resampling, never interpolated."""


COLUMN_GROUPS = (
    ColumnGroup("q", JOINTS, "rad or m", "joint positions",
                "joint position (encoder; the sidecar's joint_offsets are added)", required=True),
    ColumnGroup("dq", JOINTS, "rad/s or m/s", "joint velocities", "joint velocity", required=True),
    ColumnGroup("action", JOINTS, "policy units", "policy actions",
                "the policy's raw output, before the card's scale and default pose", required=True, per_step=True),
    ColumnGroup("tau", JOINTS, "N m", "joint torques", "measured joint torque"),
    ColumnGroup("quat", ("w", "x", "y", "z"), "unit quaternion", "'quat'", "base orientation in the world, w first",
                floating_base=True),
    ColumnGroup("gyro", ("x", "y", "z"), "rad/s", "'gyro'", "base angular velocity in the base frame (IMU)"),
    ColumnGroup("pos", ("x", "y", "z"), "m", "'pos'", "base position, world frame (motion capture, estimator)"),
    ColumnGroup("vel", ("x", "y", "z"), "m/s", "'vel'", "base linear velocity, world frame"),
    ColumnGroup("command", ("vx", "vy", "yaw_rate"), "m/s, m/s, rad/s", "'command'", "the command at that step",
                per_step=True),
    # Corrections (docs/correction.md): an operator took over at some steps.
    ColumnGroup("intervention", ("active",), "0 or 1", "'intervention'",
                "1 where an operator overrode the policy at that step", per_step=True),
    ColumnGroup("operator", JOINTS, "policy units", "operator actions",
                "the operator's action (raw policy units; sidecar operator_action: replace or delta); rows without "
                "an intervention hold any finite value (ignored)", per_step=True),
    ColumnGroup("operator_command", ("vx", "vy", "yaw_rate"), "m/s, m/s, rad/s", "'operator_command'",
                "the velocity command the operator gave during an intervention", per_step=True),
)
OBS_PREFIX = "obs."
"""``obs.0`` ... ``obs.<n-1>``: the policy's input vector as fed to it (per step; optional)."""


@dataclass(frozen=True)
class SidecarField:
    """One key of the JSON sidecar."""

    name: str
    kind: str
    """text, names (non-empty list of distinct names), positive, nonnegative, bool, path,
    joint_map (joint name -> number), joint_vector (one number per joint of ``joints``), choice
    (one of ``choices``)."""
    doc: str
    required: bool = False
    default: object = None
    choices: tuple[str, ...] = ()
    """Allowed values of a ``choice`` field."""


SIDECAR_FIELDS = (
    SidecarField("robot", "text", "the robot's name (free text)", required=True),
    SidecarField("joints", "names", "the policy's joint order: the action columns in output order", required=True),
    SidecarField("control_period", "positive", "seconds between two policy calls", required=True),
    SidecarField("card", "path", "the policy card, relative to the sidecar"),
    SidecarField("terminated", "bool", "the run ended in a fall or an emergency stop", default=False),
    SidecarField("applied", "bool", "false for a dry run: the policy ran on the robot's sensors but its actions "
                 "never reached the motors (used for the input checks, never for physics)", default=True),
    SidecarField("action_delay", "nonnegative", "control steps [may be fractional] between a row's action and "
                 "the motors receiving it, known from the deployment (e.g. 1: applied at the next tick)",
                 default=0.0),
    SidecarField("joint_offsets", "joint_map", "per-joint calibration offset [rad or m] added to the logged q "
                 "to get the model's joint position", default={}),
    SidecarField("previous_action", "joint_vector", "the raw action in force before the first row (default: "
                 "zeros)"),
    SidecarField("source", "text", "free text: robot unit, place, date"),
    SidecarField("operator_action", "choice", "how operator.* columns act: replace (the motors got the operator's "
                 "action) or delta (added to the policy's action)", default="replace", choices=("replace", "delta")),
    SidecarField("operator", "text", "free text: who or what intervened (a person, a scripted controller, a policy)"),
)


class LogError(CrossSimError):
    """A log (or log folder) that crosssim cannot use; the message names the file and the column or field."""


@dataclass
class RealLog:
    """One log on its control grid (rows ``period`` apart; jittered logs resampled, ``timing``)."""

    path: Path
    """The data file (.parquet or .csv)."""
    meta: dict
    """The sidecar, as read (defaults filled in)."""
    time: np.ndarray
    """(T,) control-grid times [s]."""
    joints: tuple[str, ...]
    """Policy joints, in the policy's order (sidecar ``joints``)."""
    q: np.ndarray
    """(T, joints) joint positions [rad or m], joint offsets applied."""
    dq: np.ndarray
    action: np.ndarray
    """(T, joints) raw policy outputs."""
    tau: np.ndarray | None = None
    quat: np.ndarray | None = None
    gyro: np.ndarray | None = None
    pos: np.ndarray | None = None
    vel: np.ndarray | None = None
    obs: np.ndarray | None = None
    command: np.ndarray | None = None
    intervention: np.ndarray | None = None
    """(T, 1) 1 where an operator overrode the policy (corrections; docs/correction.md)."""
    operator: np.ndarray | None = None
    """(T, joints) the operator's action (``operator_action``: replace, or delta on ``action``)."""
    operator_command: np.ndarray | None = None
    timing: Timing | None = None
    rows: "RealLog | None" = None
    """The log as logged (row k = policy call k) when ``timing.resampled``; else None (this is it).
    The policy's inputs are checked on these rows: each was computed from that row's state."""
    base_estimated: bool = False
    """pos / vel (and a filtered quat) were estimated from the IMU and the legs, not logged
    (crosssim/real/base_state.py)."""

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def control_period(self) -> float:
        return float(self.meta["control_period"])

    @property
    def terminated(self) -> bool:
        return bool(self.meta.get("terminated", False))

    @property
    def applied(self) -> bool:
        """False for a dry run (actions never reached the motors)."""
        return bool(self.meta.get("applied", True))

    @property
    def action_delay(self) -> float:
        """Declared delay [control steps] from a row's action to the motors."""
        return float(self.meta.get("action_delay", 0.0))

    @property
    def previous_action(self) -> np.ndarray:
        """The raw action before the first row (zeros when not logged)."""
        prev = self.meta.get("previous_action")
        return np.zeros(len(self.joints)) if prev is None else np.asarray(prev, dtype=float)

    @property
    def intervened(self) -> np.ndarray:
        """(T,) bool: rows where an operator overrode the policy (all False without the column)."""
        return np.zeros(len(self), bool) if self.intervention is None else self.intervention[:, 0] > 0.5

    @property
    def applied_action(self) -> np.ndarray:
        """(T, joints) the raw action that reached the motors: the operator's where it intervened."""
        if self.operator is None or not self.intervened.any():
            return self.action
        mine = self.operator + self.action if self.meta.get("operator_action") == "delta" else self.operator
        return np.where(self.intervened[:, None], mine, self.action)

    @property
    def card(self) -> Path | None:
        card = self.meta.get("card")
        return None if not card else (self.path.parent / str(card)).resolve()

    @property
    def as_logged(self) -> "RealLog":
        """The rows as logged (one per policy call), before any resampling."""
        return self.rows if self.rows is not None else self

    def __len__(self) -> int:
        return len(self.time)

    def _per_row(self) -> list[str]:
        return [f.name for f in fields(self) if isinstance(getattr(self, f.name), np.ndarray)
                and getattr(self, f.name).shape[:1] == self.time.shape]

    def head(self, rows: int) -> "RealLog":
        """The log's first ``rows`` grid rows (at least 2)."""
        n = max(2, int(rows))
        return replace(self, rows=None, **{k: getattr(self, k)[:n] for k in self._per_row()})

    @property
    def duration(self) -> float:
        return float(len(self) * self.control_period)


def sidecar_of(path: Path) -> Path:
    return path.with_suffix(".json")


def data_of(path: Path) -> Path:
    """The data file of a log given either file of the pair."""
    path = Path(path)
    if path.suffix == ".json":
        for suffix in DATA_SUFFIXES:
            if path.with_suffix(suffix).is_file():
                return path.with_suffix(suffix)
        raise LogError(f"{path}: no data file beside this sidecar (looked for {path.stem}.parquet and .csv)")
    return path


def _check_field(f: SidecarField, value, joints: list) -> str | None:
    """Why ``value`` does not fit field ``f`` (None: it fits)."""
    number = lambda v: not isinstance(v, bool) and isinstance(v, (int, float)) and np.isfinite(v)  # noqa: E731
    if f.kind == "text":
        return None if isinstance(value, str) and value else "must be non-empty text"
    if f.kind == "names":
        if not isinstance(value, list) or not value or not all(isinstance(j, str) and j for j in value):
            return "must be a non-empty list of joint names (the policy's joint order)"
        return "names a joint twice" if len(set(value)) != len(value) else None
    if f.kind in ("positive", "nonnegative"):
        ok = number(value) and (value > 0 if f.kind == "positive" else value >= 0)
        return None if ok else f"must be a {'positive' if f.kind == 'positive' else 'non-negative'} number"
    if f.kind == "bool":
        return None if isinstance(value, bool) else "must be true or false"
    if f.kind == "path":
        return None if isinstance(value, str) else "must be a path (relative to the sidecar)"
    if f.kind == "joint_map":
        if not isinstance(value, dict) or not all(number(v) for v in value.values()):
            return "must map joint names to numbers"
        unknown = [j for j in value if j not in joints]
        return f"names {unknown}, not joints of field 'joints'" if unknown else None
    if f.kind == "choice":
        return None if value in f.choices else f"must be one of {', '.join(f.choices)}"
    if f.kind == "joint_vector":
        ok = isinstance(value, list) and len(value) == len(joints) and all(number(v) for v in value)
        return None if ok else f"must be a list of {len(joints)} numbers (one per joint of 'joints')"
    raise AssertionError(f.kind)


def _read_meta(path: Path, problems: list[str]) -> dict:
    side = sidecar_of(path)
    if not side.is_file():
        problems.append(f"{path}: sidecar {side.name} is missing (robot, joints, control_period; see docs/real.md)")
        return {}
    try:
        meta = json.loads(side.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        problems.append(f"{side}: not valid JSON ({exc if not isinstance(exc, RecursionError) else 'nested too deeply'})")
        return {}
    if not isinstance(meta, dict):
        problems.append(f"{side}: the sidecar is a JSON object, got {type(meta).__name__}")
        return {}
    if meta.get("format") != FORMAT:
        problems.append(f"{side}: field 'format' must be {FORMAT!r}, got {meta.get('format')!r}")
    if meta.get("version") != VERSION:
        problems.append(f"{side}: field 'version' is {meta.get('version')!r}; this crosssim reads version {VERSION}")
    known = {f.name for f in SIDECAR_FIELDS} | {"format", "version"}
    unknown = sorted(k for k in meta if k not in known)
    if unknown:
        problems.append(f"{side}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                        f"(the sidecar's fields: {', '.join(f.name for f in SIDECAR_FIELDS)})")
    joints = meta.get("joints") if isinstance(meta.get("joints"), list) else []
    for f in SIDECAR_FIELDS:
        if f.name not in meta:
            if f.required:
                problems.append(f"{side}: field {f.name!r} ({f.doc}) is missing")
            meta[f.name] = f.default
            continue
        why = _check_field(f, meta[f.name], joints)
        if why:
            problems.append(f"{side}: field {f.name!r} {why}, got {json.dumps(meta[f.name])[:80]}")
            meta[f.name] = f.default
    if not isinstance(meta.get("joints"), list):
        meta["joints"] = []
    return meta


def _read_table(path: Path, problems: list[str]):
    import pandas as pd

    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        if path.suffix == ".csv":
            return pd.read_csv(path)
    except Exception as exc:  # pyarrow / pandas parser errors carry their own types
        kind = "Parquet" if path.suffix == ".parquet" else "CSV"
        problems.append(f"{path}: cannot be read as {kind} ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})")
        return None
    problems.append(f"{path}: a log is a .parquet or .csv file, got {path.suffix or 'no suffix'}")
    return None


def _column(df, name: str, path: Path, problems: list[str]) -> np.ndarray | None:
    if name not in df.columns:
        return None
    try:
        values = df[name].to_numpy(dtype=float)
    except (TypeError, ValueError):
        problems.append(f"{path}: column '{name}' is not numeric")
        return None
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        problems.append(f"{path}: column '{name}' has {bad.size} missing or non-finite values (first at row {bad[0]})")
        return None
    return values


def _block(df, names: list[str], path: Path, problems: list[str], what: str, required: bool) -> np.ndarray | None:
    """Columns ``names`` as a (T, len) array; all present or none (then None, or a problem if required)."""
    present = [n for n in names if n in df.columns]
    if not present:
        if required:
            problems.append(f"{path}: columns {', '.join(names[:4])}{'...' if len(names) > 4 else ''} ({what}) are missing")
        return None
    if len(present) != len(names):
        missing = [n for n in names if n not in df.columns]
        problems.append(f"{path}: {what}: column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} "
                        f"missing (give all of {', '.join(names)} or none)")
        return None
    cols = [_column(df, n, path, problems) for n in names]
    if any(c is None for c in cols):
        return None
    return np.stack(cols, axis=1)


def _columns(group: ColumnGroup, joints: list) -> list[str]:
    return [f"{group.name}.{k}" for k in (joints if group.keys is JOINTS else group.keys)]


def validate(path: str | Path) -> tuple[RealLog | None, list[str]]:
    """Read one log; return it (None if unusable) and every problem found, each naming the file."""
    path = data_of(Path(path))
    problems: list[str] = []
    if not path.is_file():
        return None, [f"{path}: no such file"]
    meta = _read_meta(path, problems)
    df = _read_table(path, problems)
    if df is None or not meta:
        return None, problems
    joints = list(meta.get("joints") or [])
    known = {"time"} | {c for g in COLUMN_GROUPS for c in _columns(g, joints)}
    unknown = [c for c in df.columns if c not in known and not str(c).startswith(OBS_PREFIX)]
    if unknown:
        problems.append(f"{path}: unknown column{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown[:5]))}"
                        f"{' ...' if len(unknown) > 5 else ''} (per-joint columns must name a joint of the sidecar's "
                        "'joints'; see docs/real.md)")
    if len(df) < 2:
        problems.append(f"{path}: {len(df)} rows; a log needs at least 2 control steps")
    delay = meta.get("action_delay")
    if isinstance(delay, (int, float)) and not isinstance(delay, bool) and delay >= max(len(df), 2):
        # every action would reach the motors after the log ends (and a replay would queue that many)
        problems.append(f"{path}: sidecar field 'action_delay' is {delay:g} control steps, not below the log's "
                        f"{len(df)} rows; it is a delay in control steps (e.g. 1), not in seconds or milliseconds")
    time = _column(df, "time", path, problems)
    if "time" not in df.columns:
        problems.append(f"{path}: column 'time' [s] is missing")
    timing = None
    if time is not None and len(time) >= 2 and meta.get("control_period"):
        timing, found = check_timing(time, float(meta["control_period"]))
        problems += [f"{path}: {p}" for p in found]
    blocks = {g.name: _block(df, _columns(g, joints), path, problems, g.label,
                             required=g.required) for g in COLUMN_GROUPS}
    if blocks["quat"] is not None:
        norm = np.linalg.norm(blocks["quat"], axis=1)
        bad = np.flatnonzero(np.abs(norm - 1.0) > 0.05)
        if bad.size:
            problems.append(f"{path}: columns quat.w..quat.z are not a unit quaternion at {bad.size} rows (first "
                            f"{bad[0]}, norm {norm[bad[0]]:.3f}); the order is w, x, y, z")
        else:
            blocks["quat"] = blocks["quat"] / norm[:, None]
    obs_cols = sorted((c for c in df.columns if str(c).startswith(OBS_PREFIX)), key=str)
    obs = None
    if obs_cols:
        want = [f"{OBS_PREFIX}{i}" for i in range(len(obs_cols))]
        if sorted(want) != obs_cols:
            problems.append(f"{path}: observation columns must be obs.0 ... obs.{len(obs_cols) - 1} with no gaps")
        else:
            obs = _block(df, want, path, problems, "policy observations", required=False)
    problems += _check_corrections(blocks, path)
    if problems:
        return None, problems
    offsets = meta.get("joint_offsets") or {}
    blocks["q"] = blocks["q"] + np.array([float(offsets.get(j, 0.0)) for j in joints])
    log = RealLog(path=path, meta=meta, time=time, joints=tuple(joints), obs=obs, timing=timing, **blocks)
    return (_on_grid(log) if timing.resampled else log), []


def _check_corrections(blocks: dict, path: Path) -> list[str]:
    """The intervention flag is 0 or 1, and a flagged step has the operator's action or command."""
    flag = blocks.get("intervention")
    if flag is None:
        given = [g for g in ("operator", "operator_command") if blocks.get(g) is not None]
        return [f"{path}: {given[0]}.* columns without an intervention.active column (1 at the steps the operator "
                "overrode the policy, else 0)"] if given else []
    bad = np.flatnonzero((flag[:, 0] != 0) & (flag[:, 0] != 1))
    if bad.size:
        return [f"{path}: column 'intervention.active' must be 0 or 1; {bad.size} rows are not (first at row {bad[0]})"]
    if flag.any() and blocks.get("operator") is None and blocks.get("operator_command") is None:
        first = int(np.flatnonzero(flag[:, 0])[0])
        return [f"{path}: intervention.active is 1 at {int(flag.sum())} rows (first at row {first}) but the log has no "
                "operator action: add operator.<joint> columns (the operator's action) or operator_command.vx, "
                ".vy, .yaw_rate"]
    return []


def _on_grid(log: RealLog) -> RealLog:
    """``log`` resampled onto its control grid (states interpolated, per-step values from the
    nearest row); the rows as logged kept in ``rows``."""
    grid = grid_times(log.time, log.timing)
    near = step_rows(log.time, grid, log.control_period)
    per_step = {g.name for g in COLUMN_GROUPS if g.per_step} | {"obs"}
    out = {}
    for name in log._per_row():
        values = getattr(log, name)
        if name == "time":
            out[name] = grid
        elif name in per_step:
            out[name] = values[near]
        elif name == "quat":  # same hemisphere row to row, then interpolate and renormalise
            q = values.copy()
            for k in range(1, len(q)):
                if np.dot(q[k], q[k - 1]) < 0:
                    q[k] = -q[k]
            q = interpolate(log.time, q, grid)
            out[name] = q / np.linalg.norm(q, axis=1, keepdims=True)
        elif name in SLOPES and getattr(log, SLOPES[name]) is not None:
            out[name] = hermite(log.time, values, getattr(log, SLOPES[name]), grid)
        else:
            out[name] = interpolate(log.time, values, grid)
    return replace(log, rows=log, **out)


SLOPES = {"q": "dq", "pos": "vel"}
"""Groups interpolated with their logged time derivative (cubic Hermite) when resampling."""


def check_against(log: RealLog, harness) -> list[str]:
    """Problems using ``log`` with a policy's harness: joint order, control period, sizes, base."""
    out, c, card = [], harness.canonical, harness.card
    side = sidecar_of(log.path)
    policy_joints = [c.joint_names[j] for j in harness.joints]
    missing = [j for j in log.joints if j not in c.joint_names]
    if missing:
        out.append(f"{side}: field 'joints' names {missing}, not joints of {harness.scene.name}")
    elif list(log.joints) != policy_joints:
        where = f"card {card.path}" if card is not None else harness.scene.name
        out.append(f"{side}: field 'joints' is {list(log.joints)}; the policy's joint order ({where}) is {policy_joints}")
    period = harness.control_dt
    if abs(log.control_period - period) > 1e-6 * period:
        out.append(f"{side}: control_period {log.control_period} s; the policy runs every {period} s")
    if log.obs is not None and log.obs.shape[1] != harness.obs_size:
        out.append(f"{log.path}: {log.obs.shape[1]} obs.* columns; the card's observation has {harness.obs_size} values")
    if c.free_base and log.quat is None:
        out.append(f"{log.path}: {harness.scene.name} has a floating base: columns quat.w, quat.x, quat.y, quat.z "
                   f"(base orientation) are required")
    return out


def read_log(path: str | Path) -> RealLog:
    log, problems = validate(path)
    if problems:
        more = f" (and {len(problems) - 1} more; run `crosssim logs validate {path}`)" if len(problems) > 1 else ""
        raise LogError(problems[0] + more)
    return log


def find_logs(folder: str | Path) -> list[Path]:
    """Data files of a log folder (or a single log file), sorted."""
    folder = Path(folder)
    if folder.is_file() or folder.suffix in DATA_SUFFIXES + (".json",):
        return [data_of(folder)]
    if not folder.is_dir():
        raise LogError(f"{folder}: no such log folder")
    files = sorted(p for p in folder.iterdir() if p.suffix in DATA_SUFFIXES and p.is_file())
    if not files:
        raise LogError(f"{folder}: no logs in this folder (expected <name>.parquet or <name>.csv with <name>.json; "
                       f"see docs/real.md)")
    return files


def read_logs(folder: str | Path, harness=None) -> list[RealLog]:
    """Every log of a folder, checked against ``harness`` when given; LogError on the first bad one."""
    logs = [read_log(p) for p in find_logs(folder)]
    if harness is not None:
        for log in logs:
            problems = check_against(log, harness)
            if problems:
                raise LogError(problems[0])
    return logs


def write_log(path: str | Path, meta: dict, columns: dict[str, np.ndarray]) -> Path:
    """Write a log (data file by suffix, sidecar beside it); ``meta`` gets format and version."""
    import pandas as pd

    path = Path(path)
    df = pd.DataFrame({k: np.asarray(v, dtype=float) for k, v in columns.items()})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".csv":
            df.to_csv(path, index=False, float_format="%.9g")
        else:
            df.to_parquet(path, index=False)
        sidecar_of(path).write_text(json.dumps({"format": FORMAT, "version": VERSION, **meta}, indent=1) + "\n")
    except OSError as exc:  # a full disk, a file where the folder should be: one line, not a traceback
        raise LogError(f"{path}: cannot write the log ({exc.strerror or exc}); choose another --out") from None
    return path
