"""A variant of the physics: a calibration with a perturbation on top, typed, compiled once.

A :class:`Variant` has a model part (:class:`ModelVariant`: timestep, masses, friction, joint
parameters), compiled by :func:`compile_model` into the one MuJoCo model every engine adapter
builds from, and a harness part (:class:`HarnessVariant`: motor strength, lag, torque limit,
latency, observation noise) that the control step applies identically in every engine. A
perturbation (a sweep rung, a crossval condition, a domain-randomisation draw) is a Variant too,
named by its fields flat (``Variant.of(friction_scale=0.7, action_latency=1)``), as the sweeps'
ladders and the profiles' settings name them.

Adding a model perturbation is one field on :class:`ModelVariant` (its ``compose`` rule in the
field's metadata) and one function registered with :func:`model_axis`; third parties register
theirs through the ``crosssim.perturbations`` entry-point group (docs/engines.md, "Adding a
perturbation").
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from crosssim.errors import CrossSimError
from crosssim.registry import Registry

SCALE, ADD, MIN, OVERRIDE = "scale", "add", "min", "override"
"""How a perturbation's value composes with a calibration's: multiply, add, take the tighter
limit, or replace."""


def _axis(default, compose: str, doc: str = ""):
    return field(default=default, metadata={"compose": compose, "doc": doc})


@dataclass(frozen=True)
class ModelVariant:
    """Changes to the compiled MuJoCo model; each field is applied by its registered function."""

    timestep: float | None = _axis(None, OVERRIDE)
    """Physics step [s] replacing the scene's ``<option timestep>`` (None: the scene's)."""
    dt_divisor: int = _axis(1, SCALE)
    """Physics timestep divided by this; the control period stays, so frame skip grows by it."""
    friction_scale: float = _axis(1.0, SCALE)
    """Scale on every geom's sliding friction."""
    mass_scale: float = _axis(1.0, SCALE)
    """Scale on every body's mass and inertia."""
    joint_damping: float | None = _axis(None, OVERRIDE)
    """Viscous damping [N m s/rad or N s/m] set on every hinge and slide joint (None: the
    scene's); absolute, for a model that has none to scale (calibrated from real logs)."""
    joint_armature: float | None = _axis(None, OVERRIDE)
    """Armature [kg m^2 or kg] set on every hinge and slide joint (None: the scene's)."""
    joint_frictionloss: float | None = _axis(None, OVERRIDE)
    """Dry friction [N m or N] set on every hinge and slide joint (None: the scene's)."""
    damping_scale: float = _axis(1.0, SCALE)
    """Scale on every dof's viscous damping (after ``joint_damping``)."""
    armature_scale: float = _axis(1.0, SCALE)
    """Scale on every dof's armature (rotor inertia)."""
    frictionloss_scale: float = _axis(1.0, SCALE)
    """Scale on every dof's dry friction."""
    contact_timeconst: float | None = _axis(None, OVERRIDE)
    """Contact softness: MuJoCo's solref time constant [s] set on every geom and explicit contact pair
    (None: the scene's own; MuJoCo's default is 0.02). A larger one is a softer, slower contact: the
    robot's feet sink deeper and the ground pushes back later (carpet, turf, rubber feet). Engines
    that cannot express it refuse it (crosssim.runner.simulator.check_features)."""
    ground_slope: float = _axis(0.0, ADD)
    """Ground inclination [rad]: gravity tilted about the world y axis so that +x (the direction a
    locomotion task walks) is uphill; every engine takes gravity from the compiled model, so the
    slope reaches each the same way. A cart-pole's track tilts likewise."""
    contact_dampratio: float | None = _axis(None, OVERRIDE)
    """Damping ratio of the contacts (MuJoCo's solref second value; 1 is critical, below 1 bouncy;
    None: the scene's own)."""
    extra: tuple[tuple[str, float], ...] = ()
    """Plugin perturbations (``crosssim.perturbations`` entry points): (name, value), by name."""


