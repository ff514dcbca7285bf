"""Sim against real: each engine started from a log's initial state, run closed-loop (the policy,
with the logged commands) and open-loop (the logged actions replayed), scored against the log.

Errors: joint-position RMS over the whole log and per time window, base orientation error
(floating-base robots), survival (the share of logs whose replay ran to the end without the
task's termination, a NaN or an engine failure) and the share of each log the replay lasted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from crosssim.errors import CrossSimError
from crosssim.real.logs import RealLog
from crosssim.real.start import first_call_time, initial_state  # noqa: F401  (re-exported: calibration, tests)

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
    """Rows simulated (a failure or a stop at termination ends it early)."""
    failure: str | None = None
    terminated: bool = False
    fell: int | None = None
    """First row at which the task's termination (a fall) held; None: it never did."""

    @property
    def survived(self) -> int:
        """Rows before the first fall (or the end of the simulation)."""
        return self.fell if self.fell is not None else self.ended


def with_declared_delay(sim, log: RealLog):
    """``sim`` with the log's declared action delay on top of the profile's latency."""
    if not log.action_delay:
        return sim
    from dataclasses import replace

    from crosssim.variant import HarnessVariant, Variant

    return replace(sim, variant=sim.variant.then(Variant(harness=HarnessVariant(action_delay=log.action_delay))))


def simulate(sim, harness, log: RealLog, *, policy=None, segment: int | None = None,
             stop_on_termination: bool = True) -> Trace:
    """Run one engine (a ``Simulator``) against ``log``: the policy closed-loop (with the logged
    commands) when given, else the logged actions open-loop. ``segment``: reset to the logged
    state every that many rows (open loop only). The log's declared action delay acts on top of
    the profile's latency; the actions in flight at a start are the logged ones (before the
    first row, the sidecar's previous_action)."""
    from crosssim.runner.episode import Episode, play
    from crosssim.runner.stepper import ControlStepper

    c = harness.canonical
    T = len(log)
    idx = [c.joint_names.index(j) for j in log.joints]
    qadr = c.joint_qposadr[idx]
    q = np.full((T, len(idx)), np.nan)
    quat = np.full((T, 4), np.nan) if c.free_base else None
    stepper = ControlStepper(with_declared_delay(sim, log), harness)
    stepper.clock_offset = first_call_time(harness)  # row 0 is the first policy call, not the reset
    ep = Episode(stepper)
    seg = T if (policy is not None or not segment) else int(segment)
    starts = tuple(range(0, T - 1, seg)) if T > 1 else (0,)
    actions = np.array([stepper.check_action(a, k) for k, a in enumerate(log.applied_action)])
    before = stepper.check_action(log.previous_action, -1)
    ended, failure, terminated, fell = 0, None, False, None
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
        nonlocal ended, fell
        record(start + ep.t, ep.frame)
        ended = start + ep.t + 1
        if step.terminated and fell is None:
            fell = start + ep.t

    try:
        for start in starts:
            ep.reset(initial_state(log, harness, start), [0, 1])
            n = stepper.in_flight
            if n:  # actions still in flight at the start
                stepper.queue_actions(actions[k] if k >= 0 else before for k in range(start - n, start))
            if stepper.observer.ctx is not None:
                stepper.observer.ctx.last_action = (actions[start - 1] if start else before).copy()
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
    return Trace(q, quat, starts, max(ended, 1), failure, terminated or fell is not None, fell)


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
    """Error of one trace against its log: joint-position RMS [rad] over every simulated row
    (``q_rms``, the whole log) and over the rows before the first simulated fall
    (``q_rms_survived``), per time window, by joint; survival (1 when the replay ran the whole log
    without a fall or failure, else 0: averaged over logs it is the share of logs that survive, as
    everywhere else in crosssim), the share of the log before the fall (``time_share``) and the
    fall's time [s]; base orientation error [deg]."""
    T, dt = len(log), log.control_period
    diff = trace.q - log.q
    ok = np.isfinite(diff).all(axis=1)
    ok[list(trace.starts)] = False  # rows set from the log carry no prediction
    alive = ok & (np.arange(T) < trace.survived)
    rms = lambda d: float(np.sqrt(np.mean(d**2))) if d.size else float("nan")  # noqa: E731
    per = max(1, int(round(window_s / dt)))
    windows = [rms(diff[w:w + per][ok[w:w + per]]) for w in range(0, T, per)]
    out = {"q_rms": rms(diff[ok]), "q_rms_survived": rms(diff[alive]), "q_rms_windows": windows,
           "q_rms_by_joint": {j: rms(diff[ok, k]) for k, j in enumerate(log.joints)},
           "survival": 0.0 if trace.fell is not None or trace.failure else 1.0,
           "time_share": min(trace.survived, T) / T, "fall_time_s": None if trace.fell is None else trace.fell * dt,
           "terminated": trace.terminated, "failure": trace.failure}
    if trace.quat is not None and log.quat is not None:
        good = ok & np.isfinite(trace.quat).all(axis=1)
        angle = np.degrees(quat_angle(trace.quat[good], log.quat[good])) if good.any() else np.array([np.nan])
        out["orientation_error_deg"] = float(np.mean(angle))
        out["orientation_error_max_deg"] = float(np.max(angle))
        kept = alive[good]
        out["orientation_error_survived_deg"] = float(np.mean(angle[kept])) if kept.any() else float("nan")
    return out


