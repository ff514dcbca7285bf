"""``crosssim train --framework rllib``: RLlib PPO (new API stack, torch, CPU) in one or several engines.

Sub-environments run in the local env runner (``num_env_runners=0``) round-robin over the engines
(crosssim.gym_env.rllib_env_creator), on a private Ray instance on 127.0.0.1 that is shut down
afterwards. The checkpoint folder (``algo.save_to_path``) and its card land in ``config.out``;
crosssim loads it back from the weights alone (crosssim.policies.rllib), no code runs. No
observation filter is used, so the card needs no normalisation statistics.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from crosssim.errors import CrossSimError

HIDDEN = [64, 64]  # the same network as crosssim's SB3 training
CHECKPOINT = "rllib_checkpoint"


def train_rllib(config) -> Path:
    try:
        import ray
        from ray.rllib.algorithms.ppo import PPOConfig
        from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
        from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME
        from ray.tune.registry import register_env
    except ImportError:
        raise CrossSimError("--framework rllib needs Ray RLlib: pip install 'crosssim[rllib]'") from None
    from crosssim.gym_env import make_env, rllib_env_creator
    from crosssim.perturb import RandomizationRanges
    from crosssim.runner.harness import Harness
    from crosssim.train_card import write_card

    for engine in dict.fromkeys(config.engines):  # a missing engine is one clear line here, not inside Ray
        make_env(config.task, engine=engine).close()
    act = Harness.for_task(config.task).actuation
    if len(set(act.ctrl_low)) != 1 or len(set(act.ctrl_high)) != 1:
        raise CrossSimError(f"task {config.task}: per-joint action ranges; a card's action.clip holds one range, "
                            "train with --framework sb3")
    bounds = [float(act.ctrl_low[0]), float(act.ctrl_high[0])]
    n_envs = max(config.n_envs, 1)
    env_name = f"crosssim-{config.task}-{'-'.join(config.engines)}"
    register_env(env_name, rllib_env_creator(config.task, config.engines,
                                             perturbations=RandomizationRanges() if config.randomize else None))
    batch = max(64 * n_envs, min(2048, config.steps) // (64 * n_envs) * 64 * n_envs)
    algo_config = (
        PPOConfig()
        .environment(env_name, env_config={"num_envs_per_runner": n_envs})
        .framework("torch")
        .env_runners(num_env_runners=0, num_envs_per_env_runner=n_envs, rollout_fragment_length=batch // n_envs)
        .learners(num_learners=0, num_gpus_per_learner=0)
        .training(train_batch_size_per_learner=batch, minibatch_size=64, num_epochs=10, lr=3e-4, gamma=0.99,
                  lambda_=0.95, clip_param=0.2)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=HIDDEN, fcnet_activation="tanh"))
        .debugging(seed=config.seed, log_level="ERROR")
    )
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=max(os.cpu_count() or 1, 1), include_dashboard=False, _node_ip_address="127.0.0.1",
                 log_to_driver=False, configure_logging=False)
    try:
        algo = algo_config.build_algo()
        start, sampled = time.time(), 0
        while sampled < config.steps:
            result = algo.train()
            sampled = int(result[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME])
        out = Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        if (out / CHECKPOINT).exists():
            shutil.rmtree(out / CHECKPOINT)
        algo.save_to_path(str((out / CHECKPOINT).resolve()))
        algo.stop()
    finally:
        if started:
            ray.shutdown()
    # RLlib squashes actions to [-1, 1] and maps them onto the env's box; the card's clip is that box.
    return write_card(config, out, {"file": CHECKPOINT, "format": "rllib", "algo": "ppo", "activation": "tanh"},
                      {"action": {"clip": bounds}}, time.time() - start)
