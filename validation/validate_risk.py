"""`make validate`: does the transfer-risk verdict predict transfer, on a part it was never chosen on?

1. Population and realities in three parts (validation/validation_population.py): design (RL-Zoo and
   policies/ Hopper/HalfCheetah), selection (validation/train_population.py's selection split), both in
   validation/realities.py; untouched (Walker2d-v4, Ant-v4) in the sealed validation/realities_heldout.py.
2. Selection (``select_design``): on design + selection only, a small grid of design values — the
   pass fraction (0.8 / 0.9 / 0.95) and the headroom thresholds — is scored and the values it
   prefers are printed. One crossval per policy, at the shipped fraction: the other fractions'
   margins are read from the rungs that bisection visited (approximate where their crossing lies
   outside the visited bracket; a crossval per fraction did not fit this machine's time).
   Rule, fixed before the grid ran: the pass fraction with the best mean Spearman of the negated
   headroom against the true drop over the four targets (three families, and the least headroom
   against the all-gaps reality); then the thresholds at that fraction with the most verdict
   classes (up to three) and, among those, the best Kendall tau of class against the all-gaps
   drop. A candidate within TIE of the best counts as tied, and a tie goes to the shipped value.
3. Freeze: the chosen values must equal the shipped ones (crosssim.sweep.PASS_FRACTION,
   crosssim.risk.HIGH_BELOW / MEDIUM_BELOW); otherwise the untouched part is not scored (change the
   shipped values in a commit first). Then the untouched part is scored with the frozen design.
4. Report per part, kept apart: Spearman and MMRV of each family's negated headroom against its
   own reality and of the least headroom against all gaps; the same for naive baselines; the
   verdict classes and Kendall tau; the policies the harness check refuses (no verdict: counted);
   and whether the engines' disagreement (the spread of their margins) adds to the reference
   engine's sweeps (partial Spearman; a rank regression fitted on design + selection, applied to
   untouched). The tables go to validation/NOTEBOOK.md between the markers; total wall time is printed.

    .venv/bin/python validation/validate_risk.py [--episodes 5] [--sweep-episodes 3] [--selection-only] [--hold-fraction] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))

import validation_population as vp  # noqa: E402
from validation_population import CHOOSING_PARTS, FAMILIES, PARTS, TARGETS  # noqa: E402

from crosssim import risk, sweep  # noqa: E402
from crosssim.card import load_card  # noqa: E402
from crosssim.runfolder import RunFolder  # noqa: E402
from crosssim.runner.ladders import ladders_for  # noqa: E402
from crosssim.stats import kendall, mmrv, spearman  # noqa: E402

DOC = ROOT / "validation" / "NOTEBOOK.md"
BEGIN, END = "<!-- validate:begin -->", "<!-- validate:end -->"
FRACTIONS = (0.8, 0.9, 0.95)
THRESHOLDS = tuple((h, m) for h in (0.25, 0.5, 1.0) for m in (1.5, 2.0, 3.0))
TIE = 0.02
SHIPPED = "-headroom (shipped: engines weighted)"
CLASS = {"low": 0, "medium": 1, "high": 2}


# --- scores of one policy -----------------------------------------------------------------------

def score(rows: Path, card_path: Path, fraction: float) -> dict:
    """The profile of one crossval at ``fraction`` (no bootstrap: the point values are scored),
    with every engine (shipped) and with the reference engine alone."""
    card = load_card(card_path)
    df = RunFolder(rows.parent).rows()
    ladders = ladders_for(card)  # the ladders the run swept (crosssim.sweep.LADDERS as the caller set them)
    ref = "mujoco"
    full = risk.risk_profile(df, card, ladders=ladders, reference=ref, fraction=fraction, resamples=0)
    out = {"verdict": full.verdict, "refused": full.verdict == "harness mismatch",
           "check": full.harness_check.message,
           "nominal_return": float(df[(df.engine == ref) & (df.condition == "nominal")]["return"].mean())}
    if out["refused"]:
        return out
    alone = risk.risk_profile(df[df.engine == ref], card, ladders=ladders, reference=ref, fraction=fraction,
                              resamples=0)
    comps = full.components
    out.update(
        headroom={f: _num(comps[f].headroom) for f in FAMILIES},
        censored={f: bool(comps[f].censored) for f in FAMILIES},
        margin={f: _num(comps[f].margin) for f in FAMILIES},
        drop_at_gap={f: _num(comps[f].drop_at_gap) for f in FAMILIES},
        aggregate_drop=_num(full.aggregate.drop),
        engine_margins={f: {e: _num(m) for e, m in comps[f].engine_margins.items()} for f in FAMILIES},
        engine_weights={e: _num(w) for e, w in full.aggregate.engine_weights.items()},
        headroom_ref={f: _num(alone.components[f].headroom) for f in FAMILIES},
    )
    if classify(out, risk.HIGH_BELOW, risk.MEDIUM_BELOW) != full.verdict:  # the grid's classes are crosssim's
        raise AssertionError(f"{card.name}: classify() gives {classify(out, risk.HIGH_BELOW, risk.MEDIUM_BELOW)}, "
                             f"crosssim.risk {full.verdict}: validation/validate_risk.py no longer follows risk.py")
    return out


def _num(x) -> float:
    return float("nan") if x is None else float(x)


@contextmanager
def thresholds(high: float, medium: float):
    """crosssim.risk's verdict thresholds set to a candidate while classifying."""
    old = risk.HIGH_BELOW, risk.MEDIUM_BELOW
    risk.HIGH_BELOW, risk.MEDIUM_BELOW = high, medium
    try:
        yield
    finally:
        risk.HIGH_BELOW, risk.MEDIUM_BELOW = old


