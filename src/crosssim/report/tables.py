"""Display-only tables of a run (the template formats nothing but these): per-engine metrics led by
the task's primary metric, per-episode outcomes, the verdict's thresholds, the REAL section and the
baseline-vs-PR view of a gate run. Every number is formatted here, for people, with its unit."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from crosssim.stats import bootstrap_ci, relative_drop
from crosssim.sweep import settings_text
from crosssim.text import number

METRIC_TEXT = {
    "tracking": "tracking: share of the commanded velocity delivered, 0 for a fall (higher is better)",
    "return": "return: the task's reward summed over the episode (higher is better)",
    "survival": "survival: share of episodes that run to the step limit (higher is better)",
}


def condition_order(name: str) -> tuple:
    """Nominal first, then each gap family's rungs (``family@k``) by family and severity."""
    family, _, rung = name.partition("@")
    return (name != "nominal", family, int(rung) if rung.isdigit() else 0)


def pct(x) -> str:
    return "—" if x is None or not np.isfinite(x) else f"{100 * x:.0f} %"


def value_with_ci(mean: float, lo: float, hi: float, kind: str, unit: str = "") -> str:
    """``mean [lo, hi] unit``; ``kind`` "pct" shows shares as percentages."""
    f = pct if kind == "pct" else number
    if not np.isfinite(mean):
        return "—"
    ci = f" [{f(lo)} – {f(hi)}]" if np.isfinite(lo) and np.isfinite(hi) else ""
    return f"{f(mean)}{ci}" + (f" {unit}" if unit and kind != "pct" else "")


@dataclass(frozen=True)
class Measure:
    """One column of the engine table: a per-episode value and how to show it."""

    key: str
    label: str
    unit: str
    kind: str  # "num" or "pct"
    values: object  # rows (DataFrame) -> per-row array, NaN where not measured
    binary: bool = False
    """Per-episode 0/1 (success): its interval is Wilson's, not the bootstrap's."""


def measures(task, metric: str, rows) -> list[Measure]:
    """The engine table's columns, primary metric first; a column nobody measured is left out."""
    legged = "metric_lin_vel_error" in rows.columns
    out = [Measure(metric, f"{metric} (primary)", "", "pct" if metric in ("tracking", "survival", "success") else "num",
                   lambda r: task.metric_values(r, metric) if task is not None else r["return"].to_numpy(float),
                   binary=metric == "success")]
    if "metric_time_to_success" in rows.columns:  # manipulation: seconds to the first success, of those that got there
        out.append(Measure("time_to_success", "time to success", "s", "num",
                           lambda r: r["metric_time_to_success"].to_numpy(float)))
    if legged:
        out.append(Measure("lin_vel_error", "tracking error", "m/s", "num",
                           lambda r: r["metric_lin_vel_error"].to_numpy(float)))
    if np.isfinite(rows["x_velocity"].to_numpy(float)).any():
        out.append(Measure("x_velocity", "forward speed", "m/s", "num", lambda r: r["x_velocity"].to_numpy(float)))
    out.append(Measure("terminated", "falls" if legged else "ended early", "", "pct",
                       lambda r: r["terminated"].to_numpy(bool).astype(float)))
    if metric != "return":
        out.append(Measure("return", "return", "", "num", lambda r: r["return"].to_numpy(float)))
    return out


@dataclass(frozen=True)
class EngineLine:
    engine: str
    reference: bool
    cells: list[str]
    drop: str
    """Share of the reference engine's primary metric lost here."""
    failed: int
    audit_mismatches: int
    error: str | None


@dataclass(frozen=True)
class EngineTable:
    metric: str
    metric_text: str
    columns: list[str]
    lines: list[EngineLine]
    means: dict[str, dict[str, float]] = field(default_factory=dict)
    """engine -> measure key -> mean (for the gate view)."""
    keys: list[str] = field(default_factory=list)
    """Measure keys, in column order."""


def _ok(rows):
    return rows[rows.failure.isna()]


