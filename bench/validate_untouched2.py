"""Score the second untouched part once, with the frozen design (`make validate-untouched2`).

The part (bench/train_population.py's ``untouched2``: Walker2d, Ant and InvertedDoublePendulum
policies) and its realities (bench/realities_heldout2.py, sealed) were fixed on 2026-12-02, before
the next design round, so that round is tested on policies and mechanisms it never saw. This
script refuses to run until a commit whose message says "FROZEN for untouched2" exists after the
seal: the design that commit ships (pass fraction, thresholds, ladders) is the one scored, and
nothing may be chosen from what this prints.

What the retest (docs/risk.md, "Retest") says one measurement needs: the true drops from 20
episodes per reality (5 ranked mostly noise where a reality costs little) and crossvals at 8
episodes per rung (3 moved one run's Spearman by 0.2-0.4 with its seed). Those are the defaults.

    .venv/bin/python bench/validate_untouched2.py [--episodes 20] [--sweep-episodes 8] [--shard K/N] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import validation_population as vp  # noqa: E402
from validate_risk import FAMILIES, invocation, part_metrics, per_policy, score, write_block  # noqa: E402

from crosssim import risk, sweep  # noqa: E402

BEGIN, END = "<!-- untouched2:begin -->", "<!-- untouched2:end -->"


def refusal(frozen: str | None, sealed: str, missing: list[str]) -> str | None:
    """Why the part may not be scored now (None: it may)."""
    if frozen is None:
        return ("the second untouched part is scored only with a frozen design: commit the design with "
                f"'{vp.FROZEN_TAG}' in the message (after the seal of {vp.SEALED2}), then rerun")
    if not re.match(r"[0-9a-f]{7,} *$", sealed):  # a commit, and nothing after it (" (CHANGED since ...")
        return f"{vp.SEALED2} is {sealed}: its realities are no held-out test"
    if missing:
        return f"not trained yet (bench/train_population.py --split untouched2): {', '.join(missing)}"
    return None


def metrics_table(part: dict) -> str:
    """Spearman / MMRV of every predictor per target, the shipped one's CI, verdict classes, tau."""
    names = list(part["metrics"]["all"])
    lines = ["| target | " + " | ".join(names) + " | shipped Spearman 95 % CI |", "|---" * (len(names) + 2) + "|"]
    for target, row in part["metrics"].items():
        lo, hi = part["ci"][target]
        lines.append(f"| {target} | " + " | ".join(f"{row[n][0]:.2f} / {row[n][1]:.3f}" for n in names)
                     + f" | [{lo:.2f}, {hi:.2f}] |")
    counts = ", ".join(f"{v} {c}" for v, c in part["verdicts"].items() if c)
    lines.append(f"\n{part['n']} policies ({len(part['refused'])} refused by the harness check); verdicts {counts}; "
                 f"Kendall tau of verdict class with the true all-gaps drop {part['kendall']:.2f} "
                 f"[{part['ci']['kendall'][0]:.2f}, {part['ci']['kendall'][1]:.2f}]. Cells: Spearman / MMRV.")
    return "\n".join(lines)


def main() -> None:
    start = time.time()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=20, help="nominal episodes per engine, and reality episodes")
    ap.add_argument("--sweep-episodes", type=int, default=8)
    ap.add_argument("--engines", default="mujoco,pybullet")
    ap.add_argument("--population", default=None, help="folder of bench/train_population.py's policies")
    ap.add_argument("--shard", default=None, help="K/N: fill the caches for every N-th policy from K (prints nothing)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    entries, missing = vp.population2(args.population)
    frozen, sealed = vp.frozen(), vp.sealed(vp.SEALED2)
    why = refusal(frozen, sealed, missing)
    if why:
        sys.exit(f"validate_untouched2: {why}")
    design = (sweep.PASS_FRACTION, risk.HIGH_BELOW, risk.MEDIUM_BELOW)
    engines = tuple(args.engines.split(","))
    if args.shard:  # the measurements only, in caches: nothing about them is printed
        k, n = vp.shard(args.shard)
        for e in entries[k::n]:
            vp.truth(e, args.episodes)
            vp.run(e, fraction=design[0], engines=engines, episodes=args.episodes, sweep_episodes=args.sweep_episodes)
        return
    recs = []
    for e in entries:
        rec = {"name": e.name, "part": e.part, "task": e.task, "truth": vp.truth(e, args.episodes), "scores": {}}
        rows = vp.run(e, fraction=design[0], engines=engines, episodes=args.episodes, sweep_episodes=args.sweep_episodes)
        rec["scores"][str(design[0])] = s = score(rows, e.card, design[0])
        print(f"  {e.name:<40} {s['verdict']:<16} " + (
            "" if s["refused"] else "headroom " + " ".join(f"{s['headroom'][f]:.2f}" for f in FAMILIES)), flush=True)
        recs.append(rec)
    results = {"untouched2": part_metrics(recs, *design)}
    wall = time.time() - start
    text = metrics_table(results["untouched2"]) + "\n\n" + per_policy(results)
    print(text + f"\n\ntotal wall time {wall / 60:.1f} min")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "validate_untouched2.json").write_text(json.dumps(
        {"design": design, "frozen": frozen, "sealed": sealed, "results": results, "wall_s": wall}, indent=1, default=str))
    if not args.no_write:
        write_block(BEGIN, END, f"Produced by `{invocation('validate-untouched2')}` on {dt.date.today().isoformat()} "
                    f"with the design frozen in {frozen} (pass fraction {design[0]:g}, high below {design[1]:g}, "
                    f"medium below {design[2]:g}); realities sealed in {sealed}; engines {', '.join(engines)}; "
                    f"{args.episodes} episodes per reality, {args.sweep_episodes} per visited rung; "
                    f"{wall / 60:.1f} min wall for this invocation (the measurements, made by --shard runs, are read "
                    f"back from .cache/validation).\n\n{text}")


if __name__ == "__main__":
    main()
