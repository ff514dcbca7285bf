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
from typing import TYPE_CHECKING

import numpy as np

from crosssim.real.logs import write_log

if TYPE_CHECKING:
    from crosssim.frame import SimFrame


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
    previous_action: float = 0.0
    """The policy's previous action at the first row (every joint), left over from before the log
    (the last run's, a standing controller's) as on a robot whose policy was not reset; the
    motors do not get it, only the policy's ``last_action`` input."""
    declare_previous_action: bool = False
    """Write that leftover action to the sidecar's ``previous_action``."""
    gyro_scale: float = 1.0
    """A unit bug in the IMU driver: the gyro reads (and the log and the policy get) the body rate
    times this (180/pi: degrees per second where the card and the log format say rad/s)."""
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


@dataclass(frozen=True, kw_only=True)
class SimulateLogsConfig:
    """How :func:`simulate_logs` runs the stand-in robot and what it logs."""

    episodes: int = 4
    """Episodes to run, one log each."""
    seconds: float | None = None
    """Length of each log [s] (at least two control steps); None: the task's episode length."""
    seed: int = 0
    """Base seed: episode i starts from seed + i and draws its sensor noise from the stream (seed, i, 7)."""
    noise: SensorNoise = SensorNoise()
    """Measurement noise on the logged values, which are also what the policy sees."""
    suffix: str = ".parquet"
    """Log file format: ``.parquet`` or ``.csv`` (each with its ``.json`` sidecar)."""
    with_obs: bool = True
    """Log the policy's inputs (obs.*)."""
    artefacts: Artefacts = Artefacts()
    """Deployment artefacts to put in the logs (none by default)."""


def simulate_logs(card_path: str | Path, profile, out: str | Path,
                  config: SimulateLogsConfig = SimulateLogsConfig(), *, trust: bool = False) -> list[Path]:
    """Write ``config.episodes`` logs of the card's policy in ``profile`` (an EngineProfile) into
    ``out``. The policy sees what the robot measured (the noisy, logged values), as on hardware.
    ``trust``: allow code from the policy files to run."""
    from crosssim.card import load_card
    from crosssim.runner.simulator import open_engine

    card = load_card(card_path)
    robot = _Robot.from_card(card, config, trust=trust)
    sim = open_engine(profile, robot.harness.scene, base=robot.harness.model_variant)
    out = Path(out)
    paths = []
    try:
        for i in range(config.episodes):
            rng = np.random.default_rng([config.seed, i, 7])
            rows, terminated, control_dt = _run_episode(sim, robot, config, i, rng)
            _retime(rows, rng, config.artefacts, control_dt)
            meta = {"robot": robot.harness.scene.stem, "joints": robot.names, "control_period": control_dt,
                    "card": os.path.relpath(card.path.resolve(), out.resolve()), "terminated": terminated,
                    "source": f"crosssim logs simulate: profile {profile.name}, seed {config.seed}, episode {i}",
                    **_declared(config.artefacts, sim, len(robot.names))}
            paths.append(write_log(out / f"{profile.name}-{i:03d}{config.suffix}", meta, rows))
    finally:
        sim.close()
    return paths


@dataclass(frozen=True)
class _Robot:
    """What stays the same across episodes: the card's harness and policy, and the logged joints."""

    harness: object
    policy: object
    names: list[str]
    """Logged joint names, in the policy's order."""
    qadr: np.ndarray
    dadr: np.ndarray
    offset: np.ndarray
    """Encoder offset of each logged joint [rad or m] (Artefacts.joint_offsets)."""
    slices: dict[str, slice]
    """Where each observation term sits (only where Artefacts.obs_scale needs it)."""

    @classmethod
    def from_card(cls, card, config: SimulateLogsConfig, *, trust: bool) -> "_Robot":
        from crosssim.policies import load_policy
        from crosssim.runner.harness import Harness

        harness = Harness.from_card(card)
        c = harness.canonical
        policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=trust)
        names = [c.joint_names[j] for j in harness.joints]
        offsets = dict(config.artefacts.joint_offsets)
        return cls(harness, policy, names, c.joint_qposadr[harness.joints], c.joint_dofadr[harness.joints],
                   np.array([offsets.get(j, 0.0) for j in names]),
                   _term_slices(harness) if config.artefacts.obs_scale else {})


def _run_episode(sim, robot: _Robot, config: SimulateLogsConfig, i: int, rng) -> tuple[dict, bool, float]:
    """Episode ``i``: its logged rows (on the control grid), whether it terminated, and the control period [s]."""
    from crosssim.runner.episode import Episode, play
    from crosssim.runner.stepper import ControlStepper

    stepper = ControlStepper(sim, robot.harness)
    ep = Episode(stepper)
    ep.start(config.seed + i)
    robot.policy.reset()
    steps = (robot.harness.task.max_steps if config.seconds is None
             else max(2, int(round(config.seconds / ep.control_dt))))
    recorder = _Recorder(robot, stepper, config, rng)
    terminated = play(ep, recorder.act, steps)
    return recorder.rows, terminated, ep.control_dt


