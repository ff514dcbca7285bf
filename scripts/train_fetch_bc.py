"""Train a Fetch pick-and-place policy by behaviour cloning (with DAgger) from the scripted expert.

The expert (crosssim.tasks.fetch_expert.pick_and_place, trusted code of this repository) is run
through crosssim's own harness in the MuJoCo column, under the card's law
(``task_options.control: joint_pd``, which every engine runs). Round 0 records the expert's own
episodes; each later round runs the current MLP and labels every observation it visits with the
expert's action (DAgger), so the policy learns to recover from its own mistakes. The MLP
(31 -> 256 -> 256 -> 4, Tanh) is written as a Stable-Baselines3 PPO zip whose actor holds the
cloned weights, which crosssim loads as data (``policy.pth`` as a plain state dict, no unpickling),
with the observation statistics as ``vecnormalize.json`` and a card.

    python scripts/train_fetch_bc.py [--out DIR] [--rounds N] [--episodes N] [--seed S]
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
NAME = "fetch-pick-and-place-bc"
TASK, OPTIONS = "FetchPickAndPlace", {"control": "joint_pd"}
HIDDEN = [256, 256]
FIRST_SEED = 100_000
"""Training episodes use reset seeds from here on, far from crossval's 0-49 and the eval's."""
EVAL_SEED, EVAL_EPISODES = 10_000, 20
VAR_FLOOR = 1e-6
"""Smallest variance kept in the statistics (a near-constant input must not be scaled up 1000x)."""


class Recorder:
    """Acts with ``actor`` (the expert when None) and records (obs, expert action) at every call."""

    def __init__(self, expert, actor=None):
        self.expert, self.actor, self.obs, self.labels = expert, actor, [], []

    def __call__(self, obs):
        label = np.asarray(self.expert(obs), dtype=float)
        self.obs.append(np.asarray(obs, dtype=float).copy())
        self.labels.append(label)
        return label if self.actor is None else self.actor(obs)


def run(fn, seeds) -> list[float]:
    """Success (1/0) of ``fn`` on each seed, through crosssim's harness in MuJoCo."""
    from crosssim.policies.base import CallablePolicy
    from crosssim.profiles import load_profile
    from crosssim.runner.harness import Harness
    from crosssim.runner.rollout import run_episode
    from crosssim.runner.simulator import open_engine

    h = Harness.for_task(TASK, OPTIONS)
    sim = open_engine(load_profile("mujoco"), h.scene)
    try:
        out = []
        for s in seeds:
            r = run_episode(sim, h, CallablePolicy(fn, 31, 4), episode=int(s), seed=int(s))
            if r.failure is not None:
                raise RuntimeError(f"episode {s} failed: {r.failure}")
            out.append(float(r.metrics["success"]))
        return out
    finally:
        sim.close()


def mlp() -> torch.nn.Sequential:
    sizes, layers = [31, *HIDDEN], []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(sizes[-1], 4))


def stats_of(obs: np.ndarray) -> dict:
    return {"obs_mean": obs.mean(0).tolist(), "obs_var": np.maximum(obs.var(0), VAR_FLOOR).tolist(),
            "clip_obs": 10.0, "epsilon": 1e-8}


def normalize(obs, stats) -> np.ndarray:
    """crosssim's ObservationNormalizer on the card's statistics."""
    z = (np.asarray(obs) - np.asarray(stats["obs_mean"])) / np.sqrt(np.asarray(stats["obs_var"]) + stats["epsilon"])
    return np.clip(z, -stats["clip_obs"], stats["clip_obs"])