@dataclass(frozen=True)
class HarnessVariant:
    """Changes the shared control step applies (crosssim.perturb.ActuatorChain, the stepper)."""

    motor_strength: float = _axis(1.0, SCALE)
    """Scale on every joint torque (0.8 = motors 20% weaker)."""
    motor_lag: float = _axis(0.0, ADD)
    """First-order lag time constant on applied torques [s]."""
    torque_limit: float | None = _axis(None, MIN)
    """Clip torques to this fraction of each actuator's maximum (gear x ctrl range)."""
    action_latency: int = _axis(0, ADD)
    """Actions reach the motors this many control steps late."""
    action_delay: float = _axis(0.0, ADD)
    """A further delay [control steps, fractional] before actions reach the motors, on top of
    ``action_latency``; its fraction is resolved to physics steps (the previous action acts for
    that part of the control period). Real deployments declare theirs (docs/real.md)."""
    obs_noise: float = _axis(0.0, ADD)
    """Standard deviation of Gaussian sensor noise on every sensed observation value, in its own units
    before scale, clip and normalisation (crosssim.runner.stepper ``_noise_terms``: the terms and task
    values a sensor measures; never commands, clocks, phases, the previous action or constant slots)."""
    actuator: str | None = _axis(None, OVERRIDE)
    """Actuator model file (crosssim.actuators, docs/actuators.md): a TorchScript actuator net or a
    YAML spec (net or DC motor); None: the card's ideal law."""
    servo_terms: str | None = _axis(None, OVERRIDE)
    """With a learned actuator net: ``keep`` keeps the model's joint damping, armature and friction
    loss; ``remove`` (the default, None) sets those not stated to zero, since the net holds the
    servo they stood for (crosssim.actuators.servo_replaced, docs/actuators.md)."""
    motor_free_speed: float | None = _axis(None, MIN)
    """DC-motor torque-speed envelope: joint speed [rad/s] at which the available torque falls to zero
    (linearly from each joint's maximum torque at rest); None: no envelope."""
    push_impulse: float = _axis(0.0, ADD)
    """Horizontal impulse [N s] on a free base at fixed times of every episode (crosssim.runner.stepper,
    PUSH_TIMES): the whole robot's momentum changes by it (base velocity + impulse / total mass), in
    a direction drawn per episode from its seed."""
    term_noise: tuple[tuple[str, float], ...] = _axis((), ADD)
    """Gaussian noise on named observation terms, (term, std in the term's own units, before its
    scale and clip), from the observation-noise stream."""
    backlash: float = _axis(0.0, ADD)
    """Gear play [s]: after each reversal of a joint torque's sign no torque reaches the joint for
    this long, while the gears cross their gap (crosssim.perturb.ActuatorChain)."""
    obs_drop: float = _axis(0.0, ADD)
    """Probability that a control period's observation is lost, so the policy reads the previous
    one again (a dropped sensor frame), from its own stream (crosssim.runner.stepper)."""
    encoder_offset: float = _axis(0.0, ADD)
    """Encoder calibration error [rad or m]: each policy joint's position reading is off by a constant
    drawn per episode, uniform in [-value, value]; the observation and the servo's PD both read it
    (crosssim.runner.mechanisms)."""
    joint_friction: float = _axis(0.0, ADD)
    """Coulomb (dry) friction [N m or N] on every policy joint, opposing its speed with a smoothed sign,
    applied by the harness in every engine (crosssim.runner.mechanisms.FRICTION_SPEED)."""
    deadband: float = _axis(0.0, ADD)
    """Motor dead band [N m or N]: each joint's commanded torque loses this much magnitude (none below it
    reaches the joint), as a driver's dead zone (crosssim.perturb.ActuatorChain)."""
    action_drop: float = _axis(0.0, ADD)
    """Probability per control period that the new action never reaches the motors (a dropped command
    frame), which keep the previous one, from its own stream."""
    action_jitter: float = _axis(0.0, ADD)
    """Largest extra delay [control periods, at most 1] of each period's action, drawn per period
    uniform in [0, value]: the previous action acts for that part of the period."""
    imu_bias: float = _axis(0.0, ADD)
    """Constant IMU bias per episode, each component uniform in [-value, value]: rad/s on the gyro's
    ``base_ang_vel``, and on the unitless ``projected_gravity`` (about value rad of tilt), before
    scale and clip."""

    def __post_init__(self):  # fields that crossed a process boundary as JSON come back as lists
        if not isinstance(self.term_noise, tuple) or any(not isinstance(t, tuple) for t in self.term_noise):
            object.__setattr__(self, "term_noise", tuple((str(n), float(v)) for n, v in self.term_noise))


