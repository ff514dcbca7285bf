"""A small pilot of the dose-response verdict against held-out realities (not `make validate`).

For each policy (the RL Zoo Hopper and HalfCheetah agents in ../shared/fixtures and the
project's own hopper policies in policies/), one crossval in MuJoCo only (the reference engine;
kept small because the machine is shared) gives margins, headroom and a verdict; the realities of
validation/realities.py give the true drop per family. It prints, per policy, the verdict and headroom
next to the true drops, then Kendall's tau of the verdict class (low < medium < high) against the
all-gaps true drop and Spearman of each family's headroom (negated) against its own reality, for
Hopper and HalfCheetah separately. Nothing here was used to choose the ladders, defaults or
thresholds (they were fixed before this ran), so both groups are untouched by the design.

    .venv/bin/python validation/pilot_margins.py [--episodes 5] [--sweep-episodes 3] [--out .cache/pilot]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))

from realities import REALITIES, run_reality  # noqa: E402

from crosssim.card import load_card  # noqa: E402
from crosssim.evaluate import crossval  # noqa: E402
from crosssim.policies import load_policy  # noqa: E402
from crosssim.runner import CrossvalConfig  # noqa: E402
from crosssim.runner.rollout import Harness  # noqa: E402
from crosssim.stats import kendall, spearman  # noqa: E402

CLASS = {"low": 0, "medium": 1, "high": 2}


def cards() -> list[Path]:
    zoo = sorted((ROOT / "tests" / "cards" / "zoo").glob("*.yaml")) if (ROOT.parent / "shared" / "fixtures").is_dir() else []
    own = sorted((ROOT / "policies").glob("hopper-*/card.yaml"))
    return zoo + own


def evaluate(path: Path, episodes: int, sweep_episodes: int, out: Path) -> dict:
    card = load_card(path)
    record = out / f"{card.name}.json"
    if record.exists():
        return json.loads(record.read_text())
    summary = crossval(CrossvalConfig(policy=str(path), engines=("mujoco",), episodes=episodes,
                                      sweep_episodes=sweep_episodes, out=str(out / card.name), report=False,
                                      workers=1)).summary
    risk = summary.risk
    h = Harness.from_card(card)
    policy = load_policy(card, obs_size=h.obs_size, action_size=h.action_size)
    sim = summary.engines["mujoco"].mean_return
    truth = {}
    for r in REALITIES:
        real = float(np.mean(run_reality(h, policy, r, episode_seeds=range(summary.seed, summary.seed + episodes))))
        truth[r.family] = float(np.clip((sim - real) / max(abs(sim), 1e-9), 0.0, 1.0))
    rec = {"name": card.name, "task": card.task, "verdict": risk.verdict, "driver": risk.driver, "sim_return": sim,
           "headroom": {f: c.headroom for f, c in risk.components.items()},
           "margin": {f: c.margin for f, c in risk.components.items()}, "truth": truth}
    out.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(rec, indent=1))
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--sweep-episodes", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / ".cache" / "pilot"))
    args = ap.parse_args()
    recs = [evaluate(p, args.episodes, args.sweep_episodes, Path(args.out)) for p in cards()]
    print("| policy | verdict | headroom act / tim / con | true drop act / tim / con / all |")
    print("|---|---|---|---|")
    for r in recs:
        h = " / ".join("—" if r["headroom"].get(f) is None else f"{r['headroom'][f]:.2f}" for f in ("actuation", "timing", "contact"))
        t = " / ".join(f"{r['truth'][f]:.2f}" for f in ("actuation", "timing", "contact", "all"))
        print(f"| {r['name']} | {r['verdict']} | {h} | {t} |")
    for task in sorted({r["task"] for r in recs}):
        group = [r for r in recs if r["task"] == task and r["verdict"] in CLASS]
        classes = [CLASS[r["verdict"]] for r in group]
        tau = kendall(classes, [r["truth"]["all"] for r in group]) if len(group) > 2 else float("nan")
        fam = {f: spearman([-(r["headroom"][f] or np.nan) for r in group], [r["truth"][f] for r in group])
               for f in ("actuation", "timing", "contact")}
        counts = {k: classes.count(v) for k, v in CLASS.items()}
        print(f"\n{task}: {len(group)} policies with a verdict, classes {counts}; Kendall tau(class, all-gaps drop) "
              f"{tau:.2f}; Spearman(-headroom, own reality) " + ", ".join(f"{f} {v:.2f}" for f, v in fam.items()))


if __name__ == "__main__":
    main()
