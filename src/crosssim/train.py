"""``crosssim train``: PPO on crosssim's tasks in one or several engines (stable-baselines3 or RLlib).

The output folder gets the policy and card.yaml, which states every engine the policy was trained
in, ready for crossval. SB3: model.zip and vecnormalize.json (observation statistics as plain JSON,
never a pickle). RLlib (crosssim.train_rllib): the checkpoint folder algo.save_to_path() writes.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

from crosssim import options
from crosssim.errors import CrossSimError
from crosssim.options import option
from crosssim.train_card import write_card


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Each field's help is the CLI's (crosssim.options)."""

    task: str = option("Hopper", parse=options.task_name, help="crosssim task with its own scene (see `crosssim tasks`).")
    engines: tuple[str, ...] = option(("mujoco",), parse=options.engine_names,
                                      help="Engines the sub-environments run in, round-robin; comma-separated.")
    steps: int = option(100_000, parse=options.whole(1), help="Environment steps in total.")
    n_envs: int = option(2, parse=options.whole(1), help="Sub-environments (at least one per engine is sensible).")
    seed: int = option(0, parse=options.seed, help="Seed of the policy's initialisation, the environments and PPO.")
    randomize: bool = option(False, help="Domain randomisation (crosssim.perturb.RandomizationRanges) at every reset.")
    out: str = option("policies/trained", help="Output folder for the policy and card.yaml.")
    framework: str = option("sb3", choices=("sb3", "rllib"),
                            help="sb3 (stable-baselines3) or rllib (Ray RLlib, new API stack).")


def rollout_steps(n_envs: int, total: int = 1024, batch: int = 64) -> int:
    """Steps per sub-environment per PPO rollout: about ``total`` in all, a whole number of minibatches."""
    unit = batch // math.gcd(batch, max(n_envs, 1))
    return max(unit, total // max(n_envs, 1) // unit * unit)


def train(config: TrainConfig) -> Path:
    """Train, write the policy and its card; returns the card's path."""
    if config.framework == "rllib":
        from crosssim.train_rllib import train_rllib

        return train_rllib(config)
    if config.framework != "sb3":
        raise CrossSimError(f"unknown training framework {config.framework!r}: sb3 or rllib")
    return _train_sb3(config)


def _train_sb3(config: TrainConfig) -> Path:
    try:
        import torch
        from stable_baselines3 import PPO
        from stable_baselines3.common.vec_env import VecNormalize
    except ImportError:
        raise CrossSimError("training needs stable-baselines3: pip install 'crosssim[sb3]'") from None
    from crosssim.gym_env import make_multi_engine_vec_env
    from crosssim.perturb import RandomizationRanges

    torch.set_num_threads(1)
    venv = make_multi_engine_vec_env(config.task, config.engines, max(config.n_envs, 1), seed=config.seed,
                                     perturbations=RandomizationRanges() if config.randomize else None)
    venv = VecNormalize(venv, norm_obs=True, norm_reward=True, clip_obs=10.0)
    model = PPO("MlpPolicy", venv, n_steps=rollout_steps(config.n_envs), batch_size=64, seed=config.seed,
                device="cpu", verbose=0, policy_kwargs=dict(net_arch=[64, 64]))
    start = time.time()
    model.learn(total_timesteps=config.steps)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    model.save(out / "model.zip")
    rms = venv.obs_rms
    (out / "vecnormalize.json").write_text(json.dumps({"obs_mean": rms.mean.tolist(), "obs_var": rms.var.tolist(),
                                                       "clip_obs": 10.0, "epsilon": float(venv.epsilon)}))
    card = write_card(config, out, {"file": "model.zip", "format": "sb3", "algo": "ppo"},
                      {"observation": {"normalize": {"file": "vecnormalize.json"}}}, time.time() - start)
    venv.close()
    return card
