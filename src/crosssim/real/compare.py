"""Sim against real: each engine started from a log's initial state, run closed-loop (the policy,
with the logged commands) and open-loop (the logged actions replayed), scored against the log.

Errors: joint-position RMS over the whole log and per time window, base orientation error
(floating-base robots), and survival (the fraction of the log's duration the simulated robot
lasted before the task's termination, a NaN or an engine failure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crosssim.errors import CrossSimError
from crosssim.frame import InitialState
from crosssim.real.logs import RealLog

MISSING_PENALTY = 1.0
"""Residual [rad] for a logged sample the simulation did not reach (diverged or failed)."""


@dataclass
class Trace:
    """One simulation against one log, sampled at the log's rows."""

    q: np.ndarray
    """(T, joints) simulated joint positions; NaN where not simulated."""
    quat: np.ndarray | None
    starts: tuple[int, ...]
    """Rows where the simulation was (re)set to the logged state."""
    ended: int
    """Rows simulated: the run lasted ended / T of the log."""
    failure: str | None = None
    terminated: bool = False


def initial_state(log: RealLog, harness, k: int = 0) -> InitialState:
    """The engine state at log row ``k``: logged joints, base orientation, gyro (and base position
    and velocity where logged); what the log lacks comes from the task's initial state."""
    c = harness.canonical
    init = harness.task.initial_state(c, np.random.default_rng(0))
    qpos, qvel = np.array(init.qpos, dtype=float), np.zeros(c.nv)
    idx = [c.joint_names.index(j) for j in log.joints]
    qpos[c.joint_qposadr[idx]] = log.q[k]
    qvel[c.joint_dofadr[idx]] = log.dq[k]
    if c.free_base:  # MuJoCo layout: position, quaternion w-x-y-z, world linear, body angular velocity
        for arr, part, value in ((qpos, slice(0, 3), log.pos), (qpos, slice(3, 7), log.quat),
                                 (qvel, slice(0, 3), log.vel), (qvel, slice(3, 6), log.gyro)):
            if value is not None:
                arr[part] = value[k]
    return InitialState(qpos, qvel)


def simulate(sim, harness, log: RealLog, *, policy=None, segment: int | None = None,
             stop_on_termination: bool = True) -> Trace:
    """Run one engine (a ``Simulator``) against ``log``: the policy closed-loop (with the logged
    commands) when given, else the logged actions open-loop. ``segment``: reset to the logged
    state every that many rows (open loop only; the actions pending in a latency queue are the
    logged ones)."""
    from crosssim.runner.episode import Episode, play
    from crosssim.runner.stepper import ControlStepper

    c = harness.canonical
    T = len(log)
    idx = [c.joint_names.index(j) for j in log.joints]
    qadr = c.joint_qposadr[idx]
    q = np.full((T, len(idx)), np.nan)
    quat = np.full((T, 4), np.nan) if c.free_base else None
    stepper = ControlStepper(sim, harness)
    ep = Episode(stepper)
    seg = T if (policy is not None or not segment) else int(segment)
    starts = tuple(range(0, T - 1, seg)) if T > 1 else (0,)
    actions = np.array([stepper.check_action(a, k) for k, a in enumerate(log.action)])
    ended, failure, terminated = 0, None, False
    start = 0

    def record(k, frame):
        q[k] = frame.qpos[qadr]
        if quat is not None:
            quat[k] = frame.base_quat

    def closed_loop(ep: Episode) -> np.ndarray:
        if log.command is not None:  # the robot's commands, as logged
            command = log.command[start + ep.t]
            ep.task_state["command"] = command.copy()
            if stepper.observer.ctx is not None:
                stepper.observer.ctx.command = command.copy()
        return policy.act(ep.observe())

    def recorded(ep: Episode, step) -> None:
        nonlocal ended
        record(start + ep.t, ep.frame)
        ended = start + ep.t + 1

    try:
        for start in starts:
            ep.reset(initial_state(log, harness, start), [0, 1])
            lat = stepper.p.action_latency
            if start and lat:  # actions still in flight at the segment's start
                stepper.queue_actions(actions[k] if k >= 0 else np.zeros(actions.shape[1]) for k in range(start - lat, start))
            record(start, ep.frame)
            if policy is not None:
                policy.reset()
            source = closed_loop if policy is not None else (lambda ep: actions[start + ep.t])
            if play(ep, source, min(seg, T - 1 - start), on_step=recorded, stop_on_termination=stop_on_termination):
                terminated = True
                break
    except CrossSimError as exc:  # EngineFailure (NaN) included
        failure = str(exc)
    except Exception as exc:  # an engine blowing up must not lose the other logs
        failure = f"{type(exc).__name__}: {str(exc)[:300]}"
    return Trace(q, quat, starts, max(ended, 1), failure, terminated)


