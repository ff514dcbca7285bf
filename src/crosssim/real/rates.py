"""A physical cross-check of angular rates: the gyro, and every angular-rate input of the policy,
against the rate of change of the logged orientation.

The conformance check (crosssim.real.conformance) rebuilds the policy's inputs *from the logged
state*: a gyro that reads degrees per second where everything else says rad/s is in the log
column and in the policy's input alike, so the two agree and the bug passes. The orientation is
an independent witness: the mean body rate that turns ``quat[k]`` into ``quat[k+w]`` (on the rows
as logged, in the base frame, as an IMU reads it; ``w`` rows make about WINDOW_S) is what a
correct gyro reads, averaged over the same rows. Per log:

- the ``gyro.*`` columns against that rate (the log's units), and
- each angular-rate input of the card (``base_ang_vel``, an MJCF ``gyro`` / ``frameangvel``
  sensor) as logged in ``obs.*``, turned back into the body rate it stands for under the card
  (what the policy was fed, in the card's terms), against the same rate.

The ratio comes from the least-squares slope of physical on measured rate (x, y, z together, and
per axis; the orientation's noise does not bias it); 57.3 names a degrees-per-second reading
(x 180/pi), 0.01745 a double conversion. A log whose base barely rotates is "not checked", one
whose ratio the noise leaves undecided "inconclusive", each with why.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from crosssim.real.logs import RealLog

RATE_TOLERANCE = 0.2
"""A measured rate matches when its ratio to the orientation's rate is within this of 1 (the
central difference averages over two control periods: a 5 Hz oscillation at 50 Hz reads 6 %
low; orientation noise adds a few percent on a short log)."""
MIN_RATE = 0.05
"""Below this RMS physical rate [rad/s] the base is still: nothing to compare."""
FACTOR_TOLERANCE = 0.1
RATE_FACTORS = {180 / math.pi: "degrees per second where rad/s is meant (x 180/pi)",
                math.pi / 180: "degrees-to-radians applied to a value already in rad/s (x pi/180)",
                -1.0: "sign flipped", 2 * math.pi: "revolutions per second scaled as rad/s (x 2 pi)",
                1 / (2 * math.pi): "rad/s where revolutions per second are meant (x 1/(2 pi))"}
RATE_TERMS = ("base_ang_vel",)
"""Card terms that are the base's angular velocity (MJCF sensors of kind gyro / frameangvel too)."""


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a.T
    w2, x2, y2, z2 = b.T
    return np.stack([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2], axis=-1)


def _rotvec(q: np.ndarray) -> np.ndarray:
    """Rotation vectors of unit quaternions (w first), shortest way round."""
    q = np.where(q[:, :1] < 0, -q, q)
    s = np.linalg.norm(q[:, 1:], axis=1)
    angle = 2 * np.arctan2(s, q[:, 0])
    k = np.where(s > 1e-12, angle / np.maximum(s, 1e-12), 2.0)
    return q[:, 1:] * k[:, None]


WINDOW_S = 0.08
"""Rates are compared as means over windows of about this long [s] (4 rows at 50 Hz): the
orientation's noise shrinks with the window while a controller chattering at the control rate
is still followed (measured on the Go1 fixture: a correct gyro reads 0.92 of the orientation's
rate over one row, 0.96 over four; 0.95 – 0.97 noise-free)."""


def window_rows(time: np.ndarray) -> int:
    """Rows per comparison window (at least 1)."""
    period = float(np.median(np.diff(time)))
    return max(1, int(round(WINDOW_S / period)))


def window_rates(quat: np.ndarray, time: np.ndarray, w: int) -> np.ndarray:
    """(T-w, 3) mean base-frame angular velocity [rad/s] from row k to row k+w, from orientations
    (T, 4, w first) at ``time``: the rotation vector of q[k]^-1 q[k+w] over the time between."""
    quat, time = np.asarray(quat, float), np.asarray(time, float)
    conj = quat[:-w] * np.array([1.0, -1.0, -1.0, -1.0])
    return _rotvec(_qmul(conj, quat[w:])) / (time[w:] - time[:-w])[:, None]


def window_means(values: np.ndarray, time: np.ndarray, w: int) -> np.ndarray:
    """(T-w, n) the time average from row k to row k+w of a rate sampled at the rows (trapezoids)."""
    values, time = np.asarray(values, float), np.asarray(time, float)
    steps = 0.5 * (values[:-1] + values[1:]) * np.diff(time)[:, None]
    c = np.vstack([np.zeros((1, values.shape[1])), np.cumsum(steps, axis=0)])
    return (c[w:] - c[:-w]) / (time[w:] - time[:-w])[:, None]


