"""Actuator models: what a real motor does with the PD target, shared by every engine.

The ideal law (crosssim.actuation) gives kp (target - q) - kd qd instantly. A real drive lags,
saturates and loses torque with speed. Two models replace or bound that law at physics rate:

- a **learned actuator net**: an MLP over a short history of position errors and joint
  velocities, one row per joint, in either public TorchScript format (docs/actuators.md):
  walk-these-ways (inputs ``[e_t, e_t-1, e_t-2, qd_t, qd_t-1, qd_t-2]`` with ``e = q - target``,
  unscaled, torque out) or Isaac Lab's ActuatorNetMLP (``e = target - q``, history indices
  ``input_idx``, ``input_order`` pos_vel / vel_pos, ``pos_scale``, ``vel_scale``, ``torque_scale``);
- a **DC-motor torque-speed envelope** (Isaac Lab's DCMotor): the torque a joint can give falls
  linearly from the saturation (stall) torque at rest to zero at the free speed, and never
  exceeds the flat torque limit.

An actuator file is untrusted like a policy, and its code never runs outside the policy sandbox:
a net of Linear layers and activations is rebuilt from its weights (read as data) and used only
after it reproduced the file run in the sandbox (crosssim.policies.chain); any other net runs in
the sandbox at every physics step (slow, but it runs). History is zero at every episode
start and advances once per physics step (Isaac Lab zeroes it at reset; walk-these-ways starts
at zero but carries it across resets, which touches only an episode's first two physics steps).
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crosssim.errors import CrossSimError

NET_SUFFIXES = (".pt", ".jit", ".pth", ".zip")
FORMATS = ("walk-these-ways", "isaaclab")
_WTW = dict(input_order="pos_vel", input_idx=(0, 1, 2), pos_scale=-1.0, vel_scale=1.0, torque_scale=1.0)
"""walk-these-ways in Isaac Lab's terms: its error is q - target, hence pos_scale -1."""
_SPEC_KEYS = {"model", "file", "format", "input_order", "input_idx", "pos_scale", "vel_scale", "torque_scale",
              "saturation_torque", "free_speed", "torque_limit"}


@dataclass(frozen=True)
class ActuatorSpec:
    """One actuator file, parsed: a net (with an optional DC envelope) or a DC motor alone.

    Per-joint values (``saturation_torque``, ``free_speed``, ``torque_limit``) are a number, a
    list in the card's joint order, or a mapping {joint-name regex: number}."""

    path: Path
    """The file the run names (a TorchScript net, or a YAML spec)."""
    model: str
    """``net`` or ``dc_motor``."""
    net: Path | None = None
    """TorchScript file of the net (``model: net``)."""
    format: str = "walk-these-ways"
    input_order: str = "pos_vel"
    input_idx: tuple[int, ...] = (0, 1, 2)
    """History indices fed to the net, 0 = this physics step, 1 = the one before, ..."""
    pos_scale: float = -1.0
    """Scale on the position error target - q [rad] (walk-these-ways feeds q - target)."""
    vel_scale: float = 1.0
    torque_scale: float = 1.0
    """Scale on the net's output, giving torque [N m]."""
    saturation_torque: object = None
    """Stall torque of the DC envelope [N m] (None: each joint's maximum torque)."""
    free_speed: object = None
    """No-load speed of the DC envelope [rad/s] (None: no torque-speed envelope)."""
    torque_limit: object = None
    """Flat torque limit [N m] (Isaac Lab's effort_limit; None: the saturation torque)."""

    @property
    def history(self) -> int:
        return max(self.input_idx) + 1


def _fail(path, what: str) -> CrossSimError:
    return CrossSimError(f"{path}: {what} (actuator file; docs/actuators.md)")


