"""Logs in the real-log format from a simulator configuration: a stand-in robot for tests and demos.

``crosssim logs simulate`` runs a policy in one engine profile (whose settings can hold "hidden"
parameters: damping_scale, motor_strength, action_latency, ...) and writes what a robot would
log: measured joint states, base orientation and gyro with sensor noise, the policy's inputs and
raw actions, the command. Calibrating against such logs must recover the hidden settings
(tests/test_real.py); that is how crosssim's real-to-sim path is tested without a robot.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crosssim.real.logs import write_log


@dataclass(frozen=True)
class SensorNoise:
    """Standard deviations of Gaussian measurement noise, independent per sample."""

    q: float = 0.002
    """Joint position [rad]."""
    dq: float = 0.02
    """Joint velocity [rad/s]."""
    gyro: float = 0.01
    """Base angular velocity [rad/s]."""
    quat: float = 0.005
    """Base orientation, as a small random rotation [rad]."""
    tau: float = 0.05
    """Joint torque [N m]."""

    def scaled(self, k: float) -> "SensorNoise":
        return SensorNoise(self.q * k, self.dq * k, self.gyro * k, self.quat * k, self.tau * k)


def _rotate_small(quat: np.ndarray, sigma: float, rng) -> np.ndarray:
    if sigma <= 0:
        return quat
    v = rng.normal(0.0, sigma, 3)
    angle = np.linalg.norm(v)
    dq = np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * v / max(angle, 1e-12)])
    w1, x1, y1, z1 = quat
    w2, x2, y2, z2 = dq
    out = np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                    w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])
    return out / np.linalg.norm(out)


def simulate_logs(card_path: str | Path, profile, out: str | Path, *, episodes: int = 4, seconds: float | None = None,
                  seed: int = 0, noise: SensorNoise = SensorNoise(), suffix: str = ".parquet",
                  trust: bool = False, with_obs: bool = True) -> list[Path]:
    """Write ``episodes`` logs of the card's policy in ``profile`` (an EngineProfile) into ``out``."""
    from crosssim.card import load_card
    from crosssim.policies import load_policy
    from crosssim.runner.episode import Episode, play
    from crosssim.runner.harness import Harness
    from crosssim.runner.simulator import open_engine
    from crosssim.runner.stepper import ControlStepper

    card = load_card(card_path)
    harness = Harness.from_card(card)
    c, task = harness.canonical, harness.task
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=trust)
    sim = open_engine(profile, harness.scene)
    out = Path(out)
    names = [c.joint_names[j] for j in harness.joints]
    qadr, dadr = c.joint_qposadr[harness.joints], c.joint_dofadr[harness.joints]
    paths = []
    try:
        for i in range(episodes):
            ep = Episode(ControlStepper(sim, harness))
            rng = np.random.default_rng([seed, i, 7])
            ep.start(seed + i)
            policy.reset()
            steps = task.max_steps if seconds is None else max(2, int(round(seconds / ep.control_dt)))
            rows: dict[str, list] = {}

            def add(key, value):
                rows.setdefault(key, []).append(float(value))

            def logged_policy(ep: Episode) -> np.ndarray:
                """The policy's action, logging what a robot would at this control step."""
                frame, state = ep.frame, ep.task_state
                obs = ep.observe()
                raw = np.asarray(policy.act(obs), dtype=float)  # logged as the policy returned it
                add("time", ep.t * ep.control_dt)
                for k, j in enumerate(names):
                    add(f"q.{j}", frame.qpos[qadr[k]] + rng.normal(0, noise.q))
                    add(f"dq.{j}", frame.qvel[dadr[k]] + rng.normal(0, noise.dq))
                    add(f"tau.{j}", frame.joint_torque[harness.joints[k]] + rng.normal(0, noise.tau))
                    add(f"action.{j}", raw[k])
                if c.free_base:
                    for key, value in zip("wxyz", _rotate_small(frame.base_quat, noise.quat, rng)):
                        add(f"quat.{key}", value)
                    for key, value in zip("xyz", frame.base_ang_vel_body + rng.normal(0, noise.gyro, 3)):
                        add(f"gyro.{key}", value)
                if "command" in state:
                    for key, value in zip(("vx", "vy", "yaw_rate"), state["command"]):
                        add(f"command.{key}", value)
                if with_obs:
                    for k, value in enumerate(obs):
                        add(f"obs.{k}", value)
                return raw

            terminated = play(ep, logged_policy, steps)
            path = out / f"{profile.name}-{i:03d}{suffix}"
            meta = {"robot": harness.scene.stem, "joints": names, "control_period": ep.control_dt,
                    "card": os.path.relpath(card.path.resolve(), out.resolve()), "terminated": terminated,
                    "source": f"crosssim logs simulate: profile {profile.name}, seed {seed}, episode {i}"}
            paths.append(write_log(path, meta, rows))
    finally:
        sim.close()
    return paths