def _compose(rule: str, base, top):
    if rule == SCALE:
        return type(top)(top * base)
    if rule == ADD:
        return top + base
    if rule == MIN:
        return base if top is None else top if base is None else min(base, top)
    return base if top is None else top  # OVERRIDE


def _then(base, top):
    """``top`` applied on top of ``base`` (same dataclass), field by field."""
    out = {}
    for f in fields(base):
        if f.name == "extra":
            merged = dict(base.extra)
            for name, value in top.extra:
                merged[name] = _compose(perturbation_axis(name).compose, merged[name], value) if name in merged else value
            out["extra"] = tuple(sorted(merged.items()))
        else:
            out[f.name] = _compose(f.metadata["compose"], getattr(base, f.name), getattr(top, f.name))
    return type(base)(**out)


@dataclass(frozen=True)
class Variant:
    """Calibration and perturbation of one engine column, split where each one acts."""

    model: ModelVariant = ModelVariant()
    harness: HarnessVariant = HarnessVariant()

    @classmethod
    def of(cls, **values) -> "Variant":
        """The variant of flat ``values`` (a sweep rung's or a condition's fields), each given to
        the part that declares it; TypeError names a field neither declares."""
        unknown = set(values) - MODEL_FIELDS - HARNESS_FIELDS
        if unknown:
            raise TypeError(f"Variant.of() got unknown fields {sorted(unknown)}")
        return cls(ModelVariant(**{k: v for k, v in values.items() if k in MODEL_FIELDS}),
                   HarnessVariant(**{k: v for k, v in values.items() if k in HARNESS_FIELDS}))

    @property
    def is_nominal(self) -> bool:
        """No change at all: the profile's and the card's own physics."""
        return self == Variant()

    def then(self, top: "Variant") -> "Variant":
        """``top`` on top of this one: scales multiply, latencies and lags add, torque limits take
        the tighter, a timestep replaces. A perturbation of a calibrated profile is thus a gap
        from the calibrated model, not from the canonical one."""
        return Variant(_then(self.model, top.model), _then(self.harness, top.harness))

    def settings(self) -> dict:
        """The non-default values as flat profile settings (what a profile YAML would hold)."""
        out = {}
        for part in (self.model, self.harness):
            for f in fields(part):
                value = getattr(part, f.name)
                if f.name == "extra":
                    out.update(value)
                elif value != f.default:
                    out[f.name] = value
        return out

    @classmethod
    def from_settings(cls, settings: dict, where: str) -> "Variant":
        """The variant named by flat ``settings`` (a profile's); raises CrossSimError naming
        ``where`` for a value of the wrong kind. Keys that are not variant axes are ignored."""
        parts: dict[str, dict] = {"model": {}, "harness": {}}
        extra = {}
        plugins = PERTURBATIONS.targets()
        for key, value in settings.items():
            part = "model" if key in MODEL_FIELDS else "harness" if key in HARNESS_FIELDS else None
            try:
                if part is not None:
                    parts[part][key] = _typed(key, value)
                elif key in plugins:
                    extra[key] = float(value)
            except (TypeError, ValueError):
                kind = (" or ".join(_CHOICES[key]) if key in _CHOICES else "a file path" if key in _TEXT
                        else "a number")
                raise CrossSimError(f"{where}: setting {key!r} must be {kind}, not {value!r}") from None
        return cls(ModelVariant(**parts["model"], extra=tuple(sorted(extra.items()))),
                   HarnessVariant(**parts["harness"]))


