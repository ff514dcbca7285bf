"""Layout mappings: a small YAML file that says which field of another log layout is which
column of crosssim's log format (docs/real.md, "Layout mappings").

A mapping names, for each column group (``q``, ``dq``, ``action``, ``quat``, ``gyro``, ...), the
field that holds it in one step of the source: a dotted path into a nested step object
(``joints.position``), one path per value (``[imu.qw, imu.qx, ...]``), or a pattern expanded per
joint or index (``pos_{joint}``, ``q_{i}``), with its unit (deg -> rad, deg/s -> rad/s, ms -> s)
and, for a quaternion, its order. ``steps`` is where the per-step list lies in a JSON file
(``frames``); ``sidecar`` takes the sidecar's fields from the file's own metadata
(``metadata.joint_names``) or from literal values. The same mapping reads JSON, CSV, Parquet and
MCAP: a table's row is a step whose keys are the column names (a Parquet struct column nests);
an MCAP step is the newest message of each mapped topic at a message on the ``steps`` topic.
Reading a mapping never runs code: ``yaml.safe_load`` and plain lookups.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from crosssim.real.logs import COLUMN_GROUPS, SIDECAR_FIELDS, LogError
from crosssim.real.sources import messages, numbers

TOP_KEYS = ("format", "steps", "time", "columns", "sidecar")
GROUP_KEYS = ("path", "unit", "order", "topic")
GROUPS = tuple(g.name for g in COLUMN_GROUPS) + ("obs", "previous_action")
"""Column groups a mapping may name: the log format's, the policy input vector and the action
in force before each step (row 0's becomes the sidecar's ``previous_action``)."""
REQUIRED = ("q", "dq", "action")
FORMATS = ("json", "csv", "parquet", "mcap")
_ANGLE = {"rad": 1.0, "deg": math.pi / 180}
_RATE = {"rad/s": 1.0, "deg/s": math.pi / 180}
UNITS = {
    "time": {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9},
    "q": {**_ANGLE, "m": 1.0, "mm": 1e-3},
    "dq": {**_RATE, "m/s": 1.0, "mm/s": 1e-3},
    "gyro": dict(_RATE),
    "tau": {"N m": 1.0},
    "pos": {"m": 1.0, "mm": 1e-3},
    "vel": {"m/s": 1.0, "mm/s": 1e-3},
    "control_period": {"s": 1.0, "ms": 1e-3, "Hz": -1.0},
}
"""Units a group may be logged in, and the factor to crosssim's unit (rad, rad/s, s, m);
-1: a rate [Hz], inverted. Groups not listed are taken as they are (policy units, quaternions)."""
PATTERN = re.compile(r"\{(joint|i)\}")


@dataclass(frozen=True)
class Field:
    """Where one group lies in a step and how to turn it into crosssim's unit."""

    paths: tuple[str, ...]
    """One path (the whole vector), or one per value; may hold ``{joint}`` or ``{i}``."""
    scale: float = 1.0
    """Factor to crosssim's unit; -1: a rate [Hz] turned into a period."""
    order: str = "wxyz"
    """Quaternion order in the source."""
    topic: str | None = None
    """MCAP: the topic whose newest message (at each step) holds the field."""


@dataclass(frozen=True)
class Layout:
    """A parsed layout mapping (``load_layout``)."""

    path: Path
    format: str | None
    """json, csv or parquet; None: by the source's suffix."""
    steps: str | None
    """Dotted path to the per-step list in a JSON file (None: the file is that list); MCAP: the
    topic with one message per step (the policy's actions)."""
    time: Field | None
    """None: no clock, one row per control period."""
    columns: dict[str, Field]
    sidecar: dict[str, object]
    """Sidecar field -> a Field (a path into the file's root object) or a literal value."""


def _bad(path: Path, key: str, why: str) -> LogError:
    return LogError(f"{path}: key '{key}' {why} (layout mappings: docs/real.md)")


