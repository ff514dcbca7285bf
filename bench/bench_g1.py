"""G1 episodes per second, side by side in one run: the peers' de-paced deploy loop (peer_g1.py)
against crosssim's MuJoCo column in lockstep (the default) and one episode at a time (``--one-at-a-time``).

    .venv/bin/python bench/bench_g1.py [--episodes 30]

Each crosssim run is a whole ``crossval --engines mujoco --no-risk --no-report --no-cache``
(worker spawn, sandboxed policy process, model load included), as a user runs it; the peer loop
loads once and runs its episodes back to back. Also measured: crosssim's start-up (import of the
CLI, and a 1-episode, 1-step run). The machine is shared: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
G1 = ROOT / "tests" / "cards" / "robots" / "unitree-g1.yaml"


def crossval_seconds(episodes: int, *, batch: bool, max_steps: int | None = None, threads: int | None = None) -> float:
    from crosssim.evaluate import crossval
    from crosssim.runfolder import RunFolder
    from crosssim.runner.crossval import CrossvalConfig

    if threads is not None:  # the engine worker inherits it (crosssim.runner.batched.physics_threads)
        os.environ["CROSSSIM_PHYSICS_THREADS"] = str(threads)
    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        crossval(CrossvalConfig(policy=str(G1), engines=("mujoco",), episodes=episodes, out=out, risk=False,
                                report=False, cache=False, batch=batch, max_steps=max_steps, record=False))
        seconds = time.perf_counter() - t
        rows = RunFolder(out).rows()
    os.environ.pop("CROSSSIM_PHYSICS_THREADS", None)
    failed = rows[rows.failure.notna()]
    if len(failed) or len(rows) != episodes:
        sys.exit(f"bench_g1: {len(failed)} of {len(rows)} episodes failed: {failed.failure.iloc[0] if len(failed) else ''}")
    return seconds


def peer_seconds(episodes: int) -> float:
    sys.path.insert(0, str(ROOT / "bench"))
    from peer_g1 import PeerG1

    t = time.perf_counter()
    peer = PeerG1()
    for _ in range(episodes):
        peer.run_episode()
    return time.perf_counter() - t


def import_seconds() -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import crosssim.cli"], check=True, env=os.environ | {"PYTHONSAFEPATH": "1"})
    return time.perf_counter() - t


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--reverse", action="store_true",
                        help="time the batched run first and the peer last (load drifts during a run)")
    parser.add_argument("--one-thread", action="store_true",
                        help="also time the batched run with its physics in one thread (CROSSSIM_PHYSICS_THREADS=1)")
    args = parser.parse_args(argv)
    n = args.episodes
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    os.environ.pop("CROSSSIM_PHYSICS_THREADS", None)  # the default: one physics thread per core
    startup_import = import_seconds()
    startup_run = crossval_seconds(1, batch=True, max_steps=1)  # the default path
    runs = {"peer": lambda: peer_seconds(n), "single": lambda: crossval_seconds(n, batch=False),
            "batched": lambda: crossval_seconds(n, batch=True)}
    if args.one_thread:
        runs["batched, 1 thread"] = lambda: crossval_seconds(n, batch=True, threads=1)
    took = {name: runs[name]() for name in (reversed(runs) if args.reverse else runs)}
    peer, single, batched = took["peer"], took["single"], took["batched"]
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print(f"start-up: python -c 'import crosssim.cli' {startup_import:.2f} s; crossval of 1 episode x 1 step "
          f"(worker spawn, sandbox, model load) {startup_run:.2f} s")
    rows = [("peer de-paced loop", peer), ("crosssim --one-at-a-time", single), ("crosssim default (lockstep)", batched)]
    if "batched, 1 thread" in took:
        rows.append(("  same, physics in 1 thread", took["batched, 1 thread"]))
    for name, s in rows:
        # crosssim's runs include a start-up the peer's loop (loaded once, timed with it) mostly lacks
        per = s / n if name.startswith("peer") else max(s - startup_run, 1e-9) / n
        print(f"{name:28s} {n} episodes in {s:6.1f} s = {n / s:5.2f} episodes/s   ratio to peer {peer / s:4.2f}x   "
              f"per episode after start-up {per:5.2f} s ({peer / n / per:4.2f}x the peer)")


if __name__ == "__main__":
    main()