def engine_table(run, task, metric: str, *, condition: str = "nominal") -> EngineTable:
    """Every engine's ``condition`` episodes: mean and bootstrap 95% CI of each measure."""
    s, rows = run.summary, run.rows
    nominal = rows[rows.condition == condition]
    cols = measures(task, metric, rows)
    cells, means = {}, {}
    for e in s.engines:
        ok = _ok(nominal[nominal.engine == e])
        cells[e], means[e] = [], {}
        for m in cols:
            v = np.asarray(m.values(ok), dtype=float) if len(ok) else np.array([])
            mean = float(np.nanmean(v)) if np.isfinite(v).any() else float("nan")
            if m.binary:
                from crosssim.stats import share_interval

                lo, hi = share_interval(int(np.nansum(v)), int(np.isfinite(v).sum()))
            else:
                lo, hi = bootstrap_ci(v, seed=s.seed)
            means[e][m.key] = mean
            cells[e].append(value_with_ci(mean, lo, hi, m.kind, m.unit))
    ref_mean = means.get(s.reference_engine, {}).get(metric, float("nan"))
    lines = [EngineLine(engine=e, reference=e == s.reference_engine, cells=cells[e],
                        drop="reference" if e == s.reference_engine else pct(relative_drop(ref_mean, means[e][metric])),
                        failed=es.failed, audit_mismatches=es.audit_mismatches, error=es.error)
             for e, es in s.engines.items()]
    header = [m.label + (f" [{m.unit}]" if m.unit and m.kind != "pct" else "") for m in cols]
    return EngineTable(metric=metric, metric_text=METRIC_TEXT.get(metric, metric), columns=header, lines=lines,
                       means=means, keys=[m.key for m in cols])


@dataclass(frozen=True)
class EpisodeLine:
    engine: str
    episode: int
    seed: int
    primary: str
    ret: str
    speed: str
    duration: str
    outcome: str
    bad: bool


def outcome(row, legged: bool, period: float | None) -> tuple[str, bool]:
    """Why the episode ended, in words; (text, whether it is a failure or a termination)."""
    if isinstance(row.failure, str) and row.failure:
        return f"no result: {row.failure}", True
    at = f" at t = {row.length * period:.2f} s" if period else f" after {row.length} steps"
    reason = getattr(row, "termination_reason", None)  # the task's own words, where the run stored them
    known = isinstance(reason, str) and reason not in ("", "time_limit", "failure", "terminated (no reason reported)")
    if bool(row.terminated):
        return (reason if known else "fell" if legged else "terminated (left the task's healthy range)") + at, True
    if known:  # the task's account of an episode that ran to the limit (manipulation: "dropped object")
        return reason, reason != "success"
    return "ran to the step limit", False


def episode_tables(run, task, metric: str, period: float | None) -> dict[str, list[EpisodeLine]]:
    """condition -> one line per (engine, episode), in run order."""
    rows = run.rows
    legged = "metric_lin_vel_error" in rows.columns
    primary = task.metric_values(rows, metric) if task is not None else rows["return"].to_numpy(float)
    kind = "pct" if metric in ("tracking", "survival") else "num"
    returns = rows["return"].to_numpy(float)
    out: dict[str, list[EpisodeLine]] = {}
    for k, row in enumerate(rows.itertuples(index=False)):
        text, bad = outcome(row, legged, period)
        out.setdefault(row.condition, []).append(EpisodeLine(
            engine=row.engine, episode=int(row.episode), seed=int(row.seed),
            primary=(pct if kind == "pct" else number)(float(primary[k])),
            ret=number(float(returns[k])),
            speed=number(float(row.x_velocity)) if np.isfinite(row.x_velocity) else "—",
            duration=f"{row.length * period:.2f} s" if period else f"{row.length} steps",
            outcome=text, bad=bad))
    return dict(sorted(out.items(), key=lambda kv: condition_order(kv[0])))


THRESHOLD_TEXT = {
    "pass_fraction": "a sweep rung passes while the metric keeps this share of nominal",
    "high_below": "HIGH below this headroom (margin / expected gap)",
    "medium_below": "MEDIUM below this headroom, LOW from it",
    "min_engine_weight": "an engine counts in the margins when the policy keeps this share of the reference there",
    "claim_fraction": "a card claim counts as met when the 95% CI of the measured value reaches this share of it",
    "task_success_min": "harness mismatch when fewer than this share of reference episodes succeed at the task",
    "verdict_support_min": "the verdict is called uncertain when fewer than this share of the bootstrap resamples give it",
}


SHARES = {"pass_fraction", "min_engine_weight", "claim_fraction", "task_success_min", "verdict_support_min",
          "low_below", "high_from"}
"""Thresholds that are shares (shown as %); RATIOS are headrooms (margin / expected gap, shown as 1x)."""
RATIOS = {"high_below", "medium_below"}


def verdict_meaning(risk) -> list[tuple[str, str]]:
    """(threshold in words, value) pairs of the profile's thresholds; unknown ones shown as stored."""
    return [(THRESHOLD_TEXT.get(k, k.replace("_", " ")),
             f"{v:g}x" if k in RATIOS else pct(v) if k in SHARES or (k not in THRESHOLD_TEXT and 0 <= v <= 1)
             else number(v))
            for k, v in (risk.thresholds or {}).items()]


