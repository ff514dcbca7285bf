"""Hints for a harness mismatch: the classic card mistakes, checked at the robot's start pose.

Each check reads only the card, the canonical model and the first frame (MuJoCo), so hints cost
nothing and cannot depend on the physics being right.
"""

from __future__ import annotations

import numpy as np


def card_hints(harness) -> list[str]:
    from crosssim.engines.base import EngineProfile
    from crosssim.engines.mujoco import EngineMuJoCo
    from crosssim.variant import compile_model

    card, c, act = harness.card, harness.canonical, harness.actuation
    hints = []
    engine = EngineMuJoCo()
    model = engine.load(compile_model(harness.scene), EngineProfile("mujoco", "mujoco"))
    frame = engine.frame(model, engine.reset(model, harness.task.nominal_initial_state(c)))
    o = card.observation
    names = [t.name for t in o.terms]
    if "projected_gravity" in names or "base_ang_vel" in names or "base_lin_vel" in names:
        observer = harness.observer()
        if observer.ctx is not None:
            from crosssim.observations import projected_gravity

            g = projected_gravity(frame, observer.ctx)
            upright = frame.base_quat[0] ** 2 > 0.9
            if upright and g[2] > 0:
                hints.append(f"projected gravity reads {np.round(g, 2).tolist()} with the robot upright at the start: "
                             f"the base quaternion is read in the wrong order (observation.quaternion_order is "
                             f"{o.quaternion_order!r}; crosssim's frames are w, x, y, z)")
    if act.default_pos is not None:
        start = frame.qpos[act.qpos_index]
        off = np.abs(act.default_pos - start)
        worst = int(np.argmax(off))
        if off[worst] > 0.3:
            hints.append(f"action.default_pos differs from the robot's start pose by {off[worst]:.2f} rad at "
                         f"{c.joint_names[act.joint_index[worst]]}: check the default angles and their joint order")
    if card.joints and list(card.joints) != [c.joint_names[j] for j in c.actuator_joint]:
        hints.append("the card's 'joints' order differs from the model's actuator order: it must be the order the "
                     "policy was trained with (URDF order, breadth-first and actuator order all occur)")
    if o.history > 1:
        hints.append(f"observation history of {o.history} frames in {o.layout!r} layout: check whether the policy was "
                     "trained with frame-major (whole frames) or term-major (each term's history) stacking")
    if not hints:
        hints.append("check the card: joint order, quaternion order (w, x, y, z), default pose, action scale and "
                     "mode, observation terms and their scales, normalisation, control period")
    return hints
