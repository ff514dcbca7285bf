"""``crosssim calibrate``: fit an engine profile's physical settings to real logs.

Objective: the logged actions replayed open-loop in the engine (the actuation chain, latency and
physics; no policy), reset to the logged state every ``segment`` seconds where the whole state
is logged (fixed-base robots, or base position and velocity logged), and scored by the residual
of joint positions and base orientation against the log. Continuous parameters are fitted by
bounded least squares (scipy, trust-region reflective, finite differences); the integer action
latency by trying each value. Uncertainty: the cluster-robust (sandwich) covariance of the
least-squares estimate at the fit, one cluster per replayed segment (residuals within a segment
share its initial-state error; segments are nearly independent); docs/real.md says what it
does not cover.
"""

from __future__ import annotations

import time
from pathlib import Path
from dataclasses import dataclass, field

import numpy as np

from crosssim.engines.settings import EngineProfile
from crosssim.errors import CrossSimError
from crosssim.profiles import flat_settings, with_settings
from crosssim.real.compare import errors, residual_groups, residuals, simulate


@dataclass(frozen=True)
class Param:
    name: str
    """Name on the command line (--params)."""
    setting: str
    """Profile setting it becomes (simulators/<name>.yaml ``settings``)."""
    low: float
    high: float
    nominal: float = 1.0
    integer: bool = False
    doc: str = ""


PARAMS = {p.name: p for p in (
    Param("friction", "friction_scale", 0.2, 3.0, doc="contact sliding friction (scale)"),
    Param("damping", "damping_scale", 0.1, 5.0, doc="joint viscous damping (scale)"),
    Param("armature", "armature_scale", 0.1, 5.0, doc="joint armature / rotor inertia (scale)"),
    Param("frictionloss", "frictionloss_scale", 0.0, 5.0, doc="joint dry friction (scale)"),
    Param("joint_damping", "joint_damping", 0.0, 10.0, nominal=0.0, doc="joint viscous damping [N m s/rad]"),
    Param("joint_armature", "joint_armature", 0.0, 0.5, nominal=0.0, doc="joint armature [kg m^2]"),
    Param("joint_frictionloss", "joint_frictionloss", 0.0, 5.0, nominal=0.0, doc="joint dry friction [N m]"),
    Param("mass", "mass_scale", 0.5, 2.0, doc="every body's mass and inertia (scale)"),
    Param("motor_strength", "motor_strength", 0.3, 2.0, doc="torque per commanded torque"),
    Param("torque_limit", "torque_limit", 0.2, 1.0, doc="torque clip, fraction of each actuator's maximum "
                                                        "(gear x ctrl range, or the card's torque_limit)"),
    Param("motor_lag", "motor_lag", 0.0, 0.1, nominal=0.0, doc="first-order torque lag [s]"),
    Param("latency", "action_latency", 0, 4, nominal=0, integer=True,
          doc="action delay [control steps], refined to physics steps (action_latency + action_delay)"),
)}
PLAUSIBLE = {"motor_strength": (0.6, 1.25), "friction": (0.3, 2.0), "mass": (0.7, 1.5), "motor_lag": (0.0, 0.05)}
"""Physical ranges of a fit a robot can have, beyond which a value is not a measurement but
compensation for something the twin lacks (issue 37: motors fitted 1.81x stronger than their
specification). motor_strength: a motor within -40 / +25 % of its torque constant (wear,
temperature, supply voltage; above that it is not the motor); friction: rubber-like feet on
floors; mass: a robot is weighed to better than 30 %; motor_lag: above 50 ms it is a delay.
Other parameters: their search bounds (``Param.low`` / ``high``)."""
KEEPS_START = ("the profile keeps its starting value", "the profile keeps its latency",
               "the profile keeps the start value")
"""How the sigma rule's findings say a parameter is not written (replaced where held-out folds decide)."""
NEAR_BOUND = 0.03
"""A fit within this share of its search range from a bound is "at its bound" (the true value may
lie beyond: issue 37's armature and dry friction ended within 3 % of their x5 bounds). A lower
bound of 0 (no lag, no dry friction) is a physical value, not a bound."""


def implausible(fit: "Fit") -> dict[str, str]:
    """Per fitted parameter that is no plausible measurement: why (at or near a search bound, or
    outside its physical range, PLAUSIBLE)."""
    out = {}
    for p in fit.params:
        if p.integer:
            continue
        x, span = float(fit.fitted[p.name]), p.high - p.low
        lo, hi = PLAUSIBLE.get(p.name, (p.low, p.high))
        if x < lo or x > hi:
            out[p.name] = f"{x:.3g} is outside its physical range [{lo:g}, {hi:g}]: the fit compensates for " \
                          "something the model lacks"
        elif x - p.low < NEAR_BOUND * span and p.low != 0:
            out[p.name] = f"{x:.3g} is at its lower search bound {p.low:g}: the value may lie beyond"
        elif p.high - x < NEAR_BOUND * span:
            out[p.name] = f"{x:.3g} is at its upper search bound {p.high:g}: the value may lie beyond"
    return out


