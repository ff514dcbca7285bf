"""``crosssim train``: stable-baselines3 PPO on crosssim's tasks in one or several engines.

The output folder gets model.zip, vecnormalize.json (observation statistics as plain JSON, never a
pickle) and card.yaml, which states every engine the policy was trained in, ready for crossval.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass
from pathlib import Path

from crosssim.errors import CrossSimError


@dataclass(frozen=True)
class TrainConfig:
    task: str = "Hopper"
    """crosssim task with its own scene (see `crosssim tasks`)."""
    engines: tuple[str, ...] = ("mujoco",)
    """Engines the sub-environments run in, round-robin."""
    steps: int = 100_000
    """Environment steps in total."""
    n_envs: int = 2
    """Sub-environments (at least one per engine is sensible)."""
    seed: int = 0
    randomize: bool = False
    """Domain randomisation (crosssim.perturb.RandomizationRanges) at every reset."""
    out: str = "policies/trained"
    """Output folder for model.zip, vecnormalize.json and card.yaml."""


def train(config: TrainConfig) -> Path:
    try:
        import torch
        from stable_baselines3 import PPO
        from stable_baselines3.common.vec_env import VecNormalize
    except ImportError:
        raise CrossSimError("training needs stable-baselines3: pip install 'crosssim[sb3]'") from None
    from crosssim.gym_env import make_multi_engine_vec_env
    from crosssim.perturb import RandomizationRanges
    from crosssim.runner.harness import Harness

    torch.set_num_threads(1)
    harness = Harness.for_task(config.task)
    venv = make_multi_engine_vec_env(config.task, config.engines, max(config.n_envs, 1), seed=config.seed,
                                     perturbations=RandomizationRanges() if config.randomize else None)
    venv = VecNormalize(venv, norm_obs=True, norm_reward=True, clip_obs=10.0)
    model = PPO("MlpPolicy", venv, n_steps=1024 // max(config.n_envs, 1), batch_size=64, seed=config.seed,
                device="cpu", verbose=0, policy_kwargs=dict(net_arch=[64, 64]))
    start = time.time()
    model.learn(total_timesteps=config.steps)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    model.save(out / "model.zip")
    rms = venv.obs_rms
    (out / "vecnormalize.json").write_text(json.dumps({"obs_mean": rms.mean.tolist(), "obs_var": rms.var.tolist(),
                                                       "clip_obs": 10.0, "epsilon": float(venv.epsilon)}))
    import yaml

    period = harness.task.frame_skip * harness.canonical.timestep
    card = {"name": out.name, "task": config.task,
            "policy": {"file": "model.zip", "format": "sb3", "algo": "ppo"},
            "observation": {"normalize": {"file": "vecnormalize.json"}}, "control_period": round(period, 9),
            "trained_in": config.engines[0], "validated_in": list(config.engines),
            "training": {"algo": "ppo", "framework": "stable-baselines3", "engines": list(config.engines),
                         "timesteps": config.steps, "seed": config.seed, "domain_randomization": config.randomize,
                         "n_envs": config.n_envs, "wall_time_s": round(time.time() - start, 1),
                         "date": dt.date.today().isoformat()}}
    (out / "card.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
    venv.close()
    return out / "card.yaml"