def _field(path: Path, key: str, spec, group: str) -> Field:
    """One group's entry: a path, a list of paths, or {path, unit, order}."""
    extra = {}
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in GROUP_KEYS]
        if unknown:
            raise _bad(path, f"{key}.{unknown[0]}", f"is not known; an entry has {', '.join(GROUP_KEYS)}")
        if "path" not in spec:
            raise _bad(path, key, "has no 'path' (the field's dotted path in a step, or a list of them)")
        extra, spec = spec, spec["path"]
    paths = (spec,) if isinstance(spec, str) else tuple(spec) if isinstance(spec, list) else ()
    if not paths or not all(isinstance(p, str) and p for p in paths):
        raise _bad(path, key, f"must be a dotted path or a list of them, got {spec!r}"[:200])
    units = UNITS.get(group)
    unit = extra.get("unit")
    scale = 1.0
    if unit is not None:
        if units is None:
            raise _bad(path, f"{key}.unit", f"is given, but {group} has no unit to convert (taken as logged)")
        if unit not in units:
            raise _bad(path, f"{key}.unit", f"is {unit!r}; {group} is one of {', '.join(units)}")
        scale = units[unit]
    topic = extra.get("topic")
    if topic is not None and not (isinstance(topic, str) and topic):
        raise _bad(path, f"{key}.topic", f"must be a topic name, got {topic!r}")
    order = extra.get("order", "wxyz")
    if "order" in extra and group != "quat":
        raise _bad(path, f"{key}.order", "applies to quat only")
    if order not in ("wxyz", "xyzw"):
        raise _bad(path, f"{key}.order", f"is {order!r}; one of wxyz, xyzw")
    return Field(paths, scale, order, topic)


def load_layout(path: str | Path) -> Layout:
    """Read and check a layout mapping; LogError naming the file and the bad key."""
    import yaml

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise LogError(f"{path}: not a readable YAML layout mapping ({str(exc).splitlines()[0][:160]})") from None
    if not isinstance(raw, dict):
        raise LogError(f"{path}: a layout mapping is a YAML mapping with keys {', '.join(TOP_KEYS)}")
    unknown = [k for k in raw if k not in TOP_KEYS]
    if unknown:
        raise _bad(path, str(unknown[0]), f"is not known; a layout mapping has {', '.join(TOP_KEYS)}")
    fmt = raw.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise _bad(path, "format", f"is {fmt!r}; one of {', '.join(FORMATS)} (MCAP: the --topic-* flags)")
    steps = raw.get("steps")
    if steps is not None and not (isinstance(steps, str) and steps):
        raise _bad(path, "steps", "must be the dotted path of the per-step list (e.g. frames)")
    columns = raw.get("columns")
    if not isinstance(columns, dict):
        raise _bad(path, "columns", "must map column groups (q, dq, action, ...) to their fields")
    for group in columns:
        if group not in GROUPS:
            raise _bad(path, f"columns.{group}", f"is not a column group; one of {', '.join(GROUPS)}")
    missing = [g for g in REQUIRED if g not in columns]
    if missing:
        raise _bad(path, f"columns.{missing[0]}", f"is missing ({', '.join(REQUIRED)} are required)")
    fields = {g: _field(path, f"columns.{g}", spec, g) for g, spec in columns.items()}
    time = _field(path, "time", raw["time"], "time") if raw.get("time") is not None else None
    _check_topics(path, fmt, steps, {**{f"columns.{g}": f for g, f in fields.items()},
                                     **({"time": time} if time else {})})
    return Layout(path, fmt, steps, time, fields, _sidecar(path, raw.get("sidecar") or {}))


def _check_topics(path: Path, fmt, steps, fields: dict) -> None:
    """MCAP mappings name a topic for every field and the per-step topic; others name none."""
    for key, f in fields.items():
        if fmt == "mcap" and f.topic is None:
            raise _bad(path, key, "has no 'topic' (format mcap: the topic whose message holds the field)")
        if fmt != "mcap" and f.topic is not None:
            raise _bad(path, f"{key}.topic", "applies to MCAP sources only (set format: mcap)")
    if fmt == "mcap" and steps is None:
        raise _bad(path, "steps", "is missing: the topic with one message per policy step (e.g. /policy/action)")