def load_spec(path) -> ActuatorSpec:
    """The actuator file at ``path``: a TorchScript net (walk-these-ways format) or a YAML spec.
    CrossSimError naming the file for anything malformed; reads no TorchScript code."""
    path = Path(path)
    if not path.is_file():
        raise _fail(path, "no such file")
    if path.suffix.lower() in NET_SUFFIXES:
        return ActuatorSpec(path, "net", net=path, **_WTW)
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise _fail(path, f"unknown kind of file {path.suffix!r}; give a TorchScript net ({', '.join(NET_SUFFIXES)}) "
                          "or a YAML spec")
    from crosssim.strictload import load_yaml

    raw = load_yaml(path, what="actuator spec")
    if not isinstance(raw, dict):
        raise _fail(path, "an actuator spec is a mapping (model: net | dc_motor, ...)")
    unknown = sorted(set(raw) - _SPEC_KEYS)
    if unknown:
        raise _fail(path, f"unknown field(s) {unknown}; known: {sorted(_SPEC_KEYS)}")
    model = raw.get("model", "net" if "file" in raw else None)
    if model not in ("net", "dc_motor"):
        raise _fail(path, f"field 'model' must be net or dc_motor, not {model!r}")
    values: dict = {k: raw[k] for k in ("saturation_torque", "free_speed", "torque_limit") if k in raw}
    for k, v in values.items():
        _check_joint_values(path, k, v)
    if model == "dc_motor":
        if values.get("free_speed") is None:
            raise _fail(path, "a dc_motor needs 'free_speed' [rad/s]")
        return ActuatorSpec(path, "dc_motor", **values)
    if not isinstance(raw.get("file"), str):
        raise _fail(path, "a net needs 'file': the TorchScript file, relative to this spec")
    fmt = raw.get("format", "walk-these-ways")
    if fmt not in FORMATS:
        raise _fail(path, f"field 'format' must be one of {list(FORMATS)}, not {fmt!r}")
    conv = dict(_WTW)
    if fmt == "isaaclab":
        missing = [k for k in ("input_order", "input_idx", "pos_scale", "vel_scale", "torque_scale") if k not in raw]
        if missing:
            raise _fail(path, f"an isaaclab net needs {missing} (ActuatorNetMLPCfg has no defaults for them)")
    for k in ("pos_scale", "vel_scale", "torque_scale"):
        if k in raw:
            if isinstance(raw[k], bool) or not isinstance(raw[k], (int, float)):
                raise _fail(path, f"field {k!r} must be a number, not {raw[k]!r}")
            conv[k] = float(raw[k])
    if "input_order" in raw:
        if raw["input_order"] not in ("pos_vel", "vel_pos"):
            raise _fail(path, f"field 'input_order' must be pos_vel or vel_pos, not {raw['input_order']!r}")
        conv["input_order"] = raw["input_order"]
    if "input_idx" in raw:
        idx = raw["input_idx"]
        if (not isinstance(idx, list) or not idx or len(idx) > 64
                or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1000 for i in idx)):
            raise _fail(path, f"field 'input_idx' must be a list of history indices (0 = now), not {idx!r}")
        conv["input_idx"] = tuple(idx)
    net = (path.parent / raw["file"]).resolve()
    if not net.is_file():
        raise _fail(path, f"field 'file' names {net}, which does not exist")
    return ActuatorSpec(path, "net", net=net, format=fmt, **conv, **values)


def _check_joint_values(path, key: str, value) -> None:
    ok = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0  # noqa: E731
    if value is None or ok(value):
        return
    if isinstance(value, list) and value and all(ok(v) for v in value):
        return
    if isinstance(value, dict) and value and all(isinstance(k, str) and ok(v) for k, v in value.items()):
        return
    raise _fail(path, f"field {key!r} must be a positive number, a list of them (card joint order) or a mapping "
                      f"{{joint regex: number}}, not {value!r}")


def spec_files(path) -> list[Path]:
    """The actuator file and the net it names: every file whose bytes decide the torques (the
    result cache hashes them). A file that does not parse lists itself only."""
    path = Path(path)
    try:
        spec = load_spec(path)
    except CrossSimError:
        return [path]
    return [path] + ([spec.net] if spec.net is not None and spec.net != path else [])


def per_joint(spec: ActuatorSpec, key: str, names: list[str], default: np.ndarray) -> np.ndarray:
    """``spec``'s ``key`` as one value per policy joint (``default`` where it says nothing)."""
    value = getattr(spec, key)
    if value is None:
        return np.asarray(default, dtype=float).copy()
    if isinstance(value, (int, float)):
        return np.full(len(names), float(value))
    if isinstance(value, list):
        if len(value) != len(names):
            raise _fail(spec.path, f"field {key!r} has {len(value)} values for {len(names)} policy joints")
        return np.asarray(value, dtype=float)
    out = np.asarray(default, dtype=float).copy()
    for pattern, v in value.items():
        try:
            hits = [i for i, n in enumerate(names) if re.fullmatch(pattern, n)]
        except re.error as exc:
            raise _fail(spec.path, f"field {key!r}: {pattern!r} is not a regular expression ({exc})") from None
        if not hits:
            raise _fail(spec.path, f"field {key!r}: {pattern!r} matches none of the joints {names}")
        out[hits] = float(v)
    return out


