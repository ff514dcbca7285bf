"""Dose-response sweeps: one ladder of severities per family of real-world gap, searched by
bisection for the tolerance margin. Method and reasoning: docs/risk.md.

A ladder's rung ``k`` (1..K) moves every axis of its family together, in physical units (rung 0
is nominal). The search is a pure function of "does rung k keep the metric within the pass
fraction of nominal?", so the engine worker that runs the episodes and the parent that reads
them back (cached or fresh) visit exactly the same rungs: same rows in, same rows kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Ladder:
    """A family's severities: rung k (1..K) sits at severity ``levels[k - 1]`` and sets each axis
    (a Variant field) to its ``axes`` value there. Severity is linear in every axis's
    distance from nominal, so margins and gaps in severity units can be divided."""

    family: str
    levels: tuple[float, ...]
    axes: tuple[tuple[str, tuple[float, ...]], ...]
    what: str

    @property
    def rungs(self) -> int:
        return len(self.levels)

    def level(self, k: int) -> float:
        """Severity of rung ``k`` (0: nominal)."""
        return 0.0 if k == 0 else float(self.levels[k - 1])

    def fields(self, k: int) -> dict:
        """Variant fields of rung ``k`` (0: nominal)."""
        if k == 0:
            return {}
        out = {}
        for name, values in self.axes:
            out.update(axis_fields(name, values[k - 1]))
        return out

    def condition(self, k: int) -> str:
        """The results' condition name of rung ``k``."""
        return "nominal" if k == 0 else f"{self.family}@{k}"

    def settings_at(self, severity: float) -> dict[str, float]:
        """Each axis's physical value at a severity (linear between rungs, the last step extended
        beyond the top one, never below 0; a free speed is linear in its inverse; an actuator model
        file is there from its rung on)."""
        out = {}
        for name, values in self.axes:
            if name == "actuator":
                out[name] = values[0] if severity >= self.levels[0] - 1e-9 else None
                continue
            xs, ys = [0.0, *self.levels], [lin(name, nominal(name)), *(lin(name, v) for v in values)]
            x = float(np.interp(severity, xs, ys))
            if severity > xs[-1]:  # beyond the top rung the last step is extended (as severity_of reads it)
                x = max(ys[-1] + (severity - xs[-1]) * (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]), 0.0)
            out[name] = unlin(name, x)
        return out

    def severity_of(self, name: str, value) -> float:
        """The severity at which axis ``name`` reaches ``value`` (beyond the top rung the last
        step is extended; the nominal value is 0)."""
        if name == "actuator":  # a model named is the ladder's one rung
            return float(self.levels[0]) if value else 0.0
        if value is None:
            return 0.0
        levels = np.array([0.0, *self.levels])
        values = np.array([lin(name, nominal(name)), *(lin(name, v) for v in dict(self.axes)[name])], float)
        sign = 1.0 if values[-1] > values[0] else -1.0
        x, v = sign * lin(name, float(value)), sign * values
        if x <= v[0]:
            return 0.0
        if x > v[-1]:
            return float(levels[-1] + (x - v[-1]) * (levels[-1] - levels[-2]) / (v[-1] - v[-2]))
        return float(np.interp(x, v, levels))


INVERSE = {"motor_free_speed"}
"""Axes whose severity is linear in the inverse of the value (a free speed halved is twice the gap;
none, infinity, is nominal)."""


def lin(name: str, value: float) -> float:
    if name in INVERSE:
        return 0.0 if value is None or not np.isfinite(value) else 1.0 / float(value)
    return float(value)


def unlin(name: str, x: float) -> float:
    if name in INVERSE:
        return float("inf") if x <= 0 else 1.0 / x
    return x


def nominal(name: str):
    """An axis's value with no gap."""
    return 0.0 if name.startswith(TERM_NOISE) else NOMINAL[name]


def unit(name: str) -> str:
    """An axis's unit (shown by settings_text)."""
    return "term units" if name.startswith(TERM_NOISE) else UNITS[name]


def setting_text(name: str, value, *, named: bool = True) -> str:
    """One swept axis's value in words with its unit, as the terminal and the report both show it:
    "motor_lag 1.7 ms", "motor_strength x0.88"; ``named=False`` drops the axis name ("1.7 ms")."""
    from pathlib import Path

    if name == "actuator":
        return f"actuator {Path(value).name}" if value else "ideal actuator"
    u = unit(name)
    if u == "term units":
        text, name = f"noise {value:.2g}", name.partition(":")[2]
    elif u == "s":
        text = f"{1000 * value:.2g} ms" if 0 < value < 0.01 else f"{1000 * value:.0f} ms"
    elif u == "x":
        text = f"x{value:.2f}"
    elif name in INVERSE and not np.isfinite(value):
        text = "unlimited"
    else:
        text = f"{value:.2g} {u}"
    return f"{name} {text}" if named else text


def settings_text(settings: dict) -> str:
    """Swept axes' values in words with units, e.g. "motor_strength x0.82, motor_lag 14 ms"."""
    return ", ".join(setting_text(k, v) for k, v in settings.items())


