"""crosssim's tasks in MuJoCo reproduce gymnasium's v5 environments step for step (1e-6)."""

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from crosssim.gym_env import make_env  # noqa: E402

TASKS = ["Hopper", "Walker2d", "HalfCheetah", "Ant"]


@pytest.mark.parametrize("task", TASKS)
def test_matches_gymnasium_v5(task):
    ref = gym.make(f"{task}-v5")
    ours = make_env(task, engine="mujoco")
    rng = np.random.default_rng(1)
    for seed in (0, 7):
        o_ref, _ = ref.reset(seed=seed)
        o_ours, _ = ours.reset(seed=seed)
        np.testing.assert_allclose(o_ours, o_ref, atol=1e-6, err_msg=f"{task} reset obs, seed {seed}")
        for t in range(300):
            a = rng.uniform(-1, 1, ref.action_space.shape).astype(np.float32)
            o_ref, r_ref, term_ref, trunc_ref, _ = ref.step(a)
            o_ours, r_ours, term_ours, _, _ = ours.step(a)
            np.testing.assert_allclose(o_ours, o_ref, atol=1e-6, err_msg=f"{task} obs at step {t}")
            assert r_ours == pytest.approx(r_ref, abs=1e-6), f"{task} reward at step {t}"
            assert term_ours == term_ref, f"{task} termination at step {t}"
            if term_ref:
                break
    ours.close()


def test_equivalence_check_can_fail():
    """The comparison above would notice a wrong reward weight (the check is not vacuous)."""
    from crosssim.tasks.gym_locomotion import Hopper

    ref = gym.make("Hopper-v5")
    ours = make_env("Hopper", engine="mujoco")
    ours.harness.task = type("BadHopper", (Hopper,), {"ctrl_cost_weight": 2e-3})()
    ref.reset(seed=0)
    ours.reset(seed=0)
    a = np.full(3, 0.5, dtype=np.float32)
    r_ref = ref.step(a)[1]
    r_ours = ours.step(a)[1]
    assert abs(r_ours - r_ref) > 1e-6