def check_variant(p) -> None:
    """Refuse a harness variant's malformed actuator file, a net the sandbox refuses, or a free
    speed that is no speed, in one line. A net is checked (and, when crosssim can rebuild it, its
    rebuild verified) in the policy sandbox before any worker starts; workers then skip the check."""
    if p.motor_free_speed is not None and not p.motor_free_speed > 0:
        raise CrossSimError(f"motor_free_speed must be a joint speed above 0 rad/s, not {p.motor_free_speed}")
    if p.actuator is not None:
        check_file(p.actuator)


def check_file(path) -> None:
    """Refuse a malformed actuator file or a net the sandbox refuses, in one line (see check_net)."""
    spec = load_spec(path)
    if spec.net is not None:
        check_net(spec)


VERIFIED_ENV = "CROSSSIM_VERIFIED_NETS"
"""sha256 digests of actuator nets whose rebuild this run verified against the sandboxed file
(set by the main process, inherited by its engine workers)."""


def check_net(spec: ActuatorSpec):
    """The spec's net as a verified crosssim.policies.chain.Chain, or None when crosssim cannot
    rebuild it (it then runs in the policy sandbox). CrossSimError (one line) when it is refused."""
    data = spec.net.read_bytes()
    return _checked(spec.net, hashlib.sha256(data).hexdigest(), 2 * len(spec.input_idx))


@functools.lru_cache(maxsize=8)
def _checked(path: Path, digest: str, inputs: int):
    import os

    from crosssim.errors import PolicyLoadError
    from crosssim.policies.chain import rebuild, verified
    from crosssim.policies.limits import check_file_size

    try:
        check_file_size(path)
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise _fail(path, "the file changed while crosssim was reading it; run again")
        chain = rebuild(path, source=data)  # tensors read as data: nothing of the file runs here
        if chain is not None and chain.inputs != inputs:
            raise _fail(path, f"the net takes {chain.inputs} inputs per joint, but its format feeds "
                              f"{inputs} (position errors and velocities at {inputs // 2} history steps)")
        if chain is not None and chain.outputs != 1:
            raise _fail(path, f"the net returns {chain.outputs} values per joint; an actuator net gives one torque")
        if chain is not None and digest in os.environ.get(VERIFIED_ENV, "").split(os.pathsep):
            return chain
        chain, policy = verified(path, inputs=inputs)
        size = policy.action_size
        policy.close()
    except PolicyLoadError as exc:  # the policy's --trust-policy-code hint does not apply to nets
        raise CrossSimError(f"actuator net {str(exc).split('; pass --trust-policy-code')[0]}") from None
    if size != 1:
        raise _fail(path, f"the net returns {size} values per joint; an actuator net gives one torque")
    if chain is not None:
        os.environ[VERIFIED_ENV] = os.pathsep.join(filter(None, [os.environ.get(VERIFIED_ENV), digest]))
    return chain


def dc_envelope(tau: np.ndarray, qvel: np.ndarray, saturation: np.ndarray, free_speed: np.ndarray,
                limit: np.ndarray) -> np.ndarray:
    """``tau`` clipped to the DC-motor envelope: at joint speed qd the motor gives at most
    saturation (1 - qd / free_speed) forwards and saturation (-1 - qd / free_speed) backwards,
    each within [-limit, limit] and never of the wrong sign. An infinite saturation torque makes
    a pure speed cap (no drive beyond the free speed)."""
    up, down = 1.0 - qvel / free_speed, -1.0 - qvel / free_speed
    hi = np.where(up > 0, saturation * np.where(up > 0, up, 1.0), 0.0)
    lo = np.where(down < 0, saturation * np.where(down < 0, down, -1.0), 0.0)
    return np.clip(tau, np.maximum(lo, -limit), np.minimum(hi, limit))


