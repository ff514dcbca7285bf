"""Leave one engine out: does the engines' disagreement predict a policy's drop in an engine nobody
looked at, better than the reference engine's rehearsal alone? (issue 33, "the mission's own question")

    PYTHONPATH=src .venv/bin/python validation/leave_one_engine_out.py [--episodes 5] [--shard K/N] [--score]

Rule (fixed 2026-12-03 before it ran): the fourth untouched part's population
(validation/validate_untouched4.py). Each policy runs nominal episodes (``--no-risk``, 5 per engine,
seed 0) in MuJoCo, PyBullet, Newton (MuJoCo-Warp on CPU) and PhysX. The truth is the drop in the
left-out engine, PhysX: 1 - PhysX's mean return / MuJoCo's, clipped to [0, 1]. Predictors:
- the reference engine's rehearsal: the predicted loss of validate_untouched4.py's MuJoCo crossval
  (seed 0);
- the disagreement of the three engines at nominal: 1 - the smallest mean return / the largest,
  over MuJoCo, PyBullet and Newton.
Scores: Spearman of each predictor with the truth, and the partial Spearman of the disagreement with
the truth given the rehearsal (ranks, linear residuals): positive means the disagreement carries
information the rehearsal lacks. Whatever it says goes into README and docs/risk.md.
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

from validate_untouched4 import _key, entries, prediction  # noqa: E402
from validation_population import shard  # noqa: E402

ENGINES = ("mujoco", "pybullet", "newton-mujoco-warp", "physx")
LEFT_OUT = "physx"


def nominal_returns(entry, episodes: int) -> dict:
    """Mean nominal return per engine (None where the engine failed every episode); cached."""
    path = _key(entry, f"engines{episodes}")
    if path.exists():
        return json.loads(path.read_text())
    from crosssim.evaluate import crossval
    from crosssim.runner.crossval import CrossvalConfig

    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        run = crossval(CrossvalConfig(policy=str(entry.card), engines=ENGINES, episodes=episodes, seed=0, out=tmp,
                                      report=False, cache=False, risk=False, trust_policy_code=True))
        import pandas as pd

        df = pd.read_parquet(Path(tmp) / "results.parquet")
    ok = df[df.failure.isna() & (df.condition == "nominal")]
    out = {"returns": {e: (float(ok[ok.engine == e]["return"].mean()) if (ok.engine == e).any() else None) for e in ENGINES},
           "seconds": time.perf_counter() - t}
    del run
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out))
    return out


def _ranks(x):
    from scipy.stats import rankdata

    return rankdata(x)


def partial_spearman(x, y, z) -> float:
    """Spearman of x and y with z's (rank-linear) part removed from both."""
    rx, ry, rz = _ranks(x), _ranks(y), _ranks(z)
    res = lambda a: a - np.polyval(np.polyfit(rz, a, 1), rz)  # noqa: E731
    a, b = res(rx), res(ry)
    return float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else float("nan")


def score(todo, episodes: int) -> str:
    from crosssim.stats import spearman

    rows, truth, reh, dis = [], [], [], []
    for e in todo:
        if not _key(e, f"engines{episodes}").exists() or not _key(e, "crossval-s0").exists():
            continue
        r = nominal_returns(e, episodes)["returns"]
        p = prediction(e, 0)
        three = [r[k] for k in ENGINES[:3]]
        if r["mujoco"] is None or r[LEFT_OUT] is None or p["loss"] is None or any(v is None for v in three):
            rows.append(f"| {e.name} | not scored (an engine failed or no rehearsal: {p['verdict']}) | | |")
            continue
        t = float(np.clip(1 - r[LEFT_OUT] / r["mujoco"], 0, 1)) if r["mujoco"] > 0 else float("nan")
        d = float(1 - min(three) / max(three)) if max(three) > 0 else float("nan")
        truth.append(t), reh.append(p["loss"]), dis.append(d)
        rows.append(f"| {e.name} | {t:.2f} | {p['loss']:.2f} | {d:.2f} |")
    n = len(truth)
    out = ["| policy | PhysX drop (truth) | MuJoCo rehearsal loss | disagreement of the other three |",
           "|---|---|---|---|", *rows, ""]
    if n >= 4:
        t, r, d = (np.asarray(v, float) for v in (truth, reh, dis))
        idx = np.random.default_rng(0).integers(0, n, (2000, n))

        def ci(f):
            vals = np.array([f(i) for i in idx])
            vals = vals[np.isfinite(vals)]
            return f"[{np.percentile(vals, 2.5):.2f}, {np.percentile(vals, 97.5):.2f}]"
        out += [f"n = {n} (95 % intervals: 2,000 bootstrap resamples of the policies): "
                f"Spearman(rehearsal, truth) = {spearman(r, t):.2f} {ci(lambda i: spearman(r[i], t[i]))}; "
                f"Spearman(disagreement, truth) = {spearman(d, t):.2f} {ci(lambda i: spearman(d[i], t[i]))}; "
                f"partial Spearman(disagreement, truth | rehearsal) = {partial_spearman(d, t, r):.2f} "
                f"{ci(lambda i: partial_spearman(d[i], t[i], r[i]))}"]
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--shard", default="0/1")
    ap.add_argument("--score", action="store_true")
    args = ap.parse_args(argv)
    todo, _ = entries()
    if args.score:
        text = score(todo, args.episodes)
        print(text)
        (ROOT / "validation" / "results" / "leave_one_engine_out.md").write_text(text + "\n")
        return
    k, n = shard(args.shard)
    for e in todo[k::n]:
        t = time.perf_counter()
        nominal_returns(e, args.episodes)
        print(f"{e.name}: {time.perf_counter() - t:.0f} s", flush=True)


if __name__ == "__main__":
    main()