ABSOLUTE = {"damping": ("joint_damping", "joint_damping"), "armature": ("joint_armature", "joint_armature"),
            "frictionloss": ("joint_frictionloss", "joint_frictionloss")}
"""A scale of a joint parameter the model does not have (all zero) is a no-op: calibrate the
absolute value instead (name on --params, CanonicalModel attribute)."""


def parse_params(text: str, harness=None) -> list[Param]:
    """The --params list; with ``harness``, ``damping`` / ``armature`` / ``frictionloss`` become
    absolute values where the model's policy joints have none, and a torque limit needs one."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PARAMS]
    if unknown or not names:
        raise CrossSimError(f"--params {text!r}: unknown {unknown or 'empty'}; choose from {', '.join(PARAMS)}")
    out = []
    for n in dict.fromkeys(names):
        if harness is not None and n in ABSOLUTE:
            values = getattr(harness.canonical, ABSOLUTE[n][1])[harness.joints]
            if not np.any(values):
                n = ABSOLUTE[n][0]
        if harness is not None and n == "torque_limit" and not np.isfinite(harness.max_torque[harness.joints]).any():
            raise CrossSimError("--params torque_limit: the card gives the policy's joints no torque limit "
                                "(action.torque_limit, or the actuators' ranges) to take a fraction of; state the "
                                "configured limit in the card")
        out.append(PARAMS[n])
    return list(dict.fromkeys(out))


@dataclass
class Fit:
    engine: str
    base: EngineProfile
    params: list[Param]
    nominal: dict[str, float]
    fitted: dict[str, float]
    sigma: dict[str, float]
    correlation: dict[str, dict[str, float]]
    error_before: float
    """RMS residual [rad] of the objective (segment replay) at the starting settings."""
    error_after: float
    open_loop_before: float
    """Joint-position RMS [rad] of whole-log open-loop replay, before and after."""
    open_loop_after: float
    without: dict[str, float]
    """Objective with each parameter put back to its starting value, the others fitted."""
    latency_error: dict[int, float] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    method: str = "lsq"
    segment_s: float | None = None
    horizon_s: float | None = None
    """Replayed only the first this many seconds of each log (floating base, no base position)."""
    evaluations: int = 0
    seconds: float = 0.0

    extra: dict = field(default_factory=dict)
    """Per parameter, a note for the table (e.g. a torque limit's value in N m)."""
    bootstrap: dict = field(default_factory=dict)
    """Per parameter, its standard deviation over resamples of the logs (3 logs or more)."""
    unidentified: set = field(default_factory=set)
    """Parameters the logs do not pin down: kept at their start value in ``settings()``."""
    delay: float | None = None
    """Fitted action delay [control steps] at physics-step resolution (latency in ``params``)."""
    delay_range: tuple[float, float] | None = None
    """Delays the logs cannot tell from the fitted one (paired test over segments, 2 SE)."""
    written: set | None = None
    """Parameters whose fit the profile takes, chosen on held-out folds (crosssim.real.heldout);
    None: every identified one (the sigma rule, with fewer than 3 logs or --folds 0)."""
    heldout: dict | None = None
    """The held-out folds' record (crosssim.real.heldout.HeldOut.record)."""

    @property
    def unwritten(self) -> set:
        """Parameters the profile keeps at their start value."""
        if self.written is None:
            return set(self.unidentified)
        return {p.name for p in self.params} - set(self.written)

    def settings(self) -> dict:
        """The profile's settings: the base's, with every written parameter's fit."""
        out = flat_settings(self.base)
        for p in self.params:
            if p.name in self.unwritten:
                continue
            if p.integer and self.delay is not None:
                whole = int(np.floor(self.delay + 1e-9))
                out[p.setting] = whole
                if self.delay - whole > 1e-9:
                    out["action_delay"] = float(f"{self.delay - whole:.6g}")
                else:
                    out.pop("action_delay", None)
                continue
            out[p.setting] = int(self.fitted[p.name]) if p.integer else float(f"{self.fitted[p.name]:.6g}")
        return out


class Objective:
    """Residuals of a candidate setting over every log (one engine model per evaluation)."""

    def __init__(self, harness, logs, base: EngineProfile, segment_rows: int | None):
        self.harness, self.logs, self.base, self.segment = harness, logs, base, segment_rows
        self.evaluations = 0

    def traces(self, settings: dict, segment: int | None):
        from crosssim.runner.simulator import open_engine

        sim = open_engine(with_settings(self.base, settings), self.harness.scene, base=self.harness.model_variant)
        try:
            self.evaluations += 1
            return [simulate(sim, self.harness, log, segment=segment, stop_on_termination=False) for log in self.logs]
        finally:
            sim.close()

    def residuals(self, settings: dict) -> np.ndarray:
        traces = self.traces(settings, self.segment)
        groups, offset = [], 0
        for log, t in zip(self.logs, traces):  # cluster ids, unique across logs
            g = residual_groups(log, t)
            groups.append(g + offset)
            offset += len(t.starts)
        self.groups = np.concatenate(groups)
        parts = [residuals(log, t) for log, t in zip(self.logs, traces)]
        self.log_ids = np.concatenate([np.full(len(p), i) for i, p in enumerate(parts)])
        return np.concatenate(parts)

    def rms(self, settings: dict) -> float:
        return float(np.sqrt(np.mean(self.residuals(settings) ** 2)))

    def open_loop(self, settings: dict) -> float:
        """Joint-position RMS of whole-log replay (no resets), mean over logs."""
        return float(np.mean([errors(log, t)["q_rms"] for log, t in zip(self.logs, self.traces(settings, None))]))


COARSE_ROWS = 5
"""Stage one replays segments this many control steps long (or, without the full state, the
logs' first COARSE_SECONDS): short horizons keep the objective nearly convex and make the
latency stand out; stage two refines on the requested segments."""
COARSE_SECONDS = 1.0
METHODS = ("auto", "lsq", "global")
"""lsq: bounded least squares (smooth objectives); global: differential evolution; auto: global
for floating-base robots, lsq otherwise."""
DIFF_STEP = 1e-2
"""Finite-difference step, as a fraction of each parameter's range (1e-3 gave the same fits on
the contact-free arm; contact-rich objectives are rugged below 1e-2)."""
KINKED = ("torque_limit",)
"""Parameters whose effect starts at a threshold (a torque clip acts only once the torques reach
it): their slope is zero from a start above the threshold, so a grid picks the start."""
KINK_GRID = 9
DE_POPULATION = 8
"""Differential evolution: candidates per generation, per parameter."""


def calibrate(harness, logs, base: EngineProfile, params: list[Param], *, segment_s: float | None = 0.5,
              max_evals: int = 200, method: str = "auto", progress=None) -> Fit:
    """Fit ``params`` of profile ``base`` to ``logs`` (checked against ``harness`` beforehand)."""
    t0 = time.monotonic()
    logs, dry = _applied(logs)
    method = _resolve_method(method, harness)
    replay = _Replay.of(harness, logs, base, segment_s)
    notes = [f"dry runs left out (their actions never reached the motors): {', '.join(dry)}"] if dry else []
    notes += replay.notes
    obj, space = replay.obj, _Space.of(params, base)
    lat = space.lat
    search = _Search(space, obj, replay.coarse, method, max_evals, progress)
    u0, lat0 = space.start_point()
    before = obj.rms(space.settings_of(u0, lat0))
    open_before = obj.open_loop(space.settings_of(u0, lat0))
    point = search.with_delay(*search.whole_steps(u0, lat0))
    costs = search.scan(obj, point.u)
    final = space.settings_of(point.u, point.latency)
    r = obj.residuals(final)
    after = float(np.sqrt(np.mean(r**2)))
    fitted = space.fitted(point.u, point.latency)
    judged = _judge(obj, point, r, fitted, len(logs))
    delay_range = _delay_range(lat, point.latency, judged.sigma) if lat else None
    if method == "global" and space.cont:
        notes.append("sigma comes from the local slope of a rugged (contact-rich) objective and understates the "
                     "uncertainty; compare fits on separate sets of logs")
    findings = notes + judged.findings
    if lat:
        findings.append(_latency_finding(point.latency, delay_range, harness.control_dt,
                                         lat.name not in judged.unidentified))
    without = _without(obj, space, final)
    for name, text in _not_converged(without, after).items():
        judged.unidentified.add(name)
        findings.append(text)
    open_after = obj.open_loop(final)
    return Fit(engine=base.engine, base=base, params=list(params), extra=_torque_note(harness, fitted),
               bootstrap=judged.bootstrap, nominal={p.name: p.nominal for p in params}, fitted=fitted,
               sigma=judged.sigma, correlation=judged.correlation, error_before=before, error_after=after,
               open_loop_before=open_before, open_loop_after=open_after, without=without,
               latency_error={int(k): float(v) for k, v in costs.items()}, findings=findings,
               unidentified=judged.unidentified, delay=float(point.latency) if lat else None,
               delay_range=delay_range, logs=[log.name for log in logs], method=method,
               segment_s=None if replay.segment is None else replay.segment * harness.control_dt,
               horizon_s=replay.horizon, evaluations=obj.evaluations + replay.coarse.evaluations,
               seconds=time.monotonic() - t0)


def _applied(logs) -> tuple[list, list[str]]:
    """The logs whose actions reached the motors, and the names of the dry runs left out."""
    dry = [log.name for log in logs if not log.applied]
    logs = [log for log in logs if log.applied]  # a dry run's motion is not the actions' doing
    if not logs:
        raise CrossSimError(f"every log is a dry run (applied: false): {', '.join(dry)}; calibration needs logs "
                            "whose actions reached the motors")
    return logs, dry


def _resolve_method(method: str, harness) -> str:
    """``lsq`` or ``global`` (``auto``: global for a floating base, whose contacts make a rugged objective)."""
    if method not in METHODS:
        raise CrossSimError(f"calibration method {method!r}: one of {', '.join(METHODS)}")
    if method == "auto":  # a floating base moves by its contacts: a rugged objective
        method = "global" if harness.canonical.free_base else "lsq"
    return method


@dataclass(frozen=True)
class _Replay:
    """What is replayed: the objective on the requested segments and the coarse one of stage one."""

    obj: Objective
    coarse: Objective
    segment: int | None
    """Control steps per replayed segment (None: no resets)."""
    horizon: float | None
    """Seconds replayed from each log's start, where the full state is not logged."""
    notes: list[str]

    @classmethod
    def of(cls, harness, logs, base: EngineProfile, segment_s: float | None) -> "_Replay":
        full_state = not harness.canonical.free_base or all(log.pos is not None and log.vel is not None
                                                            for log in logs)
        dt = harness.control_dt
        segment = max(2, int(round(segment_s / dt))) if segment_s and full_state else None
        if segment:
            return cls(Objective(harness, logs, base, segment),
                       Objective(harness, logs, base, min(COARSE_ROWS, segment)), segment, None, [])
        if full_state:  # whole logs, as asked
            return cls(Objective(harness, logs, base, None),
                       Objective(harness, [log.head(int(round(COARSE_SECONDS / dt))) for log in logs], base, None),
                       None, None, [])
        # no full state to reset to: the start of each log only (replay diverges later)
        rows = max(2, int(round((segment_s or COARSE_SECONDS) / dt)))
        notes = []
        obj = Objective(harness, [log.head(rows) for log in logs], base, None)
        coarse = Objective(harness, [log.head(max(COARSE_ROWS, rows // 2)) for log in logs], base, None)
        if rows < max(len(log) for log in logs):
            notes.append(f"floating base without logged base position and velocity (pos.*, vel.*): only the first "
                         f"{rows * dt:g} s of each log are replayed; log them (motion capture, a state estimator) "
                         "to use every row")
        return cls(obj, coarse, None, rows * dt, notes)


@dataclass(frozen=True)
class _Space:
    """Where the search moves: the continuous parameters in a unit box, the latency apart."""

    params: list[Param]
    cont: list[Param]
    """The continuous parameters, in the unit box's order."""
    lat: Param | None
    """The latency parameter, if fitted."""
    base_settings: dict
    start: dict[str, float]
    """Each parameter's starting value: the base profile's setting, else its nominal value."""
    lo: np.ndarray
    hi: np.ndarray
    span: np.ndarray

    @classmethod
    def of(cls, params: list[Param], base: EngineProfile) -> "_Space":
        cont = [p for p in params if not p.integer]
        base_settings = flat_settings(base)
        lo, hi = np.array([p.low for p in cont]), np.array([p.high for p in cont])
        return cls(list(params), cont, next((p for p in params if p.integer), None), base_settings,
                   {p.name: float(base_settings.get(p.setting, p.nominal)) for p in params}, lo, hi, hi - lo)

    def start_point(self) -> tuple[np.ndarray, int | None]:
        """The starting settings as a unit-box point and a latency [control steps]."""
        cont, lo, span = self.cont, self.lo, self.span
        u0 = np.clip((np.array([self.start[p.name] for p in cont]) - lo) / span, 0.0, 1.0) if cont else np.zeros(0)
        return u0, int(self.start[self.lat.name]) if self.lat else None

    def settings_of(self, u: np.ndarray, latency: float | None) -> dict:
        """Settings for unit-box point ``u`` and a delay [control steps]: whole steps as
        action_latency, the fraction as action_delay (resolved to physics steps)."""
        s = dict(self.base_settings)
        for p, x in zip(self.cont, self.lo + self.span * u):
            s[p.setting] = float(x)
        if self.lat is not None:
            whole = int(np.floor(latency + 1e-9))
            s[self.lat.setting] = whole
            s.pop("action_delay", None)
            if latency - whole > 1e-9:
                s["action_delay"] = float(latency - whole)
        return s

    def fitted(self, u: np.ndarray, latency: float | None) -> dict[str, float]:
        """Each parameter's value at ``u`` and ``latency``, in its own units."""
        out = {p.name: float(x) for p, x in zip(self.cont, self.lo + self.span * u)}
        if self.lat:
            out[self.lat.name] = float(latency)
        return out


@dataclass(frozen=True)
class _Point:
    """The search's result: the unit-box point, the delay, and the vector the uncertainty is taken in."""

    u: np.ndarray
    latency: float | None
    """Delay [control steps]; None without a latency parameter."""
    v: np.ndarray
    """``u`` with the delay appended (as a fraction of its range) where the latency is fitted."""
    settings_v: object
    """Settings of a vector like ``v``."""
    params: list[Param]
    """The parameters along ``v`` (the delay's range is the one it was refined in)."""
    lo: np.ndarray
    hi: np.ndarray


class _Search:
    """The staged search: whole-step latencies and a coarse fit first, then the requested segments,
    then the delay to a fraction of a step."""

    def __init__(self, space: _Space, obj: Objective, coarse: Objective, method: str, max_evals: int, progress):
        self.space, self.obj, self.coarse = space, obj, coarse
        self.method, self.max_evals, self.progress = method, max_evals, progress
        lat = space.lat
        self.candidates = list(range(int(lat.low), int(lat.high) + 1)) if lat else [None]

    def residuals(self, u, latency, o) -> np.ndarray:
        if self.progress:
            self.progress(self.obj.evaluations + self.coarse.evaluations)
        return o.residuals(self.space.settings_of(u, latency))

    def scan(self, o: Objective, u, around=None) -> dict:
        """RMS error by whole-step latency (within a step of ``around`` when given); empty without one."""
        near = self.candidates if around is None else [L for L in self.candidates if abs(L - around) <= 1]
        return {L: o.rms(self.space.settings_of(u, L)) for L in near} if self.space.lat else {}

    def fit(self, o: Objective, u, L):
        """The continuous parameters fitted on ``o`` at latency ``L``, from ``u``."""
        from scipy.optimize import differential_evolution, least_squares

        cont, max_evals = self.space.cont, self.max_evals
        if not cont:
            return u
        if self.method == "global":  # derivative-free, for rugged (contact-rich) objectives
            gens = max(2, max_evals // (DE_POPULATION * len(cont)) - 1)
            r = differential_evolution(lambda v: float(np.sqrt(np.mean(self.residuals(v, L, o) ** 2))),
                                       [(0.0, 1.0)] * len(cont), popsize=DE_POPULATION, maxiter=gens, tol=1e-3,
                                       seed=0, polish=False, init="sobol", x0=u)
            return r.x
        r = least_squares(self.residuals, u, bounds=(0.0, 1.0), args=(L, o), diff_step=DIFF_STEP, x_scale=1.0,
                          max_nfev=max(5, max_evals // (len(cont) + 1)))  # finite differences cost n more
        return r.x

    def whole_steps(self, u, latency):
        """Latency in whole control steps and the continuous fit, stage by stage."""
        lat, coarse = self.space.lat, self.coarse
        if lat:  # every latency once, on short horizons where it stands out most
            costs = self.scan(coarse, u)
            latency = min(costs, key=costs.get)
        for k in [k for k, p in enumerate(self.space.cont) if p.name in KINKED]:
            # flat on one side of its kink: start from the best of a grid, not from the flat side
            grid = np.linspace(0.0, 1.0, KINK_GRID)
            trial = [np.where(np.arange(len(u)) == k, g, u) for g in grid]
            u = trial[int(np.argmin([coarse.rms(self.space.settings_of(v, latency)) for v in trial]))]
        for o in ((coarse, self.obj) if self.method == "lsq" else (self.obj,)):
            u = self.fit(o, u, latency)
            if lat:  # the fitted continuous settings may prefer a neighbouring latency: check, refit once
                costs = self.scan(o, u, around=latency)
                best = min(costs, key=costs.get)
                if best != latency:
                    latency = best
                    u = self.fit(o, u, latency)
        return u, latency

    def with_delay(self, u, latency) -> _Point:
        """The delay joins the continuous fit (to a fraction of a step), within a step of the
        whole-step best; without a latency parameter, the point as it is."""
        space, lat = self.space, self.space.lat
        if not lat:
            return _Point(u, latency, u, lambda v: space.settings_of(v, latency), list(space.cont), space.lo,
                          space.hi)
        dlo, dhi = max(float(lat.low), latency - 1.0), min(float(lat.high), latency + 1.0)
        settings_v = lambda v: space.settings_of(v[:-1], dlo + (dhi - dlo) * v[-1])  # noqa: E731
        v = np.append(u, (latency - dlo) / (dhi - dlo))
        v = _fit_vector(self.obj, v, settings_v, self.method, self.max_evals, self.progress)
        u, latency = v[:-1], round(float(dlo + (dhi - dlo) * v[-1]), 4)
        v[-1] = (latency - dlo) / (dhi - dlo)
        return _Point(u, latency, v, settings_v, space.cont + [Param(lat.name, lat.setting, dlo, dhi, doc=lat.doc)],
                      np.append(space.lo, dlo), np.append(space.hi, dhi))


@dataclass(frozen=True)
class _Judged:
    """What the logs pin down at the fit."""

    sigma: dict[str, float]
    correlation: dict[str, dict[str, float]]
    bootstrap: dict[str, float]
    findings: list[str]
    unidentified: set[str]


def _judge(obj: Objective, point: _Point, r: np.ndarray, fitted: dict[str, float], log_count: int) -> _Judged:
    """Identifiability at the fit: cluster-robust sigma and correlations from the Jacobian, then the
    bootstrap over logs. ``r``: the residuals at the fit (``obj``'s last evaluation)."""
    params, lo, hi = point.params, point.lo, point.hi
    groups = obj.groups
    J = _jacobian(lambda w: obj.residuals(point.settings_v(w)), point.v, r) if params else None
    sigma, corr, findings, unidentified = _uncertainty(J, r, groups, params, hi - lo, fitted, lo, hi)
    boot = _bootstrap_logs(J, r, obj.log_ids, params, hi - lo) if params else {}
    if boot:
        findings.append("bootstrap over logs (" + f"{BOOTSTRAP} resamples of the {log_count} logs, one Gauss-Newton "
                        "step each): sd " + ", ".join(f"{k} {v:.3g}" for k, v in boot.items()))
        for p in params:  # the logs disagree more than the segments within them suggest
            sd_b, x = boot.get(p.name, 0.0), fitted[p.name]
            if p.name not in unidentified and (sd_b > 0.25 * (p.high - p.low)
                                               or sd_b > 0.5 * max(abs(x), 0.05 * (p.high - p.low))):
                unidentified.add(p.name)
                findings.append(f"{p.name}: the logs disagree (bootstrap sd {sd_b:.3g} around {x:.3g}); the profile "
                                "keeps its starting value")
    return _Judged(sigma, corr, boot, findings, unidentified)


def _delay_range(lat: Param, latency: float, sigma: dict[str, float]) -> tuple[float, float]:
    """Delays [control steps] within 2 sigma of the fitted one (the latency's whole range where
    sigma is not finite)."""
    sd = sigma.get(lat.name, float("nan"))
    return (latency - 2 * sd, latency + 2 * sd) if np.isfinite(sd) else (float(lat.low), float(lat.high))


def _latency_finding(latency: float, delay_range: tuple[float, float], dt: float, identified: bool) -> str:
    low, high = delay_range
    text = (f"latency {latency:.3g} control steps ({latency * dt * 1e3:.1f} ms), 2 sigma range {low:.3g} - "
            f"{high:.3g} steps")
    if not identified:
        text += " - not identified: the profile keeps its latency"
    return text


def _without(obj: Objective, space: _Space, final: dict) -> dict[str, float]:
    """The objective with each parameter put back to its start value, the others left at the fit."""
    without = {}
    for p in space.params:
        s = dict(final)
        if p.integer:
            s[p.setting] = int(space.start[p.name])
            s.pop("action_delay", None)
            if space.base_settings.get("action_delay"):
                s["action_delay"] = space.base_settings["action_delay"]
        else:
            s[p.setting] = space.start[p.name]
        without[p.name] = obj.rms(s)
    return without


def _not_converged(without: dict[str, float], after: float) -> dict[str, str]:
    """Parameters whose start value gives a lower error than the fit (the search stopped short of
    it), each with its finding."""
    return {name: f"{name}: its start value gives a lower error ({error:.4g} < {after:.4g} rad): the search did not "
                  "converge; the profile keeps the start value (raise --max-evals)"
            for name, error in without.items() if error < after * (1 - 1e-3)}


def _torque_note(harness, fitted: dict[str, float]) -> dict[str, str]:
    """The fitted torque limit in N m (the policy joints' range of it), for the table."""
    extra = {}
    if "torque_limit" in fitted:
        peak = harness.max_torque[harness.joints]
        peak = peak[np.isfinite(peak)]
        if peak.size:
            extra["torque_limit"] = (f"  (= {fitted['torque_limit'] * peak.min():.3g}"
                                     + (f" - {fitted['torque_limit'] * peak.max():.3g}" if np.ptp(peak) else "")
                                     + " N m)")
    return extra


def _fit_vector(obj, v0: np.ndarray, settings_v, method: str, max_evals: int, progress) -> np.ndarray:
    """Fit the unit-box vector ``v`` (settings from ``settings_v``) on objective ``obj``."""
    from scipy.optimize import differential_evolution, least_squares

    def fun(v):
        if progress:
            progress(obj.evaluations)
        return obj.residuals(settings_v(v))

    if method == "global":
        gens = max(2, max_evals // (DE_POPULATION * len(v0)) - 1)
        return differential_evolution(lambda v: float(np.sqrt(np.mean(fun(v) ** 2))), [(0.0, 1.0)] * len(v0),
                                      popsize=DE_POPULATION, maxiter=gens, tol=1e-3, seed=0, polish=False,
                                      init="sobol", x0=v0).x
    return least_squares(fun, v0, bounds=(0.0, 1.0), diff_step=DIFF_STEP, x_scale=1.0,
                         max_nfev=max(5, max_evals // (len(v0) + 1))).x


def _jacobian(f, u: np.ndarray, r0: np.ndarray) -> np.ndarray:
    """Finite-difference Jacobian in the unit box, stepping inwards at a bound."""
    J = np.zeros((r0.size, u.size))
    for k in range(u.size):
        h = DIFF_STEP if u[k] + DIFF_STEP <= 1.0 else -DIFF_STEP
        v = u.copy()
        v[k] += h
        J[:, k] = (f(v) - r0) / h
    return J


BOOTSTRAP = 200
"""Resamples of the logs for the bootstrap over logs."""


def _bootstrap_logs(J, r, log_ids, params, span) -> dict[str, float]:
    """Standard deviation of each parameter over resamples of whole logs (with replacement), each
    estimate one Gauss-Newton step from the fit on the resampled logs' residuals and Jacobian (no
    refit: the linearised bootstrap). Empty with fewer than 3 logs (too few to resample)."""
    ids = np.unique(log_ids)
    if len(ids) < 3:
        return {}
    Jp = J / span
    rows = [np.flatnonzero(log_ids == i) for i in ids]
    JtJ = [Jp[k].T @ Jp[k] for k in rows]
    Jtr = [Jp[k].T @ r[k] for k in rows]
    rng = np.random.default_rng(0)  # same logs, same numbers
    steps = []
    for _ in range(BOOTSTRAP):
        pick = rng.integers(0, len(ids), len(ids))
        A, b = sum(JtJ[i] for i in pick), sum(Jtr[i] for i in pick)
        steps.append(-np.linalg.pinv(A) @ b)
    sd = np.std(np.array(steps), axis=0, ddof=1)
    return {p.name: float(v) for p, v in zip(params, sd)}


def _uncertainty(J, r, groups, cont, span, fitted, lo, hi):
    """Per-parameter sigma and correlations from the Jacobian at the fit, and what they imply."""
    findings: list[str] = []
    unidentified: set[str] = set()
    sigma = {p.name: float("nan") for p in cont}
    corr = {p.name: {} for p in cont}
    if J is None:
        return sigma, corr, findings, unidentified
    J = J / span  # d residual / d parameter (physical units)
    n = J.shape[1]
    bread = np.linalg.pinv(J.T @ J)
    ids = np.unique(groups)
    scores = np.array([J[groups == g].T @ r[groups == g] for g in ids])  # per-cluster gradient
    G = len(ids)
    cov = bread @ (scores.T @ scores) @ bread * (G / max(G - 1, 1))
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    for k, p in enumerate(cont):
        sigma[p.name] = float(sd[k])
        for j, q in enumerate(cont):
            if j != k:
                corr[p.name][q.name] = float(cov[k, j] / max(sd[k] * sd[j], 1e-300))
    col = np.linalg.norm(J, axis=0) * span
    for k, p in enumerate(cont):
        x = fitted[p.name]
        if col[k] < 1e-6 * max(col.max(), 1e-12):
            sigma[p.name] = float("inf")
            unidentified.add(p.name)
            findings.append(f"{p.name}: the logs do not depend on it at all (e.g. contact friction on a robot that "
                            "never touches anything); the profile keeps its starting value, not a measurement")
        elif sd[k] > 0.25 * (hi[k] - lo[k]) or sd[k] > 0.5 * max(abs(x), 0.05 * (hi[k] - lo[k])):
            unidentified.add(p.name)
            findings.append(f"{p.name}: not identified by these logs (±{sd[k]:.3g} around {x:.3g}); the profile keeps "
                            "its starting value")
        if min(x - lo[k], hi[k] - x) < 1e-3 * (hi[k] - lo[k]):
            findings.append(f"{p.name}: fitted at its bound {x:.3g}; the true value may lie beyond "
                            f"[{lo[k]:g}, {hi[k]:g}] or another parameter is compensating")
    for k, p in enumerate(cont):
        for j in range(k + 1, n):
            rho = corr[p.name][cont[j].name]
            if abs(rho) > 0.9:
                findings.append(f"{p.name} and {cont[j].name} are confounded (correlation {rho:+.2f}): the logs "
                                "constrain a combination of the two better than either")
    return sigma, corr, findings, unidentified


def format_fit(fit: Fit) -> str:
    seg = (f"{fit.segment_s:g} s segments" if fit.segment_s else
           f"first {fit.horizon_s:g} s of each log" if fit.horizon_s else "whole logs")
    lines = [f"calibrated {fit.base.name} on {len(fit.logs)} logs (open-loop replay of logged actions, {seg}; "
             f"{'least squares' if fit.method == 'lsq' else 'differential evolution'}; "
             f"{fit.evaluations} simulations of the logs, {fit.seconds:.0f} s)",
             f"  error: {fit.error_before:.4f} -> {fit.error_after:.4f} rad RMS "
             f"({fit.error_before / max(fit.error_after, 1e-12):.1f}x lower); replay without resets "
             f"{fit.open_loop_before:.4f} -> {fit.open_loop_after:.4f} rad",
             f"  {'parameter':<20}{'setting':<20}{'start':>8}{'fitted':>10}{'±1 sigma':>11}{'error if left at start':>24}"
             "  written"]
    for p in fit.params:
        start = flat_settings(fit.base).get(p.setting, p.nominal)
        start = p.nominal if start is None else start
        sd = fit.sigma.get(p.name, float("nan"))
        sd_text = f"{sd:.3g}" if np.isfinite(sd) else "n/a"
        written = ("yes" if p.name not in fit.unwritten else "no (not identified)" if fit.written is None
                   else "no (held-out folds)")
        lines.append(f"  {p.name:<20}{p.setting:<20}{start:>8.3g}{fit.fitted[p.name]:>10.4g}{sd_text:>11}"
                     f"{fit.without[p.name]:>24.4f}  {written}{fit.extra.get(p.name, '')}")
    if fit.latency_error:
        lines.append("  error by latency [control steps]: " +
                     ", ".join(f"{k}: {v:.4f}" for k, v in sorted(fit.latency_error.items())))
    lines += [f"  ! {f}" for f in fit.findings]
    lines += [f"  ! {name}: implausible fit: {why}; not written as a deployment gap"
              for name, why in implausible(fit).items()]
    return "\n".join(lines)


def _sigma(fit: Fit, p: Param) -> float | None:
    sd = fit.sigma.get(p.name, float("nan"))
    return None if not np.isfinite(sd) else round(float(sd), 6)


def write_profile(fit: Fit, path) -> "Path":
    """The calibrated profile: ``engine`` and ``settings`` (what load_profile reads) and a
    ``calibration`` record of how it was obtained."""
    import datetime as dt
    from pathlib import Path

    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    odd = implausible(fit)
    record = {
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "from_profile": fit.base.name, "method": fit.method, "logs": fit.logs, "segment_s": fit.segment_s,
        "horizon_s": fit.horizon_s,
        "error_rad": {"before": round(fit.error_before, 6), "after": round(fit.error_after, 6)},
        "open_loop_error_rad": {"before": round(fit.open_loop_before, 6), "after": round(fit.open_loop_after, 6)},
        "parameters": {p.name: {"setting": p.setting, "fitted": fit.fitted[p.name], "sigma": _sigma(fit, p),
                                "bootstrap_sd": (round(fit.bootstrap[p.name], 6) if p.name in fit.bootstrap
                                                 else None),
                                "identified": p.name not in fit.unidentified,
                                "written": p.name not in fit.unwritten,
                                "implausible": odd.get(p.name)} for p in fit.params},
        "delay_steps": fit.delay, "delay_range_steps": list(fit.delay_range) if fit.delay_range else None,
        "findings": fit.findings,
        "heldout": fit.heldout,
    }
    head = (f"# Calibrated by `crosssim calibrate` against {len(fit.logs)} real logs (docs/real.md).\n"
            f"# Use it by name: crosssim crossval --engines {path.stem},... ; settings act in every condition.\n")
    body = yaml.safe_dump({"engine": fit.engine, "settings": fit.settings(), "calibration": record}, sort_keys=False)
    path.write_text(head + body)
    return path