@dataclass(frozen=True)
class MarginLine:
    """One gap family of the margins table, every number as text with its unit (severities are
    "1 = a typical gap"; the physical values sit beside them, formatted as the terminal does)."""

    family: str
    margin: str
    ci: str
    at_margin: str
    """The physical values at the margin, e.g. "motor_strength x0.88, motor_lag 9.7 ms"."""
    gap: str
    at_gap: str
    headroom: str
    loss: str
    verdict: str
    engine_margins: list[str]


def _sev(x, digits: int = 2) -> str:
    return "—" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def margin_lines(risk) -> list[MarginLine]:
    """The risk profile's margins per gap family, for display."""
    out = []
    for name, c in (risk.components or {}).items():
        bound = "≥ " if c.censored else ""
        out.append(MarginLine(
            family=name, margin=bound + _sev(c.margin), ci=f"{_sev(c.margin_ci95[0])} – {_sev(c.margin_ci95[1])}",
            at_margin=settings_text(c.margin_settings) or "—",
            gap="none" if c.gap is None else _sev(c.gap), at_gap=settings_text(c.gap_settings or {}),
            headroom="—" if c.headroom is None else f"{bound}{_sev(c.headroom, 1)}x", loss=pct(c.drop_at_gap),
            verdict=c.verdict, engine_margins=[f"{e} {_sev(m)}" for e, m in c.engine_margins.items()]))
    return out


@dataclass(frozen=True)
class RealLine:
    engine: str
    open_loop: str
    closed_loop: str
    orientation: str
    survival: str
    error: str | None = None


def real_view(real: dict | None) -> dict | None:
    """The REAL section (summary.json's ``real``) as display rows; None when the run had no logs."""
    if not real:
        return None
    lines = []
    for name, e in (real.get("engines") or {}).items():
        if "error" in e:
            lines.append(RealLine(name, "—", "—", "—", "—", error=str(e["error"])))
            continue
        ol, cl = e.get("open_loop") or {}, e.get("closed_loop") or {}
        orient = cl.get("orientation_error_deg")
        lines.append(RealLine(name, f"{number(ol.get('q_rms'))} rad", f"{number(cl.get('q_rms'))} rad",
                              "—" if orient is None else f"{number(orient)} deg", pct(cl.get("survival"))))
    check = real.get("policy_check") or {}
    return {"logs": list(real.get("logs") or []), "duration": number(real.get("duration_s")),
            "real_survival": pct((real.get("real") or {}).get("survival")), "lines": lines,
            "log_dir": real.get("log_dir"), "window": number(real.get("window_s")),
            "policy_check": None if "max_abs_action_error" not in check else
            f"{check['max_abs_action_error']:.2g}"}


@dataclass(frozen=True)
class GateLine:
    engine: str
    measure: str
    base: str
    pr: str
    change: str


def gate_view(pr: EngineTable, base: EngineTable, pr_summary, base_summary) -> dict:
    """Baseline (the policy on the base branch) next to this run, engine by engine, same measures."""
    lines = []
    for e in pr.means:
        for k, label in zip(pr.keys, pr.columns):
            b, p = base.means.get(e, {}).get(k, float("nan")), pr.means[e].get(k, float("nan"))
            change = "—" if not (np.isfinite(b) and np.isfinite(p)) else (
                f"{100 * (p - b):+.0f} points" if k in ("tracking", "survival", "terminated") else
                (f"{100 * (p - b) / abs(b):+.0f} %" if b else number(p - b)))
            lines.append(GateLine(e, label, _fmt(k, b), _fmt(k, p), change))
    risk = []
    for side, s in (("base", base_summary), ("PR", pr_summary)):
        r = s.risk
        agg = None if r is None else r.aggregate
        headroom = getattr(agg, "headroom", None)
        risk.append((side, "—" if r is None else r.verdict.upper(),
                     "—" if headroom is None or not np.isfinite(headroom) else f"{headroom:.1f}x",
                     "—" if agg is None else pct(agg.drop)))
    return {"lines": lines, "risk": risk, "base_policy": base_summary.policy, "base_sha": base_summary.policy_sha256,
            "pr_sha": pr_summary.policy_sha256}


def _fmt(key: str, v: float) -> str:
    return pct(v) if key in ("tracking", "survival", "terminated") else number(v)
