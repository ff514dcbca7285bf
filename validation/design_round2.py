"""Design round 2 (2026-12-02): do gear play on the actuation ladder and dropped frames on the
timing ladder rank the choosing parts better? The rule below was committed before any run.

What the first untouched part showed (validation/NOTEBOOK.md, "Retest"): with the measurement noise taken
out, strength and lag do not rank the policies by what backlash, dry friction, sag or a slow
actuator cost them, and latency and white noise do not rank them by jitter, dropped frames or a
velocity filter. That part has been looked at too often to test a change made from it; the sealed
second untouched part (validation/realities_heldout2.py, none of whose mechanisms either candidate
sweeps) is the test.

- **Measurement**, the same for both designs: the choosing parts (design + selection; their
  realities, validation/realities.py); true drops from 20 episodes per reality (seeds 0-19); crossvals
  in MuJoCo alone (the reference engine: the question is what the reference's ladders sweep; the
  engine weighting is not changed), 8 nominal episodes and 8 per visited rung, seed 0, pass
  fraction 0.9 (shipped).
- **Designs**: A, the shipped ladders. B, the same rungs with gear play added to every actuation
  rung (1, 2, 4, 6, 8, 10 ms at severities 0.5-5: a geared joint's play is crossed in a few ms at
  working speed) and dropped frames to every timing rung (1.25, 2.5, 5, 10, 15, 20 % at severities
  0.25-4: a loaded bus or USB link loses a few per cent). The expected deployment gap states
  neither, so it keeps its severity. Thresholds: validate_risk's rule (select_design), pass
  fraction held at 0.9, for each design on its own records.
- **Decision**: B ships if its mean Spearman over the four targets (negated headroom against the
  20-episode drop, design and selection pooled) is at least 0.02 (validate_risk.TIE) above A's,
  and no target is more than 0.05 below A's; otherwise A stays. Either way the design that stays
  is frozen ("FROZEN for untouched2") and the second untouched part scored once
  (validation/validate_sealed.py).

    .venv/bin/python validation/design_round2.py [--shard K/N] [--no-write]
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
from validate_risk import (TARGETS, TIE, headroom_score, invocation, rank_metrics, score, select_design,  # noqa: E402
                           write_block)

from crosssim import sweep  # noqa: E402
from crosssim.sweep import Ladder  # noqa: E402

BEGIN, END = "<!-- design2:begin -->", "<!-- design2:end -->"
FRACTION = 0.9
TRUTH_EPISODES, EPISODES, SWEEP_EPISODES, ENGINES = 20, 8, 8, ("mujoco",)
PLAY = (0.001, 0.002, 0.004, 0.006, 0.008, 0.010)
DROPS = (0.0125, 0.025, 0.05, 0.1, 0.15, 0.2)
MAX_FALL = 0.05


def candidate() -> dict[str, Ladder]:
    """Design B: the shipped ladders with gear play on actuation and dropped frames on timing."""
    a, t = sweep.LADDERS["actuation"], sweep.LADDERS["timing"]
    return {**sweep.LADDERS,
            "actuation": Ladder("actuation", a.levels, (*a.axes, ("backlash", PLAY)),
                                a.what[:-1] + ", gear play 1 to 10 ms)"),
            "timing": Ladder("timing", t.levels, (*t.axes, ("obs_drop", DROPS)),
                             t.what[:-1] + ", dropped frames 1.25 to 20 %)")}


DESIGNS = {"A": None, "B": candidate}


@contextmanager
def ladders(design: str):
    """crosssim.sweep.LADDERS holding ``design``'s ladders (in place: every module reads that dict)."""
    make = DESIGNS[design]
    if make is None:
        yield
        return
    saved = dict(sweep.LADDERS)
    sweep.LADDERS.update(make())
    try:
        yield
    finally:
        sweep.LADDERS.clear()
        sweep.LADDERS.update(saved)


def evaluate(entry: vp.Entry, design: str) -> dict:
    rec = {"name": entry.name, "part": entry.part, "task": entry.task,
           "truth": vp.truth(entry, TRUTH_EPISODES), "scores": {}}
    with ladders(design):
        rows = vp.run(entry, fraction=FRACTION, engines=ENGINES, episodes=EPISODES, sweep_episodes=SWEEP_EPISODES,
                      ladders="" if design == "A" else f"design2-{design}")
        rec["scores"][str(FRACTION)] = score(rows, entry.card, FRACTION)
    return rec


