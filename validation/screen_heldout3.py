"""Screen validation/realities_heldout3.py's values before they are sealed, by a rule fixed before it ran.

The second held-out set cost its population 0-14 % in contact, so its contact ranking measured
noise. This screen checks that every family costs a population something, on four Walker2d/Ant
policies of the *first* untouched part (already scored, never used to choose a design value, not
part of the third untouched part): walker2d-ppo-500k-nodr-s0, walker2d-ppo-500k-dr-s0,
ant-ppo-500k-nodr-s0, ant-ppo-500k-dr-s0, 5 episodes (seeds 0-4), true drop as the validation
computes it (validation_population.drops).

The rule, fixed before the first run:
1. Each mechanism alone (the others at nominal): one that *raises* the mean return of three or more
   of the four policies is not a harm on these tasks and leaves its family.
2. Per family, the median drop over the four policies (with 1. applied): below 0.10, every value of
   the family moves twice as far from nominal (shares and stiffness x2, skew 2 periods, gyro range
   halved), once; 0.80 or more, half as far, once. Otherwise nothing changes.
3. The values that come out are written into realities_heldout3.py and sealed, whatever they cost.

It ran once, on the first values; its output is validation/results/screen_heldout3.txt. Run again, it
reads the sealed (doubled) values and prints other numbers: a record of what they cost, not the screen.

    .venv/bin/python validation/screen_heldout3.py
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))

import realities_heldout3 as h3  # noqa: E402
from validation_population import drops  # noqa: E402

POLICIES = ("walker2d-ppo-500k-nodr-s0", "walker2d-ppo-500k-dr-s0", "ant-ppo-500k-nodr-s0", "ant-ppo-500k-dr-s0")
SEEDS = range(5)


def alone(field: str) -> h3.Heldout3Reality:
    """The family's reality with only ``field`` away from nominal."""
    family = next(f for f, fields in h3.MECHANISMS.items() if field in fields)
    r = {"actuation": h3.ACTUATION, "timing": h3.TIMING, "contact": h3.CONTACT}[family]
    return replace(h3.NOMINAL, name=f"alone-{field}", family=field, **{field: getattr(r, field)})


def main() -> None:
    from crosssim.card import load_card
    from crosssim.policies import load_policy
    from crosssim.runner.rollout import Harness

    fields = [f for fs in h3.MECHANISMS.values() for f in fs]
    table = {}
    for name in POLICIES:
        card = load_card(ROOT / ".cache" / "population" / name / "card.yaml")
        harness = Harness.from_card(card)
        policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=True)
        returns = {"nominal": h3.run_heldout(harness, policy, h3.NOMINAL, episode_seeds=SEEDS)}
        for r in (*h3.REALITIES, *(alone(f) for f in fields)):
            returns[r.family] = h3.run_heldout(harness, policy, r, episode_seeds=SEEDS)
        means = {k: float(np.mean(v)) for k, v in returns.items()}
        table[name] = (drops(returns), means)
        print(name, "nominal", round(means["nominal"]),
              " ".join(f"{k} {d:.2f}{'+' if means[k] > means['nominal'] else ''}" for k, d in drops(returns).items()),
              flush=True)
    print("\nmechanisms raising the return of >= 3 of 4:",
          [f for f in fields if sum(table[p][1][f] > table[p][1]["nominal"] for p in POLICIES) >= 3])
    for fam in ("actuation", "timing", "contact", "all"):
        print(f"median drop {fam}: {np.median([table[p][0][fam] for p in POLICIES]):.2f}")


if __name__ == "__main__":
    main()
