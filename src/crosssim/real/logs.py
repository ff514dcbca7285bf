"""Real robot logs: an engine-neutral format (docs/real.md), read, validated and written here.

One log is one run of the robot: a table (Parquet, or CSV) with one row per control step, and a
JSON sidecar with the same stem. Row k holds the state measured at ``time[k]``, the policy's
inputs at that instant, the raw action it returned and the command it was tracking. Columns are
named by joint, so a log never depends on an engine's joint order:

    time                          [s], strictly increasing, one control period apart
    q.<joint>  dq.<joint>         joint position [rad or m] and velocity, every logged joint
    tau.<joint>                   measured joint torque [N m] (optional; all joints or none)
    quat.w quat.x quat.y quat.z   base orientation, world frame, w first (floating base: required)
    gyro.x gyro.y gyro.z          base angular velocity in the base frame [rad/s] (optional)
    pos.x pos.y pos.z             base position, world frame [m] (optional: motion capture)
    vel.x vel.y vel.z             base linear velocity, world frame [m/s] (optional)
    action.<joint>                the policy's raw output for each policy joint (before scaling)
    obs.0 ... obs.<n-1>           the policy's input vector (optional)
    command.vx command.vy command.yaw_rate   the command (optional; default: the card's)

Sidecar (``<stem>.json``): ``format: "crosssim-log"``, ``version: 1``, ``robot`` (name),
``joints`` (policy joint order: the action columns in the order the policy outputs them),
``control_period`` [s], and optionally ``card`` (policy card, relative to the sidecar),
``source`` (free text), ``terminated`` (the run ended in a fall or an emergency stop).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crosssim.errors import CrossSimError

FORMAT, VERSION = "crosssim-log", 1
DATA_SUFFIXES = (".parquet", ".csv")
GROUPS = {"quat": ("w", "x", "y", "z"), "gyro": ("x", "y", "z"), "pos": ("x", "y", "z"), "vel": ("x", "y", "z"),
          "command": ("vx", "vy", "yaw_rate")}
PER_JOINT = ("q", "dq", "tau")


class LogError(CrossSimError):
    """A log (or log folder) that crosssim cannot use; the message names the file and the column or field."""


@dataclass
class RealLog:
    path: Path
    """The data file (.parquet or .csv)."""
    meta: dict
    """The sidecar, as read."""
    time: np.ndarray
    joints: tuple[str, ...]
    """Policy joints, in the policy's order (sidecar ``joints``)."""
    q: np.ndarray
    """(T, joints) joint positions."""
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
    def card(self) -> Path | None:
        card = self.meta.get("card")
        return None if not card else (self.path.parent / str(card)).resolve()

    def __len__(self) -> int:
        return len(self.time)

    def head(self, rows: int) -> "RealLog":
        """The log's first ``rows`` rows (at least 2)."""
        from dataclasses import fields, replace

        n = max(2, int(rows))
        return replace(self, **{f.name: getattr(self, f.name)[:n] for f in fields(self)
                                if isinstance(getattr(self, f.name), np.ndarray)})

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


