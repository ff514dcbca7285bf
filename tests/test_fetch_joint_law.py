"""crosssim's end-effector law (crosssim.actuation_ee) on the Fetch tasks: the benchmark's scene
without its mocap weld, the same episode starts as the mocap law's, and the scripted experts still
succeed in MuJoCo under it; a law that moves the wrong way fails them."""

import dataclasses

import numpy as np
import pytest

from crosssim.errors import CardError
from crosssim.policies.base import CallablePolicy
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness
from crosssim.runner.rollout import run_episode
from crosssim.runner.simulator import open_engine
from crosssim.tasks import fetch_expert, make_task

pytest.importorskip("gymnasium_robotics", reason="Fetch's scene files: pip install 'crosssim[robotics]'")


def episodes(task, fn, n, engine="mujoco", law=None):
    h = Harness.for_task(task, {"control": "joint_pd"})
    if law:
        h.actuation = dataclasses.replace(h.actuation, law=dataclasses.replace(h.actuation.law, **law))
    sim = open_engine(load_profile(engine), h.scene)
    try:
        return [run_episode(sim, h, CallablePolicy(fn, 31, 4), episode=k, seed=k) for k in range(n)]
    finally:
        sim.close()


def test_scene_without_weld_same_starts():
    from crosssim.scene import load_mujoco_model, resolve_scene

    mocap, joint = make_task("FetchPickAndPlace"), make_task("FetchPickAndPlace", control="joint_pd")
    a, b = load_mujoco_model(resolve_scene(mocap.scene)), load_mujoco_model(resolve_scene(joint.scene))
    assert (a.neq, b.neq) == (1, 0) and (a.nq, a.nbody, a.ngeom) == (b.nq, b.nbody, b.ngeom)
    ca, cb = Harness.for_task("FetchPickAndPlace").canonical, Harness.for_task(
        "FetchPickAndPlace", {"control": "joint_pd"}).canonical
    for k in range(3):
        sa = mocap.initial_state(ca, np.random.default_rng(k))
        sb = joint.initial_state(cb, np.random.default_rng(k))
        assert np.array_equal(sa.qpos, sb.qpos) and np.array_equal(sa.task["goal"], sb.task["goal"])


def test_unknown_control_refused():
    with pytest.raises(CardError, match="task_options.control 'osc'.*'joint_pd'"):
        make_task("FetchPush", control="osc")


def test_inverse_kinematics_reaches_the_command():
    h = Harness.for_task("FetchPickAndPlace", {"control": "joint_pd"})
    law, task = h.actuation.law, h.task
    start = task.initial_state(h.canonical, np.random.default_rng(0))
    q = law.joint_targets(np.array([0.4, -0.2, 0.6, 0.0]), start.qpos)
    import mujoco

    from crosssim.kinematics import kinematics_of

    k = kinematics_of(task.scene)

    def pos(qpos):
        k.d.qpos[:] = qpos
        mujoco.mj_kinematics(k.m, k.d)
        return k.d.xpos[k.body_id(law.body)].copy()

    moved = start.qpos.copy()
    moved[[k.m.joint(n).qposadr[0] for n in law.arm]] = q[:len(law.arm)]
    np.testing.assert_allclose(pos(moved) - pos(start.qpos), [0.02, -0.01, 0.03], atol=1e-4)


@pytest.mark.parametrize("task,fn", [("FetchPickAndPlace", fetch_expert.pick_and_place),
                                     ("FetchPush", fetch_expert.push)])
def test_expert_succeeds_under_joint_law(task, fn):
    results = episodes(task, fn, 4)
    assert [r.failure for r in results] == [None] * 4
    assert sum(r.metrics["success"] for r in results) >= 3


def test_wrong_way_law_fails():
    results = episodes("FetchPickAndPlace", fetch_expert.pick_and_place, 3, law={"pos_scale": -0.05})
    assert sum(r.metrics["success"] for r in results) == 0
