"""The control step every consumer shares: latency, actuator model and chain, engine substeps, noise,
and the real robot's mechanisms (crosssim.runner.mechanisms).

Every episode loop (crossval, lockstep batches, the gymnasium Env, real-log replay and
calibration; crosssim.runner.episode) drives engines through this one class, so a perturbation
means the same thing in all of them.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from crosssim.actuators import build_actuator
from crosssim.engines.common import check_finite
from crosssim.errors import CrossSimError
from crosssim.frame import InitialState, SimFrame
from crosssim.perturb import ActuatorChain
from crosssim.runner.mechanisms import Mechanisms
from crosssim.runner.simulator import Simulator


def frame_skip(control_dt: float, physics_dt: float, name: str) -> int:
    """Physics steps per control period; CrossSimError when the period is not a whole number of
    steps (a profile timestep that does not divide the card's control period)."""
    skip = control_dt / physics_dt
    if not math.isclose(skip, round(skip), rel_tol=1e-9) or round(skip) < 1:
        raise CrossSimError(f"{name}: the control period {control_dt:g} s is not a whole number of physics steps "
                            f"of {physics_dt:g} s; choose a timestep that divides it")
    return int(round(skip))


PUSH_FIRST, PUSH_EVERY = 1.0, 2.0
"""A variant's pushes (``push_impulse``) come at these episode times [s]: the first after 1 s, then
every 2 s (docs/risk.md, "Opt-in families"), whatever the engine, so every engine and rung sees the
same pushes."""


def _stream(noise_seed, k: int):
    """The ``k``-th side stream beside the observation noise's (None: unseeded)."""
    if noise_seed is None:
        return None
    return [*np.atleast_1d(np.asarray(noise_seed, dtype=np.int64)).tolist(), k]


def _events_seed(noise_seed):
    """The task-events stream's seed, beside the observation noise's ([seed, 1] in crossval)."""
    return _stream(noise_seed, 2)


class ControlStepper:
    """Drives one engine state through control periods of the harness's task.

    The harness part of the variant comes from ``sim.variant.harness``; the physics step from
    the compiled model (``sim.physics_dt``), so a profile timestep keeps the control period.
    """

    def __init__(self, sim: Simulator, harness, *, native_pd=None, contacts: bool = False):
        """``native_pd``: the engine's ``native_pd_model`` of ``sim.model`` (shared by a lockstep
        batch), stepped instead of ``sim.model`` where the variant leaves the card's PD law as it
        is (no actuator model, no motor perturbation): no Python per physics step. ``contacts``:
        every frame carries the contact wrench per body, whether the task reads it or not (the
        recorded episode's foot contacts; reading it changes no state). Where the engine cannot
        give it (Newton's XPBD solver) and the task does not need it, frames go on without it."""
        self.sim, self.harness = sim, harness
        self.contacts = contacts or bool(harness.task.needs_contacts)
        self._contacts_optional = not harness.task.needs_contacts
        self.engine, self.model, self.name = sim.engine, sim.model, sim.name
        self.p = sim.variant.harness
        c = harness.canonical
        self.control_dt = harness.control_dt
        self.physics_dt = sim.physics_dt
        self.substeps = frame_skip(self.control_dt, self.physics_dt, sim.name)
        self.state = None
        self._noise: np.random.Generator | None = None  # set at reset when observations are noisy
        self._drop_rng: np.random.Generator | None = None  # set at reset when frames may drop
        self._last_obs: np.ndarray | None = None
        self._pending: deque = deque()
        delay = self.p.action_latency + self.p.action_delay
        self.delay_steps = int(math.floor(delay + 1e-9))
        """Whole control steps an action waits in the queue."""
        self.delay_substeps = float((delay - self.delay_steps) * self.substeps)
        """Physics steps (fractional) of a control period the previous action still acts for: whole
        steps of it, then one step with the torque blended by the remaining fraction (the impulse of
        a switch inside that step), so the delay acts continuously, not in physics-step jumps."""
        if self.delay_substeps < 1e-9:
            self.delay_substeps = 0.0
        self._chain = ActuatorChain(self.p, harness.max_torque, self.physics_dt, c.joint_count)
        self._actuator = build_actuator(self.p, harness)  # None: the card's ideal law
        self.observer = harness.observer()
        builder = self.observer.builder
        self._mech = Mechanisms(self.p, harness.actuation, [t.name for t in builder.terms] if builder else None,
                                sim.name, harness.sensors)
        self.native = native_pd is not None and self._chain.identity and self._actuator is None \
            and not self._mech.reads_state
        if self.native:
            self.model = native_pd
        self.clock_offset = 0.0
        """Added to every frame's time [s]: the episode clock at the engine's reset. A log replay
        starts at the first policy call, one control period after the robot's reset under the
        card's ``first_call: after_one_period`` (crosssim.real.compare)."""
        self.push_dv = 0.0
        """Base velocity change [m/s] of each of the variant's pushes (impulse / total mass)."""
        if self.p.push_impulse > 0:
            if not c.free_base or not self.engine.capabilities.push:
                raise CrossSimError(f"{sim.name}: a push of {self.p.push_impulse:g} N s needs a free-joint base and an "
                                    f"engine that can push it (mujoco, pybullet); {c.path.name} in {self.engine.name} "
                                    "has not: drop the push family (deployment.push / margins) for this run")
            self.push_dv = self.p.push_impulse / (c.total_mass * sim.variant.model.mass_scale)
        self._term_noise = self._noise_terms()
        if harness.actuation.mode == "mocap" and not self.engine.capabilities.mocap:
            raise CrossSimError(f"{sim.name}: task {harness.task.name}'s control law drives a mocap body welded to the "
                                f"arm, which engine {self.engine.name} cannot build; run it in mujoco, or set the card's "
                                "task_options.control: joint_pd (crosssim's law for every engine, docs/manipulation.md)")
        if getattr(harness.task, "pushes", None) is not None and not self.engine.capabilities.push:
            raise CrossSimError(f"{sim.name}: engine {self.engine.name} cannot apply pushes (card task_options.pushes); "
                                "run it in mujoco or pybullet, or remove the pushes")

    def _noise_terms(self) -> dict[int, float | np.ndarray]:
        """The variant's sensor noise per term of the card's observation, {term index: std in the
        term's own units, one or per value}: ``obs_noise`` on every sensed term (crosssim.observations
        ``ObservationTerm.sensed``; the task's own observation only on the values its ``sensed``
        marks), ``term_noise`` on the terms it names. Without observation.terms, index 0 is the
        task's whole observation."""
        builder = self.observer.builder
        specs = builder.terms if builder is not None else ()
        names = [t.name for t in specs]
        out: dict[int, float | np.ndarray] = {}
        if self.p.obs_noise > 0:
            mask = self.harness.task.sensed(self.harness.canonical)
            task_std = self.p.obs_noise if mask is None else self.p.obs_noise * np.asarray(mask, dtype=float)
            if builder is None:
                out[0] = task_std
            for k, (spec, term) in enumerate(zip(specs, builder.term_objects if builder is not None else ())):
                if term is None or (term.sensed and term.size != "task"):  # a sensor: term, or a sensed one
                    out[k] = self.p.obs_noise
                elif term.size == "task":
                    out[k] = task_std
        for name, std in self.p.term_noise:
            where = [k for k, n in enumerate(names) if n == name]
            if not where:
                raise CrossSimError(f"{self.name}: noise on observation term {name!r}, which the card's observation "
                                    f"does not have ({', '.join(names) or 'no observation.terms'}); name one of its terms")
            out.update({k: out.get(k, 0.0) + float(std) for k in where})
        return out

    @property
    def in_flight(self) -> int:
        """Actions still to reach the motors at any instant: one per whole step of delay, and one
        more (the one acting now) for a fractional delay."""
        return self.delay_steps + (1 if self.delay_substeps else 0)

    def push(self, velocity: np.ndarray) -> SimFrame:
        """Add ``velocity`` [m/s, world] to the base (a push the task drew); return the new frame."""
        self.engine.push(self.model, self.state, np.asarray(velocity, dtype=float))
        after = self.frame()
        check_finite(after, self.name)
        return after

    def queue_actions(self, actions) -> None:
        """Set the actions still in flight (oldest first, ``in_flight`` of them): a replay that
        starts mid-log hands over the logged ones, one at a log's start the action before it."""
        actions = [np.asarray(a, dtype=float) for a in actions]
        if len(actions) != self.in_flight:
            raise CrossSimError(f"{self.name}: {len(actions)} actions in flight for a delay of "
                                f"{self.p.action_latency + self.p.action_delay:g} steps (expected {self.in_flight})")
        if self.delay_substeps:
            self._held = actions.pop(0)
        self._pending = deque(actions)

    def reset(self, initial: InitialState, noise_seed) -> tuple[SimFrame, dict]:
        """Reset engine, task and observation state; return the first frame and the task state."""
        h = self.harness
        if self.state is not None and self.engine.capabilities.reset_into:
            self.state = self.engine.reset_into(self.model, self.state, initial)
        else:
            self.state = self.engine.reset(self.model, initial)
        if self._term_noise:  # its own stream: noise never shifts initial states
            self._noise = np.random.default_rng(_stream(noise_seed, 3))
        self._drop_rng = np.random.default_rng(_stream(noise_seed, 5)) if self.p.obs_drop > 0 else None
        self._last_obs = None
        self._chain = ActuatorChain(self.p, h.max_torque, self.physics_dt, h.canonical.joint_count)
        if self._actuator is not None:
            self._actuator.reset()
        if self._term_noise and self.observer.builder is not None:
            self.observer.builder.term_noise = (self._term_noise, self._noise)
        bias = self._mech.reset(noise_seed)
        if self.observer.builder is not None:
            self.observer.builder.term_bias = bias or None
        self._elapsed, self._next_push = 0.0, PUSH_FIRST
        self._push_rng = np.random.default_rng(_stream(noise_seed, 4)) if self.push_dv else None
        self._pending = deque(np.zeros(h.action_size) for _ in range(self.delay_steps))
        self._held = np.zeros(h.action_size)
        frame = self.frame()
        task_state = h.task.reset(frame)
        task_state.update(initial.task or {})
        # Its own stream too, so drawing commands never shifts initial states or noise.
        h.task.start_episode(task_state, np.random.default_rng(_events_seed(noise_seed)))
        self.observer.reset(task_state)
        return frame, task_state

    def frame(self) -> SimFrame:
        try:
            frame = self._read(self.contacts)
        except CrossSimError:
            if not (self.contacts and self._contacts_optional):
                raise
            self.contacts = False  # an engine without contact wrenches: the recording keeps none (and says so)
            frame = self._read(False)
        if self.clock_offset:
            from dataclasses import replace

            frame = replace(frame, time=frame.time + self.clock_offset)
        return frame

    def _read(self, contacts: bool) -> SimFrame:
        if getattr(self.harness.task, "needs_derived", False) and self.engine.capabilities.native_derived:
            return self.engine.frame(self.model, self.state, contacts=contacts, derived=True)
        return self.engine.frame(self.model, self.state, contacts=contacts)

    def observe(self, frame: SimFrame, task_state: dict) -> np.ndarray:
        """The policy's input at ``frame``: one call per control period (a dropped frame repeats
        the previous call's input; the observer's own state advances either way)."""
        obs = self.observer(self._mech.sensed(frame), task_state)  # the sensors' reading of it
        if self._term_noise and self.observer.builder is None:  # the task's own observation, sensed values
            obs = obs + self._noise.normal(0.0, self._term_noise[0], obs.shape)
        if self._drop_rng is not None:
            if self._last_obs is not None and self._drop_rng.random() < self.p.obs_drop:
                return self._last_obs.copy()
            self._last_obs = obs
        return obs

    def check_action(self, action, t: int) -> np.ndarray:
        h = self.harness
        action = np.asarray(action, dtype=float)
        if action.shape != (h.action_size,):
            raise CrossSimError(f"policy returned an action of shape {action.shape}, expected ({h.action_size},)")
        if not np.isfinite(action).all():
            raise CrossSimError(f"policy returned a non-finite action at step {t}: {action}")
        if h.card is not None and h.card.action.clip is not None:
            action = np.clip(action, *h.card.action.clip)
        return action

    def step(self, action: np.ndarray, *, acted: bool = True) -> SimFrame:
        """Apply one (checked) action for one control period; return the new frame (finite).
        ``acted=False``: not the policy's action (the period before the first call), so
        ``last_action`` stays zero."""
        self.physics(self.plan(action, acted=acted))
        return self.settle()

    def plan(self, action: np.ndarray, *, acted: bool = True) -> list[tuple[np.ndarray, int]]:
        """The control period's bookkeeping before any physics (observer, delay queue): the PD
        targets (or actions, for an actuator law) as [(target, physics steps)] for ``physics``."""
        act = self.harness.actuation
        if acted:
            self.observer.acted(action)
        if self.delay_steps:
            self._pending.append(action)
            action = self._pending.popleft()
        if self._mech.dropped():  # a lost command frame: the motors keep the previous action
            action = self._held
        late = min(self.delay_substeps + self._mech.jitter() * self.substeps, float(self.substeps))
        parts = [(act.target(action), self.substeps)]
        if late:  # the previous action acts for the first part of the period
            held, now = act.target(self._held), parts[0][0]
            whole = int(late)
            blend = late - whole
            parts = [(held, whole)] + ([(blend * held + (1.0 - blend) * now, 1)] if blend > 1e-9 else []) \
                + [(now, self.substeps - whole - (1 if blend > 1e-9 else 0))]
        self._held = action
        return [(target, n) for target, n in parts if n > 0]

    def physics(self, parts: list[tuple[np.ndarray, int]]) -> None:
        """Step this stepper's engine state through ``parts`` (``plan``'s). It touches only this
        stepper's state, chain and actuator: with an engine whose ``parallel_states`` capability
        is set, the lockstep runner runs several steppers' physics in threads at once."""
        for _ in self.physics_steps(parts):
            pass

    def physics_steps(self, parts: list[tuple[np.ndarray, int]]):
        """``physics`` one engine ``step`` call at a time: a generator that yields after each, so
        the lockstep runner can take every episode's first step, then every second one (an engine
        with ``worlds`` then runs each round as one step of all worlds, whatever the torque law)."""
        engine, model, act, mech = self.engine, self.model, self.harness.actuation, self._mech
        # an actuator model (net history, torque-speed envelope) acts at every physics step
        law = act if self._actuator is None else self._actuator
        for target, n in parts:
            if act.mode == "ee_pd":  # the command's joint targets, from the state this part starts at
                target = act.law.joint_targets(target, engine.joint_state(model, self.state)[0])
            if act.mode == "mocap":  # the benchmark's own law, inside the engine
                engine.step_mocap(model, self.state, act.law, target, n)
                yield
            elif self.native:
                engine.step_targets(model, self.state, target, n)
                yield
            elif act.constant_over_substeps and not self._chain.stateful and self._actuator is None \
                    and not mech.reads_state:
                q, qd = engine.joint_state(model, self.state)
                engine.step(model, self.state, self._chain(act.torques(target, q, qd)), n)
                yield
            else:
                for _ in range(n):
                    q, qd = engine.joint_state(model, self.state)
                    tau = self._chain(law.torques(target, mech.encoder_q(q), qd))
                    friction = mech.friction(qd, len(tau))
                    engine.step(model, self.state, tau if friction is None else tau + friction, 1)
                    yield

    def settle(self) -> SimFrame:
        """The frame after ``physics``, checked finite."""
        after = self.frame()
        check_finite(after, self.name)
        self._elapsed += self.control_dt
        if self.push_dv and self._elapsed + 1e-9 >= self._next_push:  # the variant's push, after this period
            self._next_push += PUSH_EVERY
            angle = self._push_rng.uniform(-np.pi, np.pi)
            after = self.push(self.push_dv * np.array([np.cos(angle), np.sin(angle), 0.0]))
        return after
