"""How much of a sealed untouched part's miss is measurement noise? (`make validate-retest-untouched3`)

The third untouched part missed the targets (validation/NOTEBOOK.md, "Third untouched part"): pooled
actuation 0.51, all gaps 0.80, and within a task actuation below zero. Is a perfect predictor
possible at all with this measurement (20 episodes per reality, 8 per visited rung)? The first
retest (validation/validate_retest.py) answered that for the first untouched part; this answers it for
a sealed part, with the part's own measurement. It changes no design value and scores nothing new:
the design is the one frozen for the part, and nothing may be chosen from what this prints.

Rule, committed before it ran:
1. Truth retest: every policy of the part that got a verdict, in the nominal loop and in each
   reality of the part, 20 episodes at seeds 1000..1019 (disjoint from the scoring's 0..19).
   ``rel_truth`` per target: the Spearman of the scoring's true drops against the retest's.
2. Predictor retest: the part's crossvals again with seed 2000 (same engines and episode counts).
   ``rel_pred`` per target: the Spearman of the two runs' negated headroom; and the share of
   unchanged verdicts.
3. Ceiling per target: sqrt(rel_pred x rel_truth) (Spearman's attenuation, approximate).
4. The shipped predictor of each run against each truth (seed 0 vs the retest truth, seed 2000 vs
   the scoring's truth): the spread of these four numbers is what one measurement's Spearman moves by.
5. All of it pooled and within each task (the part's pooled numbers are mostly the split between its
   two tasks), reported whatever it gives.

    .venv/bin/python validation/retest_sealed.py --part untouched3 [--shard K/N] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))

import validation_population as vp  # noqa: E402
from validate_retest import CROSSVAL_SEED, RETEST_SEEDS, _neg, ceiling  # noqa: E402
from validate_sealed import refusal  # noqa: E402
from validate_risk import rank_metrics, score, write_block  # noqa: E402
from validation_population import TARGETS  # noqa: E402

from crosssim import sweep  # noqa: E402

EPISODES, SWEEP_EPISODES, ENGINES = 20, 8, ("mujoco", "pybullet")
"""The sealed parts' scoring measurement (validation/validate_sealed.py's defaults)."""


def measure(entry: vp.Entry) -> dict | None:
    """The scoring's truth and crossval, and both retests, of one policy (None: no verdict)."""
    kw = dict(fraction=sweep.PASS_FRACTION, engines=ENGINES, episodes=EPISODES, sweep_episodes=SWEEP_EPISODES)
    first = score(vp.run(entry, **kw), entry.card, sweep.PASS_FRACTION)
    if first["refused"]:
        return None
    again = score(vp.run(entry, seed=CROSSVAL_SEED, **kw), entry.card, sweep.PASS_FRACTION)
    return {"name": entry.name, "task": entry.task, "truth": vp.truth(entry, EPISODES)["drop"],
            "retest": vp.drops(vp.retest_returns(entry, RETEST_SEEDS)), "seed0": first, f"seed{CROSSVAL_SEED}": again}


def numbers(recs: list[dict]) -> dict:
    """Per target: rel_truth, rel_pred, the ceiling and the four predictor-vs-truth Spearmans."""
    out = {"n": len(recs), "same_verdict": float(np.mean([r["seed0"]["verdict"] == r[f"seed{CROSSVAL_SEED}"]["verdict"]
                                                          for r in recs])) if recs else float("nan")}
    for t in TARGETS:
        first, retest = [r["truth"][t] for r in recs], [r["retest"][t] for r in recs]
        a = [_neg(r["seed0"], t) for r in recs]
        b = [_neg(r[f"seed{CROSSVAL_SEED}"], t) for r in recs]
        rel_truth, rel_pred = rank_metrics(first, retest)[0], rank_metrics(a, b)[0]
        out[t] = {"rel_truth": rel_truth, "rel_pred": rel_pred, "ceiling": ceiling(rel_truth, rel_pred),
                  "seed0_vs_first": rank_metrics(a, first)[0], "seed0_vs_retest": rank_metrics(a, retest)[0],
                  "seed2000_vs_first": rank_metrics(b, first)[0], "seed2000_vs_retest": rank_metrics(b, retest)[0]}
    return out


def table(groups: dict[str, dict]) -> str:
    f = lambda x: "—" if not np.isfinite(x) else f"{x:.2f}"  # noqa: E731
    lines = ["| policies | target | rel_truth | rel_pred | ceiling | seed 0 vs scoring truth / retest truth "
             "| seed 2000 vs scoring truth / retest truth |", "|---|---|---|---|---|---|---|"]
    for name, g in groups.items():
        for t in TARGETS:
            x = g[t]
            lines.append(f"| {name} (n {g['n']}) | {t} | {f(x['rel_truth'])} | {f(x['rel_pred'])} | {f(x['ceiling'])} "
                         f"| {f(x['seed0_vs_first'])} / {f(x['seed0_vs_retest'])} "
                         f"| {f(x['seed2000_vs_first'])} / {f(x['seed2000_vs_retest'])} |")
    lines.append("\nSame verdict under the other crossval seed: " + ", ".join(
        f"{name} {100 * g['same_verdict']:.0f} %" for name, g in groups.items()) + ". — : undefined (a constant column: ties).")
    return "\n".join(lines)


def main() -> None:
    start = time.time()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=tuple(vp.SEALED_PARTS), required=True)
    ap.add_argument("--shard", default="0/1", help="K/N: measure every N-th policy from the K-th; writes nothing")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    k, n = vp.shard(args.shard)
    entries, missing = vp.sealed_population(args.part)
    why = refusal(args.part, vp.frozen(args.part), vp.sealed(vp.SEALED_PARTS[args.part]), missing, vp.latest_freeze())
    if why:  # the retest measures the design frozen for the part, with its sealed realities, or nothing
        sys.exit(f"retest_sealed: {why}")
    recs = [r for e in entries[k::n] if (r := measure(e)) is not None]
    if n > 1:
        print(f"shard {k}/{n}: {len(recs)} policies measured in {(time.time() - start) / 60:.1f} min")
        return
    groups = {"pooled": numbers(recs), **{task: numbers([r for r in recs if r["task"] == task])
                                          for task in sorted({r["task"] for r in recs})}}
    wall = time.time() - start
    text = table(groups)
    print(text + f"\n\ntotal wall time {wall / 60:.1f} min")
    (ROOT / "validation" / "results" / f"retest_{args.part}.json").write_text(
        json.dumps({"groups": groups, "policies": recs, "wall_s": wall}, indent=1, default=str))
    if not args.no_write:
        write_block(f"<!-- retest-{args.part}:begin -->", f"<!-- retest-{args.part}:end -->",
                    f"Produced by `make validate-retest-{args.part}` on {dt.date.today().isoformat()}: truth retest at seeds "
                    f"{RETEST_SEEDS.start}..{RETEST_SEEDS.stop - 1}, crossvals again with seed {CROSSVAL_SEED} "
                    f"({', '.join(ENGINES)}, {EPISODES} nominal episodes, {SWEEP_EPISODES} per visited rung); "
                    f"{wall / 60:.1f} min wall for this invocation (measurements read back from .cache/validation)."
                    f"\n\n{text}")


if __name__ == "__main__":
    main()
