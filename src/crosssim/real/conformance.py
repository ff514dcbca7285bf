"""Deployment conformance: did the robot feed its policy what the card says?

Every input the policy saw (``obs.*``) is rebuilt from the logged state with the card's
observation terms (crosssim.observations: the same code every engine uses), then compared term
by term with what was logged. A term that matches up to a scale, an offset or an order is named
with the factor found: the gyro fed in degrees-to-radians twice shows as ``base_ang_vel`` scaled
by 0.01745 (pi/180). The policy check (compare.policy_check) cannot see such a bug: it feeds the
logged inputs, bug included, and gets the logged actions back.

Rebuilt from a row: joints (offsets applied), base orientation, gyro, base velocity and position
where logged, the command, the previous action (the sidecar's previous_action before the
first row), the row's time since the robot's reset (the log's start, one control period later under
the card's ``first_call: after_one_period``). Terms whose inputs the log lacks (a privileged
base velocity, an MJCF sensor) are listed as not checked.
"""

from __future__ import annotations

import math

import numpy as np

from crosssim.frame import SimFrame, quat_rotate
from crosssim.real.logs import RealLog
from crosssim.real.terms import log_group, rms

OK_RELATIVE = 0.05
"""A term matches when the RMS of (logged - rebuilt) is at most this fraction of the logged RMS
(sensor noise between the logged state and the policy's own reading stays below it)."""
FIT_RELATIVE = 0.1
"""A scale / offset / order explains a mismatch when what remains after it is below this fraction."""
SCALE_TOLERANCE = 0.03
"""A fitted scale this close to 1 is 1 (no finding)."""
CORRELATED = 0.9
"""A logged value is matched to a rebuilt one of another index (an order mismatch) above this |correlation|."""
KNOWN_FACTORS = {math.pi / 180: "degrees to radians (pi/180) applied to a value already in radians",
                 180 / math.pi: "radians to degrees (180/pi): a value in degrees",
                 -1.0: "sign flipped", 9.80665: "g: a value in g instead of m/s^2",
                 1 / 9.80665: "1/g: a value in m/s^2 instead of g", 2.0: "twice the value", 0.5: "half the value"}


def _frame(log: RealLog, harness, k: int, t0: float = 0.0) -> SimFrame:
    from crosssim.real.start import initial_state

    c = harness.canonical
    init = initial_state(log, harness, k)
    qpos, qvel = init.qpos, init.qvel
    if c.free_base:
        quat = qpos[3:7]
        ang = quat_rotate(quat, qvel[3:6])
        lin, pos = qvel[0:3], qpos[0:3]
    else:
        quat, ang, lin, pos = np.array([1.0, 0, 0, 0]), np.zeros(3), np.zeros(3), np.zeros(3)
    return SimFrame(time=t0 + k * log.control_period, qpos=qpos, qvel=qvel, base_pos=pos, base_quat=quat,
                    base_lin_vel=lin, base_ang_vel=ang, joint_torque=np.zeros(c.joint_count))


def _latest(obs: np.ndarray, sizes: list[int], history: int, layout: str) -> list[np.ndarray]:
    """The newest frame's part of each term from stacked observations (T, history * sum(sizes))."""
    total = sum(sizes)
    if layout == "frame_major":
        newest = obs[:, (history - 1) * total:]
        edges = np.cumsum([0] + sizes)
        return [newest[:, a:b] for a, b in zip(edges[:-1], edges[1:])]
    out, at = [], 0
    for n in sizes:  # term_major: each term's history, oldest first
        out.append(obs[:, at + (history - 1) * n: at + history * n])
        at += history * n
    return out