def fit(net, obs, labels, stats, epochs: int, gen: torch.Generator) -> float:
    x = torch.tensor(normalize(obs, stats), dtype=torch.float32)
    y = torch.tensor(np.clip(labels, -1, 1), dtype=torch.float32)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), 256):
            idx = perm[i:i + 256]
            loss = torch.nn.functional.mse_loss(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return float(torch.nn.functional.mse_loss(net(x), y))


def actor(net, stats):
    def act(obs):
        with torch.no_grad():
            z = torch.tensor(normalize(obs, stats), dtype=torch.float32)
            return np.clip(net(z).numpy().astype(float), -1, 1)
    return act


def save_sb3(net, path: Path) -> None:
    """The MLP as the actor of an SB3 PPO MlpPolicy (its value net is untrained and unused)."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    class Spaces(gym.Env):
        observation_space = gym.spaces.Box(-np.inf, np.inf, (31,), np.float32)
        action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)

    model = PPO("MlpPolicy", Spaces(), policy_kwargs={"net_arch": {"pi": HIDDEN, "vf": [64, 64]}}, device="cpu",
                n_steps=64, batch_size=64, seed=0)
    linear = [m for m in net if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for k, layer in enumerate(linear[:-1]):
            model.policy.mlp_extractor.policy_net[2 * k].load_state_dict(layer.state_dict())
        model.policy.action_net.load_state_dict(linear[-1].state_dict())
    model.save(path)


def main(argv=None) -> int:
    from crosssim.tasks.fetch_expert import pick_and_place as expert

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "policies" / NAME)
    parser.add_argument("--expert-episodes", type=int, default=100, help="round 0: the expert's own episodes")
    parser.add_argument("--rounds", type=int, default=6, help="DAgger rounds after round 0")
    parser.add_argument("--episodes", type=int, default=80, help="episodes per DAgger round")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    start, cpu = time.time(), time.process_time()
    next_seed = FIRST_SEED

    def seeds(n):
        nonlocal next_seed
        next_seed += n
        return range(next_seed - n, next_seed)

    rec = Recorder(expert)
    rate = np.mean(run(rec, seeds(args.expert_episodes)))
    obs, labels = np.array(rec.obs), np.array(rec.labels)
    stats = stats_of(obs)
    net = mlp()
    history = [{"round": 0, "acting": "expert", "episodes": args.expert_episodes, "success": round(float(rate), 3),
                "samples": len(obs), "loss": round(fit(net, obs, labels, stats, args.epochs, gen), 5)}]
    print(history[-1], flush=True)
    for k in range(1, args.rounds + 1):
        rec = Recorder(expert, actor(net, stats))
        rate = np.mean(run(rec, seeds(args.episodes)))
        obs, labels = np.concatenate([obs, rec.obs]), np.concatenate([labels, rec.labels])
        history.append({"round": k, "acting": "policy", "episodes": args.episodes, "success": round(float(rate), 3),
                        "samples": len(obs), "loss": round(fit(net, obs, labels, stats, args.epochs, gen), 5)})
        print(history[-1], flush=True)
    wall, cpu = time.time() - start, time.process_time() - cpu
    evals = run(actor(net, stats), range(EVAL_SEED, EVAL_SEED + EVAL_EPISODES))
    print(f"trained in {wall:.0f} s; success {sum(evals):.0f}/{len(evals)} on seeds {EVAL_SEED}+", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    save_sb3(net, args.out / "model.zip")
    (args.out / "vecnormalize.json").write_text(json.dumps(stats, indent=1) + "\n")
    card = {
        "name": NAME, "task": "FetchPickAndPlace-v4", "task_options": dict(OPTIONS),
        "policy": {"file": "model.zip", "format": "sb3", "algo": "ppo"},
        "observation": {"normalize": {"file": "vecnormalize.json"}},
        "action": {"clip": [-1, 1]},
        "control_period": 0.04, "trained_in": "mujoco", "validated_in": ["mujoco"], "metric": "success",
        "training": {
            "algo": "behaviour cloning + DAgger from crosssim.tasks.fetch_expert.pick_and_place",
            "engine": "mujoco", "seed": args.seed, "first_episode_seed": FIRST_SEED,
            "expert_episodes": args.expert_episodes, "dagger_rounds": args.rounds,
            "episodes_per_round": args.episodes, "epochs_per_round": args.epochs, "optimizer": "Adam lr 1e-3, batch 256",
            "loss": "mean squared error to the expert's action clipped to [-1, 1]",
            "net_arch": HIDDEN, "activation": "Tanh", "rounds": history,
            "eval": {"episodes": EVAL_EPISODES, "first_seed": EVAL_SEED, "success": float(np.mean(evals))},
            "date": datetime.date.today().isoformat(), "wall_time_s": round(wall), "cpu_time_s": round(cpu),
            "machine": f"{platform.machine()}, 1 torch thread, torch {torch.__version__}",
            "command": "python scripts/train_fetch_bc.py",
            "note": "model.zip is an SB3 PPO zip: its actor holds the cloned MLP; the value net is untrained",
            "measured": "docs/manipulation.md",
        },
    }
    text = (f"# {NAME}: a learned pick-and-place policy, cloned from the scripted expert under crosssim's\n"
            "# joint-space law. Written by scripts/train_fetch_bc.py.\n")
    (args.out / "card.yaml").write_text(text + yaml.safe_dump(card, sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
