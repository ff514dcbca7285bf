"""Design round 3 (2026-12-02): does a combined headroom rank the all-gaps drop better than the
least one? The rule below was committed before any run.

Why this question: on the choosing parts, design round 2's candidate B improved the actuation and
timing rankings and still lost the all-gaps ranking (0.73 -> 0.58), and on the second untouched part
the least headroom ranked the all-gaps drop at 0.09. The least headroom ignores every family but one,
while a real robot brings every gap at once.

- **Designs.** A, shipped: the verdict and the all-gaps score are the least headroom over the
  families, min_f h_f. D: the combined headroom H = 1 / sum_f (1 / h_f) over the families with an
  expected gap (a headroom of 0 gives H = 0). Reasoning, not fitting: 1/h_f is the share of family
  f's tolerance its expected gap uses; if the gaps' harms add (linear damage accumulation), all of
  them at once use the sum, and H is the headroom left for all of them together. H is a lower
  bound when any family's margin is censored (the bound's class, as for one family). The family
  with the least headroom still names the verdict. Per-family scores are the same in both designs.
- **Measurement**: design round 2's records of the choosing parts (design + selection; truth 20
  episodes per reality; crossvals in MuJoCo, 8 nominal episodes and 8 per visited rung, seed 0,
  pass fraction 0.9), read back from .cache/validation. Nothing is rerun.
- **Thresholds** for each design: validate_risk's rule (select_design: most classes, then the best
  Kendall tau, ties towards the shipped values) at pass fraction 0.9, on a grid widened for H
  (H <= min_f h_f, down to a third of it): high below 0.1, 0.25, 0.5 or 1.0, medium below 0.75, 1.0,
  1.5, 2.0 or 3.0 (medium above high).
- **Decision**: D ships if its pooled all-gaps Spearman (negated score against the 20-episode
  all-gaps drop, design and selection pooled) is at least 0.02 (validate_risk.TIE) above A's and its
  verdicts' Kendall tau (its own thresholds) is no more than 0.05 below A's (its own thresholds on
  the same grid). Otherwise A stays with the thresholds it ships (0.25, 1.5). Either way the design
  that stays is frozen ("FROZEN for untouched3") and the third untouched part is scored once
  (validation/validate_sealed.py --part untouched3).

    .venv/bin/python validation/design_round3.py [--no-write]
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

import validate_risk  # noqa: E402
import validation_population as vp  # noqa: E402
from design_round2 import FRACTION, evaluate  # noqa: E402
from validate_risk import FAMILIES, TIE, headroom_score, invocation, rank_metrics, select_design, write_block  # noqa: E402

BEGIN, END = "<!-- design3:begin -->", "<!-- design3:end -->"
GRID = tuple((h, m) for h in (0.1, 0.25, 0.5, 1.0) for m in (0.75, 1.0, 1.5, 2.0, 3.0) if m > h)
MAX_TAU_FALL = 0.05


def combined_headroom(headroom: dict[str, float]) -> float:
    """H = 1 / sum_f 1/h_f over the families with a finite headroom (nan if none)."""
    h = [v for v in headroom.values() if np.isfinite(v)]
    if not h:
        return float("nan")
    if min(h) <= 0:
        return 0.0
    return float(1.0 / sum(1.0 / v for v in h))


def as_design(s: dict, design: str) -> dict:
    """A scored profile as design ``design`` classifies it: D puts H in every family's place (so the
    least over the families, what select_design and classify read, is H)."""
    if design == "A" or s["refused"]:
        return s
    finite = [f for f in FAMILIES if np.isfinite(s["headroom"][f])]
    H = combined_headroom(s["headroom"])
    censored = any(s["censored"][f] for f in finite)
    return {**s, "headroom": {f: H for f in FAMILIES}, "censored": {f: censored for f in FAMILIES}}


@contextmanager
def grid():
    saved = validate_risk.THRESHOLDS
    validate_risk.THRESHOLDS = GRID
    try:
        yield
    finally:
        validate_risk.THRESHOLDS = saved


def summary(recs: list[dict], design: str) -> dict:
    mine = [{**r, "scores": {str(FRACTION): as_design(r["scores"][str(FRACTION)], design)}} for r in recs]
    ok = [r for r in mine if not r["scores"][str(FRACTION)]["refused"]]
    out = {"n": len(recs), "refused": [r["name"] for r in mine if r not in ok]}
    groups = {"pooled": ok, **{part: [r for r in ok if r["part"] == part] for part in vp.CHOOSING_PARTS}}
    out["all"] = {name: rank_metrics([headroom_score(r["scores"][str(FRACTION)], "all") for r in g],
                                     [r["truth"]["drop"]["all"] for r in g]) for name, g in groups.items()}
    with grid():
        (_, high, medium), rows = select_design(mine, FRACTION)
    chosen = next(g for g in rows if (g["high"], g["medium"]) == (high, medium))
    shipped = next(g for g in rows if (g["high"], g["medium"]) == (0.25, 1.5))  # the pair shipped when round 3 ran
    out.update(thresholds=(high, medium), counts=chosen["counts"], kendall=chosen["kendall"],
               at_shipped={"counts": shipped["counts"], "kendall": shipped["kendall"]})
    return out


def decide(a: dict, d: dict) -> tuple[str, str]:
    gain = d["all"]["pooled"][0] - a["all"]["pooled"][0]
    fall = a["kendall"] - d["kendall"]
    if gain >= TIE and fall <= MAX_TAU_FALL:
        return "D", f"all-gaps Spearman {gain:+.3f} (>= {TIE}), Kendall tau {-fall:+.3f} (not below -{MAX_TAU_FALL})"
    why = f"all-gaps Spearman {gain:+.3f}" + (f" (< {TIE})" if gain < TIE else "")
    if fall > MAX_TAU_FALL:
        why += f"; Kendall tau {-fall:+.3f} (more than {MAX_TAU_FALL} below A)"
    return "A", why


def table(res: dict) -> str:
    lines = ["| design | all gaps: pooled Spearman / MMRV | design part | selection part | thresholds (rule) "
             "| verdicts | Kendall tau | at 0.25 / 1.5: verdicts, tau |", "|---|---|---|---|---|---|---|---|"]
    for d, s in res.items():
        cells = [f"{s['all'][k][0]:.2f} / {s['all'][k][1]:.3f}" for k in ("pooled", *vp.CHOOSING_PARTS)]
        counts = ", ".join(f"{v} {c}" for v, c in s["counts"].items() if c)
        at = s["at_shipped"]
        at_counts = ", ".join(f"{v} {c}" for v, c in at["counts"].items() if c)
        lines.append(f"| {d} | " + " | ".join(cells) + f" | high < {s['thresholds'][0]:g}, medium < {s['thresholds'][1]:g} "
                     f"| {counts} | {s['kendall']:.2f} | {at_counts}; {at['kendall']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    start = time.time()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    entries = [e for e in vp.population() if e.part in vp.CHOOSING_PARTS]
    recs = [evaluate(e, "A") for e in entries]
    res = {d: summary(recs, d) for d in ("A", "D")}
    ships, why = decide(res["A"], res["D"])
    wall = time.time() - start
    text = table(res) + f"\n\n**Decision: design {ships} ships** ({why})."
    print(text + f"\n\ntotal wall time {wall / 60:.1f} min")
    out = ROOT / "validation" / "results"
    out.mkdir(exist_ok=True)
    (out / "design_round3.json").write_text(json.dumps({"results": res, "ships": ships, "why": why, "wall_s": wall},
                                                       indent=1, default=str))
    if not args.no_write:
        write_block(BEGIN, END, f"Produced by `{invocation('validate-design-round3')}` on {dt.date.today().isoformat()}: "
                    f"{len(entries)} choosing-part policies, design round 2's records (truth 20 episodes per "
                    f"reality, MuJoCo crossvals, 8 episodes per visited rung); {wall / 60:.1f} min wall.\n\n{text}")


if __name__ == "__main__":
    main()