class ActuatorModel:
    """Joint torques for one rollout: the card's law or a learned net, then the DC envelope.

    Stateful: the net's history is zero after ``reset()`` and advances at every ``torques()``
    call, so the stepper calls it exactly once per physics step."""

    def __init__(self, act, spec: ActuatorSpec | None, free_speed: float | None, max_torque: np.ndarray,
                 joint_names: list[str]):
        self.act, self.spec = act, spec
        n = len(act.joint_index)
        peak = np.asarray(max_torque, dtype=float)[act.joint_index]
        self.saturation = per_joint(spec, "saturation_torque", joint_names, peak) if spec else peak
        self.free_speed = per_joint(spec, "free_speed", joint_names, np.full(n, np.inf)) if spec else np.full(n, np.inf)
        if free_speed is not None:
            self.free_speed = np.minimum(self.free_speed, float(free_speed))
        self.limit = per_joint(spec, "torque_limit", joint_names, peak) if spec else peak
        self.enveloped = bool(np.isfinite(self.free_speed).any())
        self.net = None
        if spec is not None and spec.model == "net":
            if act.mode != "pd":
                raise _fail(spec.path, "an actuator net turns a position target into torque; the card's action.mode "
                                       f"{act.mode!r} has no target (use pd or position)")
            # The rebuilt chain (verified against the file in the sandbox), else the file itself in
            # the sandbox: an untrusted net never runs in this process (docs/security.md).
            self.net = check_net(spec)
            if self.net is None:
                from crosssim.policies.sandbox import open_policy

                try:
                    self.net = open_policy("torchscript", spec.net, obs_size=2 * len(spec.input_idx), trust=False).act
                except CrossSimError as exc:
                    raise CrossSimError(f"actuator net {exc}") from None
            self.idx = np.asarray(spec.input_idx)
            self.err = np.zeros((spec.history, n))
            self.vel = np.zeros((spec.history, n))

    def reset(self) -> None:
        """Zero the history (episode start): episodes are independent (docs/actuators.md)."""
        if self.net is not None:
            self.err[:] = 0.0
            self.vel[:] = 0.0

    def net_torques(self, target: np.ndarray, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """One physics step of the net: history shifted by one, newest first; torque per policy joint."""
        s = self.spec
        self.err[1:] = self.err[:-1]
        self.vel[1:] = self.vel[:-1]
        self.err[0] = target - q
        self.vel[0] = qd
        pos, vel = self.err[self.idx].T * s.pos_scale, self.vel[self.idx].T * s.vel_scale
        # float32 inputs, as the net saw in training, whichever path evaluates it
        x = np.concatenate([pos, vel] if s.input_order == "pos_vel" else [vel, pos], axis=1).astype(np.float32)
        return np.asarray(self.net(x.astype(np.float64)), dtype=np.float64).reshape(-1) * s.torque_scale

    def torques(self, target: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
        """Joint torques, one per canonical joint (zero on joints the policy does not drive)."""
        a = self.act
        qd = qvel[a.dof_index]
        if self.net is not None:
            tau = self.net_torques(target, qpos[a.qpos_index], qd)
        else:
            tau = a.torques(target, qpos, qvel)[a.joint_index]
        if self.enveloped:
            tau = dc_envelope(tau, qd, self.saturation, self.free_speed, self.limit)
        else:
            tau = np.clip(tau, -self.limit, self.limit)
        out = np.zeros(a.joint_count)
        out[a.joint_index] = tau
        return out


SERVO_TERMS = ("joint_damping", "joint_armature", "joint_frictionloss")
"""The model's joint terms that stood for the servo an actuator net replaces."""


def servo_replaced(variant):
    """``variant`` (crosssim.variant.Variant) with the joint damping, armature and friction loss
    of the model set to zero when its harness runs a learned actuator net: the net was fitted to
    the real drive's torque response, which already holds the servo's damping, rotor inertia and
    friction, so the MJCF's stand-ins would count them twice (Playground Go1's damping 0.5 kept
    with walk-these-ways' real-data net felled 4 of 4 rough-ground episodes, 2 of 4 without it).
    A term the profile or card states (``joint_damping: 0.5``) is kept, and ``servo_terms: keep``
    keeps the model's own; docs/actuators.md."""
    import dataclasses

    if variant.harness.actuator is None or variant.harness.servo_terms == "keep":
        return variant
    try:
        if load_spec(variant.harness.actuator).model != "net":
            return variant  # a DC-motor envelope bounds the card's own law: the servo stays
    except CrossSimError:
        return variant  # the stepper names what is wrong with the file
    model = variant.model
    unstated = {k: 0.0 for k in SERVO_TERMS if getattr(model, k) is None}
    return dataclasses.replace(variant, model=dataclasses.replace(model, **unstated)) if unstated else variant


def build_actuator(p, harness) -> ActuatorModel | None:
    """The actuator model a harness variant ``p`` (crosssim.variant.HarnessVariant) asks for, over
    ``harness``'s actuation; None for the ideal law (no actuator file, no free speed)."""
    if p.actuator is None and p.motor_free_speed is None:
        return None
    check_variant(p)
    spec = load_spec(p.actuator) if p.actuator is not None else None
    act = harness.actuation
    names = [harness.canonical.joint_names[j] for j in act.joint_index]
    return ActuatorModel(act, spec, p.motor_free_speed, harness.max_torque, names)
