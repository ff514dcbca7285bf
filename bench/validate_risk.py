"""Does crosssim's risk profile predict transfer? (`make validate`)

For every policy of the population (the RL Zoo agents in ../shared/fixtures and the project's
own, bench/train_population.py), it runs crossval (profile) and the held-out realities
(bench/realities.py: true drops), then reports, for each component against its own reality and
the aggregate against the all-gaps reality: Spearman, Pearson and MMRV; the same for the
baselines (reference-engine return alone, each single engine's drop, a random score) and for the
ablation without cross-engine terms (sweeps in the reference engine only). The method has no
fitted weights: nothing is tuned on these policies. Results are cached per policy in
.cache/validation/; the table goes to docs/risk.md between the markers.

    .venv/bin/python bench/validate_risk.py [--episodes 5] [--engines mujoco,pybullet] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from realities import REALITIES, run_reality  # noqa: E402

from crosssim.card import load_card  # noqa: E402
from crosssim.perturb import FAMILIES  # noqa: E402
from crosssim.policies import load_policy  # noqa: E402
from crosssim.results import to_dict  # noqa: E402
from crosssim.risk import clipped_drop, risk_profile  # noqa: E402
from crosssim.runner.cache import path_digest  # noqa: E402
from crosssim.evaluate import crossval  # noqa: E402
from crosssim.runner import CrossvalConfig  # noqa: E402
from crosssim.runner.rollout import Harness  # noqa: E402
from crosssim.stats import mmrv, pearson, spearman  # noqa: E402

CACHE = ROOT / ".cache" / "validation"
DOC = ROOT / "docs" / "risk.md"
BEGIN, END = "<!-- validate:begin -->", "<!-- validate:end -->"


def population_cards() -> list[Path]:
    zoo = sorted((ROOT / "tests" / "cards" / "zoo").glob("*.yaml")) if (ROOT.parent / "shared" / "fixtures").is_dir() else []
    own = sorted((ROOT / ".cache" / "population").glob("*/card.yaml"))
    return zoo + own


def _key(card: Path, engines, episodes) -> str:
    """What the engine runs and the realities depend on; not risk.py (the profile is recomputed).

    Engine and harness code are not in it either, on purpose: a full re-evaluation takes about an
    hour, so delete .cache/validation after a change to them that should move the numbers.
    """
    c = load_card(card)
    h = hashlib.sha256(card.read_bytes() + path_digest(c.policy_file).encode() + f"{engines}{episodes}".encode())
    for f in (ROOT / "bench" / "realities.py", ROOT / "src" / "crosssim" / "perturb.py"):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def evaluate(card_path: Path, engines: tuple[str, ...], episodes: int) -> dict:
    """Runs (cached) plus the risk profile, recomputed from the cached rows with today's risk.py."""
    card = load_card(card_path)
    key = _key(card_path, engines, episodes)
    cached = CACHE / f"{card.name}-{key}.json"
    runs = CACHE / "runs" / f"{card.name}-{key}"  # the rows the record was made from
    if cached.exists() and (runs / "results.parquet").exists():
        record = json.loads(cached.read_text())
    else:
        record = _run(card_path, card, engines, episodes, runs)
        CACHE.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps({k: v for k, v in record.items() if k != "risk"}, indent=1))
    df = pd.read_parquet(runs / "results.parquet")
    record["risk"] = to_dict(risk_profile(df, card, reference=record["reference"]))
    return record


def _run(card_path: Path, card, engines: tuple[str, ...], episodes: int, out: Path) -> dict:
    summary = crossval(CrossvalConfig(policy=str(card_path), engines=engines, episodes=episodes,
                                      out=str(out), risk=True, workers=2)).summary
    df = pd.read_parquet(out / "results.parquet")
    if df.failure.notna().all():
        raise SystemExit(f"{card.name}: every episode failed ({df.failure.iloc[0]}); not caching")
    means = df[df.failure.isna()].groupby(["engine", "condition"])["return"].mean()
    harness = Harness.from_card(card)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size)
    sim = summary.engines[summary.reference_engine].mean_return
    truth, real = {}, {}
    for r in REALITIES:
        real[r.family] = float(np.mean(run_reality(harness, policy, r, episode_seeds=range(episodes))))
        truth[r.family] = float(np.clip((sim - real[r.family]) / max(abs(sim), 1e-9), 0.0, 1.0))
    return {"name": card.name, "task": card.task, "source": "zoo" if card.name.startswith("zoo-") else "own",
            "reference": summary.reference_engine, "sim_return": sim,
            "means": {f"{e}/{c}": float(v) for (e, c), v in means.items()}, "truth": truth, "reality_return": real}