def quat_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotation angle [rad] between unit quaternions (rows of a and b)."""
    dot = np.abs(np.sum(a * b, axis=-1)) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    return 2.0 * np.arccos(np.clip(dot, -1.0, 1.0))


def quat_error_vector(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotation vectors [rad] taking b to a, rows: a smooth 3-vector residual for fitting."""
    w1, v1 = b[:, 0], -b[:, 1:]  # conjugate of b
    w2, v2 = a[:, 0], a[:, 1:]
    w = w1 * w2 - np.sum(v1 * v2, axis=1)
    v = w1[:, None] * v2 + w2[:, None] * v1 + np.cross(v1, v2)
    sign = np.where(w < 0, -1.0, 1.0)
    w, v = w * sign, v * sign[:, None]
    n = np.linalg.norm(v, axis=1)
    angle = 2.0 * np.arctan2(n, w)
    return v * (angle / np.maximum(n, 1e-12))[:, None]


def residuals(log: RealLog, trace: Trace) -> np.ndarray:
    """Sim-minus-log residuals [rad] at every row the simulation predicted (not the rows it was
    reset at): joint positions, then base orientation as a rotation vector. Rows it never reached
    count MISSING_PENALTY."""
    rows = np.setdiff1d(np.arange(len(log)), trace.starts)
    dq = trace.q[rows] - log.q[rows]
    parts = [dq]
    if trace.quat is not None and log.quat is not None:
        ok = np.isfinite(trace.quat[rows]).all(axis=1)
        rot = np.full((len(rows), 3), np.nan)
        rot[ok] = quat_error_vector(trace.quat[rows][ok], log.quat[rows][ok])
        parts.append(rot)
    out = np.concatenate(parts, axis=1)
    return np.where(np.isfinite(out), out, MISSING_PENALTY).ravel()


def residual_groups(log: RealLog, trace: Trace) -> np.ndarray:
    """The segment (0, 1, ...) each entry of ``residuals(log, trace)`` belongs to."""
    rows = np.setdiff1d(np.arange(len(log)), trace.starts)
    per_row = len(log.joints) + (3 if trace.quat is not None and log.quat is not None else 0)
    return np.repeat(np.searchsorted(trace.starts, rows, side="right") - 1, per_row)


def errors(log: RealLog, trace: Trace, window_s: float = 1.0) -> dict:
    """Error of one trace against its log."""
    T, dt = len(log), log.control_period
    diff = trace.q - log.q
    ok = np.isfinite(diff).all(axis=1)
    ok[list(trace.starts)] = False  # rows set from the log carry no prediction
    rms = lambda d: float(np.sqrt(np.mean(d**2))) if d.size else float("nan")  # noqa: E731
    per = max(1, int(round(window_s / dt)))
    windows = [rms(diff[w:w + per][ok[w:w + per]]) for w in range(0, T, per)]
    out = {"q_rms": rms(diff[ok]), "q_rms_windows": windows, "q_rms_by_joint": {
        j: rms(diff[ok, k]) for k, j in enumerate(log.joints)}, "survival": trace.ended / T,
        "terminated": trace.terminated, "failure": trace.failure}
    if trace.quat is not None and log.quat is not None:
        good = ok & np.isfinite(trace.quat).all(axis=1)
        angle = np.degrees(quat_angle(trace.quat[good], log.quat[good])) if good.any() else np.array([np.nan])
        out["orientation_error_deg"] = float(np.mean(angle))
        out["orientation_error_max_deg"] = float(np.max(angle))
    return out


def _mean(items: list[dict], key: str) -> float:
    vals = [d[key] for d in items if key in d and d[key] is not None and np.isfinite(d[key])]
    return float(np.mean(vals)) if vals else float("nan")


