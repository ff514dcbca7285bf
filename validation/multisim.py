"""Does multi-engine training help? (issue #8's experiment; results in docs/multisim.md)

Four arms, the same algorithm (SB3 PPO through `crosssim train`), budget, seeds and number of
sub-environments:

  (a) mujoco       MuJoCo only
  (b) mujoco-dr    MuJoCo only, domain randomisation (crosssim.perturb.RandomizationRanges)
  (c) engines      MuJoCo, PyBullet and Newton (MuJoCo-Warp), round-robin over sub-environments
  (d) engines-dr   the three engines with domain randomisation

Each policy then goes through the validation benchmark's evaluation (validation/validate_risk.py):
crosssim's risk profile from a crossval in MuJoCo and PyBullet, and the true drop in the held-out
realities of validation/realities.py, which no arm trains in. Policies land in .cache/multisim/hopper-<arm>-s<seed>/
(kept; delete a folder to retrain); evaluations are cached like the validation's.

    make multisim   (.venv/bin/python validation/multisim.py [--seeds 0,1] [--steps 150000] [--train-only] [--no-write])
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))

from realities import REALITIES  # noqa: E402
from validate_risk import evaluate  # noqa: E402

from crosssim.stats import mmrv, spearman  # noqa: E402
from crosssim.train import TrainConfig, train  # noqa: E402

OUT = ROOT / ".cache" / "multisim"
DOC = ROOT / "docs" / "multisim.md"
BEGIN, END = "<!-- multisim:begin -->", "<!-- multisim:end -->"
TRAIN_ENGINES = ("mujoco", "pybullet", "newton-mujoco-warp")
ARMS = {
    "mujoco": (("mujoco",), False),
    "mujoco-dr": (("mujoco",), True),
    "engines": (TRAIN_ENGINES, False),
    "engines-dr": (TRAIN_ENGINES, True),
}
N_ENVS = 3  # one sub-environment per engine in the multi-engine arms; the same count everywhere


def train_arm(arm: str, seed: int, steps: int) -> Path:
    folder = OUT / f"hopper-{arm}-s{seed}"
    card = folder / "card.yaml"
    if card.exists():
        return card
    engines, dr = ARMS[arm]
    start = time.time()
    train(TrainConfig(task="Hopper", engines=engines, steps=steps, n_envs=N_ENVS, seed=seed, randomize=dr,
                      out=str(folder)))
    print(f"trained {folder.name}: {time.time() - start:.0f} s", flush=True)
    return card


def _mean_sd(values: list[float]) -> str:
    v = np.asarray(values, float)
    if len(v) < 2:
        return f"{v.mean():.2f}"
    return f"{v.mean():.2f} ± {v.std(ddof=1):.2f}"


def _real(rec: dict, family: str) -> float:
    """Return in a reality: stored by newer evaluations; else from the (unclipped) drop."""
    if "reality_return" in rec:
        return rec["reality_return"][family]
    return rec["sim_return"] * (1 - rec["truth"][family])


def _pred(records: list[dict], family: str) -> list[float]:
    risk = [r["risk"] for r in records]
    return [np.nan if k["aggregate"] is None else k["aggregate"]["drop"] if family == "all"
            else k["components"][family]["drop_at_gap"] for k in risk]  # NaN: a harness mismatch has no numbers


def tabulate(records: dict[str, list[dict]], steps: int, seeds: list[int], episodes: int) -> str:
    fams = [r.family for r in REALITIES]
    lines = [f"Produced by `.venv/bin/python validation/multisim.py --seeds {','.join(map(str, seeds))} --steps {steps}` "
             f"on {dt.date.today().isoformat()}: Hopper, SB3 PPO, {steps:,} steps, {N_ENVS} sub-environments, "
             f"seeds {', '.join(map(str, seeds))}; {episodes} episodes per engine, condition and reality. "
             "Cells: mean ± standard deviation over seeds.", "",
             "| arm | MuJoCo return | PyBullet return | risk aggregate | verdict(s) | "
             + " | ".join(f"true drop {f}" for f in fams) + " | return in all-gaps reality |",
             "|---|---|---|---|---|" + "---|" * len(fams) + "---|"]
    for arm, recs in records.items():
        if not recs:
            continue
        sim = [r["sim_return"] for r in recs]
        pyb = [r["means"].get("pybullet/nominal", np.nan) for r in recs]
        agg = [np.nan if r["risk"]["aggregate"] is None else r["risk"]["aggregate"]["drop"] for r in recs]
        verdicts = ", ".join(r["risk"]["verdict"] for r in recs)
        drops = [_mean_sd([r["truth"][f] for r in recs]) for f in fams]
        lines.append(f"| {arm} | {_mean_sd(sim)} | {_mean_sd(pyb)} | {_mean_sd(agg)} | {verdicts} | "
                     + " | ".join(drops) + f" | {_mean_sd([_real(r, 'all') for r in recs])} |")
    lines += ["", "Absolute return in each held-out reality (what a robot would get), mean ± sd over seeds:", "",
              "| arm | MuJoCo (no gap) | " + " | ".join(fams) + " |", "|---|---|" + "---|" * len(fams)]
    for arm, recs in records.items():
        if recs:
            lines.append(f"| {arm} | {_mean_sd([r['sim_return'] for r in recs])} | "
                         + " | ".join(_mean_sd([_real(r, f) for r in recs]) for f in fams) + " |")
    every = [r for recs in records.values() for r in recs]
    lines += ["", f"The risk profile on these {len(every)} policies, none of which took part in choosing its design "
              "(Spearman / MMRV of each component against its own reality):", "",
              "| " + " | ".join(fams) + " |", "|---" * len(fams) + "|",
              "| " + " | ".join(f"{spearman(_pred(every, f), [r['truth'][f] for r in every]):.2f} / "
                                f"{mmrv(_pred(every, f), [r['truth'][f] for r in every]):.3f}" for f in fams) + " |"]
    lines += ["", "Per policy:", "", "| policy | MuJoCo | PyBullet | aggregate | "
              + " | ".join(f"{f} pred / true" for f in fams) + " |", "|---|---|---|---|" + "---|" * len(fams)]
    for arm, recs in records.items():
        for r in recs:
            comp = r["risk"]["components"]
            cells = [f"{(comp[f]['drop'] if f in comp else r['risk']['aggregate']['drop']):.2f} / {r['truth'][f]:.2f}"
                     for f in fams]
            lines.append(f"| {r['name']} | {r['sim_return']:.0f} | {r['means'].get('pybullet/nominal', np.nan):.0f} | "
                         f"{r['risk']['aggregate']['drop']:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--steps", type=int, default=150_000)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--train-only", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    arms = args.arms.split(",")
    cards = {arm: [train_arm(arm, s, args.steps) for s in seeds] for arm in arms}
    if args.train_only:
        return
    records = {arm: [evaluate(c, ("mujoco", "pybullet"), args.episodes) for c in cs] for arm, cs in cards.items()}
    text = tabulate(records, args.steps, seeds, args.episodes)
    print(text)
    if not args.no_write and DOC.exists():
        doc = DOC.read_text()
        if BEGIN in doc and END in doc:
            DOC.write_text(doc[:doc.index(BEGIN)] + f"{BEGIN}\n{text}\n{END}" + doc[doc.index(END) + len(END):])


if __name__ == "__main__":
    main()
