"""Train the project's own policy population for the risk validation (cached).

Policies of varied robustness: two tasks, PPO at several budgets, seeds, with and without
domain randomisation (crosssim.perturb.RandomizationRanges). Each lands in
.cache/population/<name>/ with model.zip, vecnormalize.json and card.yaml; an existing
model.zip is kept (delete the folder to retrain).

    .venv/bin/python bench/train_population.py [--only NAME] [--list]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".cache" / "population"
PERIOD = {"Hopper": 0.008, "HalfCheetah": 0.05}


def population() -> list[dict]:
    out = []
    for budget in (60_000, 150_000):
        for dr in (False, True):
            for seed in (0, 1):
                out.append(dict(task="Hopper", budget=budget, dr=dr, seed=seed))
    for budget in (60_000, 150_000):
        for dr in (False, True):
            out.append(dict(task="HalfCheetah", budget=budget, dr=dr, seed=0))
    for p in out:
        p["name"] = f"{p['task'].lower()}-ppo-{p['budget'] // 1000}k-{'dr' if p['dr'] else 'nodr'}-s{p['seed']}"
    return out


def train(spec: dict) -> None:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from crosssim.gym_env import make_env
    from crosssim.perturb import RandomizationRanges

    torch.set_num_threads(1)
    folder = OUT / spec["name"]
    if (folder / "model.zip").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    sampler = RandomizationRanges() if spec["dr"] else None
    venv = VecNormalize(DummyVecEnv([lambda: make_env(spec["task"], engine="mujoco", perturbations=sampler)]),
                        norm_obs=True, norm_reward=True, clip_obs=10.0, gamma=0.99)
    venv.seed(spec["seed"])
    model = PPO("MlpPolicy", venv, n_steps=1024, batch_size=64, n_epochs=10, learning_rate=3e-4, gamma=0.99,
                gae_lambda=0.95, clip_range=0.2, ent_coef=0.0, seed=spec["seed"], device="cpu", verbose=0,
                policy_kwargs=dict(net_arch=[64, 64]))
    start = time.time()
    model.learn(total_timesteps=spec["budget"])
    model.save(folder / "model.zip")
    rms = venv.obs_rms
    (folder / "vecnormalize.json").write_text(json.dumps({
        "obs_mean": rms.mean.tolist(), "obs_var": rms.var.tolist(), "clip_obs": 10.0, "epsilon": float(venv.epsilon)}))
    (folder / "card.yaml").write_text(
        f"name: {spec['name']}\ntask: {spec['task']}\npolicy:\n  file: model.zip\n  format: sb3\n  algo: ppo\n"
        f"observation:\n  normalize:\n    file: vecnormalize.json\ncontrol_period: {PERIOD[spec['task']]}\n"
        f"trained_in: mujoco\ntraining:\n  algo: ppo\n  timesteps: {spec['budget']}\n  seed: {spec['seed']}\n"
        f"  domain_randomization: {str(spec['dr']).lower()}\n  wall_time_s: {time.time() - start:.0f}\n")
    print(f"{spec['name']}: {time.time() - start:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=None)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    for spec in population():
        if args.list:
            print(spec["name"])
        elif args.only in (None, spec["name"]):
            train(spec)


if __name__ == "__main__":
    main()
