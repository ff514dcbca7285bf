"""Scores and the NOTEBOOK.md table of the fourth untouched part (validation/validate_untouched4.py's
rule): rank agreement, calibration against the class bands, baselines, retest ceiling, seed stability."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from crosssim.rehearsal import ORDER, badness
from crosssim.stats import mmrv, spearman

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "validation" / "NOTEBOOK.md"
RESULTS = ROOT / "validation" / "results" / "validate_untouched4.json"
BEGIN, END = "<!-- untouched4:begin -->", "<!-- untouched4:end -->"
SEVERITY = {"low": 0, "medium": 1, "high": 2, "unknown": np.nan}


severity = badness
"""How far into the bands a (loss, failure rate) lies: 1 is the HIGH edge of either (the product's own)."""


def in_band(cls: str, loss: float, fail: float) -> bool:
    """Whether a true (loss, failure rate) lies in ``cls``'s band (the product's band of its own)."""
    from crosssim.rehearsal import band

    return band(loss, fail) == cls


def old_class(headroom) -> str:
    """The ladder verdict of before the rehearsal (crosssim.risk.verdict_for: high below a headroom of
    0.25, medium below 1); "unknown" where no profile was computed (a harness mismatch)."""
    from crosssim.risk import verdict_for

    return "unknown" if headroom is None else verdict_for(headroom)


def _rank(scores, truth) -> tuple[float, float]:
    a, b = np.asarray(scores, float), np.asarray(truth, float)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.ptp(a[ok]) == 0:
        return float("nan"), float("nan")
    return spearman(a[ok], b[ok]), mmrv(a[ok], b[ok])


def _tau(classes, truth) -> float:
    a = np.array([SEVERITY.get(c, np.nan) for c in classes], float)
    b = np.asarray(truth, float)
    ok = np.isfinite(a) & np.isfinite(b)
    return float(kendalltau(a[ok], b[ok]).statistic) if ok.sum() > 2 and np.ptp(a[ok]) > 0 else float("nan")


def scores(recs: list[dict]) -> dict:
    t_all = [r["truth"]["all"]["loss"] for r in recs]
    t_sev = [severity(r["truth"]["all"]["loss"], r["truth"]["all"]["fail"]) for r in recs]
    pred = [r["pred"]["loss"] if r["pred"]["loss"] is not None else np.nan for r in recs]
    pred_sev = [severity(r["pred"]["loss"], r["pred"]["failure_rate"]) if r["pred"]["loss"] is not None else np.nan
                for r in recs]
    out = {"n": len(recs), "rehearsal_loss": _rank(pred, t_all), "rehearsal_severity": _rank(pred_sev, t_sev)}
    for f in ("actuation", "timing", "contact"):
        out[f"family_{f}"] = _rank([r["pred"]["family_loss"].get(f, np.nan) for r in recs],
                                   [r["truth"][f]["loss"] for r in recs])
    out["tau_class"] = _tau([r["pred"]["verdict"] for r in recs], t_sev)
    out["tau_old_class"] = _tau([old_class(r["pred"]["least_headroom"]) for r in recs], t_sev)
    calibrated = [in_band(r["pred"]["verdict"], r["truth"]["all"]["loss"], r["truth"]["all"]["fail"]) for r in recs]
    out["calibrated"] = (int(sum(calibrated)), len(recs))
    out["false_reassurance"] = [r["name"] for r in recs
                                if r["truth"]["all"]["class"] == "high" and r["pred"]["verdict"] in ("medium", "low")]
    out["baseline_nominal_fail"] = _rank([r["truth"]["nominal_fail"] for r in recs], t_sev)
    out["baseline_old_headroom"] = _rank([-(r["pred"]["least_headroom"] if r["pred"]["least_headroom"] is not None
                                           else np.nan) for r in recs], t_sev)
    tasks = sorted({r["task"] for r in recs})
    task_mean = {k: np.mean([s for r, s in zip(recs, t_sev) if r["task"] == k]) for k in tasks}
    out["baseline_task"] = _rank([task_mean[r["task"]] for r in recs], t_sev)  # an oracle: the truth's own task means
    with_retest = [r for r in recs if "retest" in r]
    out["retest_ceiling"] = _rank([severity(r["retest"]["all"]["loss"], r["retest"]["all"]["fail"]) for r in with_retest],
                                  [severity(r["truth"]["all"]["loss"], r["truth"]["all"]["fail"]) for r in with_retest])
    out["retest_ceiling_loss"] = _rank([r["retest"]["all"]["loss"] for r in with_retest],
                                       [r["truth"]["all"]["loss"] for r in with_retest])
    seeded = [r for r in recs if len(r["seeds"]) > 1]
    out["seed_stable"] = (sum(len(set(r["seeds"])) == 1 for r in seeded), len(seeded),
                          max((len(r["seeds"]) for r in seeded), default=0))
    out["classes"] = {c: sum(r["pred"]["verdict"] == c for r in recs) for c in (*ORDER, "unknown")}
    out["true_classes"] = {c: sum(r["truth"]["all"]["class"] == c for r in recs) for c in ORDER}
    return out


def _f(x, fmt=".2f") -> str:
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)


