"""card.yaml for a freshly trained policy, shared by the SB3 (crosssim.train) and RLlib
(crosssim.train_rllib) trainers; its own module so neither trainer imports the other's."""

from __future__ import annotations

import datetime as dt
from pathlib import Path


def write_card(config, out: Path, policy: dict, extra: dict, wall_time_s: float) -> Path:
    """card.yaml for a trained policy (``config``: a crosssim.train.TrainConfig): every engine it was
    trained in, the training settings. Returns the card's path."""
    import yaml

    from crosssim.runner.harness import Harness

    harness = Harness.for_task(config.task)
    period = harness.control_dt
    from crosssim.tasks import describe_task

    # The task with its version (Walker2d-v5): the card says which robot the policy learnt on.
    card = {"name": out.name, "task": describe_task(harness.task), "policy": policy, **extra, "control_period": round(period, 9),
            "trained_in": config.engines[0], "validated_in": list(config.engines),
            "training": {"algo": "ppo", "framework": {"sb3": "stable-baselines3", "rllib": "rllib"}[config.framework],
                         "engines": list(config.engines), "timesteps": config.steps, "seed": config.seed,
                         "domain_randomization": config.randomize, "n_envs": config.n_envs,
                         "wall_time_s": round(wall_time_s, 1), "date": dt.date.today().isoformat()}}
    (out / "card.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
    return out / "card.yaml"