def _mean(items: list[dict], key: str) -> float:
    vals = [d[key] for d in items if key in d and d[key] is not None and np.isfinite(d[key])]
    return float(np.mean(vals)) if vals else float("nan")


def _aggregate(items: list[dict]) -> dict:
    n = max(len(d["q_rms_windows"]) for d in items)
    windows = [_mean([{"w": d["q_rms_windows"][w]} for d in items if w < len(d["q_rms_windows"])], "w")
               for w in range(n)]
    falls = [d["fall_time_s"] for d in items if d.get("fall_time_s") is not None]
    out = {"q_rms": _mean(items, "q_rms"), "q_rms_survived": _mean(items, "q_rms_survived"),
           "q_rms_windows": windows, "survival": _mean(items, "survival"), "time_share": _mean(items, "time_share"),
           "falls": len(falls), "first_fall_s": min(falls) if falls else None,
           "failures": sum(1 for d in items if d.get("failure"))}
    for key in ("orientation_error_deg", "orientation_error_survived_deg"):
        if any(key in d for d in items):
            out[key] = _mean(items, key)
    return out


def policy_check(policy, logs: list[RealLog]) -> dict | None:
    """The card's policy fed the logged inputs must return the logged actions (harness check);
    on the rows as logged, dry runs included."""
    with_obs = [log.as_logged for log in logs if log.obs is not None]
    if not with_obs:
        return None
    worst = 0.0
    for log in with_obs:
        policy.reset()
        for obs, action in zip(log.obs, log.action):
            worst = max(worst, float(np.max(np.abs(np.asarray(policy.act(obs), dtype=float) - action))))
    return {"logs": len(with_obs), "max_abs_action_error": worst}


MODES = ("open_loop", "closed_loop")


def _conformance(check, harness, logs) -> dict | None:
    """The conformance check, or its failure as one line (a term crosssim cannot rebuild must not
    cost the rest of the REAL section)."""
    try:
        return check(harness, logs)
    except Exception as exc:  # a plugin term's own error types included
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def real_section(card, engines, logs: list[RealLog], *, trust: bool = False, window_s: float = 1.0,
                 log_dir: str | None = None, progress=None, harness=None) -> dict:
    """The REAL column of a crossval: every engine profile against every applied log, both modes,
    each simulated over the whole log (a simulated fall is recorded, not a stop), and the input
    checks on every log (dry runs included). ``harness``: the crossval's (built from ``card``
    when None)."""
    from crosssim.policies import load_policy
    from crosssim.profiles import load_profile
    from crosssim.real.conformance import conformance
    from crosssim.real.rates import rate_checks
    from crosssim.runner.harness import Harness
    from crosssim.runner.simulator import open_engine

    harness = harness or Harness.from_card(card)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=trust)
    from crosssim.real.base_state import with_estimated_base

    applied, _ = with_estimated_base([log for log in logs if log.applied], harness)
    section = {"base_estimated": [log.name for log in applied if log.base_estimated],"log_dir": log_dir, "logs": [log.name for log in logs], "window_s": window_s,
               "dry_runs": [log.name for log in logs if not log.applied],
               "duration_s": float(sum(log.duration for log in applied)),
               "real": {"survival": float(np.mean([0.0 if log.terminated else 1.0 for log in applied]))
                        if applied else float("nan")},
               "timing": {log.name: log.timing.as_dict() for log in logs if log.timing is not None},
               "policy_check": policy_check(policy, logs), "conformance": _conformance(conformance, harness, logs),
               "rates": _conformance(rate_checks, harness, logs),
               "engines": {}}
    for name in engines:
        try:
            profile = load_profile(name)
            sim = open_engine(profile, harness.scene, base=harness.model_variant)
        except CrossSimError as exc:
            section["engines"][name] = {"error": str(exc)}
            continue
        per_log = {}
        try:
            for log in applied:
                per_log[log.name] = {
                    "open_loop": errors(log, simulate(sim, harness, log, stop_on_termination=False), window_s),
                    "closed_loop": errors(log, simulate(sim, harness, log, policy=policy, stop_on_termination=False),
                                          window_s)}
                if progress:
                    progress(f"real/{name}", len(per_log), len(applied), {"failure": None})
        finally:
            sim.close()
        section["engines"][name] = ({mode: _aggregate([d[mode] for d in per_log.values()]) for mode in MODES}
                                    if per_log else {}) | {"per_log": per_log}
    return section


