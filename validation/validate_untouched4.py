"""The fourth untouched part: does the deployment rehearsal predict a deployment? (issue 33)

    PYTHONPATH=src .venv/bin/python validation/validate_untouched4.py [--phase measure|retest|seeds|score]
        [--shard K/N] [--no-write]

The rule, fixed 2026-12-03 with the freeze, before any policy ran in the part's realities:

- **Population**: the design part's 16 policies (the 12 RL-Zoo Hopper/HalfCheetah agents of
  tests/cards/zoo, the project's 4 policies/hopper-*) and validation/train_population.py's split
  ``untouched4`` (6 InvertedPendulum PPO policies, 5k-60k steps, with and without domain
  randomisation). Every one is scored, whatever it does.
- **Prediction**: crossval as a user runs it (untrusted policy files, default flags: lockstep, the rehearsal, sequential
  allocation, the ladders), MuJoCo, ``--episodes 10``, seed 0, no cache, no report. Read from
  ``risk.rehearsal``: the predicted loss, failure rate, class and support; per family, the ladder's
  predicted loss at the gap (the diagnosis); the ladder verdict's least headroom (the old design).
- **Truth**: validation/realities_untouched4.py's loop, 30 episodes (seeds 0-29) in the nominal
  loop and in each reality. True loss = 1 - mean reality return / mean nominal return (clipped to
  [0, 1]); true failure rate = share of reality episodes that end early; true class = the product's
  own bands (crosssim.rehearsal.band) applied to them. The retest (seeds 1000-1029) gives the
  ceiling any predictor can reach: the Spearman of the truth with itself.
- **Scores**: Spearman and MMRV of predicted loss against the all-gaps truth; of each family's
  diagnosis against its own reality's truth (actuation, timing = sensing, contact = environment);
  Kendall tau-b of the class against the true severity max(loss / 0.20, failure rate / 0.10);
  calibration: the share of policies whose true (loss, failure rate) lies in their class's band, and
  the policies whose truth is HIGH but were called MEDIUM or LOW; baselines: the nominal failure
  rate, the old verdict's least headroom (negated), the task's identity, random (0 in expectation).
- **Seeds**: crossvals at seeds 1-4 (five seeds in all; the issue asks ten, which this session's
  compute did not allow): the share of policies whose class is the same at every seed.
Targets (issue 33): Spearman >= 0.85 with MMRV <= 0.05, each family >= 0.85, tau >= 0.7,
calibration >= 80 % and no HIGH truth called MEDIUM or LOW, above every baseline. Misses are said.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))

import realities_untouched4 as ru  # noqa: E402
from validation_population import Entry, _policy_key, population, sealed_population, shard  # noqa: E402

CACHE = ROOT / ".cache" / "validation" / "untouched4"
PART = "untouched4"
TRUTH_SEEDS = range(0, 30)
RETEST_SEEDS = range(1000, 1030)
SEEDS = range(0, 5)
FAMILIES = ("actuation", "timing", "contact")


def entries() -> tuple[list[Entry], list[str]]:
    design = [e for e in population() if e.part == "design"]
    trained, missing = sealed_population(PART)
    return design + trained, missing


def _key(entry: Entry, tag: str) -> Path:
    return CACHE / f"{entry.name}-{tag}-{_policy_key(entry).hexdigest()[:12]}.json"


def truth(entry: Entry, seeds: range) -> dict:
    """Per-episode (return, steps, ended early) in the nominal loop and each reality; cached."""
    path = _key(entry, f"truth{seeds.start}-{seeds.stop}")
    if path.exists():
        return json.loads(path.read_text())
    from crosssim.card import load_card
    from crosssim.policies import load_policy
    from crosssim.runner.rollout import Harness

    card = load_card(entry.card)
    harness = Harness.from_card(card)
    # the policy as crossval loads it (an SB3 MLP's weights read as data, numpy forward): torch's
    # thread pool spun against the other processes of a loaded host (measured: 30 min for what took 2)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size)
    t = time.perf_counter()
    out = {r.family: ru.run_untouched4(harness, policy, r, episode_seeds=seeds)
           for r in (ru.NOMINAL, *ru.REALITIES)}
    out["seconds"] = time.perf_counter() - t
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))
    return out


def prediction(entry: Entry, seed: int) -> dict:
    """What crossval says (default flags, MuJoCo, 10 episodes) at ``seed``; cached."""
    path = _key(entry, f"crossval-s{seed}")
    if path.exists():
        return json.loads(path.read_text())
    from crosssim.evaluate import crossval
    from crosssim.runner.crossval import CrossvalConfig

    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        run = crossval(CrossvalConfig(policy=str(entry.card), engines=("mujoco",), episodes=10, seed=seed, out=tmp,
                                      report=False, cache=False))  # untrusted, as on a pull request
    risk = run.summary.risk
    reh = risk.rehearsal if risk else None
    out = {"seconds": time.perf_counter() - t, "verdict": reh.verdict if reh else (risk.verdict if risk else "none"),
           "loss": reh.loss if reh else None, "failure_rate": reh.failure_rate if reh else None,
           "support": reh.support if reh else {}, "decided": reh.decided if reh else None,
           "episodes": reh.episodes if reh else 0, "margin": reh.margin if reh else None,
           "harness": risk.harness_check.status if risk else None,
           "family_loss": {f: c.drop_at_gap for f, c in (risk.components.items() if risk else ())},
           "least_headroom": risk.aggregate.headroom if risk and risk.aggregate else None}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, default=float))
    return out


def true_numbers(t: dict) -> dict:
    """True loss and failure rate per family ("all" included) from one truth record."""
    from crosssim.rehearsal import band

    base = float(np.mean([r for r, _, _ in t["none"]]))
    out = {}
    for f in (*FAMILIES, "all"):
        ret = float(np.mean([r for r, _, _ in t[f]]))
        loss = float(np.clip((base - ret) / max(abs(base), 1e-9), 0.0, 1.0))
        fail = float(np.mean([e for _, _, e in t[f]]))
        out[f] = {"loss": loss, "fail": fail, "class": band(loss, fail)}
    out["nominal_fail"] = float(np.mean([e for _, _, e in t["none"]]))
    return out


def records(todo) -> list[dict]:
    """One record per policy measured so far: its seed-0 prediction, truth, retest and classes per seed."""
    out = []
    for e in todo:
        if not _key(e, "crossval-s0").exists() or not _key(e, f"truth{TRUTH_SEEDS.start}-{TRUTH_SEEDS.stop}").exists():
            continue
        rec = {"name": e.name, "task": e.task, "part": e.part, "pred": prediction(e, 0),
               "truth": true_numbers(truth(e, TRUTH_SEEDS))}
        if _key(e, f"truth{RETEST_SEEDS.start}-{RETEST_SEEDS.stop}").exists():
            rec["retest"] = true_numbers(truth(e, RETEST_SEEDS))
        rec["seeds"] = [prediction(e, s)["verdict"] for s in SEEDS if _key(e, f"crossval-s{s}").exists()]
        out.append(rec)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase", choices=("measure", "retest", "seeds", "score"), default="score")
    ap.add_argument("--shard", default="0/1")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    from validation_population import frozen, sealed

    seal = sealed("validation/realities_untouched4.py")
    if "CHANGED" in seal or "not sealed" in seal or frozen(PART) is None:
        raise SystemExit(f"validation/realities_untouched4.py: seal {seal}, freeze {frozen(PART)}: the part is "
                         "scored only in its sealed realities with a design frozen after the seal (validation/seals.yaml)")
    todo, missing = entries()
    if missing:
        print(f"not trained yet (validation/train_population.py --split {PART}): {', '.join(missing)}")
    k, n = shard(args.shard)
    if args.phase != "score":
        for entry in todo[k::n]:
            t = time.perf_counter()
            if args.phase == "measure":
                prediction(entry, 0)
                truth(entry, TRUTH_SEEDS)
            elif args.phase == "retest":
                truth(entry, RETEST_SEEDS)
            else:
                for s in SEEDS[1:]:
                    prediction(entry, s)
            print(f"{entry.name}: {args.phase} {time.perf_counter() - t:.0f} s", flush=True)
        return
    from untouched4_scores import report

    report(records(todo), write=not args.no_write)


if __name__ == "__main__":
    main()
