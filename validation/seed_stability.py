"""Does the verdict hold still? The same policy's crossval under N seeds, class by class.

    PYTHONPATH=src .venv/bin/python validation/seed_stability.py [--seeds 10] [--engines mujoco]
        [--episodes 10] [CARD ...]

Each seed is a whole crossval as a user runs it (default flags: lockstep, rehearsal, sequential
allocation, ladders), cache off, no report. Prints one row per policy: the class per seed, the
share of seeds giving the most frequent class, and the episodes the sequential allocation used.
The issue's target: the same class for at least 9 of 10 seeds for at least 90 % of policies.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CARDS = [ROOT / "policies" / name / "card.yaml"
                 for name in ("hopper-ppo-mujoco", "hopper-ppo-150k-dr-s0", "hopper-ppo-150k-nodr-s0")]


def classes(card: Path, seeds: int, engines: tuple[str, ...], episodes: int) -> list[tuple[str, int, float]]:
    """(class, episodes per engine used, support) per seed."""
    from crosssim.evaluate import crossval
    from crosssim.runner.crossval import CrossvalConfig

    out = []
    for seed in range(seeds):
        with tempfile.TemporaryDirectory() as tmp:
            run = crossval(CrossvalConfig(policy=str(card), engines=engines, episodes=episodes, seed=seed, out=tmp,
                                          report=False, cache=False))
        risk = run.summary.risk
        reh = risk.rehearsal if risk else None
        if reh is None:
            out.append((risk.verdict if risk else "none", run.summary.episodes, float("nan")))
        else:
            out.append((reh.verdict, reh.episodes // max(1, sum(e.counted for e in reh.engines.values())),
                        reh.support.get(reh.verdict, 0.0)))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cards", nargs="*", type=Path, default=DEFAULT_CARDS)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--engines", default="mujoco")
    parser.add_argument("--episodes", type=int, default=10)
    args = parser.parse_args(argv)
    engines = tuple(args.engines.split(","))
    print(f"| policy | class per seed (0..{args.seeds - 1}) | most frequent | same class | episodes used "
          f"(per engine) | seconds |")
    print("|---|---|---|---|---|---|")
    for card in args.cards:
        t = time.perf_counter()
        got = classes(card, args.seeds, engines, args.episodes)
        counts = collections.Counter(c for c, _, _ in got)
        top, n = counts.most_common(1)[0]
        used = sorted(e for _, e, _ in got)
        print(f"| {card.parent.name} | {' '.join(c for c, _, _ in got)} | {top} | {n}/{len(got)} | "
              f"{used[0]}-{used[-1]} | {time.perf_counter() - t:.0f} |", flush=True)


if __name__ == "__main__":
    main()
