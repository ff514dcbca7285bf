"""Converters from common robot log layouts to crosssim's log format (docs/real.md, "Converting").

- **JSON steps**: a list with one object per control step (or ``{"meta": {...}, "steps": [...]}``),
  each holding vectors under common names (``q`` / ``joint_pos`` / ``dof_pos``, ``action`` /
  ``actions``, ``quat`` / ``base_quat``, ``gyro`` / ``base_ang_vel``, ``obs``, ``command``, ...).
- **ROS 2 bag in MCAP** (read by the ``mcap`` library, ``mcap-ros2-support`` for CDR messages;
  JSON-encoded messages too): ``sensor_msgs/JointState`` (joints by name, in any order),
  ``sensor_msgs/Imu`` (orientation x, y, z, w; angular velocity), the policy's actions and inputs
  as ``std_msgs/Float*MultiArray``, the command as ``geometry_msgs/Twist``. One row per action
  message (one policy call), with the newest state received before it; the row's time is that
  state's stamp (the state the policy acted on).

Both write a data file and its sidecar; ``crosssim logs validate`` then checks the result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crosssim.real.logs import COLUMN_GROUPS, JOINTS, OBS_PREFIX, LogError, write_log
from crosssim.real.sources import messages, numbers, shown

ALIASES = {
    "time": ("time", "t", "timestamp", "stamp"),
    "q": ("q", "joint_pos", "qpos", "dof_pos", "joint_positions", "position"),
    "dq": ("dq", "joint_vel", "qvel", "dof_vel", "joint_velocities", "velocity"),
    "tau": ("tau", "torque", "joint_torque", "effort"),
    "action": ("action", "actions", "raw_action"),
    "quat": ("quat", "base_quat", "orientation"),
    "gyro": ("gyro", "base_ang_vel", "ang_vel", "angular_velocity"),
    "pos": ("pos", "base_pos"),
    "vel": ("vel", "base_lin_vel", "lin_vel"),
    "command": ("command", "cmd", "commands"),
    "obs": ("obs", "observation", "observations", "policy_input"),
    "previous_action": ("previous_action", "last_action", "prev_action"),
}
"""Names a per-step JSON record may use for each group of the log format."""


@dataclass(frozen=True)
class Target:
    """What the converted log's sidecar says (docs/real.md, sidecar fields)."""

    robot: str
    joints: tuple[str, ...]
    control_period: float
    quat_order: str = "wxyz"
    """Order of the source's quaternions: 'wxyz' or 'xyzw' (ROS, scipy, Isaac Gym)."""
    extra: tuple[tuple[str, object], ...] = ()
    """Further sidecar fields (card, action_delay, applied, ...)."""


def _quat(q, order: str, where: str = "") -> np.ndarray:
    q = numbers(q, "quat", where)
    if q.size != 4:
        raise LogError(f"{where}: 'quat' has {q.size} values; expected 4 ({order})")
    return q if order == "wxyz" else np.array([q[3], q[0], q[1], q[2]])


def _columns(rows: dict[str, list], group: str, values, joints, where: str) -> None:
    spec = {g.name: g for g in COLUMN_GROUPS}.get(group)
    values = numbers(values, group, where)
    if group == "obs":
        keys = [str(k) for k in range(values.size)]
        prefix = OBS_PREFIX
    else:
        keys = list(joints) if spec.keys is JOINTS else list(spec.keys)
        prefix = f"{group}."
    if values.size != len(keys):
        raise LogError(f"{where}: '{group}' has {values.size} values; expected {len(keys)} "
                       f"({', '.join(keys[:4])}{'...' if len(keys) > 4 else ''})")
    for k, v in zip(keys, values):
        rows.setdefault(prefix + k, []).append(float(v))


