"""Each mechanism of docs/risk.md "Mechanisms" alone, at its cited value and at 3x (jitter at most one
period), on the Playground Go1 fixture (or ``--card``) in MuJoCo: mean forward speed and falls over a few seeds (the numbers in docs/risk.md).

    PYTHONPATH=src python scripts/mechanisms_go1.py [--seeds 3] [--engine mujoco] [--card CARD]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from crosssim.card import load_card
from crosssim.policies import load_policy
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness
from crosssim.runner.rollout import run_episode
from crosssim.runner.simulator import open_engine
from crosssim.variant import Variant

CARD = Path(__file__).resolve().parent.parent / "tests" / "cards" / "robots" / "playground-go1.yaml"
CITED = {"encoder_offset": 0.01, "joint_friction": 0.3, "deadband": 0.3, "action_drop": 0.05,
         "action_jitter": 0.5, "imu_bias": 0.02}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--engine", default="mujoco")
    ap.add_argument("--card", default=str(CARD), help="a legged card (default: the Playground Go1 fixture's)")
    args = ap.parse_args()
    card = load_card(Path(args.card))
    harness = Harness.from_card(card)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size)
    levels = {k: [min(v * m, 1.0) if k == "action_jitter" else v * m for m in (1, 3)] for k, v in CITED.items()}
    cases = [("nominal", {})] + [(f"{k} {v:g}", {k: v}) for k, vs in levels.items() for v in vs]
    for name, fields in cases:
        sim = open_engine(load_profile(args.engine), harness.scene, Variant.of(**fields), base=harness.model_variant)
        rows = [run_episode(sim, harness, policy, episode=i, seed=i + 1) for i in range(args.seeds)]
        sim.close()
        speed = np.mean([r.x_velocity for r in rows])
        falls = sum(r.terminated for r in rows)
        failed = [r.failure for r in rows if r.failure]
        print(f"{name:24s} speed {speed:.3f} m/s  falls {falls}/{len(rows)}" + (f"  failed: {failed[0]}" if failed else ""),
              flush=True)


if __name__ == "__main__":
    main()