class _Recorder:
    """One episode's action source: the policy on the measured frame, each control step logged as a row."""

    def __init__(self, robot: _Robot, stepper, config: SimulateLogsConfig, rng):
        self.robot, self.stepper, self.config, self.rng = robot, stepper, config, rng
        self.rows: dict[str, list] = {}
        self.hold = np.zeros(robot.harness.action_size)  # what the motors get in a dry run
        self.last = self.hold

    def add(self, key, value) -> None:
        self.rows.setdefault(key, []).append(float(value))

    def measured(self, frame: SimFrame) -> SimFrame:
        """The frame as the robot's sensors read it."""
        from dataclasses import replace

        from crosssim.frame import quat_rotate

        r, noise, rng = self.robot, self.config.noise, self.rng
        qpos, qvel = frame.qpos.copy(), frame.qvel.copy()
        qpos[r.qadr] += rng.normal(0, noise.q, len(r.qadr))
        qvel[r.dadr] += rng.normal(0, noise.dq, len(r.dadr))
        quat, ang = frame.base_quat, frame.base_ang_vel
        if r.harness.canonical.free_base:
            quat = _rotate_small(frame.base_quat, noise.quat, rng)
            gyro = (frame.base_ang_vel_body + rng.normal(0, noise.gyro, 3)) * self.config.artefacts.gyro_scale
            qpos[3:7], qvel[3:6] = quat, gyro
            ang = quat_rotate(quat, gyro)
        return replace(frame, qpos=qpos, qvel=qvel, base_quat=quat, base_ang_vel=ang)

    def act(self, ep) -> np.ndarray:
        """The policy's action, logging what a robot would at this control step."""
        artefacts = self.config.artefacts
        frame, state = self.measured(ep.frame), ep.task_state
        if artefacts.dry_run and self.stepper.observer.ctx is not None and ep.t:
            self.stepper.observer.ctx.last_action = self.last  # the policy's own output, not the held one
        if artefacts.previous_action and self.stepper.observer.ctx is not None and not ep.t:
            self.stepper.observer.ctx.last_action = np.full(self.robot.harness.action_size, artefacts.previous_action)
        obs = self.stepper.observe(frame, state)
        for term, factor in artefacts.obs_scale:
            obs[self.robot.slices[term]] *= factor
        raw = np.asarray(self.robot.policy.act(obs), dtype=float)  # logged as the policy returned it
        self.log(ep, frame, state, obs, raw)
        self.last = raw
        return self.hold if artefacts.dry_run else raw

    def log(self, ep, frame: SimFrame, state: dict, obs: np.ndarray, raw: np.ndarray) -> None:
        """One row: measured joints and base, true torques with noise, the raw action, command, inputs."""
        r, add = self.robot, self.add
        add("time", ep.t * ep.control_dt)
        for k, j in enumerate(r.names):
            add(f"q.{j}", frame.qpos[r.qadr[k]] - r.offset[k])
            add(f"dq.{j}", frame.qvel[r.dadr[k]])
            add(f"tau.{j}", ep.frame.joint_torque[r.harness.joints[k]] + self.rng.normal(0, self.config.noise.tau))
            add(f"action.{j}", raw[k])
        if r.harness.canonical.free_base:
            for key, value in zip("wxyz", frame.base_quat):
                add(f"quat.{key}", value)
            for key, value in zip("xyz", frame.qvel[3:6]):
                add(f"gyro.{key}", value)
            if self.config.artefacts.base_pose:
                for key, value in zip("xyz", ep.frame.base_pos):
                    add(f"pos.{key}", value)
                for key, value in zip("xyz", ep.frame.base_lin_vel):
                    add(f"vel.{key}", value)
        if "command" in state:
            for key, value in zip(("vx", "vy", "yaw_rate"), state["command"]):
                add(f"command.{key}", value)
        if self.config.with_obs:
            for k, value in enumerate(obs):
                add(f"obs.{k}", value)


def _retime(rows: dict, rng, artefacts: Artefacts, dt: float) -> None:
    """Put the artefacts' timing on ``rows`` (in place): jittered and late timestamps, and the
    measured groups moved to the instants their sensors were read."""
    time = np.asarray(rows["time"])
    if artefacts.jitter:
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


def _declared(artefacts: Artefacts, sim, joints: int) -> dict:
    """What the artefacts make a log's sidecar declare: a dry run, encoder offsets, the action delay."""
    meta = {}
    if artefacts.dry_run:
        meta["applied"] = False
    if artefacts.joint_offsets:
        meta["joint_offsets"] = dict(artefacts.joint_offsets)
    if artefacts.declare_previous_action:
        meta["previous_action"] = [float(artefacts.previous_action)] * joints
    if artefacts.declare_delay:
        meta["action_delay"] = sim.variant.harness.action_latency + sim.variant.harness.action_delay
    return meta
