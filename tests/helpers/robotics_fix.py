"""gymnasium-robotics 1.4.2 under mujoco >= 3.17: its joint helpers (``mujoco_utils.set_joint_qpos``,
``set_joint_qvel``, ``get_joint_qpos``, ``get_joint_qvel``) assert ``joint_type in (mjJNT_HINGE,
mjJNT_SLIDE)``, and mujoco 3.17's enums no longer compare equal to numpy integers inside ``in``, so
every Fetch environment fails at construction on its base slides. ``patch()`` re-executes those four
functions' own source with the one comparison made on ints; nothing else of the benchmark changes
(docs/manipulation.md)."""

import inspect

OLD = "assert joint_type in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)"
NEW = "assert int(joint_type) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))"


def patch() -> None:
    from gymnasium_robotics.utils import mujoco_utils

    if getattr(mujoco_utils, "_crosssim_patched", False):  # once: the re-executed functions have no source
        return
    mujoco_utils._crosssim_patched = True
    for name in ("set_joint_qpos", "set_joint_qvel", "get_joint_qpos", "get_joint_qvel"):
        source = inspect.getsource(getattr(mujoco_utils, name))
        if OLD in source:  # a release that fixed it keeps its own
            exec(source.replace(OLD, NEW), mujoco_utils.__dict__)
