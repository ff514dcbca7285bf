"""The harness: everything engine-independent about one policy (task, scene, joint order,
actuation, observation, control timing), built once from its card."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crosssim.actuation import Actuation
from crosssim.card import Card
from crosssim.errors import CardError, CrossSimError
from crosssim.frame import SimFrame
from crosssim.observations import ObservationBuilder, TermContext
from crosssim.scene import CanonicalModel, canonical_model, resolve_scene
from crosssim.tasks.base import Task


def _vec(value, default, n: int, where: str, field_name: str) -> np.ndarray:
    arr = np.asarray(default if value is None else value, dtype=float)
    try:
        return np.broadcast_to(arr, (n,)).copy()
    except ValueError:
        raise CardError(f"{where}: field '{field_name}' has {arr.size} values for {n} policy joints") from None


def build_actuation(card: Card, c: CanonicalModel, joints: np.ndarray) -> Actuation:
    """Actuation for the card's action mode, one component per policy joint (card order)."""
    act_of_joint = {int(j): a for a, j in enumerate(c.actuator_joint)}
    n, where, spec = len(joints), card.path, card.action
    missing = [c.joint_names[j] for j in joints if int(j) not in act_of_joint]
    acts = np.array([act_of_joint.get(int(j), -1) for j in joints])
    if spec.mode in ("motor", "position") and missing:
        raise CardError(f"{where}: joints {missing} have no actuator in {c.path.name}; action.mode "
                        f"{spec.mode!r} drives the model's actuators")
    gear = np.where(acts >= 0, c.actuator_gear[acts], 1.0)
    low = np.where((acts >= 0) & c.actuator_ctrllimited[acts], c.actuator_ctrlrange[acts, 0], -np.inf)
    high = np.where((acts >= 0) & c.actuator_ctrllimited[acts], c.actuator_ctrlrange[acts, 1], np.inf)
    base = dict(joint_index=joints, dof_index=c.joint_dofadr[joints], qpos_index=c.joint_qposadr[joints],
                joint_count=c.joint_count, gear=gear, ctrl_low=low, ctrl_high=high)
    if spec.mode == "motor":
        return Actuation("motor", **base)
    default = spec.default_pos
    if isinstance(default, str):  # keyframe:<name>
        key = default.split(":", 1)[1]
        if key not in c.keyframes:
            raise CardError(f"{where}: field 'action.default_pos' names keyframe {key!r}; {c.path.name} has "
                            f"{sorted(c.keyframes)}")
        default = c.keyframes[key][c.joint_qposadr[joints]]
    default = _vec(default, 0.0, n, where, "action.default_pos")
    scale = _vec(spec.scale, 1.0, n, where, "action.scale")
    limit = None if spec.torque_limit is None else _vec(spec.torque_limit, 0.0, n, where, "action.torque_limit")
    if spec.mode == "pd":
        return Actuation("pd", **base, kp=_vec(spec.kp, 0.0, n, where, "action.kp"),
                         kd=_vec(spec.kd, 0.0, n, where, "action.kd"), scale=scale, default_pos=default,
                         torque_limit=limit)
    # position: the model's position actuators, computed by crosssim at physics rate
    kp, kv = c.actuator_kp[acts], c.actuator_kv[acts]
    if not (kp > 0).all():
        raise CardError(f"{where}: action.mode 'position' needs position actuators; {c.path.name}'s actuators "
                        f"for {[c.joint_names[j] for j, k in zip(joints, kp) if k <= 0]} are not")
    forcelimit = np.where(c.actuator_forcelimited[acts], np.abs(c.actuator_forcerange[acts]).max(axis=1), np.inf)
    if limit is not None:
        forcelimit = np.minimum(forcelimit, limit)
    return Actuation("pd", **base, kp=kp.copy(), kd=kv.copy(), scale=scale, default_pos=default,
                     torque_limit=forcelimit, target_low=low, target_high=high)