def _f(x, digits=3, scale=1.0) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * scale:.{digits}f}"


def _mode_text(e: dict) -> str:
    """whole-log RMS / surviving-part RMS, survival, first fall."""
    fall = e.get("fall_time_s", e.get("first_fall_s"))
    return (f"{_f(e['q_rms']):>6} /{_f(e.get('q_rms_survived')):>6} rad {_f(e['survival'], 0, 100):>4} %"
            f"{('  fell ' + _f(fall, 2) + ' s') if fall is not None else '':<14}")


def format_real(section: dict) -> str:
    """The REAL column as printed by crossval: per engine and per log, each mode's joint-position
    RMS over the whole log and over its surviving part, survival and the first simulated fall."""
    dry = section.get("dry_runs") or []
    lines = [f"\nREAL: {len(section['logs']) - len(dry)} logs, {section['duration_s']:.1f} s "
             f"(real robot survived {_f(section['real']['survival'], 0, 100)} %)"
             + (f"; {len(dry)} dry runs (input checks only)" if dry else "")
             + "; error of each engine against the logs",
             "q RMS over the whole log / over the part before the simulated robot fell; survival: the share "
             "of logs whose replay ran to the end without a fall",
             f"{'engine':<24}{'log':<18}{'open loop':<36}{'closed loop':<36}{'orientation':>11}"]
    if section.get("base_estimated"):
        lines.insert(2, f"base state estimated for {len(section['base_estimated'])} logs without pos.*/vel.* "
                        "(IMU and leg kinematics; replays start from it)")
    for name, e in section["engines"].items():
        if "error" in e:
            lines.append(f"{name:<24}  ! {e['error']}")
            continue
        if not e.get("per_log"):
            continue
        rows = [("all", e)] + list(e["per_log"].items())
        for k, (log, d) in enumerate(rows):
            orient = d["closed_loop"].get("orientation_error_deg")
            lines.append(f"{name if k == 0 else '':<24}{log[:17]:<18}{_mode_text(d['open_loop']):<36}"
                         f"{_mode_text(d['closed_loop']):<36}{(_f(orient, 1) + ' deg') if orient is not None else '—':>11}")
        ol = e["open_loop"]
        windows = " ".join(_f(w) for w in ol["q_rms_windows"][:8]) + (" ..." if len(ol["q_rms_windows"]) > 8 else "")
        lines.append(f"{'':<24}open-loop q RMS per {section['window_s']:g} s window [rad]: {windows}")
    timing = [f"{n} ({t['jitter_rms_s'] * 1e3:.1f} ms RMS, max {t['jitter_max_s'] * 1e3:.1f} ms"
              f"{', resampled' if t['resampled'] else ''})" for n, t in (section.get("timing") or {}).items()
              if t["jitter_max_s"] > 1e-4]
    if timing:
        lines.append("timestamp jitter: " + "; ".join(timing))
    check = section.get("policy_check")
    if check:
        lines.append(f"policy check: the card's policy on the logged inputs differs from the logged actions by at most "
                     f"{check['max_abs_action_error']:.2g}" + ("" if check["max_abs_action_error"] < 1e-3 else
                                                             " (wrong policy file, normalisation or observation order?)"))
    conf = section.get("conformance")
    if conf and "error" in conf:
        lines.append(f"deployment conformance: not checked ({conf['error']})")
    elif conf:
        from crosssim.real.conformance import format_conformance

        lines.append(format_conformance(conf))
    rates = section.get("rates")
    if rates and "error" in rates:
        lines.append(f"angular rates: not checked ({rates['error']})")
    elif rates:
        from crosssim.real.rates import format_rates

        lines.append(format_rates(rates))
    lines.append("(orientation error: closed loop, whole log)")
    return "\n".join(lines)
