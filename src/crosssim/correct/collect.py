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

import numpy as np

from crosssim.real.logs import write_log


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


def collect(card_path: str | Path, profile, out: str | Path | None, *, takeover: str, operator: str = "hold",
            hold: int = 10, kp: float = 1.0, kd: float = 0.1, episodes: int = 4, steps: int | None = None,
            seed: int = 0, trust: bool = False, operator_on: bool = True) -> CollectStats:
    """Run the card's policy in ``profile`` (an EngineProfile) with the operator; write one log per
    episode into ``out`` (None: write nothing). ``operator_on`` False measures how often the
    operator *would* have taken over (the flag is logged, the policy keeps control)."""
    from crosssim.card import load_card
    from crosssim.correct.operator import Trigger, make_operator, parse_condition
    from crosssim.policies import load_policy
    from crosssim.runner.episode import Episode, play
    from crosssim.runner.harness import Harness
    from crosssim.runner.simulator import open_engine
    from crosssim.runner.stepper import ControlStepper

    card = load_card(card_path)
    harness = Harness.from_card(card)
    c, task = harness.canonical, harness.task
    trigger = Trigger(parse_condition(takeover), harness, hold=hold)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=trust)
    op = make_operator(operator, harness, kp=kp, kd=kd, trust=trust)
    names = [c.joint_names[j] for j in harness.joints]
    qadr, dadr = c.joint_qposadr[harness.joints], c.joint_dofadr[harness.joints]
    stats = CollectStats()
    sim = open_engine(profile, harness.scene, base=harness.model_variant)
    try:
        for i in range(episodes):
            ep = Episode(ControlStepper(sim, harness))
            ep.start(seed + i)
            policy.reset()
            op.reset()
            trigger.reset()
            rows: dict[str, list] = {}
            count = {"on": 0, "takeovers": 0, "was": False, "ret": 0.0}

            def add(key, value):
                rows.setdefault(key, []).append(float(value))

            def source(ep: Episode) -> np.ndarray:
                obs = ep.observe()
                mine = np.asarray(policy.act(obs), dtype=float)
                on = trigger.update(ep.frame, ep.task_state)
                theirs = np.asarray(op.act(ep.frame, obs), dtype=float) if on else mine
                count["on"] += on
                count["takeovers"] += on and not count["was"]
                count["was"] = on
                add("time", ep.t * ep.control_dt)
                for k, j in enumerate(names):
                    add(f"q.{j}", ep.frame.qpos[qadr[k]])
                    add(f"dq.{j}", ep.frame.qvel[dadr[k]])
                    add(f"action.{j}", mine[k])
                    add(f"operator.{j}", theirs[k])
                if c.free_base:
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
                return theirs if operator_on else mine

            def on_step(ep, step):
                count["ret"] += float(step.reward)

            n = task.max_steps if steps is None else int(steps)
            terminated = play(ep, source, n, on_step=on_step)
            stats.steps.append(ep.t)
            stats.interventions.append(count["on"])
            stats.takeovers.append(count["takeovers"])
            stats.returns.append(count["ret"])
            stats.terminated.append(terminated)
            if out is not None and operator_on:  # a log never claims an action the motors did not get
                out = Path(out)
                path = out / f"{profile.name}-corrections-{i:03d}.parquet"
                meta = {"robot": harness.scene.stem, "joints": names, "control_period": ep.control_dt,
                        "card": os.path.relpath(card.path.resolve(), out.resolve()), "terminated": terminated,
                        "operator": f"{op.name}; takeover {takeover}, hand back after {hold} clear steps",
                        "operator_action": "replace",
                        "source": f"crosssim correct collect: profile {profile.name}, seed {seed}, episode {i}"}
                stats.paths.append(write_log(path, meta, rows))
    finally:
        sim.close()
    return stats