def table(recs: list[dict], s: dict) -> str:
    rows = ["| policy | class (support) | predicted loss / fail | true all-gaps loss / fail (class) | "
            "classes over seeds | old least headroom |", "|---|---|---|---|---|---|"]
    for r in sorted(recs, key=lambda r: -severity(r["truth"]["all"]["loss"], r["truth"]["all"]["fail"])):
        p, t = r["pred"], r["truth"]["all"]
        sup = p["support"].get(p["verdict"], float("nan"))
        rows.append(f"| {r['name']} | {p['verdict']} ({_f(sup, '.0%')}) | {_f(p['loss'])} / {_f(p['failure_rate'])} | "
                    f"{_f(t['loss'])} / {_f(t['fail'])} ({t['class']}) | {' '.join(r['seeds'])} | "
                    f"{_f(p['least_headroom'])} |")
    sp = lambda k: f"{_f(s[k][0])} (MMRV {_f(s[k][1])})"  # noqa: E731
    cal, n = s["calibrated"]
    stable = s["seed_stable"]
    summary = [
        "", "| score | value | target |", "|---|---|---|",
        f"| Spearman, rehearsal predicted loss vs all-gaps true loss | {sp('rehearsal_loss')} | >= 0.85 (<= 0.05) |",
        f"| Spearman, rehearsal severity vs true severity (loss and failures) | {sp('rehearsal_severity')} | |",
        *(f"| Spearman, {f} diagnosis vs its own reality's loss | {sp('family_' + f)} | >= 0.85 |"
          for f in ("actuation", "timing", "contact")),
        f"| Kendall tau-b, class vs true severity | {_f(s['tau_class'])} | >= 0.7 |",
        f"| the same for the old ladder verdict (least headroom) | {_f(s['tau_old_class'])} | baseline |",
        f"| calibration: true (loss, failures) inside the class's band | {cal}/{n} ({_f(cal / max(n, 1), '.0%')}) | >= 80 % |",
        f"| true HIGH called MEDIUM or LOW | {len(s['false_reassurance'])} {', '.join(s['false_reassurance'])} | 0 |",
        f"| baseline: nominal failure rate vs true severity | {sp('baseline_nominal_fail')} | below the rehearsal |",
        f"| baseline: old least headroom (negated) vs true severity | {sp('baseline_old_headroom')} | below the rehearsal |",
        f"| baseline: task identity (each task's mean true severity, an oracle) | {sp('baseline_task')} | |",
        f"| retest ceiling: true severity at seeds 0-29 vs 1000-1029 | {sp('retest_ceiling')} | >= 0.9 |",
        f"| retest ceiling of the true loss alone | {sp('retest_ceiling_loss')} | |",
        f"| same class at every crossval seed ({stable[2]} seeds) | {stable[0]}/{stable[1]} | 90 % of policies, 9 of 10 seeds |",
        f"| classes called / true classes | {s['classes']} / {s['true_classes']} | every class occurs |",
    ]
    return "\n".join(rows + summary)


def report(recs: list[dict], *, write: bool) -> None:
    """Print the table of ``recs`` (validate_untouched4.records) and, with ``write``, store it."""
    s = scores(recs)
    body = table(recs, s)
    print(body)
    if not write:
        return
    RESULTS.write_text(json.dumps({"records": recs, "scores": s}, indent=1, default=float))
    doc = NOTEBOOK.read_text()
    if BEGIN in doc and END in doc:
        NOTEBOOK.write_text(doc[:doc.index(BEGIN)] + f"{BEGIN}\n{body}\n{END}" + doc[doc.index(END) + len(END):])
    print(f"wrote {RESULTS.relative_to(ROOT)} and {NOTEBOOK.relative_to(ROOT)}", file=sys.stderr)