def _configure_timing(card: Card, task: Task, c: CanonicalModel, scene: Path) -> None:
    """Set the task's frame skip from the control period over the physics step. The period is
    the card's (a task with a fixed frame skip checks it against its own: frame skip x the scene's
    step); a card physics timestep keeps that period and changes the frame skip, and one that
    does not divide it is refused naming the field."""
    period, dt = card.control_period, card.physics_timestep
    try:
        if period is not None:
            task.configure(period, c.timestep if dt is None or not task.period_from_card else dt)
    except CrossSimError as exc:
        if dt is not None and task.period_from_card:
            raise CardError(f"{card.path}: field 'physics_timestep' ({dt:g} s) does not divide control_period "
                            f"({period:g} s) into whole physics steps; choose e.g. "
                            f"{period / max(1, round(period / dt)):g} s") from None
        raise CardError(f"{card.path}: {exc} ({scene.name})") from None
    if dt is not None and not task.period_from_card:
        native = task.frame_skip * c.timestep
        skip = native / dt
        if not np.isclose(skip, round(skip), rtol=1e-6, atol=0) or round(skip) < 1:
            raise CardError(f"{card.path}: field 'physics_timestep' ({dt:g} s) does not divide task {task.name}'s "
                            f"control period ({native:g} s) into whole physics steps; choose e.g. "
                            f"{native / max(1, round(skip)):g} s")
        task.frame_skip = int(round(skip))  # the gymnasium task's period stays; only the skip follows


@dataclass
class Observer:
    """Per-rollout observation state (history, last action) over the harness's builder."""

    harness: "Harness"
    builder: ObservationBuilder | None
    ctx: TermContext | None

    def reset(self, task_state: dict) -> None:
        if self.builder is not None:
            self.builder.reset()
            self.ctx.last_action = np.zeros(self.harness.action_size)
            self.ctx.command = np.asarray(task_state.get("command", np.zeros(3)), dtype=float)

    def __call__(self, frame: SimFrame, task_state: dict) -> np.ndarray:
        if self.builder is None:
            return self.harness.task.observe(frame, task_state)
        if "command" in task_state:  # a task may draw a new command mid-episode
            self.ctx.command = np.asarray(task_state["command"], dtype=float)
        task = self.harness.task
        self.ctx.task_observation = lambda f: task.observe(f, task_state)
        return self.builder(frame, self.ctx)

    def acted(self, action: np.ndarray) -> None:
        if self.ctx is not None:
            self.ctx.last_action = np.asarray(action, dtype=float).copy()