def _read_meta(path: Path, problems: list[str]) -> dict:
    side = sidecar_of(path)
    if not side.is_file():
        problems.append(f"{path}: sidecar {side.name} is missing (robot, joints, control_period; see docs/real.md)")
        return {}
    try:
        meta = json.loads(side.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        problems.append(f"{side}: not valid JSON ({exc})")
        return {}
    if not isinstance(meta, dict):
        problems.append(f"{side}: the sidecar is a JSON object, got {type(meta).__name__}")
        return {}
    if meta.get("format") != FORMAT:
        problems.append(f"{side}: field 'format' must be {FORMAT!r}, got {meta.get('format')!r}")
    if meta.get("version") != VERSION:
        problems.append(f"{side}: field 'version' is {meta.get('version')!r}; this crosssim reads version {VERSION}")
    if not isinstance(meta.get("robot"), str) or not meta.get("robot"):
        problems.append(f"{side}: field 'robot' (the robot's name) is missing")
    joints = meta.get("joints")
    if not isinstance(joints, list) or not joints or not all(isinstance(j, str) and j for j in joints):
        problems.append(f"{side}: field 'joints' must be a non-empty list of joint names (the policy's joint order)")
        meta["joints"] = []
    elif len(set(joints)) != len(joints):
        problems.append(f"{side}: field 'joints' names a joint twice")
    period = meta.get("control_period")
    if isinstance(period, bool) or not isinstance(period, (int, float)) or not np.isfinite(period) or period <= 0:
        problems.append(f"{side}: field 'control_period' must be a positive number of seconds, got {period!r}")
        meta["control_period"] = None
    if "card" in meta and not isinstance(meta["card"], str):
        problems.append(f"{side}: field 'card' must be a path (relative to the sidecar)")
    if "terminated" in meta and not isinstance(meta["terminated"], bool):
        problems.append(f"{side}: field 'terminated' must be true or false")
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
    known = {"time"} | {f"{p}.{j}" for p in PER_JOINT + ("action",) for j in joints} \
        | {f"{g}.{k}" for g, keys in GROUPS.items() for k in keys}
    unknown = [c for c in df.columns if c not in known and not str(c).startswith("obs.")]
    if unknown:
        problems.append(f"{path}: unknown column{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown[:5]))} "
                        f"(per-joint columns must name a joint of the sidecar's 'joints'; see docs/real.md)")
    if len(df) < 2:
        problems.append(f"{path}: {len(df)} rows; a log needs at least 2 control steps")
    time = _column(df, "time", path, problems)
    if "time" not in df.columns:
        problems.append(f"{path}: column 'time' [s] is missing")
    elif time is not None and len(time) >= 2 and meta.get("control_period"):
        steps = np.diff(time)
        if (steps <= 0).any():
            problems.append(f"{path}: column 'time' is not strictly increasing (row {int(np.argmax(steps <= 0)) + 1})")
        else:
            period = float(meta["control_period"])
            off = np.flatnonzero(np.abs(steps - period) > 0.1 * period)
            if off.size:
                problems.append(f"{path}: column 'time' steps by {steps[off[0]]:.4g} s at row {off[0] + 1}; the sidecar's "
                                f"control_period is {period} s (rows must be one control step apart, dropped steps "
                                f"split a log in two)")
    blocks = {p: _block(df, [f"{p}.{j}" for j in joints], path, problems,
                        {"q": "joint positions", "dq": "joint velocities", "tau": "joint torques",
                         "action": "policy actions"}[p], required=p != "tau") for p in PER_JOINT + ("action",)}
    groups = {g: _block(df, [f"{g}.{k}" for k in keys], path, problems, f"'{g}'", required=False)
              for g, keys in GROUPS.items()}
    if groups["quat"] is not None:
        norm = np.linalg.norm(groups["quat"], axis=1)
        bad = np.flatnonzero(np.abs(norm - 1.0) > 0.05)
        if bad.size:
            problems.append(f"{path}: columns quat.w..quat.z are not a unit quaternion at row {bad[0]} (norm "
                            f"{norm[bad[0]]:.3f}); the order is w, x, y, z")
        else:
            groups["quat"] = groups["quat"] / norm[:, None]
    obs_cols = sorted((c for c in df.columns if str(c).startswith("obs.")), key=str)
    obs = None
    if obs_cols:
        want = [f"obs.{i}" for i in range(len(obs_cols))]
        if sorted(want) != obs_cols:
            problems.append(f"{path}: observation columns must be obs.0 ... obs.{len(obs_cols) - 1} with no gaps")
        else:
            obs = _block(df, want, path, problems, "policy observations", required=False)
    if problems:
        return None, problems
    return RealLog(path=path, meta=meta, time=time, joints=tuple(joints), q=blocks["q"], dq=blocks["dq"],
                   action=blocks["action"], tau=blocks["tau"], obs=obs, **groups), []


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
    period = harness.task.frame_skip * c.timestep
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
    path.parent.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame({k: np.asarray(v, dtype=float) for k, v in columns.items()})
    if path.suffix == ".csv":
        df.to_csv(path, index=False, float_format="%.9g")
    else:
        df.to_parquet(path, index=False)
    sidecar_of(path).write_text(json.dumps({"format": FORMAT, "version": VERSION, **meta}, indent=1) + "\n")
    return path
