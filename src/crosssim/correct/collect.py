"""``crosssim correct collect``: a policy run with a simulated operator, written as real logs.

The run goes through the shared episode loop (crosssim.runner.episode.play): the action source
asks the policy, checks the takeover condition on the current frame, and lets the operator's
action through while it is in control. Each row logs the policy's own action (``action.*``),
the flag (``intervention.active``) and the operator's action (``operator.*``, the policy's
action on rows without an intervention), in the real-log format (docs/real.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from crosssim.real.logs import write_log

if TYPE_CHECKING:
    from crosssim.runner.episode import Episode


@dataclass
class CollectStats:
    """What a collection did, per episode."""

    steps: list[int] = field(default_factory=list)
    interventions: list[int] = field(default_factory=list)
    """Steps the operator controlled."""
    takeovers: list[int] = field(default_factory=list)
    """Times the operator took over."""
    returns: list[float] = field(default_factory=list)
    terminated: list[bool] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Share of all steps under the operator's control."""
        return float(sum(self.interventions) / max(1, sum(self.steps)))

    def describe(self) -> str:
        return (f"{len(self.steps)} episodes, {sum(self.steps)} steps, intervention rate {100 * self.rate:.1f} % "
                f"({sum(self.takeovers)} takeovers), mean return {np.mean(self.returns):.1f}, "
                f"{sum(self.terminated)} terminated")


@dataclass(frozen=True, kw_only=True)
class CollectConfig:
    """How :func:`collect` runs the policy with its operator."""

    takeover: str
    """When the operator takes over: any term tripping (tilt>RAD, height<M, sink>M/S, tracking>M/S,
    joint:NAME>V, joint:NAME<V, |joint:NAME|>V; comma-separated)."""
    operator: str = "hold"
    """'hold' (scripted PD towards the zero pose, in action units) or a second policy card."""
    hold: int = 10
    """Hand back after this many control steps without a trip."""
    kp: float = 1.0
    """Scripted operator: action per rad of joint error [1/rad]."""
    kd: float = 0.1
    """Scripted operator: action per rad/s of joint velocity [s/rad]."""
    episodes: int = 4
    """Episodes to run, one log each."""
    steps: int | None = None
    """Control steps per episode; None: the task's episode length."""
    seed: int = 0
    """Base seed: episode i starts from seed + i."""
    budget: int | None = None
    """An intervention budget: the operator controls at most this many steps per episode, then
    leaves the policy alone (an operator that cannot rescue every episode); None: no limit."""
    operator_noise: float = 0.0
    """Standard deviation of Gaussian noise on the operator's action [action units] (a noisy human
    or joystick), drawn per step from the stream (seed, episode, 11); 0: exact."""
    operator_on: bool = True
    """False: the operator never acts; the flag still says where it *would* have taken over, the
    policy keeps control and no log is written."""


def collect(card_path: str | Path, profile, out: str | Path | None, config: CollectConfig, *,
            trust: bool = False) -> CollectStats:
    """Run the card's policy in ``profile`` (an EngineProfile) with the operator; write one log per
    episode into ``out`` (None: write nothing). ``trust``: allow code from the policy files (the
    policy's and an operator card's) to run."""
    from crosssim.card import load_card
    from crosssim.runner.simulator import open_engine

    card = load_card(card_path)
    team = _Team.from_card(card, config, trust=trust)
    stats = CollectStats()
    sim = open_engine(profile, team.harness.scene, base=team.harness.model_variant)
    try:
        for i in range(config.episodes):
            source, ep, terminated = _run_episode(sim, team, config, i)
            stats.steps.append(ep.t)
            stats.interventions.append(source.on)
            stats.takeovers.append(source.takeovers)
            stats.returns.append(source.ret)
            stats.terminated.append(terminated)
            if out is not None and config.operator_on:  # a log never claims an action the motors did not get
                folder = Path(out)
                meta = {"robot": team.harness.scene.stem, "joints": team.names, "control_period": ep.control_dt,
                        "card": os.path.relpath(card.path.resolve(), folder.resolve()), "terminated": terminated,
                        "operator": f"{team.operator.name}; takeover {config.takeover}, hand back after "
                                    f"{config.hold} clear steps",
                        "operator_action": "replace",
                        "source": f"crosssim correct collect: profile {profile.name}, seed {config.seed}, episode {i}"}
                path = folder / f"{profile.name}-corrections-{i:03d}.parquet"
                stats.paths.append(write_log(path, meta, source.rows))
    finally:
        sim.close()
    return stats


