"""Memory over many policies in a row: the main process's resident memory after each crossval and
each engine worker's peak (what a CI job checking 30 policies holds at worst).

    .venv/bin/python bench/bench_memory.py [--policies 30] [--card tests/cards/robots/unitree-g1.yaml]

Every run is a real ``crossval`` (MuJoCo column, sandboxed policy, short episodes, no report), each
of its own policy card path, one after another in this one process.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mb() -> float:
    """Resident memory now [MB] (not the peak: growth across runs is the question)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", type=int, default=30)
    parser.add_argument("--card", default=str(ROOT / "tests" / "cards" / "robots" / "unitree-g1.yaml"))
    parser.add_argument("--one-at-a-time", action="store_true", help="run each crossval with --one-at-a-time "
                                                                       "(default: lockstep, as crossval's default)")
    args = parser.parse_args(argv)
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    out = Path(tempfile.mkdtemp(prefix="crosssim-bench-memory-"))
    main_rss, worker_peak = [], []
    for k in range(args.policies):
        run = crossval(CrossvalConfig(policy=args.card, engines=("mujoco",), episodes=2, max_steps=50, risk=False,
                                      report=False, cache=False, out=str(out / str(k)), batch=not args.one_at_a_time))
        main_rss.append(rss_mb())
        worker_peak.append(max(w.get("max_rss_mb", 0.0) for w in run.summary.workers.values()))
        print(f"policy {k + 1:2d}: main RSS {main_rss[-1]:6.1f} MB, worker peak RSS {worker_peak[-1]:6.1f} MB",
              flush=True)
    five = min(4, len(main_rss) - 1)
    growth = (main_rss[-1] - main_rss[five]) / max(len(main_rss) - 1 - five, 1)
    print(f"main RSS after {five + 1} / after {len(main_rss)}: {main_rss[five]:.1f} / {main_rss[-1]:.1f} MB "
          f"({growth:+.2f} MB per policy); worker peak RSS min / max: {min(worker_peak):.1f} / {max(worker_peak):.1f} MB")


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    main()