def _named(ratio: float) -> tuple[float, str] | None:
    """(factor, what it means) of a known unit mistake within FACTOR_TOLERANCE of ``ratio``."""
    for factor, text in RATE_FACTORS.items():
        if abs(ratio - factor) <= FACTOR_TOLERANCE * abs(factor):
            return factor, text
    return None


def _slope(m: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of ``p`` on ``m`` (through 0) and its standard error."""
    mm = float(m @ m)
    if mm <= 0:
        return float("nan"), float("inf")
    b = float(m @ p) / mm
    res = p - b * m
    return b, float(np.sqrt(res @ res / max(res.size - 1, 1) / mm))


def compare_rates(what: str, measured: np.ndarray, physical: np.ndarray, overlap: int = 1) -> dict:
    """``measured`` (T, n) against ``physical`` (T, n): the ratio measured / physical (from the
    slope of physical on measured, which the orientation's noise does not bias; all values
    together and per value). ``ok`` within RATE_TOLERANCE of 1; a finding (``scale``) where the
    ratio lies outside 1 ± RATE_TOLERANCE by more than 3 standard errors; else inconclusive."""
    out = {"what": what, "rows": int(len(measured))}
    m, p = np.asarray(measured, float).ravel(), np.asarray(physical, float).ravel()
    out["physical_rms"] = float(np.sqrt(np.mean(p * p))) if p.size else 0.0
    if out["physical_rms"] < MIN_RATE:
        return {**out, "status": "not checked", "why": f"the base barely rotates ({out['physical_rms']:.3g} rad/s RMS)"}
    b, se = _slope(m, p)
    se *= np.sqrt(overlap)  # windows of ``overlap`` rows overlap: about 1/overlap as many independent ones
    if not np.isfinite(b) or b == 0:
        return {**out, "status": "inconclusive", "why": "the measured rate is zero throughout"}
    ratio = 1.0 / b
    out.update(ratio=ratio, ratio_range=[float(_inv(b + 3 * se)), float(_inv(b - 3 * se))])
    cols = (np.asarray(measured, float).reshape(len(measured), -1), np.asarray(physical, float).reshape(len(measured), -1))
    axes = [(bk, sk * np.sqrt(overlap)) for bk, sk in (_slope(cols[0][:, k], cols[1][:, k])
                                                      for k in range(cols[0].shape[1]))]
    out["ratio_per_axis"] = [None if not np.isfinite(bk) or bk == 0 else 1.0 / bk for bk, _ in axes]
    low, high = 1.0 / (1.0 + RATE_TOLERANCE), 1.0 / (1.0 - RATE_TOLERANCE)  # b's band for a ratio within 1 +- tol
    if abs(ratio - 1.0) <= RATE_TOLERANCE:
        flipped = [k for k, (bk, sk) in enumerate(axes) if np.isfinite(bk) and bk + 3 * sk < 0]
        return {**out, "status": "axis", "axes": flipped} if flipped else {**out, "status": "ok"}
    if b + 3 * se < low or b - 3 * se > high:
        out["status"] = "scale"
        named = _named(ratio)
        if named:
            out["factor"], out["hint"] = named
        return out
    return {**out, "status": "inconclusive",
            "why": f"ratio {ratio:.3g}, between {out['ratio_range'][0]:.3g} and {out['ratio_range'][1]:.3g} at 3 "
                   "standard errors: a longer log or a less noisy orientation would tell"}


def _inv(b: float) -> float:
    return 1.0 / b if b > 0 else float("inf")


def rate_check(harness, log: RealLog) -> list[dict]:
    """The gyro column and the card's angular-rate inputs of one log against its orientation's
    rate; [] when the log has no orientation or nothing to compare (a fixed base)."""
    rows = log.as_logged
    if rows.quat is None or not harness.canonical.free_base or len(rows) < 3:
        return []
    w = window_rows(rows.time)
    if len(rows) < w + 3:
        return []
    physical = window_rates(rows.quat, rows.time, w)
    out = []
    if rows.gyro is not None:
        t = compare_rates("gyro column", window_means(rows.gyro, rows.time, w), physical, w)
        out.append(_fix(harness, t, None))
    if rows.obs is not None and harness.observer().builder is not None:
        from crosssim.real.conformance import rebuild

        names = [t.name for t in harness.observer().builder.terms]
        rate_terms = [k for k, name in enumerate(names) if _is_rate(harness, name)]
        if rate_terms:
            implied = _implied_rates(harness, rows, rate_terms)
            for k in rate_terms:
                t = compare_rates(f"input {names[k]}", window_means(implied[k], rows.time, w), physical, w)
                out.append(_fix(harness, {**t, "term": names[k], "index": k}, k))
    return out


def _implied_rates(harness, rows: RealLog, terms: list[int]) -> dict[int, np.ndarray]:
    """Per angular-rate term, the body rate (T, 3) its logged input stands for under the card: the
    term is rebuilt with the gyro at zero and at each unit axis (it is affine in the rate, per
    row), and the logged value solved for the rate (least squares)."""
    from crosssim.real.conformance import rebuild

    T = len(rows)
    basis = [np.zeros(3)] + list(np.eye(3))
    builds = [rebuild(harness, replace(rows, gyro=np.tile(e, (T, 1)), rows=None)) for e in basis]
    out = {}
    for k in terms:
        logged = builds[0][2][k]
        c = builds[0][1][k]
        L = np.stack([b[1][k] - c for b in builds[1:]], axis=-1)  # (T, n, 3)
        out[k] = np.stack([np.linalg.lstsq(L[r], logged[r] - c[r], rcond=None)[0] for r in range(T)])
    return out


def _is_rate(harness, name: str) -> bool:
    if name in RATE_TERMS:
        return True
    if name.startswith("sensor:"):
        kind = harness.sensors.types.get(name[len("sensor:"):])
        return kind is not None and kind[1] in ("gyro", "frameangvel")
    return False


def _fix(harness, t: dict, k: int | None) -> dict:
    """``t`` with the change that removes its finding."""
    if t["status"] not in ("scale", "axis"):
        return t
    if t["status"] == "axis":
        axes = ", ".join("xyz"[a] for a in t["axes"])
        return {**t, "fix": f"axis {axes} has its sign flipped against the orientation: the IMU's mounting or frame "
                            "differs from the base frame; rotate the reading into the base frame"}
    r = t.get("factor", t["ratio"])  # a named unit mistake: its exact factor
    if k is None:
        return {**t, "fix": f"the log's gyro.* columns are {t['ratio']:.4g}x the base's rate: write them in rad/s (x {1 / r:.4g}"
                            " when writing or converting the log), then check the policy's own input (below)"}
    card = harness.card
    old = np.asarray(card.observation.terms[k].scale, dtype=float) if card is not None else np.asarray(1.0)
    new = old * r
    fmt = (lambda v: f"{float(v):.6g}") if old.ndim == 0 else (lambda v: "[" + ", ".join(f"{x:.6g}" for x in v) + "]")
    return {**t, "fix": f"the policy was fed {t['ratio']:.4g}x the body rate the card describes: fix the deployment (x {1 / r:.4g} "
                        f"before the policy); to simulate the robot as deployed: card observation.terms[{k}] "
                        f"({t['term']}) scale: {fmt(old)} -> {fmt(new)}"}


def rate_checks(harness, logs: list[RealLog]) -> dict | None:
    """Per log, the rate checks (``rate_check``); ``ok`` unless one is a finding; None when no log
    has an orientation to check against."""
    per_log = {log.name: rate_check(harness, log) for log in logs}
    per_log = {k: v for k, v in per_log.items() if v}
    if not per_log:
        return None
    return {"per_log": per_log, "ok": all(t["status"] not in ("scale", "axis") for v in per_log.values() for t in v)}


def format_rates(result: dict) -> str:
    """A summary line, then one line per log and finding."""
    bad = [(name, t) for name, v in result["per_log"].items() for t in v if t["status"] in ("scale", "axis")]
    checked = [t for v in result["per_log"].values() for t in v if "ratio" in t]
    ratios = ", ".join(f"{t['what']} {t['ratio']:.3g}" for t in checked[:4])
    lines = [f"angular rates vs the orientation's rate of change ({len(result['per_log'])} logs): "
             + ("match" if not bad else "differ") + (f" (ratio {ratios})" if ratios else "")]
    for name, v in result["per_log"].items():
        for t in v:
            if t["status"] in ("scale", "axis"):
                what = (f"ratio {t['ratio']:.4g}" + (f" ({t['hint']})" if t.get("hint") else "")
                        if t["status"] == "scale" else f"axes {t['axes']} flipped")
                lines.append(f"  ! {name}: {t['what']}: {what}; fix: {t['fix']}")
            elif t["status"] in ("not checked", "inconclusive"):
                lines.append(f"  - {name}: {t['what']}: {t['status']} ({t['why']})")
    return "\n".join(lines)