@dataclass(frozen=True)
class _Team:
    """What stays the same across episodes: the harness, the policy, the operator and its trigger,
    and the logged joints."""

    harness: object
    trigger: object
    policy: object
    operator: object
    names: list[str]
    """Logged joint names, in the policy's order."""
    qadr: np.ndarray
    dadr: np.ndarray

    @classmethod
    def from_card(cls, card, config: CollectConfig, *, trust: bool) -> "_Team":
        from crosssim.correct.operator import Trigger, make_operator, parse_condition
        from crosssim.policies import load_policy
        from crosssim.runner.harness import Harness

        harness = Harness.from_card(card)
        c = harness.canonical
        trigger = Trigger(parse_condition(config.takeover), harness, hold=config.hold)
        policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=trust)
        op = make_operator(config.operator, harness, kp=config.kp, kd=config.kd, trust=trust)
        return cls(harness, trigger, policy, op, [c.joint_names[j] for j in harness.joints],
                   c.joint_qposadr[harness.joints], c.joint_dofadr[harness.joints])


def _run_episode(sim, team: _Team, config: CollectConfig, i: int) -> tuple[_Source, Episode, bool]:
    """Episode ``i``: its action source (rows and counts), the finished Episode, whether it terminated."""
    from crosssim.runner.episode import Episode, play
    from crosssim.runner.stepper import ControlStepper

    ep = Episode(ControlStepper(sim, team.harness))
    ep.start(config.seed + i)
    team.policy.reset()
    team.operator.reset()
    team.trigger.reset()
    source = _Source(team, config.operator_on, budget=config.budget, noise=config.operator_noise,
                     rng=np.random.default_rng((config.seed, i, 11)))
    n = team.harness.task.max_steps if config.steps is None else int(config.steps)
    terminated = play(ep, source.act, n, on_step=source.on_step)
    return source, ep, terminated


class _Source:
    """One episode's action source: the policy, the operator's action while the trigger holds,
    each control step logged as a row."""

    def __init__(self, team: _Team, operator_on: bool, *, budget: int | None = None, noise: float = 0.0, rng=None):
        self.team, self.operator_on = team, operator_on
        self.budget, self.noise, self.rng = budget, float(noise), rng
        self.rows: dict[str, list] = {}
        self.on, self.takeovers, self.was, self.ret = 0, 0, False, 0.0
        """Steps under the operator, takeovers, whether it held the last step, the return so far."""

    def add(self, key, value) -> None:
        self.rows.setdefault(key, []).append(float(value))

    def act(self, ep) -> np.ndarray:
        team = self.team
        obs = ep.observe()
        mine = np.asarray(team.policy.act(obs), dtype=float)
        on = team.trigger.update(ep.frame, ep.task_state) and (self.budget is None or self.on < self.budget)
        theirs = np.asarray(team.operator.act(ep.frame, obs), dtype=float) if on else mine
        if on and self.noise > 0:  # what the motors got, noise included: the log holds it
            theirs = theirs + self.rng.normal(0.0, self.noise, theirs.shape)
        self.on += on
        self.takeovers += on and not self.was
        self.was = on
        self.log(ep, obs, mine, theirs, on)
        return theirs if self.operator_on else mine

    def on_step(self, ep, step) -> None:
        self.ret += float(step.reward)

    def log(self, ep, obs: np.ndarray, mine: np.ndarray, theirs: np.ndarray, on) -> None:
        """One row: joints, base, command, the policy's inputs and action, the operator's action, the flag."""
        team, add = self.team, self.add
        add("time", ep.t * ep.control_dt)
        for k, j in enumerate(team.names):
            add(f"q.{j}", ep.frame.qpos[team.qadr[k]])
            add(f"dq.{j}", ep.frame.qvel[team.dadr[k]])
            add(f"action.{j}", mine[k])
            add(f"operator.{j}", theirs[k])
        if team.harness.canonical.free_base:
            for key, value in zip("wxyz", ep.frame.base_quat):
                add(f"quat.{key}", value)
            for key, value in zip("xyz", ep.frame.base_ang_vel_body):
                add(f"gyro.{key}", value)
        if "command" in ep.task_state:
            for key, value in zip(("vx", "vy", "yaw_rate"), ep.task_state["command"]):
                add(f"command.{key}", value)
        for k, value in enumerate(obs):
            add(f"obs.{k}", value)
        add("intervention.active", float(on))
