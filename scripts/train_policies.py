"""Train crosssim's example policies with fixed seeds and write each with its policy card.

Each policy goes to ``<out>/<name>/``: ``model.zip`` (SB3), ``vecnormalize.json`` (observation
statistics as plain JSON: crosssim never reads VecNormalize's pickle) and ``card.yaml``. A folder
that already holds a model.zip is skipped unless ``--force``.

    .venv/bin/python scripts/train_policies.py [--only NAME] [--timesteps N] [--out DIR] [--force]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
EVAL_EPISODES, EVAL_SEED = 10, 10_000

# RL-zoo-style Hopper PPO; each budget trains in about 4-6 minutes on one CPU core. Measured (policies/README.md):
# with gamma 0.99 in PyBullet, PPO (seeds 0 and 1) stays in a lunge-and-fall optimum (return ~260 up to 320k steps);
# gamma 0.995 learns to balance for the whole episode instead.
HOPPER_PPO = {"n_steps": 1024, "batch_size": 64, "n_epochs": 10, "gamma": 0.99, "gae_lambda": 0.95,
              "learning_rate": 3e-4, "clip_range": 0.2, "ent_coef": 0.0, "vf_coef": 0.5, "max_grad_norm": 0.5}
POLICIES = {
    "hopper-ppo-mujoco": {"task": "Hopper-v5", "engine": "mujoco", "timesteps": 204_800, "seed": 0,
                          "control_period": 0.008, "hyper": HOPPER_PPO, "about": "the project's default policy"},
    "hopper-ppo-pybullet": {"task": "Hopper-v5", "engine": "pybullet", "timesteps": 204_800, "seed": 0,
                            "control_period": 0.008, "hyper": {**HOPPER_PPO, "gamma": 0.995},
                            "about": "trained through crosssim's own PyBullet engine"},
}


def normalize(obs: np.ndarray, stats: dict) -> np.ndarray:
    """What crosssim's ObservationNormalizer does with the card's statistics."""
    z = (obs - np.asarray(stats["obs_mean"])) / np.sqrt(np.asarray(stats["obs_var"]) + stats["epsilon"])
    return np.clip(z, -stats["clip_obs"], stats["clip_obs"])


def evaluate(model, stats: dict, task: str, engine: str) -> list[float]:
    """Deterministic returns in the raw training-engine env, normalised from the JSON (as a card user would)."""
    from crosssim.gym_env import make_env

    env, returns = make_env(task, engine=engine), []
    for i in range(EVAL_EPISODES):
        obs, _ = env.reset(seed=EVAL_SEED + i)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(normalize(obs, stats).astype(np.float32), deterministic=True)
            obs, reward, term, trunc, _ = env.step(action)
            total, done = total + reward, term or trunc
        returns.append(total)
    env.close()
    return returns


def train(name: str, spec: dict, out: Path, timesteps: int | None) -> None:
    from stable_baselines3 import PPO
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from crosssim.gym_env import make_env

    folder, steps, seed = out / name, timesteps or spec["timesteps"], spec["seed"]
    folder.mkdir(parents=True, exist_ok=True)
    print(f"== {name}: PPO on {spec['task']} in {spec['engine']}, {steps} steps, seed {seed}", flush=True)
    torch.manual_seed(seed)
    venv = DummyVecEnv([lambda: Monitor(make_env(spec["task"], engine=spec["engine"]))])
    venv = VecNormalize(venv, norm_obs=True, norm_reward=True, clip_obs=10.0, gamma=spec["hyper"]["gamma"])
    model = PPO("MlpPolicy", venv, policy_kwargs={"net_arch": [64, 64]}, seed=seed, device="cpu", verbose=0,
                **spec["hyper"])
    start, cpu = time.time(), time.process_time()
    model.learn(total_timesteps=steps)
    wall, cpu = time.time() - start, time.process_time() - cpu
    rms = venv.obs_rms
    stats = {"obs_mean": rms.mean.tolist(), "obs_var": rms.var.tolist(), "clip_obs": float(venv.clip_obs),
             "epsilon": float(venv.epsilon)}
    venv.close()
    model.save(folder / "model.zip")
    (folder / "vecnormalize.json").write_text(json.dumps(stats, indent=1) + "\n")
    returns = evaluate(model, stats, spec["task"], spec["engine"])
    mean = float(np.mean(returns))
    print(f"   trained in {wall:.0f} s ({cpu:.0f} s CPU); deterministic return {mean:.1f} +- {np.std(returns):.1f} "
          f"over {EVAL_EPISODES} episodes in {spec['engine']}", flush=True)
    card = {
        "name": name, "task": spec["task"],
        "policy": {"file": "model.zip", "format": "sb3", "algo": "ppo"},
        "observation": {"normalize": {"file": "vecnormalize.json"}},
        "control_period": spec["control_period"],
        "trained_in": spec["engine"], "validated_in": [spec["engine"]],
        "claimed": {"return": round(mean, 1)},
        "training": {
            "algo": "ppo", "timesteps": steps, "seed": seed, "engine": spec["engine"],
            "date": datetime.date.today().isoformat(), "wall_time_s": round(wall), "cpu_time_s": round(cpu),
            "net_arch": [64, 64], "activation": "Tanh", "hyperparameters": spec["hyper"],
            "eval": {"episodes": EVAL_EPISODES, "first_seed": EVAL_SEED, "deterministic": True,
                     "return_std": round(float(np.std(returns)), 1)},
            "machine": f"{platform.machine()}, 1 torch thread, torch {torch.__version__}",
            "command": f"python scripts/train_policies.py --only {name}"
                       + (f" --timesteps {steps}" if timesteps else "") + " --force",
        },
    }
    text = f"# {name}: {spec['about']}. Written by scripts/train_policies.py.\n"
    (folder / "card.yaml").write_text(text + yaml.safe_dump(card, sort_keys=False))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(POLICIES), help="train this policy only")
    parser.add_argument("--timesteps", type=int, help="override each policy's timestep budget")
    parser.add_argument("--out", type=Path, default=ROOT / "policies", help="output folder (default: policies/)")
    parser.add_argument("--force", action="store_true", help="retrain even if model.zip exists")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for name, spec in POLICIES.items():
        if args.only and name != args.only:
            continue
        if (args.out / name / "model.zip").is_file() and not args.force:
            print(f"== {name}: {args.out / name}/model.zip exists, skipped (--force retrains)")
            continue
        train(name, spec, args.out, args.timesteps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