def _aggregate(items: list[dict]) -> dict:
    n = max(len(d["q_rms_windows"]) for d in items)
    windows = [_mean([{"w": d["q_rms_windows"][w]} for d in items if w < len(d["q_rms_windows"])], "w")
               for w in range(n)]
    out = {"q_rms": _mean(items, "q_rms"), "q_rms_windows": windows, "survival": _mean(items, "survival"),
           "failures": sum(1 for d in items if d.get("failure"))}
    if any("orientation_error_deg" in d for d in items):
        out["orientation_error_deg"] = _mean(items, "orientation_error_deg")
    return out


def policy_check(policy, logs: list[RealLog]) -> dict | None:
    """The card's policy fed the logged inputs must return the logged actions (harness check)."""
    with_obs = [log for log in logs if log.obs is not None]
    if not with_obs:
        return None
    worst = 0.0
    for log in with_obs:
        policy.reset()
        for obs, action in zip(log.obs, log.action):
            worst = max(worst, float(np.max(np.abs(np.asarray(policy.act(obs), dtype=float) - action))))
    return {"logs": len(with_obs), "max_abs_action_error": worst}


def real_section(card, engines, logs: list[RealLog], *, trust: bool = False, window_s: float = 1.0,
                 log_dir: str | None = None, progress=None, harness=None) -> dict:
    """The REAL column of a crossval: every engine profile against every log, both modes.
    ``harness``: the crossval's (built from ``card`` when None)."""
    from crosssim.policies import load_policy
    from crosssim.profiles import load_profile
    from crosssim.runner.harness import Harness
    from crosssim.runner.simulator import open_engine

    harness = harness or Harness.from_card(card)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=trust)
    section = {"log_dir": log_dir, "logs": [log.name for log in logs], "window_s": window_s,
               "duration_s": float(sum(log.duration for log in logs)),
               "real": {"survival": float(np.mean([0.0 if log.terminated else 1.0 for log in logs]))},
               "policy_check": policy_check(policy, logs), "engines": {}}
    for name in engines:
        try:
            profile = load_profile(name)
            sim = open_engine(profile, harness.scene)
        except CrossSimError as exc:
            section["engines"][name] = {"error": str(exc)}
            continue
        per_log = {}
        try:
            for log in logs:
                per_log[log.name] = {
                    "open_loop": errors(log, simulate(sim, harness, log), window_s),
                    "closed_loop": errors(log, simulate(sim, harness, log, policy=policy), window_s)}
                if progress:
                    progress(f"real/{name}", len(per_log), len(logs), {"failure": None})
        finally:
            sim.close()
        section["engines"][name] = {mode: _aggregate([d[mode] for d in per_log.values()])
                                    for mode in ("open_loop", "closed_loop")} | {"per_log": per_log}
    return section


def _f(x, digits=3, scale=1.0) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * scale:.{digits}f}"


def format_real(section: dict) -> str:
    """The REAL column as printed by crossval."""
    lines = [f"\nREAL: {len(section['logs'])} logs, {section['duration_s']:.1f} s "
             f"(real robot survived {_f(section['real']['survival'], 0, 100)} %); error of each engine against the logs",
             f"{'engine':<22}{'open-loop q RMS':>16}{'closed-loop q RMS':>19}{'  orientation':>13}{'survival':>10}"
             f"   open-loop q RMS per {section['window_s']:g} s window [rad]"]
    for name, e in section["engines"].items():
        if "error" in e:
            lines.append(f"{name:<22}  ! {e['error']}")
            continue
        ol, cl = e["open_loop"], e["closed_loop"]
        orient = cl.get("orientation_error_deg")
        windows = " ".join(_f(w) for w in ol["q_rms_windows"][:8]) + (" ..." if len(ol["q_rms_windows"]) > 8 else "")
        lines.append(f"{name:<22}{_f(ol['q_rms']) + ' rad':>16}{_f(cl['q_rms']) + ' rad':>19}"
                     f"{(_f(orient, 1) + ' deg') if orient is not None else '—':>13}{_f(cl['survival'], 0, 100) + ' %':>10}"
                     f"   {windows}")
    check = section.get("policy_check")
    if check:
        lines.append(f"policy check: the card's policy on the logged inputs differs from the logged actions by at most "
                     f"{check['max_abs_action_error']:.2g}" + ("" if check["max_abs_action_error"] < 1e-3 else
                                                             " (wrong policy file, normalisation or observation order?)"))
    lines.append("(orientation error and survival: closed loop)")
    return "\n".join(lines)
