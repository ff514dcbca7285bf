"""The expected deployment gap: what the real robot will bring, which the verdict compares each
family's tolerance margin with (docs/risk.md, "Deployment gap").

A card states it in a ``deployment:`` section, or names a YAML file with the same keys
(``deployment: {file: robot-gap.yaml}``, keys in the card win); where nothing is stated, the
documented default of the task's robot class applies (``DEFAULTS``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from crosssim.errors import CardError

MECHANISMS = ("encoder_offset", "joint_friction", "deadband", "action_drop", "action_jitter", "imu_bias",
              "ground_slope")
"""Keys of the real robot's mechanisms (docs/risk.md, "Mechanisms"): each a rehearsal axis of the same
name when a card or deployment file states it; no robot class has a default yet (the validation freeze)."""
KEYS = ("file", "latency", "latency_steps", "motor_strength", "motor_lag", "obs_noise", "friction", "added_mass",
        "contact_timeconst", "push", "motor_free_speed", "actuator", "obs_noise_terms", "margins", "uncertainty",
        "calibration", *MECHANISMS)
"""Every key a card's ``deployment`` section may hold."""
OPT_IN = ("push", "motor_free_speed", "actuator", "obs_noise_terms")
"""Keys of the opt-in gap families (crosssim.families): swept only when stated (or named in
``margins``), so a card without them costs nothing more."""
UNCERTAIN = ("latency", "latency_steps", "motor_strength", "motor_lag", "obs_noise", "friction", "added_mass",
             "contact_timeconst", "push")
"""Keys that may carry a 1-sigma uncertainty (``uncertainty:``, as ``crosssim calibrate`` writes it)."""
HARSHER = {"friction": -1.0}
"""The direction in which a key's gap grows (+1 unless listed: a lower friction is a larger gap)."""


@dataclass(frozen=True)
class DeploymentGap:
    """The gap one expects between the simulator and the deployed robot (each 0: none)."""

    motor_strength: float = 0.0
    """Share of the commanded torque the real motors may lack (0.1: up to 10 % weaker)."""
    motor_lag: float = 0.0
    """Torque rise time constant of the real motors [s]."""
    latency: float = 0.0
    """Sensing-to-actuation latency [s] (``latency_steps`` in a card: control steps)."""
    latency_steps: float | None = None
    """The latency in control steps, when stated that way (wins over ``latency``)."""
    obs_noise: float = 0.0
    """Standard deviation of sensor noise on every sensed observation value, in its own units (rad, rad/s, m/s, ...) before scale, clip and normalisation; never on commands, clocks, phases or the previous action."""
    friction: float = 1.0
    """Lowest friction expected, as a scale on the simulated friction (0.7: 30 % more slippery)."""
    added_mass: float = 0.0
    """Payload or mass error as a share of the robot's mass (0.1: 10 % heavier)."""
    contact_timeconst: float | None = None
    """Softest contact expected: MuJoCo's solref time constant [s] of the robot-ground contacts
    (the simulator's is MuJoCo's default 0.02; 0.03 is a floor that gives way more, like carpet or
    turf); None: as simulated."""
    push: float = 0.0
    """Horizontal push impulse [N s] the robot must take (opt-in family ``push``)."""
    motor_free_speed: float | None = None
    """Real motors' free speed [rad/s] (DC-motor torque-speed limit; opt-in family ``dc_motor``)."""
    actuator: str | None = None
    """Actuator model file of the real motors (opt-in family ``actuator_net``)."""
    obs_noise_terms: dict | None = None
    """Noise std per observation term, in the term's units (opt-in families ``noise:<term>``)."""
    margins: tuple = ()
    """Opt-in families to sweep with no gap stated: their margins are reported, the verdict ignores them."""
    uncertainty: dict | None = None
    """1-sigma uncertainty of stated keys (a calibration's); the verdict uses value + 2 sigma, harsher."""
    encoder_offset: float = 0.0
    """Largest encoder calibration error [rad]: each joint's reading off by up to this, per episode."""
    joint_friction: float = 0.0
    """Coulomb friction [N m] of the real joints beyond the simulated model's."""
    deadband: float = 0.0
    """Motor driver dead band [N m]: commanded torque magnitude that never reaches the joint."""
    action_drop: float = 0.0
    """Probability per control period that a command frame is lost (the motors keep the previous one)."""
    action_jitter: float = 0.0
    """Largest extra delay of a command [control periods, at most 1], drawn per period."""
    imu_bias: float = 0.0
    """Largest constant IMU bias per component [rad/s on the gyro; about rad of tilt on gravity]."""
    ground_slope: float = 0.0
    """Steepest ground expected [rad], uphill along the walking direction (+x)."""

    def axes(self, control_period: float) -> dict[str, float]:
        """The gap as values of the swept axes (crosssim.sweep.LADDERS)."""
        steps = self.latency_steps if self.latency_steps is not None else self.latency / control_period
        from crosssim.sweep import TERM_NOISE

        return {"motor_strength": 1.0 - self.motor_strength, "motor_lag": self.motor_lag,
                "action_latency": steps, "obs_noise": self.obs_noise, "friction_scale": self.friction,
                "mass_scale": 1.0 + self.added_mass, "contact_timeconst": self.contact_timeconst,
                "push_impulse": self.push,
                "motor_free_speed": self.motor_free_speed, "actuator": self.actuator,
                **{TERM_NOISE + t: v for t, v in (self.obs_noise_terms or {}).items()},
                **{k: getattr(self, k) for k in MECHANISMS}}