def _sidecar(path: Path, raw) -> dict[str, object]:
    """Sidecar fields: ``{value: X}`` a literal, else a path into the file's root (a Field)."""
    if not isinstance(raw, dict):
        raise _bad(path, "sidecar", "must map sidecar fields to paths or {value: ...}")
    known = [f.name for f in SIDECAR_FIELDS]
    out = {}
    for name, spec in raw.items():
        if name not in known:
            raise _bad(path, f"sidecar.{name}", f"is not a sidecar field; one of {', '.join(known)}")
        if isinstance(spec, dict) and set(spec) == {"value"}:
            out[name] = spec["value"]
        else:
            out[name] = _field(path, f"sidecar.{name}", spec, name)
    return out


MISSING = object()


def lookup(record, path: str):
    """The value at a dotted ``path`` in a nested record (a key holding dots is tried whole
    first: table columns such as ``imu.gyro_x``); MISSING where there is none."""
    if isinstance(record, dict) and path in record:
        return record[path]
    node = record
    for part in path.split("."):
        if isinstance(node, dict):
            if part not in node:
                return MISSING
            node = node[part]
        elif isinstance(node, (list, tuple)) or type(node).__name__ in ("ndarray", "array"):
            if not part.isdigit() or int(part) >= len(node):
                return MISSING
            node = node[int(part)]
        elif not part.startswith("_") and hasattr(node, part):  # a decoded ROS message's field
            node = getattr(node, part)
        else:
            return MISSING
    return node


def expand(field: Field, joints, size: int | None, first) -> tuple[str, ...]:
    """``field``'s paths with ``{joint}`` and ``{i}`` filled in (``{i}``: 0 .. size-1, or while
    the first step has the path where the size is open, as for ``obs``)."""
    out = []
    for p in field.paths:
        p = p if field.topic is None else f"{field.topic}.{p}"  # an MCAP step maps topics to messages
        kind = PATTERN.search(p)
        if kind is None:
            out.append(p)
        elif kind.group(1) == "joint":
            out += [p.replace("{joint}", j) for j in joints]
        elif size is not None:
            out += [p.replace("{i}", str(i)) for i in range(size)]
        else:
            i = 0
            while lookup(first, p.replace("{i}", str(i))) is not MISSING:
                out.append(p.replace("{i}", str(i)))
                i += 1
    return tuple(out)


# -- reading a source through a mapping -----------------------------------------------------------

SUFFIX_FORMATS = {".json": "json", ".csv": "csv", ".parquet": "parquet"}