V1 = "design v1: mean over engines of the drop from the reference's nominal (x disagreement for all gaps)"


def _profile(risk: dict, family: str) -> float:
    """The profile's predicted drop for ``family`` ("all": the aggregate); NaN on a harness mismatch
    (no risk numbers then)."""
    if risk["aggregate"] is None:
        return float("nan")
    # Dose-response design: a family's score is its predicted loss at the expected deployment gap.
    return risk["aggregate"]["drop"] if family == "all" else risk["components"][family]["drop_at_gap"]


def _disagreement(risk: dict) -> float:
    """The engines' spread of margins, largest over the families [severity] (the dose-response
    design's engine disagreement); NaN without risk numbers."""
    spreads = [c["engine_spread"] for c in (risk.get("components") or {}).values()]
    return float(np.nanmax(spreads)) if spreads and np.isfinite(spreads).any() else float("nan")


def predictors(rec: dict, engines: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Scores per target family: the profile, the ablation, earlier designs and the baselines."""
    ref, m = rec["reference"], rec["means"]
    base = m[f"{ref}/nominal"]
    comps = rec["risk"]["components"]
    out: dict[str, dict[str, float]] = {}
    for fam in [*FAMILIES, "all"]:
        cond = "combined" if fam == "all" else fam
        own = [clipped_drop(m[f"{e}/nominal"], m.get(f"{e}/{cond}", np.nan)) for e in engines
               if f"{e}/nominal" in m and abs(m[f"{e}/nominal"]) > 1e-9]
        v1 = [clipped_drop(base, m[f"{e}/{cond}"]) for e in engines if f"{e}/{cond}" in m]
        dis = _disagreement(rec["risk"])
        scores = {
            "profile": _profile(rec["risk"], fam),
            "ablation: sweeps in reference engine only": clipped_drop(base, m.get(f"{ref}/{cond}", np.nan)),
            V1: (1 - (1 - np.mean(v1)) * (1 - dis)) if fam == "all" else float(np.mean(v1)),
            "variant: each engine vs its own nominal, unweighted mean": float(np.mean(own)) if own else np.nan,
            "baseline: reference return (negated)": -base,
        }
        for e in engines:
            if e != ref:
                scores[f"baseline: {e} nominal drop"] = clipped_drop(base, m.get(f"{e}/nominal", np.nan))
        out[fam] = scores
    return out


DESIGNS = ("profile", "ablation: sweeps in reference engine only",
           "variant: each engine vs its own nominal, unweighted mean")


def split_check(records: list[dict], engines: tuple[str, ...]) -> str:
    """Design choice and the disagreement weight: chosen on the Hopper policies, reported on HalfCheetah.

    1. Mean Spearman over the four realities of each candidate design (the profile's weighted
       engine sensitivities, v1, reference-only sweeps, the unweighted mean) on each split.
    2. score = profile + w * disagreement, w chosen on Hopper (grid, best mean Spearman), reported
       on the HalfCheetah policies, which it never saw.
    """
    fams = [*FAMILIES, "all"]
    preds = [predictors(r, engines) for r in records]
    train = [i for i, r in enumerate(records) if r["task"] == "Hopper"]
    test = [i for i, r in enumerate(records) if r["task"] != "Hopper"]
    if len(train) < 3 or len(test) < 3:
        return "(not enough policies per task for the split)"

    def spear(idx, name, w=0.0):
        out = []
        for fam in fams:
            s = [preds[i][fam][name] + w * _disagreement(records[i]["risk"]) for i in idx]
            out.append(spearman(s, [records[i]["truth"][fam] for i in idx]))
        return out

    lines = [f"Design selection: mean Spearman over the four realities, chosen on the {len(train)} Hopper "
             f"policies, confirmed on the {len(test)} HalfCheetah policies:", "",
             "| design | Hopper (selection) | HalfCheetah (held out) |", "|---|---|---|"]
    for name in (V1, *DESIGNS):
        lines.append(f"| {name} | {np.nanmean(spear(train, name)):.3f} | {np.nanmean(spear(test, name)):.3f} |")
    grid = [0.0, 0.1, 0.25, 0.5, 1.0, 2.0]
    best = max(grid, key=lambda w: np.nanmean(spear(train, "profile", w)))
    lines += ["", f"Weight on engine disagreement added to the profile, chosen on the Hopper policies: w = {best}. "
              f"On the held-out HalfCheetah policies (Spearman per reality {', '.join(fams)}):", "",
              "| predictor | " + " | ".join(fams) + " |", "|---" * (len(fams) + 1) + "|"]
    for label, w in (("profile (w = 0)", 0.0), (f"profile + {best} x disagreement", best)):
        lines.append(f"| {label} | " + " | ".join(f"{v:.2f}" for v in spear(test, "profile", w)) + " |")
    return "\n".join(lines)


def table(records: list[dict], engines: tuple[str, ...]) -> tuple[str, dict]:
    preds = [predictors(r, engines) for r in records]
    rng = np.random.default_rng(0)
    lines, numbers = [], {}
    lines.append("| target reality | predictor | Spearman | Pearson | MMRV |")
    lines.append("|---|---|---|---|---|")
    for fam in [*FAMILIES, "all"]:
        truth = np.array([r["truth"][fam] for r in records])
        names = list(preds[0][fam]) + ["baseline: random score"]
        for name in names:
            s = rng.uniform(size=len(records)) if name.endswith("random score") else np.array([p[fam][name] for p in preds])
            row = (spearman(s, truth), pearson(s, truth), mmrv(s, truth))
            numbers[f"{fam}/{name}"] = row
            label = ("aggregate" if fam == "all" else f"{fam} component") if name == "profile" else name
            lines.append(f"| {fam} | {label} | {row[0]:.2f} | {row[1]:.2f} | {row[2]:.3f} |")
    fams = [*FAMILIES, "all"]
    lines += ["", "Spearman between the realities' true drops (how differently they rank the policies):", "",
              "| | " + " | ".join(fams) + " |", "|---" * (len(fams) + 1) + "|"]
    for a in fams:
        ta = [r["truth"][a] for r in records]
        lines.append(f"| {a} | " + " | ".join(f"{spearman(ta, [r['truth'][b] for r in records]):.2f}" for b in fams) + " |")
    return "\n".join(lines), numbers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--engines", default="mujoco,pybullet")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--cached-only", action="store_true", help="tabulate the policies already evaluated, run nothing")
    args = ap.parse_args()
    engines = tuple(args.engines.split(","))
    cards = population_cards()
    records = []
    for k, card in enumerate(cards):
        if args.cached_only and not (CACHE / f"{load_card(card).name}-{_key(card, engines, args.episodes)}.json").exists():
            continue
        rec = evaluate(card, engines, args.episodes)
        records.append(rec)
        print(f"[{k + 1}/{len(cards)}] {rec['name']:<34} sim {rec['sim_return']:8.1f}  verdict {rec['risk']['verdict']:<8}"
              f" aggregate {rec['risk']['aggregate']['drop']:.2f}  true(all) {rec['truth']['all']:.2f}", flush=True)
    text, numbers = table(records, engines)
    text += "\n\n" + split_check(records, engines)
    cmd = " ".join(["make validate", *(["ARGS=\"" + " ".join(sys.argv[1:]) + "\""] if sys.argv[1:] else [])])
    per_policy = ["", "| policy | verdict | " + " | ".join(f"{f} pred / true" for f in [*FAMILIES, "all"]) + " |",
                  "|---|---|" + "---|" * (len(FAMILIES) + 1)]
    for r in records:
        comp = r["risk"]["components"]
        cells = [f"{comp[f]['drop_at_gap']:.2f} / {r['truth'][f]:.2f}" for f in FAMILIES]
        cells.append(f"{r['risk']['aggregate']['drop']:.2f} / {r['truth']['all']:.2f}")
        per_policy.append(f"| {r['name']} | {r['risk']['verdict']} | " + " | ".join(cells) + " |")
    block = (f"{BEGIN}\nProduced by `{cmd}` on {dt.date.today().isoformat()}: {len(records)} policies, "
             f"{args.episodes} episodes per engine and condition, engines {', '.join(engines)}.\n\n{text}\n"
             + "\n".join(per_policy) + f"\n{END}")
    print(text)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "validate_risk.json").write_text(json.dumps({"records": records, "metrics": numbers}, indent=1))
    if not args.no_write and DOC.exists():
        doc = DOC.read_text()
        if BEGIN in doc and END in doc:
            DOC.write_text(doc[:doc.index(BEGIN)] + block + doc[doc.index(END) + len(END):])


if __name__ == "__main__":
    main()
