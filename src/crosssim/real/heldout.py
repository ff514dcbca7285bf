"""Calibration judged on logs it did not see: k-fold over whole logs (docs/real.md, "Held-out folds").

Each fold's logs are held out while the others are fitted (``calibrate``); the fold's fit is then
scored on the held-out logs with each set of its parameters written (the rest at their start
value). The set written to the profile is the one with the lowest mean held-out error over the
folds, found by backward elimination from "all fitted parameters" (a parameter stays only if it
lowers the held-out error); the profile takes those parameters from the fit on every log. This
replaces the per-parameter sigma rule (issue 37: the rule withheld damping, the parameter that
bought the most, and the written twin was worse than the default on held-out logs). Reported
per fold and in the mean: default vs written, held-out segment error, and whole logs replayed
open loop and closed loop: joint RMS, the share of held-out logs whose replay survives, and the
first simulated fall. The held-out error the set is chosen on is the objective's where it covers
every row, else the whole logs' (``criterion_for``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

FOLDS = 5
"""Default fold count (at most one fold per log)."""
MIN_LOGS = 3
"""Below this many logs (whose actions were applied) nothing is held out."""
KEEP_GAIN = 1e-3
"""A parameter is written only if it lowers the mean held-out error by more than this share (a
parameter the logs do not depend on changes it by nothing: kept at its start value)."""


@dataclass(frozen=True)
class Replay:
    """Whole held-out logs replayed in one mode (open loop: the logged actions; closed loop: the
    policy), each to its end (a simulated fall is recorded, not a stop)."""

    q_rms: float
    """Joint-position RMS [rad] over the whole log, mean over logs."""
    survived: float
    """Share of the held-out logs whose replay did not fall."""
    first_fall_s: float | None
    """Mean time of the first simulated fall over the logs that fell [s]; None: none fell."""

    @classmethod
    def of(cls, found: list[dict]) -> "Replay":
        falls = [e["fall_time_s"] for e in found if e["fall_time_s"] is not None]
        return cls(float(np.mean([e["q_rms"] for e in found])), 1.0 - len(falls) / len(found),
                   float(np.mean(falls)) if falls else None)

    def as_dict(self) -> dict:
        return {"q_rms": round(self.q_rms, 6), "survived": round(self.survived, 4),
                "first_fall_s": None if self.first_fall_s is None else round(self.first_fall_s, 3)}


@dataclass(frozen=True)
class Score:
    """Error of one parameter set on held-out logs."""

    rms: float
    """Segment-replay RMS [rad] (the calibration objective)."""
    open_loop: Replay
    closed_loop: Replay | None
    """None: the policy was not loaded (calibrate without --trust-policy-code for a policy that
    needs it)."""

    def as_dict(self) -> dict:
        return {"rms": round(self.rms, 6), "open_loop": self.open_loop.as_dict(),
                "closed_loop": None if self.closed_loop is None else self.closed_loop.as_dict()}


@dataclass(eq=False)
class Fold:
    held_out: list = field(repr=False)
    """The held-out logs (RealLog)."""
    fit: object
    """The fit on the other logs (crosssim.real.calibrate.Fit)."""
    errors: dict = field(default_factory=dict)
    """Held-out error (the criterion's) by written set (frozenset of parameter names)."""
    default: Score | None = None
    written: Score | None = None

    @property
    def names(self) -> list[str]:
        return [log.name for log in self.held_out]


def split(logs: list, k: int) -> list[tuple[list, list]]:
    """``k`` folds of whole logs, round robin in name order: (fitted, held out) per fold."""
    ordered = sorted(logs, key=lambda log: log.name)
    return [([log for j, log in enumerate(ordered) if j % k != i], ordered[i::k]) for i in range(k)]


def settings_with(fit, keep) -> dict:
    """``fit``'s profile settings with only the parameters in ``keep`` written."""
    return replace(fit, written=set(keep)).settings()


def _segments(harness, logs, base, settings, segment_s) -> float:
    from crosssim.real.calibrate import _Replay

    return _Replay.of(harness, logs, base, segment_s).obj.rms(settings)


def _whole(harness, logs, base, settings, policies: list) -> list[Replay]:
    """Whole logs replayed once per entry of ``policies`` (None: open loop, the logged actions)."""
    from crosssim.profiles import with_settings
    from crosssim.real.compare import errors, simulate
    from crosssim.runner.simulator import open_engine

    sim = open_engine(with_settings(base, settings), harness.scene, base=harness.model_variant)
    try:
        return [Replay.of([errors(log, simulate(sim, harness, log, policy=p, stop_on_termination=False))
                           for log in logs]) for p in policies]
    finally:
        sim.close()


def _score(harness, logs, base, settings, segment_s, policy) -> Score:
    """Segment RMS, and whole logs replayed open loop and (with ``policy``) closed loop."""
    replays = _whole(harness, logs, base, settings, [None] if policy is None else [None, policy])
    return Score(_segments(harness, logs, base, settings, segment_s), replays[0],
                 replays[1] if policy is not None else None)


CRITERIA = {"segments": "held-out segment RMS (the calibration objective)",
            "closed_loop": "held-out whole-log closed-loop joint RMS",
            "open_loop": "held-out whole-log open-loop joint RMS"}


def criterion_for(harness, logs, segment_s, policy) -> str:
    """What the written set is chosen on: the objective itself where it covers every row (a fixed
    base, or the base pose and velocity logged); else (the fit replays only the start of each log)
    whole held-out logs, closed loop with the policy, open loop without. Measured on the Go1
    fixture: the first 0.2 s of each log scored a wrong fit (0.033 rad) better than the hidden
    parameters themselves (0.042), while whole logs ranked the hidden set first."""
    full = not harness.canonical.free_base or all(log.pos is not None and log.vel is not None for log in logs)
    if full:
        return "segments"
    return "closed_loop" if policy is not None else "open_loop"


def _error(harness, logs, base, settings, segment_s, policy, criterion: str) -> float:
    if criterion == "segments":
        return _segments(harness, logs, base, settings, segment_s)
    return _whole(harness, logs, base, settings, [policy if criterion == "closed_loop" else None])[0].q_rms


def _backward(folds: list[Fold], names: list[str], evaluate) -> tuple[frozenset, list[tuple[str, float]]]:
    """The written set with the lowest mean held-out error, by backward elimination from all;
    the steps taken (name dropped, mean error after)."""
    mean = lambda keep: float(np.mean([evaluate(f, keep) for f in folds]))  # noqa: E731
    keep = frozenset(names)
    current = mean(keep)
    steps = [("", current)]
    while keep:
        trial = {p: mean(keep - {p}) for p in sorted(keep)}
        p = min(trial, key=trial.get)
        if trial[p] > current * (1 + KEEP_GAIN):
            break
        keep, current = keep - {p}, trial[p]
        steps.append((p, current))
    return keep, steps


@dataclass
class HeldOut:
    k: int
    folds: list[Fold]
    chosen: frozenset
    steps: list[tuple[str, float]]
    """Backward elimination: (parameter dropped, mean held-out error after); first: all written."""
    seconds: float
    criterion: str = "segments"
    """What the written set was chosen on (CRITERIA)."""

    def record(self) -> dict:
        """What the profile file records under calibration.heldout."""
        names = [p.name for p in self.folds[0].fit.params]
        return {"folds": self.k, "written": sorted(self.chosen), "chosen_on": self.criterion,
                "seconds": round(self.seconds, 1),
                "mean": {"default": _mean_score([f.default for f in self.folds]),
                         "written": _mean_score([f.written for f in self.folds])},
                "elimination": [{"dropped": p or None, "error": round(e, 6)} for p, e in self.steps],
                "per_fold": [{"held_out": f.names, "fitted": {n: round(float(f.fit.fitted[n]), 6) for n in names},
                              "default": f.default.as_dict(), "written": f.written.as_dict(),
                              "flagged": _flags(f.fit)} for f in self.folds]}


def _flags(fit) -> dict[str, str]:
    from crosssim.real.calibrate import implausible

    return implausible(fit)


def _mean_replay(replays: list[Replay]) -> dict | None:
    if any(r is None for r in replays):
        return None
    falls = [r.first_fall_s for r in replays if r.first_fall_s is not None]
    return {"q_rms": round(float(np.mean([r.q_rms for r in replays])), 6),
            "survived": round(float(np.mean([r.survived for r in replays])), 4),
            "first_fall_s": round(float(np.mean(falls)), 3) if falls else None}


def _mean_score(scores: list[Score]) -> dict:
    """The folds' mean (each fold weighs alike; a fold's first fall only where one fell)."""
    return {"rms": round(float(np.mean([s.rms for s in scores])), 6),
            "open_loop": _mean_replay([s.open_loop for s in scores]),
            "closed_loop": _mean_replay([s.closed_loop for s in scores])}


def cross_validate(harness, logs, base, params, *, folds: int = FOLDS, fit_kwargs: dict | None = None,
                   policy=None, progress=None) -> HeldOut | str:
    """Fit on k-1 folds, score on the held-out one, for each fold; the written set chosen on the
    held-out errors; default vs written scored on each fold (closed loop too with ``policy``).
    Returns a sentence instead where there are too few logs to hold any out."""
    from crosssim.real.calibrate import calibrate

    t0 = time.monotonic()
    applied = [log for log in logs if log.applied]
    if folds < 2 or len(applied) < MIN_LOGS:
        why = f"--folds {folds}" if folds < 2 else f"{len(applied)} logs; {MIN_LOGS} or more are needed"
        return (f"nothing held out ({why}): the fit is judged only on the logs it was fitted to, and the sigma rule "
                "decides what is written")
    k = min(folds, len(applied))
    kwargs = dict(fit_kwargs or {})
    segment_s = kwargs.get("segment_s")
    out = []
    for i, (train, held) in enumerate(split(applied, k)):
        if progress:
            progress(f"fold {i + 1}/{k}: fitting {len(train)} logs, holding out {', '.join(log.name for log in held)}")
        out.append(Fold(held, calibrate(harness, train, base, params, **kwargs)))

    criterion = criterion_for(harness, applied, segment_s, policy)

    def evaluate(fold: Fold, keep) -> float:
        if keep not in fold.errors:
            fold.errors[keep] = _error(harness, fold.held_out, base, settings_with(fold.fit, keep), segment_s, policy,
                                       criterion)
        return fold.errors[keep]

    chosen, steps = _backward(out, [p.name for p in params], evaluate)
    for fold in out:
        fold.default = _score(harness, fold.held_out, base, settings_with(fold.fit, ()), segment_s, policy)
        fold.written = _score(harness, fold.held_out, base, settings_with(fold.fit, chosen), segment_s, policy)
    return HeldOut(k, out, chosen, steps, time.monotonic() - t0, criterion)


def apply(fit, heldout: HeldOut):
    """``fit`` (on every log) with the written set chosen on the held-out folds, and a finding saying so."""
    from crosssim.real.calibrate import KEEPS_START

    fit.written = set(heldout.chosen)
    fit.heldout = heldout.record()
    for phrase in KEEPS_START:  # the sigma rule no longer decides what is written
        fit.findings = [f.replace(phrase, "what is written is decided on held-out folds") for f in fit.findings]
    left = [p.name for p in fit.params if p.name not in heldout.chosen]
    fit.findings += _disagree(heldout)
    fit.findings.append(f"written: {', '.join(sorted(heldout.chosen)) or 'nothing'} (the set with the lowest mean "
                        f"held-out error over {heldout.k} folds)" + (f"; kept at the start value: {', '.join(left)}"
                                                                      if left else ""))
    return fit


DISAGREE = 0.25
"""Fold fits of a written parameter spread over more than this share of its search range: other
logs give other values (issue 37: damping 6.2 on four logs, 0.56 on four others)."""


def _disagree(heldout: HeldOut) -> list[str]:
    """A finding per written parameter whose fold fits disagree (its value is no measurement)."""
    out = []
    for p in heldout.folds[0].fit.params:
        values = [float(f.fit.fitted[p.name]) for f in heldout.folds]
        if p.name in heldout.chosen and max(values) - min(values) > DISAGREE * (p.high - p.low):
            out.append(f"{p.name}: the folds' fits range {min(values):.3g} - {max(values):.3g} (over "
                       f"{100 * DISAGREE:.0f} % of its range {p.low:g} - {p.high:g}): other logs give other values; it "
                       "lowers the held-out error, but its value is compensation, not a measurement")
    return out


def format_heldout(heldout: HeldOut) -> str:
    """Default vs written on the held-out folds, per fold and in the mean, and the fold fits."""
    rec = heldout.record()
    names = [p.name for p in heldout.folds[0].fit.params]

    def mode(r):
        if r is None:
            return f"{'not run':>30}"
        fall = "-" if r["first_fall_s"] is None else f"{r['first_fall_s']:.2f} s"
        return f"{r['q_rms']:>10.4f}{100 * r['survived']:>7.0f} %{fall:>11}"

    def row(label, s):
        return f"    {label:<22}{s['rms']:>9.4f}  {mode(s['open_loop'])}  {mode(s['closed_loop'])}"

    head = f"{'q RMS':>10}{'survived':>9}{'first fall':>11}"
    lines = [f"  held-out folds: {heldout.k} (each log held out once; fitted on the others; {heldout.seconds:.0f} s); "
             "whole logs replayed open loop (logged actions) and closed loop (the policy); survived: share of logs",
             f"    {'':<22}{'segments':>9}  {'open loop':^30}  {'closed loop':^30}",
             f"    {'':<22}{'q RMS':>9}  {head}  {head}",
             row("mean, default", rec["mean"]["default"]), row("mean, written", rec["mean"]["written"])]
    for i, f in enumerate(rec["per_fold"]):
        held = ", ".join(f["held_out"])
        lines += [row(f"fold {i + 1} default", f["default"]), row(f"fold {i + 1} written", f["written"]),
                  f"      held out {held}; fitted " + ", ".join(f"{n} {f['fitted'][n]:.4g}" for n in names)]
        lines += [f"      ! {n}: {why}" for n, why in f["flagged"].items()]
    spread = {n: [f["fitted"][n] for f in rec["per_fold"]] for n in names}
    lines.append("    fold fits, min - max: " + ", ".join(f"{n} {min(v):.4g} - {max(v):.4g}"
                                                       for n, v in spread.items()))
    lines.append(f"    written set chosen on the {CRITERIA[heldout.criterion]}, by backward elimination: " + " -> ".join(
        f"{'all' if not p else 'without ' + p} {e:.4f}" for p, e in heldout.steps))
    return "\n".join(lines)
