"""A simulated operator: when it takes over (a stated condition on the frame) and what it commands.

A condition is a comma-separated list of terms; the operator takes over when any term trips and
hands back once none has tripped for ``hold`` control steps. Terms (SI units, radians):

- ``tilt>0.3``: angle between the root body's z axis and the world's vertical [rad]
- ``height<0.9``: the root body's height above z = 0 [m]
- ``joint:NAME>V`` / ``joint:NAME<V`` / ``|joint:NAME|>V``: a joint's position [rad or m]
- ``tracking>0.5``: planar velocity-tracking error of a commanded task [m/s]
- ``sink>0.5``: the root body falling faster than this [m/s] (an imminent fall)

The operator is a scripted controller (``hold``: PD on the policy joints towards a pose, in the
policy's raw action units) or a second policy card.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from crosssim.errors import CrossSimError


class CorrectionError(CrossSimError):
    """Bad input to ``crosssim correct``: the message names the option, file or field and the fix."""


_TERM = re.compile(r"^(\|?)(tilt|height|tracking|sink|joint:[\w.\-/]+)(\|?)\s*([<>])\s*(-?[0-9.]+(?:e-?\d+)?)$")


@dataclass(frozen=True)
class Term:
    quantity: str
    """tilt, height, tracking, sink, or joint:NAME."""
    above: bool
    """Trips when the value is above ``limit`` (else below)."""
    limit: float
    absolute: bool = False

    def text(self) -> str:
        q = f"|{self.quantity}|" if self.absolute else self.quantity
        return f"{q}{'>' if self.above else '<'}{self.limit:g}"


def parse_condition(text: str) -> tuple[Term, ...]:
    """``tilt>0.3,height<0.9`` -> terms; CorrectionError naming the bad term."""
    terms = []
    for raw in (t.strip() for t in str(text).split(",")):
        m = _TERM.match(raw.replace(" ", ""))
        if not raw or not m or bool(m.group(1)) != bool(m.group(3)):
            raise CorrectionError(f"--takeover: cannot read {raw!r}; terms are tilt>RAD, height<M, sink>M/S, "
                                  "tracking>M/S, joint:NAME>V, joint:NAME<V or |joint:NAME|>V, comma-separated")
        terms.append(Term(m.group(2), m.group(4) == ">", float(m.group(5)), bool(m.group(1))))
    return tuple(terms)


def _tilt(quat: np.ndarray) -> float:
    w, x, y, z = quat
    cos = 1.0 - 2.0 * (x * x + y * y)  # world z component of the body's z axis
    return float(np.arccos(np.clip(cos, -1.0, 1.0)))


class Trigger:
    """Evaluates a condition on frames of one harness; ``update`` says whether the operator is in control."""

    def __init__(self, terms: tuple[Term, ...], harness, *, hold: int = 10):
        c = harness.canonical
        self.terms, self.hold = terms, int(hold)
        self._qadr = {}
        for t in terms:
            if t.quantity.startswith("joint:"):
                name = t.quantity[len("joint:"):]
                if name not in c.joint_names:
                    raise CorrectionError(f"--takeover: {name!r} is not a joint of {harness.scene.name} "
                                          f"(joints: {', '.join(c.joint_names)})")
                self._qadr[name] = int(c.joint_qposadr[c.joint_names.index(name)])
        self.active, self._clear = False, 0

    def reset(self) -> None:
        self.active, self._clear = False, 0

    def value(self, term: Term, frame, task_state: dict) -> float:
        q = term.quantity
        if q == "tilt":
            v = _tilt(frame.base_quat)
        elif q == "height":
            v = float(frame.base_pos[2])
        elif q == "sink":
            v = float(-frame.base_lin_vel[2])
        elif q == "tracking":
            cmd = task_state.get("command")
            if cmd is None:
                raise CorrectionError("--takeover: 'tracking' needs a task with a velocity command")
            v = float(np.linalg.norm(np.asarray(cmd, float)[:2] - frame.base_lin_vel_body[:2]))
        else:
            v = float(frame.qpos[self._qadr[q[len("joint:"):]]])
        return abs(v) if term.absolute else v

    def tripped(self, frame, task_state: dict) -> bool:
        for t in self.terms:
            v = self.value(t, frame, task_state)
            if (v > t.limit) if t.above else (v < t.limit):
                return True
        return False

    def update(self, frame, task_state: dict) -> bool:
        """Whether the operator controls this step: takes over on a trip, hands back after
        ``hold`` steps in a row without one."""
        if self.tripped(frame, task_state):
            self.active, self._clear = True, 0
        elif self.active:
            self._clear += 1
            if self._clear >= self.hold:
                self.active = False
        return self.active


class HoldOperator:
    """Scripted operator, a steadying hand rather than a planner. Torque (motor) cards: PD on the
    policy joints towards ``pose`` (rad or m, policy joint order) in raw action units, clipped to
    the card's action range. Position-target (pd, position) cards: the raw action 0, i.e. the
    card's default pose held by the robot's own joint controllers (stand still)."""

    def __init__(self, harness, *, kp: float, kd: float, pose: np.ndarray | None = None):
        c = harness.canonical
        self.targets = harness.actuation.mode != "motor"
        self.qadr, self.dadr = c.joint_qposadr[harness.joints], c.joint_dofadr[harness.joints]
        self.kp, self.kd = float(kp), float(kd)
        self.pose = np.zeros(len(self.qadr)) if pose is None else np.asarray(pose, float)
        clip = harness.card.action.clip if harness.card is not None and harness.card.action.clip else (-1.0, 1.0)
        self.low, self.high = clip
        self.name = ("scripted stand (the default pose)" if self.targets
                     else f"scripted hold (kp {self.kp:g}, kd {self.kd:g})")

    def reset(self) -> None:
        pass

    def act(self, frame, obs: np.ndarray) -> np.ndarray:
        if self.targets:
            return np.clip(np.zeros(len(self.qadr)), self.low, self.high)
        q, dq = frame.qpos[self.qadr], frame.qvel[self.dadr]
        return np.clip(self.kp * (self.pose - q) - self.kd * dq, self.low, self.high)


class PolicyOperator:
    """A second policy (its own card, same task and observation) as the operator."""

    def __init__(self, card_path: str, harness, *, trust: bool = False):
        from crosssim.card import load_card
        from crosssim.policies import load_policy

        card = load_card(card_path)
        if card.task != harness.card.task:
            raise CorrectionError(f"--operator {card_path}: task {card.task}, the policy's is {harness.card.task}")
        self.policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size, trust=trust)
        self.name = f"policy {card.name}"

    def reset(self) -> None:
        self.policy.reset()

    def act(self, frame, obs: np.ndarray) -> np.ndarray:
        return np.asarray(self.policy.act(obs), dtype=float)


def make_operator(spec: str, harness, *, kp: float = 1.0, kd: float = 0.1, trust: bool = False):
    """``hold`` (scripted) or a policy card path."""
    if spec == "hold":
        return HoldOperator(harness, kp=kp, kd=kd)
    return PolicyOperator(spec, harness, trust=trust)
