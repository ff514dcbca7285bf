"""crosssim's tasks in MuJoCo reproduce gymnasium's environments step for step (1e-6), at each
version crosssim offers (v4 and v5) and with the options that change the observation."""

import warnings

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from crosssim.gym_env import make_env  # noqa: E402

# (crosssim task, its task_options, gymnasium id, gymnasium kwargs)
CASES = [
    ("Hopper", {}, "Hopper-v5", {}),
    ("Walker2d", {}, "Walker2d-v5", {}),
    ("HalfCheetah", {}, "HalfCheetah-v5", {}),
    ("Ant", {}, "Ant-v5", {}),
    ("Hopper-v4", {}, "Hopper-v4", {}),
    ("Walker2d-v4", {}, "Walker2d-v4", {}),
    ("HalfCheetah-v4", {}, "HalfCheetah-v4", {}),
    ("Ant-v4", {}, "Ant-v4", {}),
    ("Ant-v4", {"contact_forces": "on"}, "Ant-v4", {"use_contact_forces": True}),
    ("Ant", {"contact_forces": "off"}, "Ant-v5", {"include_cfrc_ext_in_observation": False}),
    ("Swimmer", {}, "Swimmer-v5", {}),
    ("InvertedPendulum", {}, "InvertedPendulum-v5", {}),
    ("InvertedDoublePendulum", {}, "InvertedDoublePendulum-v5", {}),
    ("Reacher", {}, "Reacher-v5", {}),
    ("Pusher", {}, "Pusher-v5", {}),
    ("Humanoid", {}, "Humanoid-v5", {}),
    ("Swimmer-v4", {}, "Swimmer-v4", {}),
    ("InvertedPendulum-v4", {}, "InvertedPendulum-v4", {}),
    ("InvertedDoublePendulum-v4", {}, "InvertedDoublePendulum-v4", {}),
    ("Reacher-v4", {}, "Reacher-v4", {}),
    ("Humanoid-v4", {}, "Humanoid-v4", {}),
]
STEPS = 300


def gym_make(env_id: str, **kwargs):
    with warnings.catch_warnings():  # gymnasium marks every v4 as out of date; that is the point here
        warnings.simplefilter("ignore")
        return gym.make(env_id, **kwargs)


def assert_same_episodes(ours, ref, steps: int = STEPS, seeds=(0, 7), atol: float = 1e-6, label: str = "", act=None):
    """Reset both with each seed, step both with the same actions (random, or ``act(ref)``):
    observation, reward and termination agree within ``atol`` at every step."""
    rng = np.random.default_rng(1)
    low, high = ref.action_space.low, ref.action_space.high
    act = act or (lambda env: rng.uniform(low, high).astype(np.float32))
    for seed in seeds:
        o_ref, _ = ref.reset(seed=seed)
        o_ours, _ = ours.reset(seed=seed)
        assert o_ours.shape == o_ref.shape, f"{label} observation size"
        np.testing.assert_allclose(o_ours, o_ref, atol=atol, err_msg=f"{label} reset obs, seed {seed}")
        for t in range(steps):
            a = act(ref)
            o_ref, r_ref, term_ref, trunc_ref, _ = ref.step(a)
            o_ours, r_ours, term_ours, _, _ = ours.step(a)
            np.testing.assert_allclose(o_ours, o_ref, atol=atol, err_msg=f"{label} obs at step {t}, seed {seed}")
            assert r_ours == pytest.approx(r_ref, abs=atol), f"{label} reward at step {t}, seed {seed}"
            assert term_ours == term_ref, f"{label} termination at step {t}, seed {seed}"
            if term_ref:
                break


@pytest.mark.parametrize("task,options,gym_id,gym_kwargs", CASES,
                         ids=[f"{t}{'-' + '-'.join(map(str, o.values())) if o else ''}" for t, o, _, _ in CASES])
def test_matches_gymnasium(task, options, gym_id, gym_kwargs):
    ref = gym_make(gym_id, **gym_kwargs)
    ours = make_env(task, engine="mujoco", task_options=options)
    assert_same_episodes(ours, ref, label=f"{task} {options}")
    ours.close()


def push_object(env):
    """Pusher action that drives the arm's tip at the object (Jacobian transpose on the reference
    env's state), so that the arm touches and moves it: random actions almost never do."""
    import mujoco

    m, d = env.unwrapped.model, env.unwrapped.data
    jac = np.zeros((3, m.nv))
    mujoco.mj_jacBody(m, d, jac, None, m.body("tips_arm").id)
    error = d.body("object").xpos - d.body("tips_arm").xpos
    return np.clip(50 * jac[:, :7].T @ error - 0.5 * d.qvel[:7], -2, 2).astype(np.float32)


def test_pusher_matches_gymnasium_while_pushing_the_object():
    ref, ours = gym_make("Pusher-v5"), make_env("Pusher")
    start = ours.reset(seed=1)[0][17:20]  # the object's position
    assert_same_episodes(ours, ref, steps=100, seeds=(1,), label="Pusher pushing", act=push_object)
    moved = np.linalg.norm(ref.unwrapped.data.body("object").xpos - start)
    assert moved > 0.05, f"the arm did not move the object ({moved:.3f} m): no contact was compared"
    ours.close()


def test_walker2d_versions_are_different_robots():
    """v4's right foot has friction 0.9, v5's 1.9: same observation size, different physics."""
    from crosssim.scene import canonical_model, resolve_scene
    from crosssim.tasks import make_task

    mu = {}
    for v in ("v4", "v5"):
        c = canonical_model(resolve_scene(make_task(f"Walker2d-{v}").scene))
        mu[v] = c.geom_friction[c.geom_body.index("foot"), 0]
    assert mu == {"v4": pytest.approx(0.9), "v5": pytest.approx(1.9)}


def test_ant_zeroed_contact_block_as_mujoco_py():
    """Ant-v4 with ``zeroed``: 111 values whose last 84 are zeros (what mujoco-py's Ant-v3 gave)."""
    env = make_env("Ant-v4", task_options={"contact_forces": "zeroed"})
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        obs = env.step(env.action_space.sample())[0]
    assert obs.shape == (111,) and not obs[27:].any() and obs[:27].any()
    env.close()


def test_equivalence_check_can_fail():
    """The comparison above would notice a wrong reward weight or the wrong version (not vacuous)."""
    from crosssim.tasks.gym_locomotion import Hopper

    ref = gym_make("Hopper-v5")
    ours = make_env("Hopper", engine="mujoco")
    ours.harness.task = type("BadHopper", (Hopper,), {"ctrl_cost_weight": 2e-3})()
    with pytest.raises(AssertionError, match="reward at step 0"):
        assert_same_episodes(ours, ref, steps=3, seeds=(0,))
    with pytest.raises(AssertionError, match="obs at step"):  # the v5 foot is not the v4 foot
        assert_same_episodes(make_env("Walker2d-v5"), gym_make("Walker2d-v4"), seeds=(0,))