MODEL_FIELDS = {f.name for f in fields(ModelVariant)} - {"extra"}
HARNESS_FIELDS = {f.name for f in fields(HarnessVariant)}
_INTEGER = {"dt_divisor", "action_latency"}
_TEXT = {"actuator", "servo_terms"}
_CHOICES = {"servo_terms": ("keep", "remove")}


def _typed(key: str, value):
    if value is None and key in ("timestep", "torque_limit", "actuator", "servo_terms", "motor_free_speed", "joint_damping",
                                 "joint_armature", "joint_frictionloss", "contact_timeconst", "contact_dampratio"):
        return None
    if key in _TEXT:
        if not isinstance(value, str) or not value or value not in _CHOICES.get(key, (value,)):
            raise TypeError(key)
        return value
    if isinstance(value, bool):
        raise TypeError(key)
    if key in _INTEGER:
        if float(value) != int(value):
            raise ValueError(key)
        return int(value)
    return float(value)


def variant_keys() -> set[str]:
    """Every profile setting a variant reads (built-in axes and installed plugins)."""
    return MODEL_FIELDS | HARNESS_FIELDS | set(PERTURBATIONS.targets())


# -- model axes: one function per ModelVariant field ---------------------------------------------

MODEL_AXES: dict[str, Callable[[Any, Any], None]] = {}
"""ModelVariant field -> function(mj_model, value) applying a non-default value in place."""


def model_axis(name: str):
    """Register the function that applies ModelVariant field ``name`` to a MuJoCo model."""
    def register(fn):
        MODEL_AXES[name] = fn
        return fn
    return register


@model_axis("timestep")
def _timestep(m, value: float) -> None:
    m.opt.timestep = float(value)


@model_axis("dt_divisor")
def _dt_divisor(m, value: int) -> None:
    m.opt.timestep = m.opt.timestep / value


@model_axis("friction_scale")
def _friction(m, value: float) -> None:
    m.geom_friction[:, 0] = m.geom_friction[:, 0] * value


@model_axis("mass_scale")
def _mass(m, value: float) -> None:
    m.body_mass[:] = m.body_mass * value
    m.body_inertia[:] = m.body_inertia * value


def _joint_dofs(m):
    """Dof addresses of the hinge and slide joints (not a floating base's or a ball's)."""
    import numpy as np

    return np.array([m.jnt_dofadr[j] for j in range(m.njnt) if int(m.jnt_type[j]) in (2, 3)], dtype=int)


@model_axis("joint_damping")
def _joint_damping(m, value: float) -> None:
    m.dof_damping[_joint_dofs(m)] = value


@model_axis("joint_armature")
def _joint_armature(m, value: float) -> None:
    m.dof_armature[_joint_dofs(m)] = value


@model_axis("joint_frictionloss")
def _joint_frictionloss(m, value: float) -> None:
    m.dof_frictionloss[_joint_dofs(m)] = value


@model_axis("damping_scale")
def _damping(m, value: float) -> None:
    m.dof_damping[:] = m.dof_damping * value


@model_axis("armature_scale")
def _armature(m, value: float) -> None:
    m.dof_armature[:] = m.dof_armature * value


@model_axis("frictionloss_scale")
def _frictionloss(m, value: float) -> None:
    m.dof_frictionloss[:] = m.dof_frictionloss * value


@model_axis("ground_slope")
def _ground_slope(m, value: float) -> None:
    import numpy as np

    c, s = np.cos(value), np.sin(value)
    gx, gy, gz = (float(v) for v in m.opt.gravity)
    m.opt.gravity[:] = (c * gx + s * gz, gy, -s * gx + c * gz)  # rotation about +y: -z gravity gains -x


CONTACT_SOFTNESS = ("contact_timeconst", "contact_dampratio")
"""The ModelVariant fields of contact softness: an engine that cannot express them refuses them
(``EngineCapabilities.contact_softness``), and a rehearsal or ladder there runs without them."""


def _solrefs(m):
    """Every geom's and explicit contact pair's solref (a first value <= 0 is MuJoCo's direct
    (stiffness, damping) form)."""
    return [a for a in (m.geom_solref, m.pair_solref) if len(a)]


