"""`make validate-retest`: how much of the validation's miss is measurement noise?

`make validate` scores a predictor (each family's negated headroom) against a *true drop* measured
with 5 episodes per reality, and the predictor itself comes from one crossval with 3 episodes per
visited rung. Both are noisy. If two independent measurements of the same true drop rank the
policies differently, no predictor can rank them at Spearman 0.85, and the target says more about
the measurement than about the design. This script measures that noise; it changes no design value
and no shipped number.

Rule, committed before any retest ran (reported whatever it gives):
1. Truth retest: every policy of every part, in the nominal loop and in each reality of its part,
   RETEST_EPISODES (20) episodes at seeds RETEST_SEEDS (1000..1019), disjoint from the first
   measurement's seeds 0..4. True drops as `make validate` computes them (paired seeds).
2. Reliability of a 5-episode truth, per part and target: the first measurement and the retest's
   four disjoint blocks of 5 episodes are five independent 5-episode measurements; ``rel5`` is the
   mean Spearman over their ten pairs, across the policies the harness check ranks (seed-0 scoring).
   ``rel20`` is its Spearman-Brown step-up to 20 episodes (4 rel5 / (1 + 3 rel5)), and the
   Spearman of the first measurement against the whole retest is printed beside it.
3. The shipped predictor (the seed-0 crossvals `make validate` cached) against the 20-episode truth:
   Spearman with its 95 % bootstrap interval and MMRV, beside its score against the first truth, and
   the one-point baseline the same way.
4. Predictor retest, on the parts given by ``--predictor-parts`` (the rule's part: untouched; the
   selection part was added once the untouched one showed changed verdicts, default both): the
   crossvals again with seed CROSSVAL_SEED (2000; episodes 2000.., disjoint from the others), the
   same engines and episode counts; ``rel_pred`` = Spearman of the two crossvals' negated headroom
   per target, and the share of policies whose verdict is the same (a refusal counts as a verdict).
5. Verdict support (added after the untouched predictor retest, with crosssim.risk's
   VERDICT_SUPPORT_MIN = 0.9 committed before the selection part's supports were computed): each
   crossval's share of bootstrap resamples giving its own verdict (500 resamples, seed 0); a verdict
   is *flagged* when its support is below the threshold. Reported per part: changed and unchanged
   verdicts flagged in either run, and in the seed-0 run alone (what one user run shows).
6. More sweep episodes (rule committed before these runs, after the rest was read): the untouched
   part's predictor retest again at 8 episodes per visited rung (``--sweep-episodes 8 --parts
   untouched``: seeds 0 and 2000, the same truths), reported whatever it gives: rel_pred, the share
   of unchanged verdicts, the support flags and the scores against the 20-episode truth, beside
   the 3-episode numbers. It answers whether the predictor's noise, not the design, caps the
   untouched scores, and what a default of more sweep episodes buys.
7. Ceiling: with a perfect ranking underneath, an observed Spearman is at most about
   sqrt(rel_pred x rel_truth) (Spearman's attenuation; exact for Pearson correlations of normal
   scores, approximate here). Printed for the 5-episode truth `make validate` uses and for 20.

    .venv/bin/python validation/validate_retest.py [--sweep-episodes 3] [--parts ...] [--predictor-parts ...]
                                              [--shard K/N] [--no-write]

``--shard K/N`` measures every N-th policy only (one process per core; the caches are shared), and
writes nothing. A run without it reads the caches back and writes the tables into validation/NOTEBOOK.md
between the retest markers and validation/results/validate_retest.json (``-sweepN`` in both names for
another number of sweep episodes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))

import validation_population as vp  # noqa: E402
from validate_risk import (CLASS, SHIPPED, _f, classify, headroom_score, invocation, paired_ci, predictors,  # noqa: E402
                           rank_metrics, score, write_block)
from validation_population import PARTS, TARGETS  # noqa: E402

from crosssim import risk, sweep  # noqa: E402
from crosssim.stats import kendall, spearman  # noqa: E402

RETEST_EPISODES = 20
RETEST_SEEDS = range(1000, 1000 + RETEST_EPISODES)
BLOCK = 5
"""Episodes of the first measurement: the retest splits into blocks of this size."""
CROSSVAL_SEED = 2000
ONE_POINT = "baseline: one-point drop at the expected gap"


def spearman_brown(r: float, k: float) -> float:
    """Reliability of a measurement k times as long as one of reliability r."""
    return float(k * r / (1 + (k - 1) * r)) if np.isfinite(r) and r > -1 / (k - 1) else float("nan")


def ceiling(*rels: float) -> float:
    p = float(np.prod(rels))
    return float(np.sqrt(p)) if np.isfinite(p) and p >= 0 else float("nan")


def reliability(first: list[dict], retests: list[dict], target: str) -> dict:
    """rel5 (mean Spearman over the pairs of independent 5-episode measurements), rel20 and the
    Spearman of the first measurement against the whole retest, over the given policies."""
    blocks = [list(range(i, i + BLOCK)) for i in range(0, RETEST_EPISODES, BLOCK)]
    measures = [[t["drop"][target] for t in first]]
    measures += [[vp.drops(r, idx)[target] for r in retests] for idx in blocks]
    pairs = [spearman(a, b) for a, b in itertools.combinations(measures, 2)]
    pairs = [p for p in pairs if np.isfinite(p)]
    rel5 = float(np.mean(pairs)) if pairs else float("nan")
    whole = [vp.drops(r)[target] for r in retests]
    return {"rel5": rel5, "pairs": len(pairs), "rel20": spearman_brown(rel5, RETEST_EPISODES / BLOCK),
            "first_vs_retest": spearman(measures[0], whole)}


def part_retest(recs: list[dict], fraction: float) -> dict:
    """Every number of one part: reliability of the truth, and the shipped predictor and the one-point
    baseline against the first and the 20-episode truth."""
    ok = [r for r in recs if not r["scores"][str(fraction)]["refused"]]
    out = {"n": len(ok), "targets": {}}
    for target in TARGETS:
        rel = reliability([r["truth"] for r in ok], [r["retest"] for r in ok], target)
        scores = predictors(ok, fraction, target)
        first = [r["truth"]["drop"][target] for r in ok]
        retest = [vp.drops(r["retest"])[target] for r in ok]
        rel.update({
            "shipped_first": rank_metrics(scores[SHIPPED], first),
            "shipped_retest": rank_metrics(scores[SHIPPED], retest),
            "shipped_retest_ci": paired_ci(scores[SHIPPED], retest, spearman),
            "one_point_first": rank_metrics(scores[ONE_POINT], first),
            "one_point_retest": rank_metrics(scores[ONE_POINT], retest),
        })
        out["targets"][target] = rel
    classed = [(CLASS[v], vp.drops(r["retest"])["all"]) for r in ok
               if (v := classify(r["scores"][str(fraction)], risk.HIGH_BELOW, risk.MEDIUM_BELOW)) in CLASS]
    out["kendall_retest"] = kendall(*zip(*classed)) if len(classed) > 2 else float("nan")
    return out


def predictor_retest(recs: list[dict], fraction: float) -> dict:
    """The two crossvals (seed 0 and CROSSVAL_SEED) of the policies seed 0 ranks: rel_pred per target
    and the share of unchanged verdicts."""
    ok = [r for r in recs if not r["scores"][str(fraction)]["refused"]]
    out = {"n": len(ok), "rel_pred": {}, "retest_vs_20": {}, "mean_vs_20": {}}
    for target in TARGETS:
        a = np.array([_neg(r["scores"][str(fraction)], target) for r in ok])
        b = np.array([_neg(r["rescored"], target) for r in ok])
        truth = [vp.drops(r["retest"])[target] for r in ok]
        out["rel_pred"][target] = rank_metrics(a, b)[0]
        out["retest_vs_20"][target] = rank_metrics(b, truth)[0]  # the other seed's crossval, same truth
        out["mean_vs_20"][target] = rank_metrics((a + b) / 2, truth)[0]  # both seeds' headroom averaged
    same = [r["scores"][str(fraction)]["verdict"] == r["rescored"]["verdict"] for r in ok]
    out["same_verdict"] = float(np.mean(same)) if same else float("nan")
    out["verdicts"] = [{"name": r["name"], "seed0": r["scores"][str(fraction)]["verdict"],
                        f"seed{CROSSVAL_SEED}": r["rescored"]["verdict"], "support": r["support"]} for r in ok]

    def count(flagged, changed: bool) -> list[int]:
        return [sum(f for f, s in zip(flagged, same) if s != changed), same.count(not changed)]

    either = [min(r["support"]) < risk.VERDICT_SUPPORT_MIN for r in ok]
    first = [r["support"][0] < risk.VERDICT_SUPPORT_MIN for r in ok]
    out["flagged"] = {"changed": count(either, True), "unchanged": count(either, False),
                      "changed_first": count(first, True), "unchanged_first": count(first, False)}
    return out


def support(rows: Path, card_path: Path, fraction: float) -> float:
    """Share of the bootstrap resamples (crosssim.risk's, 500, seed 0) that give the run's own verdict."""
    from crosssim.card import load_card
    from crosssim.runfolder import RunFolder
    from crosssim.runner.ladders import ladders_for

    card = load_card(card_path)
    prof = risk.risk_profile(RunFolder(rows.parent).rows(), card, ladders=ladders_for(card), reference="mujoco",
                             fraction=fraction, resamples=500)
    return float(prof.verdict_support.get(prof.verdict, 0.0))


def _neg(s: dict, target: str) -> float:
    """validate_risk's negated headroom; NaN for a run the harness check refused."""
    return float("nan") if s["refused"] else headroom_score(s, target)


def tables(results: dict, pred: dict) -> str:
    rows = ["| part | target | rel5 | rel20 | first vs retest | shipped vs first (5 ep) | shipped vs retest (20 ep) "
            "| one-point vs first | one-point vs retest |", "|---|---|---|---|---|---|---|---|---|"]
    for part, res in results.items():
        for target, t in res["targets"].items():
            lo, hi = t["shipped_retest_ci"]
            rows.append(f"| {part} (n {res['n']}) | {target} | {_f(t['rel5'])} | {_f(t['rel20'])} | "
                        f"{_f(t['first_vs_retest'])} | {_f(t['shipped_first'][0])} / {_f(t['shipped_first'][1], '.3f')} | "
                        f"{_f(t['shipped_retest'][0])} [{_f(lo)}, {_f(hi)}] / {_f(t['shipped_retest'][1], '.3f')} | "
                        f"{_f(t['one_point_first'][0])} | {_f(t['one_point_retest'][0])} |")
    kt = ", ".join(f"{p} {_f(r['kendall_retest'])}" for p, r in results.items())
    text = "\n".join(rows) + f"\n\nKendall tau of the verdict class against the 20-episode all-gaps drop: {kt}."
    for part, p in pred.items():
        t = results[part]["targets"]
        lines = ["| target | rel_pred | ceiling, 5-episode truth | ceiling, 20-episode truth | shipped (seed 0), vs 5 / 20 "
                 f"| seed {CROSSVAL_SEED}, vs 20 | both seeds averaged, vs 20 |", "|---|---|---|---|---|---|---|"]
        for target in TARGETS:
            rp = p["rel_pred"][target]
            lines.append(f"| {target} | {_f(rp)} | {_f(ceiling(rp, t[target]['rel5']))} | "
                         f"{_f(ceiling(rp, t[target]['rel20']))} | {_f(t[target]['shipped_first'][0])} / "
                         f"{_f(t[target]['shipped_retest'][0])} | {_f(p['retest_vs_20'][target])} | "
                         f"{_f(p['mean_vs_20'][target])} |")
        changed = ", ".join(f"{v['name']} {v['seed0']} -> {v[f'seed{CROSSVAL_SEED}']} (support "
                            + "/".join(f"{x:.2f}" for x in v["support"]) + ")" for v in p["verdicts"]
                            if v["seed0"] != v[f"seed{CROSSVAL_SEED}"]) or "none"
        fl = p["flagged"]
        text += (f"\n\nPredictor retest, {part} (n {p['n']}; crossval seed 0 against seed {CROSSVAL_SEED}): "
                 f"same verdict for {p['same_verdict']:.0%} (changed: {changed}). Verdict support below "
                 f"{risk.VERDICT_SUPPORT_MIN:g} in either run: {fl['changed'][0]} of the {fl['changed'][1]} changed "
                 f"verdicts, {fl['unchanged'][0]} of the {fl['unchanged'][1]} unchanged; in the seed-0 run alone: "
                 f"{fl['changed_first'][0]} of {fl['changed_first'][1]} and {fl['unchanged_first'][0]} of "
                 f"{fl['unchanged_first'][1]}.\n\n" + "\n".join(lines))
    return text


def main() -> None:
    start = time.time()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=5, help="as make validate: nominal episodes, first truth")
    ap.add_argument("--sweep-episodes", type=int, default=3)
    ap.add_argument("--engines", default="mujoco,pybullet")
    ap.add_argument("--population", default=None)
    ap.add_argument("--predictor-parts", default="untouched,selection", help="comma-separated parts to rerun crossval on")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts to measure")
    ap.add_argument("--shard", default="0/1", help="K/N: measure every N-th policy from the K-th; writes nothing")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    k, n = vp.shard(args.shard)
    fraction = sweep.PASS_FRACTION
    kw = dict(fraction=fraction, engines=tuple(args.engines.split(",")), episodes=args.episodes,
              sweep_episodes=args.sweep_episodes)
    pred_parts = tuple(p for p in args.predictor_parts.split(",") if p)
    recs: dict[str, list[dict]] = {p: [] for p in PARTS}
    parts = args.parts.split(",")
    for i, e in enumerate(e for e in vp.population(args.population) if e.part in parts):
        if i % n != k:
            continue
        s = score(vp.run(e, **kw), e.card, fraction)
        rec = {"name": e.name, "truth": vp.truth(e, args.episodes), "scores": {str(fraction): s},
               "retest": vp.retest_returns(e, RETEST_SEEDS)}
        if e.part in pred_parts and not s["refused"]:
            runs = vp.run(e, **kw), vp.run(e, seed=CROSSVAL_SEED, **kw)
            rec["rescored"] = score(runs[1], e.card, fraction)
            rec["support"] = [support(r, e.card, fraction) for r in runs]
        recs[e.part].append(rec)
        print(f"  {e.part:<9} {e.name:<30} retest drops "
              + " ".join(_f(v) for v in vp.drops(rec["retest"]).values())
              + (f"  verdict {s['verdict']} / {rec['rescored']['verdict']}, support "
                 + "/".join(f"{x:.2f}" for x in rec["support"]) if "rescored" in rec else ""), flush=True)
    if n > 1:
        print(f"shard {k}/{n} measured in {(time.time() - start) / 60:.1f} min")
        return
    results = {p: part_retest(r, fraction) for p, r in recs.items() if r}
    pred = {p: predictor_retest(recs[p], fraction) for p in pred_parts if recs.get(p)}
    text = tables(results, pred)
    wall = time.time() - start
    print(text + f"\n\ntotal wall time {wall / 60:.1f} min")
    out = ROOT / "validation" / "results"
    out.mkdir(exist_ok=True)
    suffix = "" if args.sweep_episodes == 3 else f"-sweep{args.sweep_episodes}"  # `make validate`'s 3: the main block
    (out / f"validate_retest{suffix}.json").write_text(json.dumps({"results": results, "predictor": pred, "wall_s": wall},
                                                                  indent=1, default=str))
    if args.no_write:
        return
    write_block(f"<!-- retest{suffix}:begin -->", f"<!-- retest{suffix}:end -->",
                f"Produced by `{invocation('validate-retest')}` on {dt.date.today().isoformat()}: engines {args.engines}; "
                f"first truth {args.episodes} episodes (seeds 0..{args.episodes - 1}), retest "
                f"{RETEST_EPISODES} (seeds {RETEST_SEEDS.start}..{RETEST_SEEDS.stop - 1}); crossvals with "
                f"{args.sweep_episodes} episodes per visited rung, predictor retest seed {CROSSVAL_SEED}; {wall / 60:.1f} "
                f"min wall for this invocation (measurements cached in .cache/validation are read back).\n\n{text}")


if __name__ == "__main__":
    main()
