"""A card's ``first_call: after_one_period`` means the same in every consumer: crossval's episode,
the gymnasium Env built from the card, and a log replay (closed loop and the conformance rebuild)
all see the same first observation and give the same first action."""

from dataclasses import replace

import numpy as np
import pytest
import yaml

from conftest import CARDS
from crosssim.card import load_card
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness


def _card(tmp_path, first_call="after_one_period"):
    raw = yaml.safe_load((CARDS / "ant-locomotion.yaml").read_text())
    raw["policy"] = {"file": "helpers.mix_policy:ant_mix", "format": "callable"}
    raw["first_call"] = first_call
    raw["task_options"]["episode_seconds"] = 1
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _crossval_first(path, seed):
    from crosssim.policies import load_policy
    from crosssim.runner.episode import Episode
    from crosssim.runner.simulator import open_engine
    from crosssim.runner.stepper import ControlStepper

    card = load_card(path)
    h = Harness.from_card(card)
    policy = load_policy(card, obs_size=h.obs_size, action_size=h.action_size, trust=True)
    sim = open_engine(load_profile("mujoco"), h.scene, base=h.model_variant)
    try:
        ep = Episode(ControlStepper(sim, h))
        ep.start(seed)
        obs = ep.observe()
        return ep.frame.time, obs, policy.act(obs)
    finally:
        sim.close()


def test_gym_env_and_log_replay_see_crossvals_first_observation(tmp_path):
    from crosssim.gym_env import CrossSimEnv
    from crosssim.policies import load_policy
    from crosssim.real.compare import simulate
    from crosssim.real.conformance import rebuild
    from crosssim.real.logs import read_logs
    from crosssim.real.simulate import SensorNoise, SimulateLogsConfig, simulate_logs
    from crosssim.runner.simulator import open_engine
    from helpers.mix_policy import ant_mix

    path = _card(tmp_path)
    time, obs, action = _crossval_first(path, seed=0)
    assert time == pytest.approx(0.05)  # one control period in
    # The gait phase at t = 0.05 s of a 0.5 s period (hand value): what the first call must see.
    assert obs[-2:] == pytest.approx([np.sin(2 * np.pi * 0.1), np.cos(2 * np.pi * 0.1)], abs=1e-12)

    env = CrossSimEnv(engine="mujoco", card=path)
    try:
        env_obs, _ = env.reset(seed=0)
    finally:
        env.close()
    np.testing.assert_allclose(env_obs, obs, rtol=0, atol=1e-12)

    # A log of the same episode (no sensor noise, base pose logged), replayed closed loop.
    logs = tmp_path / "logs"
    config = SimulateLogsConfig(episodes=1, seconds=0.5, noise=SensorNoise().scaled(0.0),
                                artefacts=replace(_artefacts(), base_pose=True))
    simulate_logs(path, load_profile("mujoco"), logs, config, trust=True)
    h = Harness.from_card(load_card(path))
    (log,) = read_logs(logs, h)
    np.testing.assert_allclose(log.obs[0], obs, rtol=0, atol=1e-9)
    seen = []

    class Recording:
        def reset(self):
            pass

        def act(self, o):
            seen.append(np.array(o))
            return ant_mix(o)

    sim = open_engine(load_profile("mujoco"), h.scene, base=h.model_variant)
    try:
        simulate(sim, h, log, policy=Recording())
    finally:
        sim.close()
    np.testing.assert_allclose(seen[0], obs, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ant_mix(seen[0]), action, rtol=0, atol=1e-9)
    # The conformance rebuild reads the same clock: the gait phase of every row as logged.
    names, rebuilt, logged = rebuild(h, log)
    k = names.index("gait_phase")
    np.testing.assert_allclose(rebuilt[k], logged[k], rtol=0, atol=1e-9)

    # Broken case: the same log read as if the first call were at reset is one period off.
    early = replace(h, card=replace(h.card, first_call="reset"))
    names, rebuilt, logged = rebuild(early, log)
    assert np.abs(rebuilt[k] - logged[k]).max() > 0.1
    _ = load_policy  # the card's policy is loaded by the consumers above


def _artefacts():
    from crosssim.real.simulate import Artefacts

    return Artefacts()


def test_gym_env_with_first_call_at_reset_sees_time_zero(tmp_path):
    from crosssim.gym_env import CrossSimEnv

    path = _card(tmp_path, first_call="reset")
    time, obs, _ = _crossval_first(path, seed=2)
    assert time == 0.0 and obs[-2:] == pytest.approx([0.0, 1.0], abs=1e-12)
    env = CrossSimEnv(engine="mujoco", card=path)
    try:
        np.testing.assert_allclose(env.reset(seed=2)[0], obs, rtol=0, atol=1e-12)
    finally:
        env.close()
