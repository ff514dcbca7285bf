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


@dataclass(frozen=True)
class Artefacts:
    """What real deployments put in their logs, for the tests to recover (docs/real.md)."""

    jitter: float = 0.0
    """Standard deviation of the sampling instants' noise [s] (clipped at 0.3 control periods):
    each row's time and measured state are those of its jittered instant (the physics and the
    actions stay on the control grid)."""
    late_row: int | None = None
    """One row whose timestamp is ``late_by`` seconds late (the loop ran late once)."""
    late_by: float = 0.0
    dry_run: bool = False
    """The policy's actions never reach the motors (they hold the default action); logged
    ``applied: false``."""
    base_pose: bool = False
    """Log base position and linear velocity (pos.*, vel.*), as motion capture would."""
    joint_offsets: tuple[tuple[str, float], ...] = ()
    """Encoder offsets: the logged q is the true one minus the offset (declared in the sidecar)."""
    obs_scale: tuple[tuple[str, float], ...] = ()
    """A deployment bug: these observation terms reach the policy multiplied by the factor."""
    declare_delay: bool = False
    """Declare the profile's action latency (plus action_delay) in the sidecar, as a deployment
    that knows its pipeline would."""


MEASURED = ("q", "dq", "tau", "quat", "gyro", "pos", "vel")
"""Log groups read by sensors at the row's time (jittered timestamps move them; actions do not)."""


def _term_slices(harness) -> dict[str, slice]:
    """Where each card term sits in the newest frame of the observation."""
    builder = harness.observer().builder
    sizes = []
    for spec, term in zip(builder.terms, builder._terms):
        if term is None:
            sizes.append(int(harness.sensors.m.sensor_dim[harness.sensors.types[spec.name[len("sensor:"):]][0]]))
        else:
            sizes.append(term.count(len(harness.joints), spec.options))
    total, out, at = sum(sizes), {}, 0
    if builder.layout == "frame_major":
        at = (builder.history - 1) * total
        for spec, n in zip(builder.terms, sizes):
            out[spec.name] = slice(at, at + n)
            at += n
    else:
        for spec, n in zip(builder.terms, sizes):
            out[spec.name] = slice(at + (builder.history - 1) * n, at + builder.history * n)
            at += builder.history * n
    return out


