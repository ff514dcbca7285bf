"""Isaac Lab's exported IO descriptors (``--export_io_descriptors``) -> a Locomotion card.

The export lists the policy group's observation terms in order (function, shape, scale, clip,
history length, joint names and offsets), the action terms (type, joint names, scale, offset),
the articulation's joints (default positions, stiffness, damping) and the scene's decimation,
policy period and physics step. It names neither the weights nor a MuJoCo model of the robot:
``--policy`` and ``--robot`` give them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crosssim.errors import CardError, CrossSimError
from crosssim.importers.common import Imported, compact

TERMS = {"base_lin_vel": "base_lin_vel", "base_ang_vel": "base_ang_vel", "projected_gravity": "projected_gravity",
         "generated_commands": "command", "velocity_commands": "command", "joint_pos_rel": "joint_pos_rel",
         "joint_pos": "joint_pos", "joint_vel_rel": "joint_vel", "joint_vel": "joint_vel",
         "last_action": "last_action", "base_pos_z": "base_height"}
"""Isaac Lab observation function (the last part of ``full_path``) -> crosssim term."""
JOINT_TERMS = ("joint_pos_rel", "joint_pos", "joint_vel")
POSITION_ACTIONS = ("JointPositionAction",)
"""Action classes whose processed action is ``offset + scale x action`` sent as a joint position target."""


def _function(term: dict) -> str:
    return str(term.get("full_path") or term.get("name") or "?").rsplit(".", 1)[-1]


def _shape(term: dict) -> int | None:
    shape = term.get("shape")
    if isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int):
        return shape[0]
    return None


def _close(a, b) -> bool:
    return a is not None and b is not None and len(a) == len(b) and np.allclose(a, b, atol=1e-6)


def read_isaaclab(source: Path, *, policy: Path | None = None, robot: Path | None = None) -> Imported:
    from crosssim.strictload import load_yaml

    try:
        doc = load_yaml(source, what="IO descriptors export")
    except CrossSimError as exc:
        raise CardError(str(exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("actions"), list) or not isinstance(
            doc.get("observations"), dict):
        raise CardError(f"{source}: an IO descriptors export has 'actions' (a list) and 'observations' (groups)")
    if policy is None:
        raise CardError(f"{source}: the export does not name the policy's weights; pass --policy FILE "
                        "(TorchScript .pt or ONNX .onnx)")
    if robot is None:
        raise CardError(f"{source}: the export describes a USD robot; pass --robot with the robot's MJCF")
    out = Imported({}, source, "isaaclab")
    action, joints = _action(doc, source, out)
    terms, history = _observations(doc, source, out, joints, action)
    scene = doc.get("scene") or {}
    period, physics = scene.get("dt"), scene.get("physics_dt")
    card = {"name": source.stem.replace("_IO_descriptors", ""), "task": "Locomotion",
            "robot": str(Path(robot).resolve()),
            "policy": {"file": str(Path(policy).resolve()), "format": "onnx" if Path(policy).suffix == ".onnx"
                       else "torchscript"}}
    if isinstance(period, (int, float)) and period > 0:
        card["control_period"] = float(period)
    else:
        out.note("scene.dt (the policy period) is missing: write control_period", blocking=True)
    if isinstance(physics, (int, float)) and physics > 0:
        card["physics_timestep"] = float(physics)
    card["joints"] = joints
    card["observation"] = {"terms": terms, **({"history": history} if history else {})}
    card["action"] = action
    card["trained_in"] = "isaaclab"
    out.card = card
    out.note("command: the export has no command ranges; the card runs the Locomotion task's default command "
             "(set task_options.command or task_options.commands)")
    out.note("claimed: the export states no performance; add claimed.x_velocity / survival for the harness check")
    return out


def _action(doc: dict, source: Path, out: Imported) -> tuple[dict, list[str]]:
    actions = doc["actions"]
    if len(actions) != 1 or not isinstance(actions[0], dict):
        raise CardError(f"{source}: {len(actions)} action terms; crosssim cards have one joint action term")
    a = actions[0]
    kind = str(a.get("full_path", a.get("action_type", "?"))).rsplit(".", 1)[-1]
    joints = a.get("joint_names")
    if not isinstance(joints, list) or not all(isinstance(j, str) for j in joints):
        raise CardError(f"{source}: field 'actions[0].joint_names' must list the joints the action drives")
    n = len(joints)
    scale = a.get("scale", 1.0)
    offset = a.get("offset")
    if kind not in POSITION_ACTIONS:
        out.note(f"action term {kind}: not a joint position action; the card's action is written as one "
                 "(edit action.mode)", blocking=True)
    if a.get("clip") is not None:
        out.note(f"actions[0].clip {a['clip']!r:.60}: per-joint action clip is not carried over", blocking=True)
    action: dict = {"mode": "pd", "scale": compact(scale if isinstance(scale, list) else [scale])}
    if isinstance(offset, list) and len(offset) == n:
        action["default_pos"] = [float(v) for v in offset]
    art = next(iter((doc.get("articulations") or {}).values()), None)
    gains = None
    if isinstance(art, dict) and isinstance(art.get("joint_names"), list):
        names = art["joint_names"]
        missing = [j for j in joints if j not in names]
        if missing:
            raise CardError(f"{source}: action joints {missing} are not in the articulation's joint_names")
        index = [names.index(j) for j in joints]

        def per_joint(key):
            values = art.get(key)
            return [float(values[i]) for i in index] if isinstance(values, list) and len(values) == len(names) else None

        kp, kd = per_joint("default_joint_stiffness"), per_joint("default_joint_damping")
        if "default_pos" not in action and per_joint("default_joint_pos"):
            action["default_pos"] = per_joint("default_joint_pos")
        if kp and any(v > 0 for v in kp):
            gains = (kp, kd or [0.0] * n)
        for key, what in (("default_joint_armature", "armature"), ("default_joint_friction", "friction")):
            values = per_joint(key)
            if values and any(v != 0 for v in values):
                out.note(f"articulations: joint {what} {compact(values)!r:.60} belongs in the MJCF; not carried over")
    if gains:
        action["kp"], action["kd"] = compact(gains[0]), compact(gains[1])
    else:
        action["mode"] = "position"
        out.note("articulations: joint stiffness is 0 or missing (an actuator model drives the joints, which the "
                 "export does not describe): the card sends targets to the MJCF's position actuators "
                 "(action.mode: position); write kp/kd and mode: pd for an ideal PD drive")
    return action, list(joints)


def _observations(doc: dict, source: Path, out: Imported, joints: list[str], action: dict):
    groups = doc["observations"]
    if "policy" not in groups or not isinstance(groups["policy"], list):
        raise CardError(f"{source}: no 'observations.policy' group: the policy's input is not in the export")
    for name in groups:
        if name != "policy":
            out.note(f"observations.{name}: not the policy's input (a critic or other group); not used")
    terms, histories = [], set()
    for k, t in enumerate(groups["policy"]):
        if not isinstance(t, dict):
            raise CardError(f"{source}: observations.policy[{k}] is not a mapping")
        fn = _function(t)
        size = _shape(t)
        where = f"observations.policy[{k}] ({t.get('name', fn)})"
        name = TERMS.get(fn)
        if name is None:
            out.note(f"{where}: {fn} ({size} values) has no crosssim term; the card's observation lacks it",
                     blocking=True)
            continue
        if name in JOINT_TERMS or name == "last_action":
            expected = len(joints)
            if name in JOINT_TERMS and t.get("joint_names") not in (None, joints):
                out.note(f"{where}: its joint order differs from the action's; a card has one joint order",
                         blocking=True)
        else:
            expected = 3 if name in ("command", "base_lin_vel", "base_ang_vel", "projected_gravity") else 1
        if size is not None and size != expected:
            out.note(f"{where}: {size} values, crosssim's {name} gives {expected}", blocking=True)
        if fn == "joint_pos_rel" and not _close(t.get("joint_pos_offsets"), action.get("default_pos")):
            out.note(f"{where}: joint_pos_offsets differ from the action offset; joint_pos_rel subtracts "
                     "action.default_pos", blocking=True)
        if fn == "joint_vel_rel" and any(v != 0 for v in t.get("joint_vel_offsets") or []):
            out.note(f"{where}: joint_vel_offsets are not zero; crosssim's joint_vel has no offset", blocking=True)
        over = t.get("overloads") or {}
        entry: dict = {"name": name}
        scale = over.get("scale")
        if scale is not None:
            entry["scale"] = compact([float(v) for v in scale]) if isinstance(scale, list) else float(scale)
        clip = over.get("clip")
        if clip is not None:
            entry["clip"] = [float(v) for v in clip] if isinstance(clip, list) else float(clip)
        histories.add(int(over.get("history_length") or 0))
        terms.append(entry if len(entry) > 1 else name)
    history = None
    if histories - {0}:
        if len(histories) > 1:
            out.note(f"observations.policy: history lengths {sorted(histories)} differ between terms; a card has "
                     "one history for all terms", blocking=True)
        else:
            history = {"length": histories.pop(), "layout": "term_major"}  # Isaac Lab stacks each term's own
    return terms, history