def classify(s: dict, high: float, medium: float) -> str:
    """The verdict of a scored profile under thresholds (high, medium): crosssim.risk's rule (each
    family's class by verdict_for; a missing margin is unknown; else the worst class decides)."""
    if s["refused"]:
        return "harness mismatch"
    if any(not np.isfinite(s["margin"][f]) for f in FAMILIES):
        return "unknown"
    order = ("high", "unknown", "medium", "low")
    with thresholds(high, medium):
        classes = [risk.verdict_for(s["headroom"][f], s["censored"][f]) for f in FAMILIES]
    return min(classes, key=order.index)


def least(d: dict) -> float:
    v = [x for x in d.values() if np.isfinite(x)]
    return min(v) if v else float("nan")


# --- metrics ------------------------------------------------------------------------------------

def _finite(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    ok = np.isfinite(a) & np.isfinite(b)
    return a[ok], b[ok]


def rank_metrics(scores, truth) -> tuple[float, float]:
    """(Spearman, MMRV) of a risk score (higher: more loss expected) against the true drop."""
    a, b = _finite(scores, truth)
    return (spearman(a, b), mmrv(a, b)) if a.size > 2 else (float("nan"), float("nan"))


def paired_ci(a, b, stat, *, resamples: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat(a, b)`` over the policies (each resample draws policies
    with replacement, a policy's score and true drop together; resamples where ``stat`` is undefined,
    e.g. a constant sample, are skipped). How far a Spearman from a handful of policies can be trusted."""
    a, b = _finite(a, b)
    if a.size < 3:
        return float("nan"), float("nan")
    idx = np.random.default_rng(seed).integers(0, a.size, (resamples, a.size))
    vals = np.array([stat(a[i], b[i]) for i in idx])
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    return float(np.percentile(vals, tail)), float(np.percentile(vals, 100 - tail))


def headroom_score(s: dict, target: str, key: str = "headroom") -> float:
    """Negated headroom of a family (``all``: the least over the families): higher = riskier."""
    return -(least(s[key]) if target == "all" else s[key][target])


def predictors(recs: list[dict], fraction: float, target: str, seed: int = 0) -> dict[str, np.ndarray]:
    scored = [r["scores"][str(fraction)] for r in recs]
    rng = np.random.default_rng([seed, TARGETS.index(target)])
    return {
        SHIPPED: np.array([headroom_score(s, target) for s in scored]),
        "-headroom, reference engine alone": np.array([headroom_score(s, target, "headroom_ref") for s in scored]),
        "baseline: nominal return (negated)": np.array([-s["nominal_return"] for s in scored]),
        "baseline: one-point drop at the expected gap": np.array(
            [s["aggregate_drop"] if target == "all" else s["drop_at_gap"][target] for s in scored]),
        "baseline: random score": rng.uniform(size=len(scored)),
    }


def part_metrics(recs: list[dict], fraction: float, high: float, medium: float) -> dict:
    """Every number of one part, with the design (fraction, high, medium). Refused policies have no
    verdict and take no part in the rank metrics: they are counted."""
    refused = [r["name"] for r in recs if r["scores"][str(fraction)]["refused"]]
    ok = [r for r in recs if not r["scores"][str(fraction)]["refused"]]
    out = {"n": len(recs), "refused": refused, "metrics": {}, "ci": {}}
    for target in TARGETS:
        truth = [r["truth"]["drop"][target] for r in ok]
        scores = predictors(ok, fraction, target)
        out["metrics"][target] = {name: rank_metrics(s, truth) for name, s in scores.items()}
        out["ci"][target] = paired_ci(scores[SHIPPED], truth, spearman)
    verdicts = [classify(r["scores"][str(fraction)], high, medium) for r in ok]
    out["verdicts"] = {v: verdicts.count(v) for v in ("high", "medium", "low", "unknown")}
    classed = [(CLASS[v], r["truth"]["drop"]["all"]) for v, r in zip(verdicts, ok) if v in CLASS]
    out["kendall"] = kendall(*zip(*classed)) if len(classed) > 2 else float("nan")
    out["ci"]["kendall"] = paired_ci(*zip(*classed), kendall) if len(classed) > 2 else (float("nan"),) * 2
    out["per_policy"] = [{"name": r["name"], "verdict": v, "truth": r["truth"]["drop"],
                          "headroom": r["scores"][str(fraction)]["headroom"]} for v, r in zip(verdicts, ok)]
    out["disagreement"] = disagreement(ok, fraction)
    return out


def spread(s: dict, target: str) -> float:
    """The engines' disagreement on a family's tolerance: the spread of their margins (every engine,
    weighted or not) [severity]; ``all``: that of the family with the least reference headroom."""
    if target == "all":
        target = min(FAMILIES, key=lambda f: s["headroom_ref"][f] if np.isfinite(s["headroom_ref"][f]) else np.inf)
    m = [v for v in s["engine_margins"][target].values() if np.isfinite(v)]
    return float(max(m) - min(m)) if len(m) > 1 else float("nan")


def _ranks(x) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(x) / len(x)


def _residual(y, x) -> np.ndarray:
    a = np.vstack([np.ones_like(x), x]).T
    return y - a @ np.linalg.lstsq(a, y, rcond=None)[0]


def disagreement(recs: list[dict], fraction: float) -> dict:
    """Per target: Spearman of the reference engine's negated headroom, of the spread alone, and
    the partial Spearman of the spread given the reference headroom (rank residuals)."""
    out = {}
    for target in TARGETS:
        s = [r["scores"][str(fraction)] for r in recs]
        x = np.array([headroom_score(v, target, "headroom_ref") for v in s])
        d = np.array([spread(v, target) for v in s])
        y = np.array([r["truth"]["drop"][target] for r in recs])
        ok = np.isfinite(x) & np.isfinite(d) & np.isfinite(y)
        if ok.sum() < 4:
            out[target] = {"n": int(ok.sum())}
            continue
        rx, rd, ry = _ranks(x[ok]), _ranks(d[ok]), _ranks(y[ok])
        partial = spearman(_residual(ry, rx), _residual(rd, rx)) if np.ptp(_residual(rd, rx)) else float("nan")
        out[target] = {"n": int(ok.sum()), "reference": spearman(x[ok], y[ok]), "spread": spearman(d[ok], y[ok]),
                       "partial": partial, "x": rx.tolist(), "d": rd.tolist(), "y": ry.tolist()}
    return out


def regression_transfer(fit: dict, test: dict) -> dict:
    """Rank regression y ~ x + d (reference headroom, engine spread) fitted on design + selection,
    applied to the untouched part: Spearman of the fitted score there against the reference alone."""
    out = {}
    for target in TARGETS:
        a, b = fit.get(target, {}), test.get(target, {})
        if "x" not in a or "x" not in b:
            continue
        coef = np.linalg.lstsq(np.vstack([np.ones(len(a["x"])), a["x"], a["d"]]).T, np.array(a["y"]), rcond=None)[0]
        combined = coef[1] * np.array(b["x"]) + coef[2] * np.array(b["d"])
        out[target] = {"weight_spread": float(coef[2] / coef[1]) if coef[1] else float("nan"),
                       "with_spread": spearman(combined, b["y"]), "reference": spearman(b["x"], b["y"])}
    return out


# --- design selection ---------------------------------------------------------------------------

def select_design(records: list[dict], hold_fraction: float | None = None) -> tuple[tuple[float, float, float], list[dict]]:
    """The design values chosen on design + selection records only (module docstring: the rule).
    Returns ((fraction, high, medium), the grid's rows). Untouched records are never read: they
    are filtered out before any of their fields is looked at. ``hold_fraction``: the pass fraction
    is held at this value (``--hold-fraction``) instead of the rule's; the thresholds are still chosen by
    the rule at it."""
    recs = [r for r in records if r["part"] in CHOOSING_PARTS]
    if not recs:
        raise ValueError("no design or selection records to choose on")
    shipped = (sweep.PASS_FRACTION, risk.HIGH_BELOW, risk.MEDIUM_BELOW)
    rows = []
    fraction_score = {}
    for f in FRACTIONS:
        if not all(str(f) in r["scores"] for r in recs):
            continue
        ok = [r for r in recs if not r["scores"][str(f)]["refused"]]
        sp = [rank_metrics([headroom_score(r["scores"][str(f)], t) for r in ok],
                           [r["truth"]["drop"][t] for r in ok])[0] for t in TARGETS]
        fraction_score[f] = float(np.nanmean(sp)) if np.isfinite(sp).any() else -np.inf
        if not np.isfinite(fraction_score[f]):
            print(f"pass fraction {f:g}: too few policies to rank (no Spearman); the grid cannot prefer it")
        for h, m in THRESHOLDS:
            verdicts = [classify(r["scores"][str(f)], h, m) for r in ok]
            classed = [(CLASS[v], r["truth"]["drop"]["all"]) for v, r in zip(verdicts, ok) if v in CLASS]
            tau = kendall(*zip(*classed)) if len(classed) > 2 else float("nan")
            rows.append({"fraction": f, "high": h, "medium": m, "spearman": fraction_score[f], "per_target": sp,
                         "classes": len({v for v in verdicts if v in CLASS}), "kendall": tau,
                         "counts": {v: verdicts.count(v) for v in ("high", "medium", "low", "unknown")},
                         "refused": len(recs) - len(ok)})
    if not fraction_score:
        raise ValueError("no pass fraction was run on every design/selection policy")
    best = max(fraction_score.values())
    tied = [f for f, v in fraction_score.items() if v >= best - TIE]
    fraction = shipped[0] if shipped[0] in tied else max(tied, key=fraction_score.get)
    if hold_fraction is not None:
        fraction = hold_fraction
    cands = [r for r in rows if r["fraction"] == fraction]
    top = max(min(r["classes"], 3) for r in cands)
    cands = [r for r in cands if min(r["classes"], 3) == top]
    best_tau = max(np.nan_to_num(r["kendall"], nan=-2) for r in cands)
    tied = [r for r in cands if np.nan_to_num(r["kendall"], nan=-2) >= best_tau - TIE]
    pick = min(tied, key=lambda r: (abs(np.log(r["high"] / shipped[1])) + abs(np.log(r["medium"] / shipped[2]))))
    return (fraction, pick["high"], pick["medium"]), rows


# --- output -------------------------------------------------------------------------------------

def _f(x, fmt=".2f") -> str:
    return "—" if x is None or not np.isfinite(x) else format(x, fmt)


def tables(results: dict, grid: list[dict], chosen, transfer: dict, preferred=None) -> str:
    parts = [p for p in PARTS if p in results]
    fr, hi, me = chosen
    held = (f" The rule preferred pass fraction {preferred[0]:g} (its margins read from the rungs a "
            f"{sweep.PASS_FRACTION:g} bisection visited); the fraction was held at the shipped {fr:g} "
            "(--hold-fraction) and the thresholds chosen by the rule at it.") if preferred and preferred[0] != fr else ""
    lines = [f"Design chosen on design + selection: pass fraction {fr:g}, high below {hi:g}, medium below {me:g} "
             f"(shipped: {sweep.PASS_FRACTION:g}, {risk.HIGH_BELOW:g}, {risk.MEDIUM_BELOW:g}).{held}", "",
             "Policies, refused by the harness check (no verdict, not ranked), verdict classes, Kendall tau of class "
             "(low < medium < high) against the all-gaps true drop:", "",
             "| part | policies | refused | high / medium / low / unknown | Kendall tau |", "|---|---|---|---|---|"]
    for p in parts:
        r = results[p]
        v = r["verdicts"]
        lines.append(f"| {p} | {r['n']} | {len(r['refused'])} | {v['high']} / {v['medium']} / {v['low']} / "
                     f"{v['unknown']} | {_f(r['kendall'])} |")
    lines += ["", "95 % bootstrap intervals over the policies of each part (2,000 resamples of the ranked policies, "
              "a policy's score and true drop drawn together, seeded): the shipped predictor's Spearman (table "
              "below) and Kendall tau (above). With a handful of policies they are wide:", "",
              "| statistic | " + " | ".join(f"{p} (n {r})" for p, r in
                                            ((p, results[p]["n"] - len(results[p]["refused"])) for p in parts)) + " |",
              "|---|" + "---|" * len(parts)]
    for key in (*TARGETS, "kendall"):
        label = "Kendall tau of class" if key == "kendall" else f"Spearman, {key}"
        lines.append(f"| {label} | " + " | ".join(
            f"{_f(results[p]['metrics'][key][SHIPPED][0] if key != 'kendall' else results[p]['kendall'])} "
            f"[{_f(results[p]['ci'][key][0])}, {_f(results[p]['ci'][key][1])}]" for p in parts) + " |")
    lines += ["", "Spearman / MMRV against the true drop (a family's headroom against its own reality; the least "
              "headroom, and each baseline's aggregate, against the all-gaps reality):", "",
              "| target | predictor | " + " | ".join(parts) + " |", "|---|---|" + "---|" * len(parts)]
    for t in TARGETS:
        for name in results[parts[0]]["metrics"][t]:
            cells = [f"{_f(results[p]['metrics'][t][name][0])} / {_f(results[p]['metrics'][t][name][1], '.3f')}"
                     for p in parts]
            lines.append(f"| {t} | {name} | " + " | ".join(cells) + " |")
    lines += ["", "Engine disagreement (spread of the mujoco and pybullet margins) beyond the reference engine's sweeps: "
              "Spearman of the reference's negated headroom, of the spread alone, and the partial Spearman of the "
              "spread given the reference headroom (rank residuals):", "",
              "| target | " + " | ".join(f"{p}: ref / spread / partial" for p in parts) + " |",
              "|---|" + "---|" * len(parts)]
    for t in TARGETS:
        cells = []
        for p in parts:
            d = results[p]["disagreement"].get(t, {})
            cells.append(" / ".join(_f(d.get(k)) for k in ("reference", "spread", "partial")) + f" (n {d.get('n', 0)})")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    if transfer:
        lines += ["", "Rank regression (true drop ~ reference headroom + spread) fitted on design + selection, "
                  "applied to untouched: Spearman with the spread vs the reference headroom alone:", "",
                  "| target | weight on spread (per unit of headroom) | with spread | reference alone |", "|---|---|---|---|"]
        for t, d in transfer.items():
            lines.append(f"| {t} | {_f(d['weight_spread'])} | {_f(d['with_spread'])} | {_f(d['reference'])} |")
    lines += ["", "Design grid (design + selection only; mean Spearman over the four targets; classes and tau with "
              "those thresholds):", "", "| pass fraction | high below | medium below | mean Spearman | "
              "high / medium / low / unknown | Kendall tau |", "|---|---|---|---|---|---|"]
    for r in grid:
        c = r["counts"]
        mark = " **chosen**" if (r["fraction"], r["high"], r["medium"]) == tuple(chosen) else ""
        lines.append(f"| {r['fraction']:g} | {r['high']:g} | {r['medium']:g} | {_f(r['spearman'])} | {c['high']} / "
                     f"{c['medium']} / {c['low']} / {c['unknown']} | {_f(r['kendall'])}{mark} |")
    return "\n".join(lines)


def per_policy(results: dict) -> str:
    lines = ["| part | policy | verdict | headroom act / tim / con | true drop act / tim / con / all |",
             "|---|---|---|---|---|"]
    for p, r in results.items():
        for x in r["per_policy"]:
            h = " / ".join(_f(x["headroom"][f]) for f in FAMILIES)
            t = " / ".join(_f(x["truth"][f]) for f in TARGETS)
            lines.append(f"| {p} | {x['name']} | {x['verdict']} | {h} | {t} |")
        for name in r["refused"]:
            lines.append(f"| {p} | {name} | refused (harness check) | — | — |")
    return "\n".join(lines)


def main() -> None:
    start = time.time()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=5, help="nominal episodes per engine, and reality episodes")
    ap.add_argument("--sweep-episodes", type=int, default=3)
    ap.add_argument("--engines", default="mujoco,pybullet")
    ap.add_argument("--population", default=None, help="folder of validation/train_population.py's policies")
    ap.add_argument("--only", default=None, help="comma-separated policy names (debugging; no docs write)")
    ap.add_argument("--selection-only", action="store_true", help="choose the design; do not score untouched")
    ap.add_argument("--hold-fraction", action="store_true",
                    help="hold the pass fraction at the shipped value (the rule's own preference is printed and written); "
                         "for when rerunning every crossval at another fraction does not fit")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    engines = tuple(args.engines.split(","))
    entries = vp.population(args.population)
    if args.only:
        entries = [e for e in entries if e.name in args.only.split(",")]
    missing = vp.missing_trained(args.population)
    if missing:
        print(f"not trained yet (validation/train_population.py): {', '.join(missing)}")
    kw = dict(engines=engines, episodes=args.episodes, sweep_episodes=args.sweep_episodes)

    def evaluate(e: vp.Entry, fractions) -> dict:
        rec = {"name": e.name, "part": e.part, "task": e.task, "truth": vp.truth(e, args.episodes), "scores": {}}
        rows = vp.run(e, fraction=sweep.PASS_FRACTION, **kw)
        for f in fractions:
            rec["scores"][str(f)] = score(rows, e.card, f)
        s = rec["scores"][str(sweep.PASS_FRACTION if str(sweep.PASS_FRACTION) in rec["scores"] else fractions[0])]
        print(f"  {e.part:<9} {e.name:<30} {s['verdict']:<16} " + (
            "" if s["refused"] else "headroom " + " ".join(_f(s["headroom"][f]) for f in FAMILIES)), flush=True)
        return rec

    choosing = [evaluate(e, FRACTIONS) for e in entries if e.part in CHOOSING_PARTS]
    preferred, grid = select_design(choosing)
    chosen = select_design(choosing, sweep.PASS_FRACTION)[0] if args.hold_fraction else preferred
    if preferred[0] != chosen[0]:
        print(f"the rule prefers pass fraction {preferred[0]:g}; held at the shipped {chosen[0]:g} (--hold-fraction)")
    shipped = (sweep.PASS_FRACTION, risk.HIGH_BELOW, risk.MEDIUM_BELOW)
    print(f"design chosen on design + selection: pass fraction {chosen[0]:g}, high below {chosen[1]:g}, "
          f"medium below {chosen[2]:g}; shipped {shipped[0]:g}, {shipped[1]:g}, {shipped[2]:g}")
    results = {p: part_metrics([r for r in choosing if r["part"] == p], chosen[0], *chosen[1:])
               for p in CHOOSING_PARTS if any(r["part"] == p for r in choosing)}
    untouched = []
    if tuple(chosen) != shipped:
        print("the chosen design differs from the shipped one, so the untouched part is not scored (it is never "
              "scored with a design that is not shipped). The shipped values now come from design rounds 2 and 3 "
              "(validation/NOTEBOOK.md), measured better than this grid's records: this run's tables are a record, not a "
              "reason to change them")
    elif not args.selection_only:
        print(f"untouched part, held-out realities sealed in {vp.sealed()}")
        untouched = [evaluate(e, (chosen[0],)) for e in entries if e.part == "untouched"]
        if untouched:
            results["untouched"] = part_metrics(untouched, *chosen)
    transfer = {}
    if "untouched" in results:
        fit = disagreement([r for r in choosing if not r["scores"][str(chosen[0])]["refused"]], chosen[0])
        transfer = regression_transfer(fit, results["untouched"]["disagreement"])
    text = tables(results, grid, chosen, transfer, preferred)
    wall = time.time() - start
    print(text + "\n\n" + per_policy(results) + f"\n\ntotal wall time {wall / 60:.1f} min")
    out = ROOT / "validation" / "results"
    out.mkdir(exist_ok=True)
    (out / "validate_risk.json").write_text(json.dumps({"chosen": chosen, "grid": grid, "results": results,
                                                        "transfer": transfer, "wall_s": wall}, indent=1, default=str))
    if args.no_write or args.only or "untouched" not in results:
        return
    write_block(BEGIN, END, f"Produced by `{invocation('validate')}` on {dt.date.today().isoformat()}: engines "
                f"{', '.join(engines)}; {args.episodes} nominal episodes per engine, {args.sweep_episodes} per visited "
                f"rung, {args.episodes} per reality; held-out realities sealed in {vp.sealed()}; {wall / 60:.1f} min wall "
                "for this invocation (crossvals and true drops cached in .cache/validation are read back; a cold run "
                f"takes hours here).\n\n{text}\n\n{per_policy(results)}")


def invocation(target: str) -> str:
    """The make command that ran this script, with its arguments."""
    return f"make {target}" + (f" ARGS=\"{' '.join(sys.argv[1:])}\"" if sys.argv[1:] else "")


def write_block(begin: str, end: str, body: str) -> None:
    """``body`` between the markers ``begin`` and ``end`` of validation/NOTEBOOK.md (nothing when one is missing)."""
    doc = DOC.read_text()
    if begin in doc and end in doc:
        DOC.write_text(doc[:doc.index(begin)] + f"{begin}\n{body}\n{end}" + doc[doc.index(end) + len(end):])


if __name__ == "__main__":
    main()
