"""The Fetch tasks under crosssim's end-effector law in the other engines: what the pybullet column
builds (the block as its own multibody, its contacts with fingers, table and floor by MuJoCo's bits,
friction as MuJoCo combines it) and the one-line refusals of what it and physx do not build."""

import numpy as np
import pytest

from crosssim.engines import EngineProfile, get_engine
from crosssim.errors import CrossSimError, EngineFailure
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness
from crosssim.scene import resolve_scene
from crosssim.tasks import fetch_expert, make_task
from crosssim.variant import compile_model

pytest.importorskip("gymnasium_robotics", reason="Fetch's scene files: pip install 'crosssim[robotics]'")
pytest.importorskip("pybullet")


def compiled():
    return compile_model(resolve_scene(make_task("FetchPickAndPlace", control="joint_pd").scene))


def test_default_columns_refuse_in_one_line():
    with pytest.raises(EngineFailure, match=r"^pybullet cannot build torsional .* 'robot0:r_gripper_finger_link' "
                                            r"\(condim 4 against floor0\)") as exc:
        get_engine("pybullet").load(compiled(), EngineProfile("pybullet", "pybullet"))
    assert "\n" not in str(exc.value)
    pytest.importorskip("sapien")
    with pytest.raises(EngineFailure, match=r"^physx cannot build free body 'object0'") as exc:
        get_engine("physx").load(compiled(), load_profile("physx-sliding"))
    assert "\n" not in str(exc.value)


def test_block_state_round_trip_and_rests_on_table():
    h = Harness.for_task("FetchPickAndPlace", {"control": "joint_pd"})
    start = h.task.initial_state(h.canonical, np.random.default_rng(3))
    engine = get_engine("pybullet")
    model = engine.load(compiled(), load_profile("pybullet-sliding"))
    try:
        qpos, qvel = start.qpos.copy(), start.qvel.copy()
        qvel[15:21] = [0.1, -0.2, 0.0, 0.3, 0.0, -0.5]
        from crosssim.frame import InitialState

        state = engine.reset(model, InitialState(qpos=qpos, qvel=qvel))
        q, v = engine.joint_state(model, state)
        np.testing.assert_allclose(q[15:22], qpos[15:22], atol=1e-9)
        np.testing.assert_allclose(v[15:21], qvel[15:21], atol=1e-9)
        state = engine.reset(model, start)
        engine.step(model, state, np.zeros(h.canonical.joint_count), 250)  # 0.5 s, arm held by its damping
        q, _ = engine.joint_state(model, state)
        assert abs(q[17] - start.qpos[17]) < 2e-3  # the block stays on the table (5 cm cube, centre 0.425 m)
    finally:
        engine.close(model)


def test_friction_product_mismatch_refused():
    c = compiled()
    block = c.mj.geom("object0").id
    c.mj.geom_friction[block, 0] = 0.5  # MuJoCo: max(1, 0.5) = 1 with the fingers; Bullet: 0.5 x 1
    with pytest.raises(EngineFailure, match=r"^pybullet cannot build friction of the contacts of body 'object0'"):
        get_engine("pybullet").load(c, load_profile("pybullet-sliding"))


def test_expert_in_pybullet():
    from crosssim.policies.base import CallablePolicy
    from crosssim.runner.rollout import run_episode
    from crosssim.runner.simulator import open_engine

    h = Harness.for_task("FetchPickAndPlace", {"control": "joint_pd"})
    sim = open_engine(load_profile("pybullet-sliding"), h.scene)
    try:
        rs = [run_episode(sim, h, CallablePolicy(fetch_expert.pick_and_place, 31, 4), episode=k, seed=k)
              for k in range(1, 4)]
    finally:
        sim.close()
    assert [r.failure for r in rs] == [None] * 3
    assert sum(r.metrics["success"] for r in rs) >= 2