@dataclass(frozen=True)
class StatedDeployment:
    """What a card's ``deployment`` section states, checked and merged with the file it names (the
    card's keys win). Each ``None`` is a key not stated: the robot class's default applies there
    (``deployment_gap``); ``0`` is stated as "no gap"."""

    file: Path | None = None
    """The deployment file the section names, resolved; its keys are merged into the fields below."""
    latency: float | None = None
    latency_steps: float | None = None
    motor_strength: float | None = None
    motor_lag: float | None = None
    obs_noise: float | None = None
    friction: float | None = None
    """The low end of a ``[low, high]`` range, at most 1."""
    added_mass: float | None = None
    contact_timeconst: float | None = None
    push: float | None = None
    motor_free_speed: float | None = None
    actuator: str | None = None
    """The actuator model file, resolved (relative to the file that named it)."""
    obs_noise_terms: dict[str, float] | None = None
    margins: tuple[str, ...] | None = None
    uncertainty: dict[str, float] | None = None
    calibration: dict | None = None
    """How ``crosssim calibrate`` measured the values: kept as written, never read."""
    encoder_offset: float | None = None
    joint_friction: float | None = None
    deadband: float | None = None
    action_drop: float | None = None
    action_jitter: float | None = None
    imu_bias: float | None = None
    ground_slope: float | None = None

    def stated(self) -> dict:
        """The stated keys (every key of KEYS but ``file`` that is not None) and their values."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "file"}
        return {k: v for k, v in values.items() if v is not None}


DEFAULTS: dict[str, DeploymentGap] = {
    "legged": DeploymentGap(motor_strength=0.1, motor_lag=0.01, latency=0.02, obs_noise=0.01, friction=0.6,
                            added_mass=0.1, contact_timeconst=0.03),
    "gymnasium": DeploymentGap(motor_strength=0.1, motor_lag=0.005, latency_steps=1.0, obs_noise=0.01, friction=0.8,
                               added_mass=0.05),
}
"""Per robot class, used where a card states nothing (docs/risk.md gives the sources)."""


def robot_class(task) -> str:
    """"legged" for the velocity-tracking Locomotion task, else "gymnasium"."""
    return "legged" if task.name == "Locomotion" else "gymnasium"


def _number(section: dict, key: str, where: str, low: float, high: float | None = None) -> float:
    value = section[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < low or (high is not None and value > high):
        rng = f"from {low:g} to {high:g}" if high is not None else f">= {low:g}"
        unit = " (seconds: 20 ms is 0.02; or latency_steps in control steps)" if key == "latency" else ""
        raise CardError(f"{where}: field 'deployment.{key}' must be a number {rng}{unit}, got {value!r:.40}")
    return float(value)


def parse_deployment(section, where: Path) -> StatedDeployment:
    """The card's ``deployment`` section (a mapping of KEYS), checked (CardError names the card and
    the field); the file it names is read and merged under the card's own keys."""
    from crosssim.strictload import did_you_mean, load_yaml

    if not isinstance(section, dict):
        raise CardError(f"{where}: field 'deployment' must be a mapping (latency: 0.02, motor_strength: 0.1, ...)")
    merged, file = {}, None
    if section.get("file") is not None:
        if not isinstance(section["file"], str):
            raise CardError(f"{where}: field 'deployment.file' must be a path to a YAML file")
        path = file = (where.parent / section["file"]).resolve()
        if not path.is_file():
            raise CardError(f"{where}: field 'deployment.file' points to {path}, which does not exist")
        try:
            data = load_yaml(path, what="deployment file")
        except Exception as exc:  # one line naming the file, never a traceback
            raise CardError(f"{path}: {exc}") from None
        if not isinstance(data, dict) or "file" in data:
            raise CardError(f"{path}: a deployment file is a YAML mapping of {', '.join(KEYS[1:])}")
        if isinstance(data.get("actuator"), str):  # a file named in the file: relative to it
            data["actuator"] = str((path.parent / data["actuator"]).resolve())
        merged.update(data)
    merged.update({k: v for k, v in section.items() if k != "file"})
    if isinstance(section.get("actuator"), str):
        merged["actuator"] = str((where.parent / section["actuator"]).resolve())
    for key in merged:
        if key not in KEYS:
            raise CardError(f"{where}: field 'deployment.{key}' is not known; {did_you_mean(key, KEYS, 'deployment.')}")
    # A latency is seconds; above 1 s it is almost surely milliseconds written as seconds (20 for
    # 0.02), which would read as a huge gap and a silent "high"/"unknown" verdict: refuse it.
    limits = {"latency": (0.0, 1.0), "latency_steps": (0.0, None), "motor_strength": (0.0, 0.95),
              "motor_lag": (0.0, None), "obs_noise": (0.0, None), "added_mass": (0.0, None), "push": (0.0, None),
              "contact_timeconst": (0.001, 1.0), "encoder_offset": (0.0, None), "joint_friction": (0.0, None),
              "deadband": (0.0, None), "action_drop": (0.0, 0.95), "action_jitter": (0.0, 1.0), "imu_bias": (0.0, None),
              "ground_slope": (0.0, 0.5)}
    out = {}
    for key, value in merged.items():
        if key in ("actuator", "obs_noise_terms", "margins", "uncertainty", "calibration"):
            out[key] = _opt_in(key, value, merged, where)
            continue
        if key == "motor_free_speed":
            out[key] = _number(merged, key, where, 0.1)
            continue
        if key == "friction":
            if isinstance(value, list):  # a range [low, high]: the low end is the gap
                if len(value) != 2:
                    raise CardError(f"{where}: field 'deployment.friction' is a scale or a [low, high] range")
                for v in value:
                    _number({"friction": v}, "friction", where, 0.01)
                if value[0] > value[1]:
                    raise CardError(f"{where}: field 'deployment.friction' is [{value[0]}, {value[1]}]: low above high")
                value = min(float(value[0]), 1.0)
                out[key] = value
            else:
                out[key] = min(_number(merged, key, where, 0.01), 1.0)
        else:
            out[key] = _number(merged, key, where, *limits[key])
    return StatedDeployment(file=file, **out)