def rebuild(harness, log: RealLog) -> tuple[list[str], list[np.ndarray], list[np.ndarray]]:
    """(term names, rebuilt values per term (T, n), logged values per term (T, n)) on the rows as
    logged; only the newest frame of a stacked history is compared."""
    log = log.as_logged
    observer = harness.observer()
    builder, ctx = observer.builder, observer.ctx
    card = harness.card
    if builder is None:
        return [], [], []
    clip = card.action.clip if card is not None else None
    actions = log.action if clip is None else np.clip(log.action, *clip)
    before = log.previous_action if clip is None else np.clip(log.previous_action, *clip)
    from crosssim.real.start import first_call_time

    t0 = first_call_time(harness)  # row 0 is the first call: one period after reset (card first_call)
    task_state = harness.task.reset(_frame(log, harness, 0, t0))  # the card's command, where the log has none
    default_command = np.asarray(task_state.get("command", np.zeros(3)), dtype=float)
    rows = []
    for k in range(len(log)):
        frame = _frame(log, harness, k, t0)
        ctx.command = log.command[k] if log.command is not None else default_command
        ctx.last_action = actions[k - 1] if k else before
        ctx.first_call_time, ctx.call_index = t0, k
        rows.append(builder.single(frame, ctx))
    names = [t.name for t in builder.terms]
    rebuilt = [np.array([r[t] for r in rows]) for t in range(len(names))]
    logged = _latest(log.obs, [r.shape[1] for r in rebuilt], builder.history, builder.layout)
    if not declares_previous_action(log):  # row 0's previous action is whatever the robot held: unknown
        for k, name in enumerate(names):
            if name in PREVIOUS_ACTION_TERMS and len(rebuilt[k]) > 1:
                rebuilt[k], logged[k] = rebuilt[k][1:], logged[k][1:]
    return names, rebuilt, logged


PREVIOUS_ACTION_TERMS = ("last_action",)
"""Terms that read the previous action: on row 0 that is the action in force before the log
(the sidecar's ``previous_action``). A robot's controller often holds a leftover action there
(the last run's, a standing controller's), which a log rarely records: without a declared
``previous_action`` row 0 of these terms is not compared (rows 1.. are: each holds the row
before's logged action)."""


def declares_previous_action(log: RealLog) -> bool:
    """True when the log's sidecar states ``previous_action`` (else crosssim assumes zeros in replays)."""
    return log.meta.get("previous_action") is not None


def implied_previous_action(harness, log: RealLog) -> np.ndarray | None:
    """The raw previous action row 0's logged ``last_action`` input implies (the logged value over
    the term's scale), or None when the card has no such term, the log no inputs, or the scale or
    clip cannot be undone."""
    observer = harness.observer()
    builder = observer.builder
    log = log.as_logged
    if builder is None or log.obs is None:
        return None
    names = [t.name for t in builder.terms]
    if "last_action" not in names:
        return None
    sizes = [harness.action_size if t.name == "last_action" else None for t in builder.terms]
    if any(s is None for s in sizes):  # other terms' widths come from a rebuilt row
        frame = _frame(log, harness, 0)
        ctx = observer.ctx
        ctx.command = log.command[0] if log.command is not None else np.zeros(3)
        ctx.last_action = np.zeros(harness.action_size)
        sizes = [p.shape[0] for p in builder.single(frame, ctx)]
    k = names.index("last_action")
    spec = builder.terms[k]
    value = _latest(log.obs[:1], sizes, builder.history, builder.layout)[k][0]
    scale = np.broadcast_to(np.asarray(spec.scale, dtype=float), value.shape)
    if np.any(np.abs(scale) < 1e-12):
        return None
    if spec.clip is not None and np.any(np.isclose(value, spec.clip[0]) | np.isclose(value, spec.clip[1])):
        return None
    return value / scale


def _hint(scale: float) -> str | None:
    for factor, text in KNOWN_FACTORS.items():
        if abs(scale - factor) <= 0.01 * abs(factor):
            return text
    return None