def summary(recs: list[dict]) -> dict:
    """Per target the Spearman / MMRV of negated headroom against the truth (pooled and per part),
    the thresholds select_design picks, the verdict classes and their Kendall tau."""
    ok = [r for r in recs if not r["scores"][str(FRACTION)]["refused"]]
    out = {"n": len(recs), "refused": [r["name"] for r in recs if r not in ok], "targets": {}}
    groups = {"pooled": ok, **{part: [r for r in ok if r["part"] == part] for part in vp.CHOOSING_PARTS}}
    for t in TARGETS:
        out["targets"][t] = {name: rank_metrics([headroom_score(r["scores"][str(FRACTION)], t) for r in mine],
                                                [r["truth"]["drop"][t] for r in mine]) for name, mine in groups.items()}
    out["mean_spearman"] = float(np.mean([out["targets"][t]["pooled"][0] for t in TARGETS]))
    (fraction, high, medium), grid = select_design(recs, FRACTION)
    chosen = next(g for g in grid if (g["fraction"], g["high"], g["medium"]) == (fraction, high, medium))
    out.update(thresholds=(high, medium), counts=chosen["counts"], kendall=chosen["kendall"])
    return out


def decide(a: dict, b: dict) -> tuple[str, str]:
    """The rule: (design that ships, why)."""
    gain = b["mean_spearman"] - a["mean_spearman"]
    falls = {t: a["targets"][t]["pooled"][0] - b["targets"][t]["pooled"][0] for t in TARGETS}
    worst = max(falls, key=falls.get)
    if gain >= TIE and falls[worst] <= MAX_FALL:
        return "B", (f"mean Spearman {gain:+.3f} (>= {TIE}), no target below A by more than {MAX_FALL} "
                     f"(worst {worst} {-falls[worst]:+.3f})")
    why = f"mean Spearman {gain:+.3f}" + (f" (< {TIE})" if gain < TIE else "")
    if falls[worst] > MAX_FALL:
        why += f"; {worst} {-falls[worst]:+.3f} (more than {MAX_FALL} below A)"
    return "A", why


def table(res: dict) -> str:
    lines = ["| design | target | pooled Spearman / MMRV | design part | selection part |", "|---|---|---|---|---|"]
    for d, s in res.items():
        for t in TARGETS:
            cells = [f"{s['targets'][t][k][0]:.2f} / {s['targets'][t][k][1]:.3f}" for k in ("pooled", *vp.CHOOSING_PARTS)]
            lines.append(f"| {d} | {t} | " + " | ".join(cells) + " |")
    lines.append("")
    for d, s in res.items():
        counts = ", ".join(f"{v} {c}" for v, c in s["counts"].items() if c)
        lines.append(f"- {d}: mean Spearman {s['mean_spearman']:.3f}; thresholds high below {s['thresholds'][0]:g}, "
                     f"medium below {s['thresholds'][1]:g}; verdicts {counts}; Kendall tau {s['kendall']:.2f}; "
                     f"{s['n']} policies, {len(s['refused'])} refused by the harness check.")
    return "\n".join(lines)


def main() -> None:
    start = time.time()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shard", default=None, help="K/N: fill the caches for every N-th policy from K (writes nothing)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    entries = [e for e in vp.population() if e.part in vp.CHOOSING_PARTS]
    if args.shard:
        k, n = vp.shard(args.shard)
        for e in entries[k::n]:
            for d in DESIGNS:
                evaluate(e, d)
                print(f"  {e.name} {d} done ({(time.time() - start) / 60:.1f} min)", flush=True)
        return
    res = {d: summary([evaluate(e, d) for e in entries]) for d in DESIGNS}
    ships, why = decide(res["A"], res["B"])
    wall = time.time() - start
    text = table(res) + f"\n\n**Decision: design {ships} ships** ({why})."
    print(text + f"\n\ntotal wall time {wall / 60:.1f} min")
    out = ROOT / "validation" / "results"
    out.mkdir(exist_ok=True)
    (out / "design_round2.json").write_text(json.dumps({"results": res, "ships": ships, "why": why, "wall_s": wall},
                                                       indent=1, default=str))
    if not args.no_write:
        write_block(BEGIN, END, f"Produced by `{invocation('validate-design-round2')}` on {dt.date.today().isoformat()}: "
                    f"{len(entries)} choosing-part policies, truth {TRUTH_EPISODES} episodes per reality, crossvals in "
                    f"{', '.join(ENGINES)} with {EPISODES} nominal episodes and {SWEEP_EPISODES} per visited rung; "
                    f"{wall / 60:.1f} min wall (cached runs read back).\n\n{text}")


if __name__ == "__main__":
    main()