def axis_fields(name: str, value) -> dict:
    """Variant fields of one axis value: a latency in control steps is split into whole steps
    (``action_latency``) and a fraction (``action_delay``, resolved to physics steps by the
    harness; crosssim.runner.stepper), so every engine sees the same sub-step latency."""
    if name.startswith(TERM_NOISE):  # "term_noise:<term>": noise on that observation term only
        return {"term_noise": ((name[len(TERM_NOISE):], float(value)),)}
    if name == "action_latency":
        whole = int(np.floor(value + 1e-9))
        frac = float(value) - whole
        return {"action_latency": whole} | ({"action_delay": round(frac, 9)} if frac > 1e-9 else {})
    return {name: value}


NOMINAL = {"motor_strength": 1.0, "motor_lag": 0.0, "action_latency": 0, "obs_noise": 0.0,
           "friction_scale": 1.0, "mass_scale": 1.0, "motor_free_speed": float("inf"), "push_impulse": 0.0,
           "actuator": None, "backlash": 0.0, "obs_drop": 0.0, "contact_timeconst": 0.02, "encoder_offset": 0.0,
           "joint_friction": 0.0, "deadband": 0.0, "action_drop": 0.0, "action_jitter": 0.0, "imu_bias": 0.0,
           "ground_slope": 0.0}
"""Each swept axis's value with no gap (the Variant fields' defaults). ``contact_timeconst``'s
default is the scene's own; its nominal here is MuJoCo's default time constant, 0.02 s, which the
ladder and the deployment gap assume the scene keeps (docs/risk.md, "Contact softness")."""

UNITS = {"motor_strength": "x", "motor_lag": "s", "action_latency": "control steps", "obs_noise": "sensor units",
         "friction_scale": "x", "mass_scale": "x", "motor_free_speed": "rad/s", "push_impulse": "N s",
         "actuator": "file", "latency": "s", "backlash": "s", "obs_drop": "share of frames", "contact_timeconst": "s",
         "encoder_offset": "rad", "joint_friction": "N m", "deadband": "N m", "action_drop": "share of commands",
         "action_jitter": "control steps", "imu_bias": "rad/s",
         "ground_slope": "rad"}
TERM_NOISE = "term_noise:"
"""Prefix of a per-term noise axis: ``term_noise:<observation term>``. (``latency`` is no axis: the
risk profile adds the timing axis's latency in seconds beside it.)"""

LADDERS: dict[str, Ladder] = {
    "actuation": Ladder("actuation", (0.5, 1, 2, 3, 4, 5),
                        (("motor_strength", (0.95, 0.9, 0.8, 0.7, 0.6, 0.5)),
                         ("motor_lag", (0.004, 0.008, 0.016, 0.024, 0.032, 0.040))),
                        "actuation (motor strength 0.95 to 0.5, torque lag 4 to 40 ms)"),
    "timing": Ladder("timing", (0.25, 0.5, 1, 2, 3, 4),
                     (("action_latency", (0.25, 0.5, 1, 2, 3, 4)),
                      ("obs_noise", (0.0025, 0.005, 0.01, 0.02, 0.03, 0.04))),
                     "timing and sensing (action latency 0.25 to 4 control steps, observation noise 0.0025 to 0.04)"),
    "contact": Ladder("contact", (0.5, 1, 2, 3, 4, 5),
                      (("friction_scale", (0.93, 0.86, 0.72, 0.58, 0.44, 0.3)),
                       ("mass_scale", (1.03, 1.06, 1.12, 1.18, 1.24, 1.3)),
                       ("contact_timeconst", (0.022, 0.024, 0.028, 0.032, 0.036, 0.04))),
                      "contact and inertia (friction x 0.93 to 0.3, mass +3 to +30 %, contact time constant 22 to 40 ms)"),
}
"""The default ladders (docs/risk.md gives the reasoning). Severity 1 is a typical gap on every
axis; every rung is as harsh as the one below it on every axis, so the metric is expected to
fall along the ladder. Timing's two bottom rungs are sub-step latencies (a quarter and half of a
control period, the harness's fractional delay), which resolve policies that one whole step of
latency already breaks. Contact's softness rises from MuJoCo's default 20 ms time constant to 40 ms,
where the Playground Go1 policy falls (issue 33); an engine whose contacts have no solref runs the
contact ladder without it (crosssim.runner.workers)."""

PASS_FRACTION = 0.9
"""A rung passes when the metric keeps at least this share of nominal (docs/risk.md, alternatives)."""


def sweep_conditions(ladders: dict[str, Ladder] = LADDERS) -> tuple[tuple[str, dict], ...]:
    """Every rung condition a sweep may visit, as (name, Variant fields), family by family."""
    return tuple((lad.condition(k), lad.fields(k)) for lad in ladders.values() for k in range(1, lad.rungs + 1))


