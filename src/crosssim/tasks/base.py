"""The task contract: engine-agnostic, computed from SimFrames only (dm_control style)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from crosssim.errors import CrossSimError
from crosssim.frame import InitialState, SimFrame
from crosssim.scene import CanonicalModel


@dataclass
class StepResult:
    reward: float
    terms: dict[str, float]
    terminated: bool
    reason: str | None = None
    """Why the task terminated, "<kind>: <detail>" (e.g. "fall: tilt 1.2 rad > 1 rad"); a
    termination without one is recorded as "terminated by task <name>"."""


class Task:
    """A task reads SimFrames and never an engine. Subclasses set the class attributes."""

    name: str = ""
    scene: str = ""
    """MJCF reference (``gymnasium:hopper.xml`` or a path)."""
    frame_skip: int = 1
    """Physics steps of the scene per control step (the control period is frame_skip x timestep)."""
    period_from_card: bool = False
    """Whether the control period comes from the card (``configure``) instead of ``frame_skip``."""
    max_steps: int = 1000
    """Control steps per episode (gymnasium's TimeLimit)."""
    needs_contacts: bool = False
    """Whether observation or reward read ``SimFrame.body_ext_wrench``."""
    needs_derived: bool = False
    """Whether observation or reward read body poses or velocities (``SimFrame.derived`` where the
    engine has them, else crosssim.kinematics)."""
    success_survival: float = 1.0
    """Share of ``max_steps`` an episode must run before a termination for it to count as doing the
    task (1: to the step limit; ``succeeded``, read by the harness check; docs/risk.md)."""
    metrics: tuple[str, ...] = ("return", "survival")
    """Per-episode metrics a card may choose (card field ``metric``); every one is higher-is-better."""
    primary_metric: str = "return"
    """The metric drops and the verdict use when the card chooses none."""

    @property
    def success_criterion(self) -> str:
        """The success criterion in words."""
        if self.success_survival >= 1.0:
            return "an episode succeeds when it runs to the step limit with no early termination"
        return (f"an episode succeeds when it runs at least {100 * self.success_survival:.0f}% of the "
                f"{self.max_steps}-step limit before any termination")

    def succeeded(self, rows) -> np.ndarray:
        """Per row of results (results.parquet columns): did the episode do the task?"""
        full = ~rows["terminated"].to_numpy(bool)
        if self.success_survival >= 1.0:
            return full
        return full | (rows["length"].to_numpy(float) >= self.success_survival * self.max_steps)

    def metric_values(self, rows, name: str) -> np.ndarray:
        """Per row of results: the value of declared metric ``name`` (NaN for a row with a failure)."""
        if name == "return":
            values = rows["return"].to_numpy(float)
        elif name == "survival":  # share of full episodes, as the card's claim
            values = (~rows["terminated"].to_numpy(bool)).astype(float)
        else:
            raise CrossSimError(f"task {self.name} declares no metric {name!r}; metrics: {', '.join(self.metrics)}")
        return np.where(rows["failure"].isna().to_numpy(), values, np.nan)

    def configure(self, control_period: float, timestep: float) -> None:
        """Adopt a card's control period [s] over the scene's physics step [s]. A task with a fixed
        ``frame_skip`` only checks that they agree; raises CrossSimError when they do not."""
        period = self.frame_skip * timestep
        if not math.isclose(control_period, period, rel_tol=1e-6):
            raise CrossSimError(f"control_period {control_period} s does not match task {self.name}: "
                                f"{self.frame_skip} x {timestep} s = {period} s")

    def bind(self, c: CanonicalModel, joints: np.ndarray) -> None:
        """Resolve card options that need the robot (``joints``: canonical index of each policy
        joint, in the policy's order); raise CardError naming the field. Default: nothing to do."""

    def actuation(self, c: CanonicalModel):
        """The task's own control law (crosssim.actuation.Actuation), replacing the card's action
        mode: a benchmark's end-effector law (docs/manipulation.md); None (default): the card's."""
        return None

    def episode_outcome(self, state: dict) -> tuple[dict[str, float], str | None]:
        """At an episode's end: per-episode metrics (``metric_<name>`` columns) and how it ended in
        words ("success", "dropped object", ...; None: the runner's own reason). Default: none."""
        return {}, None

    def observation_size(self, c: CanonicalModel) -> int:
        raise NotImplementedError

    def action_size(self, c: CanonicalModel) -> int:
        return c.actuator_count

    def initial_state(self, c: CanonicalModel, rng: np.random.Generator) -> InitialState:
        raise NotImplementedError

    def nominal_initial_state(self, c: CanonicalModel) -> InitialState:
        """The start state with no reset variation where the task can give one (diagnostics read
        the card against it); by default the seed-0 draw of ``initial_state``."""
        return self.initial_state(c, np.random.default_rng(0))

    def reset(self, frame: SimFrame) -> dict[str, Any]:
        """Task state at episode start (commands, phase, previous positions...)."""
        return {}

    def start_episode(self, state: dict, rng: np.random.Generator) -> None:
        """Draw what an episode varies besides its initial state (commands, ...) into ``state``,
        from ``rng``, the episode's own stream; called right after ``reset``. Default: nothing."""

    def observe(self, frame: SimFrame, state: dict) -> np.ndarray:
        raise NotImplementedError

    def sensed(self, c) -> np.ndarray | None:
        """Which values of ``observe``'s output a real robot's sensors measure (1) and which it
        computes or is given (0: model constants, commanded torques, goals, zeroed slots), for the
        sensor noise (crosssim.runner.stepper); None: every value is measured."""
        return None

    def step(self, before: SimFrame, after: SimFrame, action: np.ndarray, state: dict, dt: float) -> StepResult:
        raise NotImplementedError


@dataclass(frozen=True)
class ResetNoise:
    """Gymnasium's reset distribution: qpos uniform, qvel uniform or normal, scale ``scale``."""

    scale: float
    qvel: str = "uniform"  # or "normal"

    def sample(self, qpos0: np.ndarray, nv: int, rng: np.random.Generator) -> InitialState:
        # Same draw order as gymnasium's reset_model, so one seed gives one initial state in both.
        qpos = qpos0 + rng.uniform(-self.scale, self.scale, size=qpos0.size)
        if self.qvel == "uniform":
            qvel = np.zeros(nv) + rng.uniform(-self.scale, self.scale, size=nv)
        else:
            qvel = np.zeros(nv) + self.scale * rng.standard_normal(nv)
        return InitialState(qpos=qpos, qvel=qvel)