def from_json_steps(source: str | Path, out: str | Path, target: Target) -> tuple[Path, list[str]]:
    """Convert a per-step JSON list; return the written log and notes (the keys it ignored; a
    previous action that is not the step before's action)."""
    source = Path(source)
    try:
        raw = json.loads(source.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LogError(f"{source}: not a readable JSON file ({exc})") from None
    except RecursionError:
        raise LogError(f"{source}: not a readable JSON file (nested too deeply for Python's JSON reader)") from None
    steps = raw.get("steps") if isinstance(raw, dict) else raw
    if not isinstance(steps, list) or not steps or not all(isinstance(s, dict) for s in steps):
        raise LogError(f"{source}: expected a list of per-step objects (or {{\"steps\": [...]}})")
    lookup = {alias: group for group, names in ALIASES.items() for alias in names}
    rows: dict[str, list] = {}
    prev: list[np.ndarray] = []
    ignored: set[str] = set()
    for k, step in enumerate(steps):
        where = f"{source}: step {k}"
        seen = set()
        for key, value in step.items():
            group = lookup.get(key)
            if group is None or group in seen:
                ignored.add(key)
                continue
            seen.add(group)
            if group == "previous_action":  # row 0's becomes the sidecar's; the rest are checked
                prev.append(numbers(value, key, where))
            elif group == "time":
                t = numbers(value, key, where)
                if t.size != 1:
                    raise LogError(f"{where}: '{key}' must be one number [s], got {shown(value)}")
                rows.setdefault("time", []).append(float(t[0]))
            else:
                _columns(rows, group, _quat(value, target.quat_order, where) if group == "quat" else value,
                         target.joints, where)
        if "time" not in seen:
            rows.setdefault("time", []).append(k * target.control_period)  # no clock: one row per period
    lengths = {len(v) for v in rows.values()}
    if len(lengths) != 1:
        short = min(rows, key=lambda c: len(rows[c]))
        raise LogError(f"{source}: '{short.split('.')[0]}' is in {len(rows[short])} of {len(steps)} steps; give it "
                       "in every step or in none")
    more, notes = previous_action(source, prev, rows, target.joints)
    path = _write(out, rows, target, f"converted from {source.name} (JSON steps)", **more)
    return path, ([f"ignored keys: {', '.join(sorted(ignored))}"] if ignored else []) + notes


def previous_action(source: Path, prev: list[np.ndarray], rows: dict, joints) -> tuple[dict, list[str]]:
    """The sidecar's ``previous_action`` from the first step's logged previous action, and a note
    where a later step's does not hold the step before's action (the policy's ``last_action``
    input then is not the logged action)."""
    if not prev:
        return {}, []
    if len(prev) != len(rows["time"]) or any(p.size != len(joints) for p in prev):
        raise LogError(f"{source}: the previous action must be in every step, {len(joints)} values each")
    actions = np.array([rows[f"action.{j}"] for j in joints]).T
    before = np.array(prev[1:])
    bad = np.flatnonzero(np.abs(before - actions[:-1]).max(axis=1) > 1e-5 * (1 + np.abs(actions[:-1]).max()))
    notes = [] if not bad.size else [
        f"the previous action of {bad.size} steps is not the step before's action (first at step {bad[0] + 1}): "
        "the action in force is not what the log says the policy returned"]
    return {"previous_action": [float(x) for x in prev[0]]}, notes


def _write(out, rows, target: Target, source: str, **more) -> Path:
    meta = {"robot": target.robot, "joints": list(target.joints), "control_period": target.control_period,
            "source": source, **dict(target.extra), **more}
    return write_log(out, meta, rows)


# -- any layout, through a layout mapping (crosssim/real/layout.py) -------------------------------

def _layout_meta(source: Path, layout, root, given: dict) -> tuple[dict, list[str]]:
    """The sidecar: what the file says through the mapping, then what the card or the flags give
    (``given``); the policy's joint order where the file names the same joints in another one."""
    from crosssim.real.layout import sidecar_values

    meta, notes = sidecar_values(source, layout, root), []
    for key, value in given.items():
        if key == "joints" and meta.get("joints") is not None and value:
            if sorted(map(str, meta["joints"])) == sorted(value) and list(meta["joints"]) != list(value):
                notes.append("joints put in the policy's order (the file's vectors are matched by name)")
                meta["file_joints"] = list(meta["joints"])
                meta["joints"] = list(value)
            continue
        if value is not None and value != () and meta.get(key) is None:
            meta[key] = list(value) if key == "joints" else value
    for key, flag in (("joints", "--joints"), ("control_period", "--control-period")):
        if not meta.get(key):
            raise LogError(f"{source}: the {key.replace('_', ' ')} is not known: map sidecar.{key} in {layout.path}, "
                           f"or pass --policy CARD or {flag}")
    meta.setdefault("robot", source.stem)
    return meta, notes


def from_layout(source: str | Path, out: str | Path, layout, given: dict) -> tuple[Path, list[str]]:
    """Convert a JSON, CSV, Parquet or MCAP file through a layout mapping (``load_layout``); ``given``:
    sidecar fields from the card or the flags (robot, joints, control_period, card, ...). Return
    the written log and notes."""
    from crosssim.real.layout import read_source, step_values

    source = Path(source)
    root, steps, clock, notes = read_source(source, layout)
    meta, more_notes = _layout_meta(source, layout, root, given)
    notes = notes + more_notes
    order = meta.pop("file_joints", None) or meta["joints"]  # the file's vectors are in this order
    joints = [str(j) for j in order]
    rows: dict[str, list] = {}
    if layout.time is None:  # the receive times of an MCAP bag, else one row per period
        rows["time"] = clock or [k * float(meta["control_period"]) for k in range(len(steps))]
    else:
        for k, t in enumerate(step_values(source, layout, steps, "time", joints)):
            if t.size != 1:
                raise LogError(f"{source}: step {k}: the time must be one number, got {t.size} values")
            rows.setdefault("time", []).append(float(t[0]))
    prev = []
    for group in layout.columns:
        values = step_values(source, layout, steps, group, joints)
        if group == "previous_action":
            prev = values
            continue
        for k, v in enumerate(values):
            _columns(rows, group, v, joints, f"{source}: step {k}")
    more, prev_notes = previous_action(source, prev, rows, joints)
    if more and order != meta["joints"]:  # the sidecar's vector is in the policy's order
        more["previous_action"] = [more["previous_action"][joints.index(j)] for j in meta["joints"]]
    meta = {"source": f"converted from {source.name} with {layout.path.name}", **meta, **more}
    return write_log(out, meta, rows), notes + prev_notes


# -- MCAP (ROS 2 bags) ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Topics:
    """Topic of each source in a bag; None: not recorded."""

    joint_states: str = "/joint_states"
    action: str = "/policy/action"
    imu: str | None = "/imu"
    obs: str | None = "/policy/obs"
    command: str | None = "/cmd_vel"


def _get(msg, name: str):
    return msg[name] if isinstance(msg, dict) else getattr(msg, name)


def _stamp(msg, log_time_ns: int) -> float:
    """The message's header stamp [s], else the time the bag received it."""
    try:
        header = _get(msg, "header")
        stamp = _get(header, "stamp")
        sec, nsec = _get(stamp, "sec"), _get(stamp, "nanosec")
        if sec or nsec:
            return float(sec) + float(nsec) * 1e-9
    except (AttributeError, KeyError, TypeError):
        pass
    return log_time_ns * 1e-9


def from_mcap(source: str | Path, out: str | Path, target: Target, topics: Topics = Topics()) -> tuple[Path, list[str]]:
    """Convert a ROS 2 bag in MCAP; return the written log and notes (topics missing, rows dropped)."""
    source = Path(source)
    wanted = [t for t in (topics.joint_states, topics.action, topics.imu, topics.obs, topics.command) if t]
    latest: dict[str, tuple[float, object]] = {}
    rows: dict[str, list] = {}
    seen: set[str] = set()
    dropped = 0
    for topic, log_time, msg in messages(source, wanted):
        seen.add(topic)
        if topic != topics.action:
            latest[topic] = (_stamp(msg, log_time), msg)
            continue
        if topics.joint_states not in latest:  # no state yet: the policy acted on nothing logged
            dropped += 1
            continue
        t, js = latest[topics.joint_states]
        names = list(_get(js, "name"))
        missing = [j for j in target.joints if j not in names]
        if missing:
            raise LogError(f"{source}: {topics.joint_states} has no joints {missing} (it names {names[:6]}...)")
        order = [names.index(j) for j in target.joints]
        where = f"{source}: {topics.action} at {log_time * 1e-9:.3f} s"
        rows.setdefault("time", []).append(t)
        _columns(rows, "q", np.asarray(_get(js, "position"), dtype=float)[order], target.joints, where)
        _columns(rows, "dq", np.asarray(_get(js, "velocity"), dtype=float)[order], target.joints, where)
        effort = list(_get(js, "effort"))
        if effort:
            _columns(rows, "tau", np.asarray(effort, dtype=float)[order], target.joints, where)
        _columns(rows, "action", _get(msg, "data"), target.joints, where)
        if topics.imu and topics.imu in latest:
            imu = latest[topics.imu][1]
            o, w = _get(imu, "orientation"), _get(imu, "angular_velocity")
            _columns(rows, "quat", [_get(o, "w"), _get(o, "x"), _get(o, "y"), _get(o, "z")], target.joints, where)
            _columns(rows, "gyro", [_get(w, "x"), _get(w, "y"), _get(w, "z")], target.joints, where)
        if topics.obs and topics.obs in latest:
            _columns(rows, "obs", _get(latest[topics.obs][1], "data"), target.joints, where)
        if topics.command and topics.command in latest:
            tw = latest[topics.command][1]
            lin, ang = _get(tw, "linear"), _get(tw, "angular")
            _columns(rows, "command", [_get(lin, "x"), _get(lin, "y"), _get(ang, "z")], target.joints, where)
    if topics.action not in seen or topics.joint_states not in seen:
        absent = [t for t in (topics.joint_states, topics.action) if t not in seen]
        raise LogError(f"{source}: no messages on {', '.join(absent)}; name the topics with --topic-joint-states / "
                       "--topic-action")
    notes = [f"topic {t} not in the bag" for t in (topics.imu, topics.obs, topics.command) if t and t not in seen]
    if dropped:
        notes.append(f"{dropped} actions before the first joint state left out")
    lengths = {k: len(v) for k, v in rows.items()}
    full = len(rows["time"])
    partial = sorted({k.split(".")[0] for k, n in lengths.items() if n != full})
    if partial:  # a topic that started late: its group cannot be given for every row
        for k in [k for k in rows if k.split(".")[0] in partial]:
            del rows[k]
        notes.append(f"left out {', '.join(partial)}: its topic started after the first action")
    return _write(out, rows, target, f"converted from {source.name} (MCAP)"), notes