def compare_term(name: str, logged: np.ndarray, rebuilt: np.ndarray) -> dict:
    """One term: ok, or the scale / offset / order that explains the difference, or a mismatch."""
    out = {"term": name, "values": int(logged.shape[1]), "status": "ok", "scale": 1.0, "offset": 0.0, "order": None}
    ref = max(rms(logged), rms(rebuilt), 1e-9)
    rel = rms(logged - rebuilt) / ref
    out["relative_error"] = rel
    if rel <= OK_RELATIVE:
        return out
    findings, R = [], rebuilt
    n = logged.shape[1]
    spread_l, spread_r = logged.std(axis=0), rebuilt.std(axis=0)
    if n > 1 and (spread_l > 1e-9).all() and (spread_r > 1e-9).all():
        corr = np.corrcoef(logged.T, rebuilt.T)[:n, n:]
        perm = np.argmax(np.abs(corr), axis=1)
        if sorted(perm) == list(range(n)) and (perm != np.arange(n)).any() \
                and (np.abs(corr[np.arange(n), perm]) > CORRELATED).all():
            R = rebuilt[:, perm]
            out["order"] = [int(p) for p in perm]
            findings.append("order")
    Rc, Lc = R - R.mean(axis=0), logged - logged.mean(axis=0)
    var = float(np.sum(Rc * Rc))
    a = float(np.sum(Rc * Lc) / var) if var > 1e-12 * len(R) else 1.0  # one scale for the term
    b = logged.mean(axis=0) - a * R.mean(axis=0)  # an offset per value (a calibration offset per joint)
    if np.ptp(b) <= 0.05 * max(rms(logged), 1e-9):
        b = float(np.mean(b))
    resid = logged - (a * R + b)
    out["residual_after_fit"] = rms(resid) / ref
    if abs(a - 1.0) > SCALE_TOLERANCE:
        findings.append("scale")
    if np.max(np.abs(b)) > 0.05 * max(rms(logged), 1e-9):
        findings.append("offset")
    out["scale"] = float(a)
    out["offset"] = [float(v) for v in b] if np.ndim(b) else float(b)
    if not findings or out["residual_after_fit"] > FIT_RELATIVE:
        out["status"] = "mismatch"
    else:
        out["status"] = "+".join(findings)
    hint = _hint(a) if "scale" in findings else None
    if hint:
        out["hint"] = hint
    return out


def _compare(harness, logs: list[RealLog]) -> list[dict]:
    per: dict[int, tuple[list, list]] = {}
    names: list[str] = []
    for log in logs:
        names, rebuilt, logged = rebuild(harness, log)
        for k in range(len(names)):
            per.setdefault(k, ([], []))
            per[k][0].append(logged[k])
            per[k][1].append(rebuilt[k])
    terms = []
    for k, name in enumerate(names):
        need = log_group(harness, name)
        if need is not None and any(getattr(log, need) is None for log in logs):
            terms.append({"term": name, "status": "not checked", "why": f"the logs have no '{need}' columns"})
            continue
        t = compare_term(name, np.concatenate(per[k][0]), np.concatenate(per[k][1]))
        if name in PREVIOUS_ACTION_TERMS and t["status"] != "ok":
            t = _declared_first_row(harness, logs, name, per[k], t)
        terms.append(_with_fix(harness, k, t))
    return terms


def _declared_first_row(harness, logs: list[RealLog], name: str, pairs: tuple[list, list], t: dict) -> dict:
    """``t`` (a previous-action term that does not match) as a ``previous_action`` finding when
    only row 0 of the logs that declare one differs: the sidecar states another previous action
    than the one the robot's policy saw."""
    declared = [declares_previous_action(log) for log in logs]
    if not any(declared):
        return t
    rest = compare_term(name, np.concatenate([lg[1:] if d else lg for lg, d in zip(pairs[0], declared)]),
                        np.concatenate([r[1:] if d else r for r, d in zip(pairs[1], declared)]))
    if rest["status"] != "ok":
        return t
    implied = {log.name: implied_previous_action(harness, log) for log, d in zip(logs, declared) if d}
    return {**t, "status": "previous_action",
            "implied": {n: None if v is None else [round(float(x), 6) for x in v] for n, v in implied.items()}}


