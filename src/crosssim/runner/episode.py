"""The one episode loop: every consumer (crossval, lockstep batches, the gymnasium Env, real-log
replay, calibration) runs episodes through :class:`Episode` and :func:`play`.

An Episode holds one engine state's progress through a task: the current frame, the task state
and the control step count. ``advance`` is the per-episode step function (check the action,
apply it for one control period, score it); ``play`` runs it with three hooks: where actions
come from (a policy, logged actions), what to do after each step, and whether termination stops.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from crosssim.frame import InitialState, SimFrame
from crosssim.runner.stepper import ControlStepper
from crosssim.tasks.base import StepResult


class Episode:
    """One episode on one ControlStepper (reset it to start another)."""

    def __init__(self, stepper: ControlStepper):
        self.stepper = stepper
        self.frame: SimFrame | None = None
        self.task_state: dict = {}
        self.t = 0
        """Control steps taken since the last reset."""

    @property
    def task(self):
        return self.stepper.harness.task

    @property
    def control_dt(self) -> float:
        return self.stepper.control_dt

    def reset(self, initial: InitialState, noise_seed) -> None:
        self.frame, self.task_state = self.stepper.reset(initial, noise_seed)
        self.t = 0

    def start(self, seed: int) -> None:
        """Reset to the task's initial state drawn from ``seed`` (crossval's seeding: the
        observation noise has its own stream, so noise never shifts initial states). With the
        card's ``first_call: after_one_period`` the robot then holds a zero action for one control
        period (pd: the default pose) before the first policy call, as deploy scripts do; that
        period is not scored."""
        h = self.stepper.harness
        self.reset(self.task.initial_state(h.canonical, np.random.default_rng(seed)), [seed, 1])
        self.wait_for_first_call()

    def wait_for_first_call(self) -> None:
        """After a reset: with the card's ``first_call: after_one_period``, hold a zero action (pd:
        the default pose) for one control period, not scored, as crossval, the gymnasium Env and
        simulated logs all do; with ``reset`` (the default) nothing."""
        h = self.stepper.harness
        if h.first_call == "after_one_period":
            self.frame = self.stepper.step(np.zeros(h.action_size), acted=False)

    def observe(self) -> np.ndarray:
        """The policy's input at the current frame (with the variant's observation noise)."""
        return self.stepper.observe(self.frame, self.task_state)

    def advance(self, action, *, check: bool = True) -> StepResult:
        """Apply ``action`` for one control period and score it; the frame moves on only when the
        engine step succeeded (a failure leaves the last good frame)."""
        self.act(action, check=check)
        self.physics()
        return self.score()

    # advance in three parts, so that a lockstep batch can run the physics of many episodes at once
    def act(self, action, *, check: bool = True) -> None:
        """``advance``'s first part: check ``action`` and plan its control period."""
        if check:
            action = self.stepper.check_action(action, self.t)
        self._action, self._parts = action, self.stepper.plan(action)

    def physics(self) -> None:
        """``advance``'s second part: the engine steps of the planned period (this episode's state only)."""
        self.stepper.physics(self._parts)

    def physics_steps(self):
        """``physics`` as a generator, one engine step call per item (ControlStepper.physics_steps)."""
        return self.stepper.physics_steps(self._parts)

    def score(self) -> StepResult:
        """``advance``'s last part: the new frame, the task's score, a push the task drew."""
        after = self.stepper.settle()
        step = self.task.step(self.frame, after, self._action, self.task_state, self.stepper.control_dt)
        push = self.task_state.pop("push", None)  # a push the task drew: after scoring, before the next observation
        self.frame = after if push is None else self.stepper.push(push)
        self.t += 1
        return step


ActionSource = Callable[[Episode], np.ndarray]
"""Where an episode's actions come from: e.g. ``lambda ep: policy.act(ep.observe())``."""


def policy_actions(policy) -> ActionSource:
    return lambda ep: policy.act(ep.observe())


def play(ep: Episode, source: ActionSource, steps: int, *,
         on_step: Callable[[Episode, StepResult], None] | None = None, stop_on_termination: bool = True) -> bool:
    """Advance ``ep`` up to ``steps`` control steps with actions from ``source``, calling
    ``on_step`` after each; return whether the task terminated. Failures propagate."""
    for _ in range(steps):
        step = ep.advance(source(ep))
        if on_step is not None:
            on_step(ep, step)
        if step.terminated and stop_on_termination:
            return True
    return False