@dataclass
class Harness:
    card: Card | None
    """None when built for a bare task (training), with gymnasium's motor semantics."""
    task: Task
    scene: Path
    canonical: CanonicalModel
    actuation: Actuation
    joints: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    """Canonical joint index of each policy joint, in the policy's order."""
    sensors: object = None
    physics_dt: float = 0.0
    """Physics step [s]: the card's ``physics_timestep``, else the scene's (0: the scene's)."""
    joint_sensors: dict = field(default_factory=dict)
    """'jointpos' / 'jointvel' -> sensor name per policy joint, for joint terms with ``source: sensors``."""

    def __post_init__(self):
        if not self.physics_dt:
            self.physics_dt = self.canonical.timestep

    @property
    def first_call(self) -> str:
        """When the policy is first called (card ``first_call``): 'reset' or 'after_one_period'."""
        return self.card.first_call if self.card is not None else "reset"

    @property
    def model_variant(self):
        """The card's own change to the compiled model (its physics timestep), under every
        profile and perturbation (crosssim.runner.simulator.open_engine's ``base``)."""
        from crosssim.variant import ModelVariant, Variant

        if self.card is None or self.card.physics_timestep is None:
            return Variant()
        return Variant(ModelVariant(timestep=self.card.physics_timestep))

    @classmethod
    def from_card(cls, card: Card) -> "Harness":
        from crosssim.tasks import make_task

        try:
            task = make_task(card.task, **card.task_options)
        except TypeError as exc:
            raise CardError(f"{card.path}: field 'task_options' does not fit task {card.task}: {exc}") from None
        except CardError as exc:
            raise CardError(f"{card.path}: {exc}") from None
        if not (card.robot or task.scene):
            raise CardError(f"{card.path}: task {card.task} needs the card's 'robot' field (an MJCF file)")
        scene = resolve_scene(card.robot or task.scene, base_dir=card.path.parent)
        if card.robot and task.scene:  # the card's model replaces the task's: body lookups read it
            task.scene = str(scene)
        c = canonical_model(scene)
        if card.joints:
            unknown = [j for j in card.joints if j not in c.joint_names]
            if unknown:
                raise CardError(f"{card.path}: field 'joints' names {unknown}, not joints of {scene.name} "
                                f"(its joints: {list(c.joint_names)})")
            joints = np.array([c.joint_names.index(j) for j in card.joints], dtype=int)
        else:
            joints = c.actuator_joint.copy()
        own = task.actuation(c)
        if own is not None and card.action.mode != "motor":
            raise CardError(f"{card.path}: field 'action.mode' ({card.action.mode}): task {task.name} runs its own "
                            "control law (task_options.control, docs/manipulation.md); remove the field")
        h = cls(card, task, scene, c, own or build_actuation(card, c, joints), joints,
                physics_dt=card.physics_timestep or c.timestep)
        if card.control_period is None and task.period_from_card:
            raise CardError(f"{card.path}: task {task.name} needs 'control_period' (seconds)")
        _configure_timing(card, task, c, scene)
        try:
            task.bind(c, joints)
        except CardError as exc:
            raise CardError(f"{card.path}: {exc}") from None
        if card.observation.terms:
            from crosssim.observations import check_terms
            from crosssim.sensors import SensorReader

            terms = card.observation.terms
            needs = [t.name.split(":", 1)[1] for t in terms if t.name.startswith("sensor:")]
            from_sensors = [(k, t.name) for k, t in enumerate(terms) if t.options.get("source") == "sensors"]
            if needs or from_sensors:
                h.sensors = SensorReader(scene)
                for name in needs:
                    h.sensors.check(name, card.path)
            names = [c.joint_names[j] for j in joints]
            for k, name in from_sensors:
                kind = "jointvel" if name == "joint_vel" else "jointpos"
                where = f"{card.path}: field 'observation.terms[{k}]' ({name}, source: sensors)"
                h.joint_sensors[kind] = h.sensors.joint_sensors(kind, names, where)
            check_terms(terms, scene, card.path, h.sensors)
            for k, t in enumerate(terms):
                if t.name == "task_observation":
                    try:
                        task.observation_size(c)
                    except (CardError, NotImplementedError):
                        raise CardError(f"{card.path}: field 'observation.terms[{k}]' (task_observation): task "
                                        f"{task.name} has no observation of its own; list its terms instead") from None
        return h

    @classmethod
    def for_task(cls, name: str, options: dict | None = None) -> "Harness":
        """A harness for a task with no card: the task's scene and gymnasium's motors. ``options``:
        the task's options, as a card's ``task_options`` (``{"version": "v4"}``)."""
        from crosssim.tasks import make_task

        task = make_task(name, **(options or {}))
        scene = resolve_scene(task.scene)
        c = canonical_model(scene)
        return cls(None, task, scene, c, task.actuation(c) or Actuation.motors(c), c.actuator_joint.copy())

    def observer(self) -> Observer:
        card = self.card
        if card is None or not card.observation.terms:
            return Observer(self, None, None)
        o = card.observation
        builder = ObservationBuilder(o.terms, history=o.history, layout=o.layout, fill=o.fill)
        a = self.actuation
        default = a.default_pos if a.default_pos is not None else self.canonical.qpos0[a.qpos_index]
        ctx = TermContext(a.qpos_index, a.dof_index, default, quaternion_order=o.quaternion_order,
                          sensors=self.sensors, joint_sensors=self.joint_sensors)
        return Observer(self, builder, ctx)

    @property
    def control_dt(self) -> float:
        """Control period [s]: the task's frame skip over the physics step (the card's or the scene's)."""
        return self.task.frame_skip * self.physics_dt

    @property
    def max_torque(self) -> np.ndarray:
        """Largest torque each canonical joint's actuator can give [N m or N] (inf: unactuated)."""
        out = np.full(self.canonical.joint_count, np.inf)
        a = self.actuation
        if a.mode == "motor":
            peak = np.abs(a.gear) * np.maximum(np.abs(a.ctrl_low), np.abs(a.ctrl_high))
        else:
            peak = a.torque_limit if a.torque_limit is not None else np.full(len(a.joint_index), np.inf)
        out[a.joint_index] = peak
        return out

    @property
    def obs_size(self) -> int:
        card = self.card
        if card is not None and card.observation.terms:
            task_size = 0
            if any(t.name == "task_observation" for t in card.observation.terms):
                task_size = self.task.observation_size(self.canonical)
            return self.observer().builder.size(len(self.joints), self.sensors, task_size)
        return self.task.observation_size(self.canonical)

    @property
    def action_size(self) -> int:
        """Action components: the task's own law's command (Fetch: 4), else one per policy joint."""
        return self.actuation.action_size