def _with_fix(harness, k: int, t: dict) -> dict:
    """``t`` with the change that removes its finding (``fix``), where one is known."""
    status, card = t["status"], harness.card
    if status == "previous_action":
        implied = next(iter(t["implied"].values()), None)
        value = f"{implied}" if implied is not None else "the action the policy held before the log"
        return {**t, "fix": f"sidecar: previous_action: {value} (what row 0's input shows), or leave the field out "
                            "(row 0 is then not compared)"}
    if "scale" in status and card is not None and k < len(card.observation.terms):
        spec = card.observation.terms[k]
        old = np.asarray(spec.scale, dtype=float)
        new = old * t["scale"]
        fmt = (lambda v: f"{float(v):.6g}") if old.ndim == 0 else (lambda v: "[" + ", ".join(f"{x:.6g}" for x in v) + "]")
        return {**t, "fix": f"the deployment feeds the policy {t['scale']:.4g}x the card's value: fix the "
                            f"deployment, or to simulate it as deployed, card observation.terms[{k}] ({t['term']}) "
                            f"scale: {fmt(old)} -> {fmt(new)}"}
    if "order" in status:
        return {**t, "fix": "the deployment feeds this term's values in another order: fix the deployment's "
                            "order (or the card's joints, for a joint term)"}
    if "offset" in status:
        return {**t, "fix": "a constant offset per value: for a joint term, the sidecar's joint_offsets or the "
                            "card's action.default_pos; else the deployment's calibration"}
    return t


def _ok(terms: list[dict]) -> bool:
    return all(t["status"] in ("ok", "not checked") for t in terms)


def conformance(harness, logs: list[RealLog]) -> dict | None:
    """Term-by-term comparison of the logged policy inputs with those rebuilt from the logged
    state: per log (a deployment's software may change between runs) and over all logs with
    ``obs.*`` columns (``terms``); None when no log has them."""
    with_obs = [log for log in logs if log.obs is not None]
    if not with_obs or harness.observer().builder is None:
        return None
    per_log = {log.name: _compare(harness, [log]) for log in with_obs}
    terms = _compare(harness, with_obs) if len(with_obs) > 1 else next(iter(per_log.values()))
    return {"logs": len(with_obs), "rows": int(sum(len(log.as_logged) for log in with_obs)), "terms": terms,
            "per_log": per_log, "ok": all(_ok(t) for t in per_log.values())}


def _num(v) -> str:
    return f"{v:.4g}" if not isinstance(v, list) else "[" + ", ".join(f"{x:.3g}" for x in v) + "]"


def _finding(t: dict) -> str:
    parts = []
    if "order" in t["status"]:
        parts.append(f"order: logged value i is rebuilt value {t['order']}[i]")
    if "scale" in t["status"]:
        parts.append(f"scale {t['scale']:.4g}" + (f" ({t['hint']})" if t.get("hint") else ""))
    if "offset" in t["status"]:
        parts.append(f"offset {_num(t['offset'])}")
    if t["status"] == "mismatch":
        parts.append(f"not a scale, offset or order (relative error {t['relative_error']:.2g}, "
                     f"{t['residual_after_fit']:.2g} after the best scale and offsets)")
    if t["status"] == "previous_action":
        parts.append("only row 0 differs: the sidecar's previous_action is not what the policy saw before the log")
    if t.get("fix"):
        parts.append(f"fix: {t['fix']}")
    return f"{t['term']}: " + "; ".join(parts)


def format_conformance(result: dict) -> str:
    """A summary line, then one line per log and term that is not ok."""
    skipped = sorted({t["term"] for terms in result["per_log"].values() for t in terms if t["status"] == "not checked"})
    bad = [(name, t) for name, terms in result["per_log"].items() for t in terms
           if t["status"] not in ("ok", "not checked")]
    lines = [f"deployment conformance ({result['logs']} logs, {result['rows']} rows): the policy inputs rebuilt from "
             f"the logged state with the card {'match the logged ones' if not bad else 'differ from the logged ones'}"
             + (f" (not checked: {', '.join(skipped)})" if skipped else "")]
    lines += [f"  ! {name}: {_finding(t)}" for name, t in bad]
    return "\n".join(lines)