def read_source(source: Path, layout: Layout) -> tuple[object, list, list | None, list[str]]:
    """The source's root object (JSON; {} otherwise), its per-step records, the steps' receive
    times [s] (MCAP; else None) and notes."""
    import json

    fmt = layout.format or SUFFIX_FORMATS.get(source.suffix)
    if fmt == "mcap" or (source.suffix == ".mcap" and layout.format is None):
        if fmt != "mcap":
            raise LogError(f"{source}: an MCAP source needs 'format: mcap' and a 'topic' per field in {layout.path}")
        return _mcap_steps(source, layout)
    if fmt is None:
        raise LogError(f"{source}: cannot tell the format from the suffix {source.suffix!r}; set 'format' "
                       f"({', '.join(FORMATS)}) in {layout.path}")
    if fmt != "json":
        import pandas as pd

        try:
            df = pd.read_csv(source) if fmt == "csv" else pd.read_parquet(source)
        except Exception as exc:  # pandas / pyarrow parser errors carry their own types
            raise LogError(f"{source}: cannot be read as {fmt} ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0][:160]})") from None
        return {}, df.to_dict("records"), None, []
    try:
        root = json.loads(source.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LogError(f"{source}: not a readable JSON file ({exc})") from None
    except RecursionError:
        raise LogError(f"{source}: not a readable JSON file (nested too deeply for Python's JSON reader)") from None
    steps = root if layout.steps is None else lookup(root, layout.steps)
    if not isinstance(steps, list) or not steps or not all(isinstance(s, dict) for s in steps):
        where = f"at '{layout.steps}'" if layout.steps else "at the top level"
        raise LogError(f"{source}: no list of per-step objects {where}; set 'steps' in {layout.path} to the dotted "
                       "path of that list (e.g. frames)")
    return root, steps, None, []


def _mcap_steps(source: Path, layout: Layout) -> tuple[dict, list, list, list[str]]:
    """One step per message on the ``steps`` topic: the newest message of every mapped topic
    received before it (the state the policy acted on), by topic name."""
    fields = [*layout.columns.values(), *([layout.time] if layout.time else [])]
    topics = sorted({f.topic for f in fields} | {layout.steps})
    latest, steps, clock, dropped = {}, [], [], 0
    for topic, log_time, msg in messages(source, topics):
        latest[topic] = msg
        if topic != layout.steps:
            continue
        if any(t not in latest for t in topics):
            dropped += 1  # a topic has no message yet: the step cannot be given whole
            continue
        steps.append(dict(latest))
        clock.append(log_time * 1e-9)
    if not steps:
        missing = [t for t in topics if t not in latest]
        raise LogError(f"{source}: no step with a message on every mapped topic (never seen: "
                       f"{', '.join(missing) or 'none'}; steps topic {layout.steps}) (topics of {layout.path})")
    notes = [f"{dropped} steps before the first message of every mapped topic left out"] if dropped else []
    return {}, steps, clock, notes


def sidecar_values(source: Path, layout: Layout, root) -> dict:
    """The sidecar fields the mapping takes from the file (or gives literally)."""
    out = {}
    for name, spec in layout.sidecar.items():
        if not isinstance(spec, Field):
            out[name] = spec
            continue
        value = lookup(root, spec.paths[0])
        if value is MISSING:
            raise LogError(f"{source}: no value at '{spec.paths[0]}' (sidecar.{name} in {layout.path})")
        if name == "control_period" and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = 1.0 / value if spec.scale < 0 else value * spec.scale
        out[name] = list(value) if isinstance(value, (list, tuple)) else value
    return out


def _group_size(group: str, joints) -> int | None:
    if group in ("obs",):
        return None
    spec = {g.name: g for g in COLUMN_GROUPS}.get(group)
    return len(joints) if spec is None or spec.keys is None else len(spec.keys)


def _stamp(value):
    """A ROS time (``sec`` and ``nanosec``) as seconds; anything else as it is."""
    sec, nsec = lookup(value, "sec"), lookup(value, "nanosec")
    if isinstance(value, (int, float)) or sec is MISSING or nsec is MISSING:
        return value
    return float(sec) + float(nsec) * 1e-9


def step_values(source: Path, layout: Layout, steps: list, group: str, joints) -> list:
    """Per step, ``group``'s value (a number, a vector or a list of per-value numbers) in crosssim's
    unit; LogError naming the step and the path where one is missing."""
    field = layout.columns[group] if group != "time" else layout.time
    paths = expand(field, joints, _group_size(group, joints), steps[0])
    if not paths:
        raise LogError(f"{source}: step 0 has no '{field.paths[0].replace('{i}', '0')}' (columns.{group} of "
                       f"{layout.path})")
    out = []
    for k, step in enumerate(steps):
        values = [lookup(step, p) for p in paths]
        for p, v in zip(paths, values):
            if v is MISSING:
                raise LogError(f"{source}: step {k}: no '{p}' ({'columns.' if group != 'time' else ''}{group} of "
                               f"{layout.path})")
        where = f"{source}: step {k}"
        if group == "time" and len(values) == 1:
            values = [_stamp(values[0])]
        v = numbers(values[0] if len(paths) == 1 else values, group, where) * field.scale
        if group == "quat" and v.size == 4 and field.order == "xyzw":
            v = v[[3, 0, 1, 2]]
        out.append(v)
    return out