SCENE_TIMECONST = 0.02
"""MuJoCo's default contact time constant [s]: ``contact_timeconst`` is stated for a scene that
keeps it (the ladder's nominal, crosssim.sweep.NOMINAL)."""


@model_axis("contact_timeconst")
def _contact_timeconst(m, value: float) -> None:
    # Every geom, the world's and the robot's: MuJoCo mixes the two geoms' solref of a contact
    # (solmix), so scaling both scales a robot-ground contact's time constant. Scaled from the
    # scene's own (value / 20 ms): a scene at MuJoCo's default gets exactly ``value``, and one whose
    # contacts are stiffer or softer keeps its own as nominal instead of being reset to 20 ms.
    if not value > 0:
        raise CrossSimError(f"contact_timeconst must be a time constant > 0 [s], not {value!r}")
    for solref in _solrefs(m):
        direct = solref[:, 0] <= 0  # direct (stiffness, damping) form: becomes standard, critically damped
        solref[direct, 1] = 1.0
        solref[direct, 0] = value
        solref[~direct, 0] *= value / SCENE_TIMECONST


@model_axis("contact_dampratio")
def _contact_dampratio(m, value: float) -> None:
    if not value > 0:
        raise CrossSimError(f"contact_dampratio must be a damping ratio > 0, not {value!r}")
    for solref in _solrefs(m):
        if (solref[:, 0] <= 0).any():
            raise CrossSimError("contact_dampratio: the scene states its contacts' solref in direct (stiffness, "
                                "damping) form; set contact_timeconst with it")
        solref[:, 1] = value


@dataclass(frozen=True)
class PerturbationAxis:
    """A model perturbation from outside crosssim (entry point ``crosssim.perturbations``)."""

    apply: Callable[[Any, float], None]
    """function(mj_model, value) changing the MuJoCo model in place."""
    compose: str = SCALE
    """How a perturbation composes with a calibration: ``scale`` (multiply) or ``add``."""
    doc: str = ""


PERTURBATIONS = Registry("perturbation", "crosssim.perturbations", {})
"""Plugin model perturbations by the profile setting that names them (each a PerturbationAxis)."""


def perturbation_axis(name: str) -> PerturbationAxis:
    """The installed plugin perturbation ``name`` (imported on first use)."""
    if name in MODEL_FIELDS or name in HARNESS_FIELDS:
        raise CrossSimError(f"perturbation plugin {name!r} has the name of a built-in perturbation; rename it")
    axis = PERTURBATIONS.load(name)
    if not isinstance(axis, PerturbationAxis):
        raise CrossSimError(f"perturbation plugin {name!r} ({PERTURBATIONS.targets()[name]}) is not a "
                            "crosssim.variant.PerturbationAxis")
    return axis


# -- compile ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompiledModel:
    """A scene compiled by MuJoCo with a model variant applied: what every adapter builds from.

    ``mj`` is a fresh ``MjModel`` per :func:`compile_model` call; the adapter that receives it
    may adopt it (switch native actuators off, set solver options).
    """

    scene: Path
    """The MJCF file (adapters with their own importer read it too)."""
    mj: Any
    """``mujoco.MjModel`` with the variant applied."""
    variant: ModelVariant

    @property
    def timestep(self) -> float:
        """Physics step [s] of this compiled model (the scene's, with the variant applied)."""
        return float(self.mj.opt.timestep)


def compile_model(scene: Path, variant: ModelVariant = ModelVariant()) -> CompiledModel:
    """Compile ``scene`` with MuJoCo and apply ``variant``'s timestep, masses, friction and joint
    parameters once, in field order (an absolute timestep before its divisor)."""
    from crosssim.scene import load_mujoco_model

    m = load_mujoco_model(Path(scene))
    for f in fields(variant):
        value = getattr(variant, f.name)
        if f.name != "extra" and value != f.default:
            MODEL_AXES[f.name](m, value)
    for name, value in variant.extra:
        perturbation_axis(name).apply(m, value)
    return CompiledModel(Path(scene), m, variant)