def retained(nominal: np.ndarray, rung: np.ndarray) -> float:
    """Share of the nominal metric kept at a rung (paired episodes: the same seeds in both):
    1 - (mean nominal - mean rung) / |mean nominal|; NaN without data."""
    nominal, rung = np.asarray(nominal, float), np.asarray(rung, float)
    ok = np.isfinite(nominal) & np.isfinite(rung)
    if not ok.any():
        return float("nan")
    base = float(nominal[ok].mean())
    return 1.0 - (base - float(rung[ok].mean())) / max(abs(base), 1e-9)


def visits_left(lo: int, hi: int) -> int:
    """The most rungs the bisection still visits with the margin bracketed by rungs ``lo`` (passed)
    and ``hi`` (failed, or K + 1): ceil(log2(hi - lo)), 0 once they are neighbours."""
    return int(np.ceil(np.log2(hi - lo))) if hi - lo > 1 else 0


def max_visits(rungs: int) -> int:
    """The most rungs a bisection of a ``rungs``-rung ladder visits: ceil(log2(K + 1))."""
    return visits_left(0, rungs + 1)


def bisect_rungs(rungs: int, passes: Callable[[int], bool | None],
                 on_visit: Callable[[int], None] | None = None) -> list[tuple[int, bool]]:
    """Bisection for the last passing rung, assuming the metric falls along the ladder.

    ``passes(k)`` says whether rung k keeps the metric within the pass fraction (None: no data,
    the search stops). Returns the visited (rung, passed) pairs in visiting order: every visited
    rung below the final bracket passed, every one above failed, so the margin lies between the
    highest pass and the lowest fail. Costs ``max_visits(K)`` rungs at most, one fewer on some
    paths; ``on_visit(n)`` hears, after each visited rung, the most rungs the search now visits in
    all (the visited ones included), so a progress bar can shrink its total as the search goes.
    """
    lo, hi = 0, rungs + 1  # rung 0 passes by definition; K + 1 stands for "beyond the ladder"
    visited = []
    while hi - lo > 1:
        k = (lo + hi) // 2
        ok = passes(k)
        if ok is None:
            break
        visited.append((k, bool(ok)))
        lo, hi = (k, hi) if ok else (lo, k)
        if on_visit is not None:
            on_visit(len(visited) + visits_left(lo, hi))
    return visited


def margin_from_curve(points, fraction: float = PASS_FRACTION, top: int | None = None) -> tuple[float, bool]:
    """Tolerance margin [rungs] from visited (severity, retained) points: the first crossing of
    ``fraction`` walking up from nominal, interpolated linearly between the last point above it
    and the first below. Returns (margin, censored): censored when no visited point fails, the
    margin then being the highest severity visited (a lower bound; the ladder's ``top``
    reached means the policy tolerates the whole ladder)."""
    prev_s, prev_r = 0.0, 1.0
    for s, r in sorted(points):
        if not np.isfinite(r):
            continue
        if r < fraction:
            span = prev_r - r
            return float(prev_s + (s - prev_s) * ((prev_r - fraction) / span if span > 0 else 0.0)), False
        prev_s, prev_r = float(s), float(r)
    return prev_s, True


def curve_at(points, severity: float) -> float:
    """The retained share at ``severity``, linear between visited points (and (0, 1)); flat
    beyond the last visited point."""
    pts = sorted((float(s), float(r)) for s, r in points if np.isfinite(r))
    xs = [0.0, *(s for s, _ in pts)]
    ys = [1.0, *(r for _, r in pts)]
    return float(np.interp(severity, xs, ys))


def rung_passes(nominal, rung, fraction: float = PASS_FRACTION) -> bool:
    """Whether a rung keeps at least ``fraction`` of the nominal metric (paired episodes)."""
    r = retained(nominal, rung)
    return bool(np.isfinite(r) and r >= fraction)


def search_family(rungs, rows_of, metric, fraction: float = PASS_FRACTION, judge=None,
                  on_visit=None) -> list[tuple[int, bool]]:
    """The bisection of one family in one engine, wherever its rows come from.

    ``rungs``: (condition, Variant fields) of rungs 1..K; ``rows_of(condition, fields)``:
    the rows of the sweep episodes under a condition (None for a missing one; the engine worker
    runs what it lacks, the parent only reads); ``metric(rows)``: per-row metric values;
    ``judge(nominal rows, rung rows)``: whether a rung passes, when the family has its own
    criterion (the rehearsal's failure-aware one), else the metric keeps ``fraction`` of nominal.
    Returns the visited (rung, passed) pairs (``bisect_rungs``, which calls ``on_visit``)."""
    base = rows_of("nominal", {})
    if not base or any(r is None for r in base):
        return []
    nominal = metric(base)

    def passes(k: int):
        condition, fields = rungs[k - 1]
        rows = rows_of(condition, fields)
        if not rows or any(r is None for r in rows):
            return None
        return judge(base, rows) if judge is not None else rung_passes(nominal, metric(rows), fraction)

    return bisect_rungs(len(rungs), passes, on_visit)
