"""Score a sealed untouched part once, with the design frozen for it (`make validate-untouched2`,
`make validate-untouched3`).

Each part (validation/train_population.py's split of that name) and its realities
(validation_population.SEALED_PARTS, sealed: validation/seals.yaml) were fixed before a design round, so that round
is tested on policies and mechanisms it never saw: ``untouched2`` (Walker2d, Ant and
InvertedDoublePendulum; validation/realities_heldout2.py) tests design round 2, ``untouched3`` (Walker2d
and Ant; validation/realities_heldout3.py) tests design round 3. This script refuses to run until
validation/seals.yaml records a freeze for the part, a commit after the seal ("FROZEN for <part>" in
its subject): the design that commit ships (pass fraction, thresholds, ladders) is the one scored, and nothing may be chosen from what this
prints.

What the retest (validation/NOTEBOOK.md, "Retest") says one measurement needs: the true drops from 20
episodes per reality (5 ranked mostly noise where a reality costs little) and crossvals at 8
episodes per rung (3 moved one run's Spearman by 0.2-0.4 with its seed). Those are the defaults.

    .venv/bin/python validation/validate_sealed.py --part untouched3 [--episodes 20] [--sweep-episodes 8] [--shard K/N] [--no-write]
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
sys.path.insert(0, str(ROOT / "validation"))

import validation_population as vp  # noqa: E402
from validate_risk import FAMILIES, part_metrics, per_policy, score, write_block  # noqa: E402

from crosssim import risk, sweep  # noqa: E402


def markers(part: str) -> tuple[str, str]:
    """The part's block in validation/NOTEBOOK.md."""
    return f"<!-- {part}:begin -->", f"<!-- {part}:end -->"


def refusal(part: str, frozen: str | None, sealed: str, missing: list[str], latest: str | None = None) -> str | None:
    """Why ``part`` may not be scored now (None: it may). ``latest``: the newest freeze for any part."""
    path = vp.SEALED_PARTS[part]
    if frozen is None:
        return (f"the part {part} is scored only with a frozen design: commit the design with "
                f"'{vp.frozen_tag(part)}' in the subject (after the seal of {path}), record that commit under "
                f"freezes in validation/seals.yaml, then rerun")
    if latest is not None and latest != frozen:
        return (f"the design frozen for {part} ({frozen}) no longer ships: {latest} froze another one since, "
                f"so {part}'s table in validation/NOTEBOOK.md is the record of its one scoring")
    if not re.match(r"[0-9a-f]{7,} *$", sealed):  # a commit, and nothing after it (" (CHANGED since ...")
        return f"{path} is {sealed}: its realities are no held-out test"
    if missing:
        return f"not trained yet (validation/train_population.py --split {part}): {', '.join(missing)}"
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
    ap.add_argument("--part", choices=tuple(vp.SEALED_PARTS), required=True)
    ap.add_argument("--episodes", type=int, default=20, help="nominal episodes per engine, and reality episodes")
    ap.add_argument("--sweep-episodes", type=int, default=8)
    ap.add_argument("--engines", default="mujoco,pybullet")
    ap.add_argument("--population", default=None, help="folder of validation/train_population.py's policies")
    ap.add_argument("--shard", default=None, help="K/N: fill the caches for every N-th policy from K (prints nothing)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    part = args.part
    entries, missing = vp.sealed_population(part, args.population)
    frozen, sealed = vp.frozen(part), vp.sealed(vp.SEALED_PARTS[part])
    why = refusal(part, frozen, sealed, missing, vp.latest_freeze())
    if why:
        sys.exit(f"validate_sealed: {why}")
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
    results = {part: part_metrics(recs, *design)}
    wall = time.time() - start
    text = metrics_table(results[part]) + "\n\n" + per_policy(results)
    print(text + f"\n\ntotal wall time {wall / 60:.1f} min")
    out = ROOT / "validation" / "results"
    out.mkdir(exist_ok=True)
    (out / f"validate_{part}.json").write_text(json.dumps(
        {"design": design, "frozen": frozen, "sealed": sealed, "results": results, "wall_s": wall}, indent=1, default=str))
    if not args.no_write:
        extra = [a for a in sys.argv[1:] if a not in ("--part", part, f"--part={part}")]
        command = f"make validate-{part}" + (f" ARGS=\"{' '.join(extra)}\"" if extra else "")
        write_block(*markers(part), f"Produced by `{command}` on {dt.date.today().isoformat()} "
                    f"with the design frozen in {frozen} (pass fraction {design[0]:g}, high below {design[1]:g}, "
                    f"medium below {design[2]:g}); realities sealed in {sealed}; engines {', '.join(engines)}; "
                    f"{args.episodes} episodes per reality, {args.sweep_episodes} per visited rung; "
                    f"{wall / 60:.1f} min wall for this invocation (the measurements, made by --shard runs, are read "
                    f"back from .cache/validation).\n\n{text}")


if __name__ == "__main__":
    main()