def simulate_logs(card_path: str | Path, profile, out: str | Path, *, episodes: int = 4, seconds: float | None = None,
                  seed: int = 0, noise: SensorNoise = SensorNoise(), suffix: str = ".parquet",
                  trust: bool = False, with_obs: bool = True, artefacts: Artefacts = Artefacts()) -> list[Path]:
    """Write ``episodes`` logs of the card's policy in ``profile`` (an EngineProfile) into ``out``.
    The policy sees what the robot measured (the noisy, logged values), as on hardware."""
    from dataclasses import replace

    from crosssim.card import load_card
    from crosssim.frame import SimFrame, quat_rotate
    from crosssim.policies import load_policy
    from crosssim.runner.episode import Episode, play
    from crosssim.runner.harness import Harness
    from crosssim.runner.simulator import open_engine
    from crosssim.runner.stepper import ControlStepper

    card = load_card(card_path)
    harness = Harness.from_card(card)
    c, task = harness.canonical, harness.task
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=trust)
    sim = open_engine(profile, harness.scene, base=harness.model_variant)
    out = Path(out)
    names = [c.joint_names[j] for j in harness.joints]
    qadr, dadr = c.joint_qposadr[harness.joints], c.joint_dofadr[harness.joints]
    offsets = dict(artefacts.joint_offsets)
    offset = np.array([offsets.get(j, 0.0) for j in names])
    slices = _term_slices(harness) if artefacts.obs_scale else {}
    paths = []
    try:
        for i in range(episodes):
            stepper = ControlStepper(sim, harness)
            ep = Episode(stepper)
            rng = np.random.default_rng([seed, i, 7])
            ep.start(seed + i)
            policy.reset()
            steps = task.max_steps if seconds is None else max(2, int(round(seconds / ep.control_dt)))
            rows: dict[str, list] = {}
            hold = np.zeros(harness.action_size)  # what the motors get in a dry run
            last = [hold]

            def add(key, value):
                rows.setdefault(key, []).append(float(value))

            def measured(frame: SimFrame) -> SimFrame:
                """The frame as the robot's sensors read it."""
                qpos, qvel = frame.qpos.copy(), frame.qvel.copy()
                qpos[qadr] += rng.normal(0, noise.q, len(qadr))
                qvel[dadr] += rng.normal(0, noise.dq, len(dadr))
                quat, ang = frame.base_quat, frame.base_ang_vel
                if c.free_base:
                    quat = _rotate_small(frame.base_quat, noise.quat, rng)
                    gyro = frame.base_ang_vel_body + rng.normal(0, noise.gyro, 3)
                    qpos[3:7], qvel[3:6] = quat, gyro
                    ang = quat_rotate(quat, gyro)
                return replace(frame, qpos=qpos, qvel=qvel, base_quat=quat, base_ang_vel=ang)

            def logged_policy(ep: Episode) -> np.ndarray:
                """The policy's action, logging what a robot would at this control step."""
                frame, state = measured(ep.frame), ep.task_state
                if artefacts.dry_run and stepper.observer.ctx is not None and ep.t:
                    stepper.observer.ctx.last_action = last[0]  # the policy's own output, not the held one
                obs = stepper.observe(frame, state)
                for term, factor in artefacts.obs_scale:
                    obs[slices[term]] *= factor
                raw = np.asarray(policy.act(obs), dtype=float)  # logged as the policy returned it
                add("time", ep.t * ep.control_dt)
                for k, j in enumerate(names):
                    add(f"q.{j}", frame.qpos[qadr[k]] - offset[k])
                    add(f"dq.{j}", frame.qvel[dadr[k]])
                    add(f"tau.{j}", ep.frame.joint_torque[harness.joints[k]] + rng.normal(0, noise.tau))
                    add(f"action.{j}", raw[k])
                if c.free_base:
                    for key, value in zip("wxyz", frame.base_quat):
                        add(f"quat.{key}", value)
                    for key, value in zip("xyz", frame.qvel[3:6]):
                        add(f"gyro.{key}", value)
                    if artefacts.base_pose:
                        for key, value in zip("xyz", ep.frame.base_pos):
                            add(f"pos.{key}", value)
                        for key, value in zip("xyz", ep.frame.base_lin_vel):
                            add(f"vel.{key}", value)
                if "command" in state:
                    for key, value in zip(("vx", "vy", "yaw_rate"), state["command"]):
                        add(f"command.{key}", value)
                if with_obs:
                    for k, value in enumerate(obs):
                        add(f"obs.{k}", value)
                last[0] = raw
                return hold if artefacts.dry_run else raw

            terminated = play(ep, logged_policy, steps)
            time = np.asarray(rows["time"])
            if artefacts.jitter:
                dt = ep.control_dt
                time = time + np.clip(rng.normal(0, artefacts.jitter, len(time)), -0.3 * dt, 0.3 * dt)
            if artefacts.late_row is not None and artefacts.late_row < len(time):
                time[artefacts.late_row] += artefacts.late_by
            grid = np.asarray(rows["time"])
            if not np.array_equal(time, grid):  # sensors read at the jittered instants: states there
                from crosssim.real.timing import hermite

                moved = {}
                for key in [k for k in rows if k.split(".")[0] in MEASURED]:
                    group, name = key.split(".", 1)
                    slope = {"q": "dq", "pos": "vel"}.get(group)
                    values = np.asarray(rows[key])[:, None]
                    moved[key] = (hermite(grid, values, np.asarray(rows[f"{slope}.{name}"])[:, None], time)[:, 0]
                                  if slope and f"{slope}.{name}" in rows else np.interp(time, grid, values[:, 0]))
                rows.update({k: list(v) for k, v in moved.items()})
            rows["time"] = list(time)
            path = out / f"{profile.name}-{i:03d}{suffix}"
            meta = {"robot": harness.scene.stem, "joints": names, "control_period": ep.control_dt,
                    "card": os.path.relpath(card.path.resolve(), out.resolve()), "terminated": terminated,
                    "source": f"crosssim logs simulate: profile {profile.name}, seed {seed}, episode {i}"}
            if artefacts.dry_run:
                meta["applied"] = False
            if offsets:
                meta["joint_offsets"] = offsets
            if artefacts.declare_delay:
                meta["action_delay"] = sim.variant.harness.action_latency + sim.variant.harness.action_delay
            paths.append(write_log(path, meta, rows))
    finally:
        sim.close()
    return paths
