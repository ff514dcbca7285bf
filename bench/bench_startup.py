"""Start-up of a MuJoCo-only crossval, side by side in one run: crosssim (this checkout, and
optionally an older one) against the peers' G1 loop's own start-up.

    .venv/bin/python bench/bench_startup.py [--repeat 3] [--baseline /path/to/old/src]

Start-up is a whole ``crosssim crossval --engines mujoco --no-risk --no-report --no-cache --quiet
--episodes 1 --max-steps 1`` in a fresh process (imports, plan, policy check, worker spawn,
sandboxed policy process, model load, one control step, results written), for the small
Hopper card (SB3 zip, no sandbox) and the G1 fixture card (TorchScript LSTM, sandboxed). The
peer's start-up is a fresh process that imports mujoco and torch and loads the G1 model and
TorchScript file (bench/peer_g1.py), then runs one control step. ``--baseline`` runs the same
commands with another crosssim source tree first on PYTHONPATH (e.g. ``git archive <commit> src``
unpacked somewhere), interleaved with this one, so before and after share the host's load.
``--quick`` also times ``crossval --quick`` on the default card and engines (warm row cache after
the first round; the first round is reported apart). The machine is shared: compare within one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CARDS = {"hopper": ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml",
         "g1": ROOT / "tests" / "cards" / "robots" / "unitree-g1.yaml"}
PEER = ("import sys; sys.path.insert(0, {bench!r}); from peer_g1 import PeerG1, DECIMATION; p = PeerG1(); "
        "import mujoco; d = mujoco.MjData(p.m); mujoco.mj_step(p.m, d, DECIMATION)")


def _timed(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t
    if done.returncode:
        sys.exit(f"bench_startup: {' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return seconds


def crossval_cmd(card: Path, out: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "crosssim.cli", "crossval", "--policy", str(card), "--out", out, *extra]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", help="another crosssim src folder, timed interleaved with this one")
    parser.add_argument("--cards", default="hopper,g1", help="comma-separated: hopper, g1")
    parser.add_argument("--quick", action="store_true", help="also time crossval --quick (default card and engines)")
    args = parser.parse_args(argv)
    trees = {"this": str(ROOT / "src")}
    if args.baseline:
        trees["baseline"] = str(Path(args.baseline).resolve())
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"MUJOCO_GL": "egl"}
    times: dict[str, list[float]] = {}
    first_quick: dict[str, float] = {}
    print(f"load average at start: {os.getloadavg()} on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        caches = {tree: os.path.join(tmp, f"cache-{tree}") for tree in trees}
        for r in range(args.repeat):
            times.setdefault("peer G1 start-up", []).append(
                _timed([sys.executable, "-c", PEER.format(bench=str(ROOT / "bench"))], base_env))
            for card in args.cards.split(","):
                for tree, src in trees.items():
                    cmd = crossval_cmd(CARDS[card], os.path.join(tmp, f"{card}-{tree}-{r}"), "--engines", "mujoco",
                                       "--no-risk", "--no-report", "--no-cache", "--quiet", "--episodes", "1",
                                       "--max-steps", "1")
                    times.setdefault(f"crosssim {card} start-up [{tree}]", []).append(
                        _timed(cmd, base_env | {"PYTHONPATH": src}))
            if args.quick:
                for tree, src in trees.items():
                    cmd = crossval_cmd(CARDS["hopper"], os.path.join(tmp, f"quick-{tree}-{r}"), "--quick",
                                       "--cache-dir", caches[tree])
                    took = _timed(cmd, base_env | {"PYTHONPATH": src})
                    if r == 0:
                        first_quick[tree] = took
                    else:
                        times.setdefault(f"crossval --quick, warm rows [{tree}]", []).append(took)
            print(f"round {r + 1}: load average {os.getloadavg()[0]:.2f}", flush=True)
    for tree, took in first_quick.items():
        print(f"crossval --quick, first round (cold rows) [{tree}]: {took:.2f} s")
    for name, values in times.items():
        print(f"{name:45s} min {min(values):6.2f} s  median {statistics.median(values):6.2f} s  "
              f"({', '.join(f'{v:.2f}' for v in values)})")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
