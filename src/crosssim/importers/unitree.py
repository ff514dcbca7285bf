"""unitree_rl_gym's ``deploy/deploy_mujoco/configs/<robot>.yaml`` -> a Locomotion card.

The deploy script (``deploy_mujoco.py``) builds the observation as [base angular velocity x
ang_vel_scale, projected gravity, command x cmd_scale, (q - default_angles) x dof_pos_scale,
dq x dof_vel_scale, last action, sin(2 pi t / 0.8), cos(2 pi t / 0.8)], reads the joints in the
MJCF's qpos order after the free joint, applies PD torques at every physics step with kps / kds
around ``action x action_scale + default_angles``, and steps ``control_decimation`` physics steps
before its first policy call (``first_call: after_one_period``, phase counted from reset).
"""

from __future__ import annotations

from pathlib import Path

from crosssim.errors import CardError, CrossSimError
from crosssim.importers.common import Imported, compact, find_beside, number, numbers

KNOWN = {"policy_path", "xml_path", "simulation_duration", "simulation_dt", "control_decimation", "kps", "kds",
         "default_angles", "ang_vel_scale", "dof_pos_scale", "dof_vel_scale", "action_scale", "cmd_scale",
         "num_actions", "num_obs", "cmd_init"}
"""Keys of unitree_rl_gym's deploy_mujoco configs that this importer reads."""
GAIT_PERIOD = 0.8
"""Gait period [s] the deploy script hard-codes (``period = 0.8``)."""


def term(name: str, scale, **options):
    """A card term entry: the bare name when it has no scale (or scale 1) and no options."""
    scale = None if scale is None or (scale == 1.0 if not isinstance(scale, list) else set(scale) == {1.0}) else scale
    if scale is None and not options:
        return name
    return {"name": name, **({"scale": scale} if scale is not None else {}), **options}


def _format(path: Path) -> str:
    return {".pt": "torchscript", ".jit": "torchscript", ".onnx": "onnx"}.get(path.suffix, "torchscript")


def read_unitree(source: Path, *, policy: Path | None = None, robot: Path | None = None) -> Imported:
    """A card from a deploy_mujoco config; the joint order comes from the MJCF (qpos order)."""
    from crosssim.strictload import load_yaml

    try:
        doc = load_yaml(source, what="deploy config")
    except CrossSimError as exc:
        raise CardError(str(exc)) from None
    if not isinstance(doc, dict):
        raise CardError(f"{source}: a deploy config is a YAML mapping (kps, kds, default_angles, ...)")
    out = Imported({}, source, "unitree")
    for key in doc:
        if key not in KNOWN:
            out.note(f"{key}: not a deploy_mujoco key this importer knows; not carried over")
    n = doc.get("num_actions")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise CardError(f"{source}: field 'num_actions' must be a positive integer, got {n!r:.40}")
    kps, kds = numbers(doc, "kps", source, n), numbers(doc, "kds", source, n)
    default = numbers(doc, "default_angles", source, n)
    dt, decimation = number(doc, "simulation_dt", source), doc.get("control_decimation")
    if kps is None or kds is None or default is None or dt is None:
        raise CardError(f"{source}: a deploy config needs kps, kds, default_angles and simulation_dt")
    if isinstance(decimation, bool) or not isinstance(decimation, int) or decimation < 1:
        raise CardError(f"{source}: field 'control_decimation' must be a positive integer, got {decimation!r:.40}")

    weights = policy or (find_beside(str(doc["policy_path"]), source, "policy_path", out.notes)
                         if doc.get("policy_path") else None)
    scene = robot or (find_beside(str(doc["xml_path"]), source, "xml_path", out.notes) if doc.get("xml_path") else None)
    if weights is None:
        raise CardError(f"{source}: policy_path {doc.get('policy_path')!r} not found (nor beside the config); "
                        "pass --policy FILE")
    if scene is None:
        raise CardError(f"{source}: xml_path {doc.get('xml_path')!r} not found (nor beside the config); "
                        "pass --robot MJCF")
    joints = _joint_order(Path(scene), n, out)

    cmd_scale = numbers(doc, "cmd_scale", source, 3) or [1.0, 1.0, 1.0]
    terms = [term("base_ang_vel", number(doc, "ang_vel_scale", source)), "projected_gravity",
             term("command", cmd_scale), term("joint_pos_rel", number(doc, "dof_pos_scale", source)),
             term("joint_vel", number(doc, "dof_vel_scale", source)), "last_action",
             term("gait_phase", None, period=GAIT_PERIOD)]
    num_obs = doc.get("num_obs")
    expected = 11 + 3 * n
    if num_obs is not None and num_obs != expected:
        out.note(f"num_obs is {num_obs}, but deploy_mujoco.py's layout gives {expected} (11 + 3 x num_actions): "
                 "the observation terms written here do not match this policy; edit observation.terms",
                 blocking=True)
    command = numbers(doc, "cmd_init", source, 3) or [0.0, 0.0, 0.0]
    if doc.get("simulation_duration") is not None:
        out.note(f"simulation_duration {doc['simulation_duration']} s: the viewer's run time, not an episode "
                 "length; the card keeps the Locomotion task's episode_seconds")
    out.card = {
        "name": f"{source.stem}-deploy",
        "task": "Locomotion",
        "robot": str(Path(scene).resolve()),
        "policy": {"file": str(Path(weights).resolve()), "format": _format(Path(weights))},
        "control_period": round(dt * decimation, 12),
        "physics_timestep": dt,
        "first_call": "after_one_period",
        "joints": joints,
        "task_options": {"command": command},
        "observation": {"terms": terms},
        "action": {"mode": "pd", "scale": number(doc, "action_scale", source) or 1.0,
                   "kp": compact(kps), "kd": compact(kds), "default_pos": default},
        "trained_in": "isaacgym",
        "validated_in": ["mujoco"],
    }
    out.note("claimed: a deploy config states no performance; add claimed.x_velocity / survival for the harness check")
    return out


def _joint_order(scene: Path, n: int, out: Imported) -> list[str]:
    """The policy's joints as deploy_mujoco.py reads them: qpos after the free joint, in model order."""
    from crosssim.scene import canonical_model, resolve_scene

    try:
        c = canonical_model(resolve_scene(str(scene)))
    except CrossSimError as exc:
        raise CardError(f"{scene}: cannot read the robot: {exc}") from None
    if not c.free_base:
        out.note("the robot has no free-joint base: deploy_mujoco.py's qpos[7:] would not be its joints",
                 blocking=True)
    order = sorted(range(len(c.joint_names)), key=lambda j: int(c.joint_qposadr[j]))
    names = [c.joint_names[j] for j in order]
    if len(names) < n:
        raise CardError(f"{scene}: has {len(names)} joints; the deploy config drives num_actions = {n}")
    if len(names) > n:
        out.note(f"the robot has {len(names)} joints; the first {n} in qpos order are the policy's "
                 f"({', '.join(names[n:n + 3])}{', ...' if len(names) > n + 3 else ''} are not driven)")
    actuated = [c.joint_names[j] for j in c.actuator_joint]
    if actuated[:n] != names[:n]:
        out.note("the MJCF's actuator order differs from its qpos order; deploy_mujoco.py writes torques in "
                 "actuator order (d.ctrl): check that they match on the robot", blocking=True)
    return names[:n]