def _opt_in(key: str, value, merged: dict, where: Path):
    """An opt-in or bookkeeping key, checked (CardError names the card and the field)."""
    field = f"{where}: field 'deployment.{key}'"
    if key == "actuator":
        if not isinstance(value, str) or not Path(value).is_file():
            raise CardError(f"{field} must name an actuator model file (docs/actuators.md); {value!r} is not one")
        return value
    if key == "calibration":  # how a calibration got its numbers: kept as written, never read
        if not isinstance(value, dict):
            raise CardError(f"{field} must be a mapping (as crosssim calibrate writes it)")
        return value
    if key == "margins":
        from crosssim.families import family_key

        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise CardError(f"{field} must be a list of opt-in families (push, dc_motor, noise:<term>)")
        for name in value:
            family_key(name, where)
        return tuple(value)
    if not isinstance(value, dict) or not value:
        raise CardError(f"{field} must be a mapping of " + ("observation term: noise std (term units)"
                                                             if key == "obs_noise_terms" else "key: 1-sigma"))
    out = {}
    for name, v in value.items():
        if key == "uncertainty" and name not in UNCERTAIN:
            raise CardError(f"{field}: {name!r} has no uncertainty here; one of {', '.join(UNCERTAIN)}")
        if key == "uncertainty" and name not in merged:
            raise CardError(f"{field}: an uncertainty for {name!r}, which the deployment does not state")
        out[str(name)] = _number({f"{key}.{name}": v}, f"{key}.{name}", where, 0.0)
    return out


def _harsh_end(stated: dict) -> dict:
    """Each stated key with an uncertainty moved two sigma towards a larger gap (the verdict plans
    for the harsh end of what was measured); the keys' own limits still hold."""
    sigma = stated.get("uncertainty") or {}
    out = dict(stated)
    for key, sd in sigma.items():
        value = out[key] + 2.0 * sd * HARSHER.get(key, 1.0)
        out[key] = min(max(value, 0.01), 1.0) if key == "friction" else \
            min(value, 0.95) if key == "motor_strength" else min(value, 1.0) if key == "contact_timeconst" else \
            max(value, 0.0)
    return out


def deployment_gap(card, task) -> tuple[DeploymentGap, str]:
    """The gap the verdict uses and where it came from ("card" or "default for <class> robots")."""
    stated = card.deployment.stated()
    base = DEFAULTS[robot_class(task)]
    if not stated:
        return base, f"default for {robot_class(task)} robots (docs/risk.md)"
    # Unstated keys keep the class default (write 0 for "no gap there"); a latency in seconds
    # replaces a default stated in steps.
    if "latency" in stated and "latency_steps" not in stated:
        base = replace(base, latency_steps=None)
    used = {k: v for k, v in _harsh_end(stated).items() if k != "calibration"}
    where = "card deployment section" + (" (calibrated values at +2 sigma)" if stated.get("uncertainty") else "")
    return replace(base, **used), f"{where} over the default for {robot_class(task)} robots"


def gap_dict(gap: DeploymentGap) -> dict:
    return {k: v for k, v in asdict(gap).items()
            if v is not None and v != () and not (k in ("push", *MECHANISMS) and v == 0)}
