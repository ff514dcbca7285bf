"""crosssim tasks as gymnasium Envs: the env checker for every task x engine, registered ids,
the multi-engine vector env, and a short training run whose card crossval accepts."""

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

from conftest import installed_engines  # noqa: E402
from crosssim.errors import CrossSimError  # noqa: E402
from crosssim.gym_env import make_env, make_multi_engine_vec_env, register_envs  # noqa: E402
from crosssim.tasks import registered_tasks  # noqa: E402

TASKS = [t for t, cls in sorted(registered_tasks().items()) if cls.scene]  # card-driven tasks need a robot card
ENGINES = installed_engines()
try:
    import newton  # noqa: F401

    ENGINES = ENGINES + ["newton-mujoco-warp"]
except ImportError:
    pass


@pytest.mark.parametrize("task", ["InvertedDoublePendulum", "Hopper"])
@pytest.mark.parametrize("engine", ["mujoco", "pybullet", "physx"])
def test_a_reset_forgets_the_episodes_before_it(engine, task):
    """The same seed and action give the same first step whatever ran before in the same env:
    30 seeds, then the same 30 in another order. Before 2026-12-02 PyBullet's cart-pole failed
    this (its cart started inside the rail, a collision MuJoCo's bits rule out; the contact
    cache carried the penetration from one episode into the next): about 5 % of reset+step
    pairs differed, and gymnasium's determinism check failed now and then."""
    import importlib.util

    if engine not in ENGINES and not (engine == "physx" and importlib.util.find_spec("sapien")):
        pytest.skip(f"{engine} not installed")
    env = make_env(task, engine=engine)

    def first_step(seed):
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        return env.step(rng.uniform(env.action_space.low, env.action_space.high))[0]

    env.action_space.seed(40)  # the case found: a server's first episode against its later ones
    action = env.action_space.sample()
    found = []
    for _ in range(3):
        env.reset(seed=40)
        found.append(env.step(action)[0])
    seeds = list(range(30))
    before = {s: first_step(s) for s in seeds}
    after = {s: first_step(s) for s in np.random.default_rng(1).permutation(seeds).tolist()}
    env.close()
    np.testing.assert_array_equal(found[0], found[1])
    np.testing.assert_array_equal(found[1], found[2])
    for s in seeds:
        np.testing.assert_array_equal(before[s], after[s], err_msg=f"seed {s}")


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("engine", ENGINES)
def test_env_checker(task, engine):
    from test_registry_smoke import EXPECTED_FAILURES  # what an engine cannot build is refused in one line

    expected = EXPECTED_FAILURES.get((task, engine))
    if expected:
        with pytest.raises(CrossSimError, match=expected):
            env = make_env(task, engine=engine)
            env.reset(seed=0)
            for _ in range(20):
                env.step(env.action_space.sample())
        return
    env = make_env(task, engine=engine)
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_registered_ids():
    register_envs()
    env = gym.make("crosssim/Hopper-v0", engine="pybullet")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (11,)
    env.close()


def test_multi_engine_vec_env_round_robin():
    venv = make_multi_engine_vec_env("Hopper", ("mujoco", "pybullet"), 4)
    assert [e.profile.name for e in venv.envs] == ["mujoco", "pybullet", "mujoco", "pybullet"]
    obs = venv.reset()
    assert obs.shape == (4, 11)
    obs, rewards, dones, infos = venv.step(np.zeros((4, 3)))
    assert np.isfinite(obs).all() and rewards.shape == (4,)
    venv.close()


def test_short_multi_engine_training_gives_a_card_crossval_accepts(tmp_path):
    pytest.importorskip("stable_baselines3")
    from crosssim.cli import main
    from crosssim.evaluate import crossval
    from crosssim.runner import CrossvalConfig

    out = tmp_path / "trained"
    assert main(["train", "--task", "Hopper", "--engines", "mujoco,pybullet", "--steps", "512", "--n-envs", "2",
                 "--out", str(out)]) == 0
    import yaml

    card = yaml.safe_load((out / "card.yaml").read_text())
    assert card["training"]["engines"] == ["mujoco", "pybullet"] and card["validated_in"] == ["mujoco", "pybullet"]
    summary = crossval(CrossvalConfig(policy=str(out / "card.yaml"), engines=("mujoco", "pybullet"), episodes=1,
                                      max_steps=50, out=str(tmp_path / "run"), risk=False, report=False)).summary
    assert all(s.failed == 0 for s in summary.engines.values())


def test_randomised_models_are_reused_and_give_the_same_rollouts():
    from crosssim.gym_env import CrossSimEnv
    from crosssim.variant import Variant

    light, heavy = Variant.of(mass_scale=0.9), Variant.of(mass_scale=1.1, friction_scale=0.7)
    draws = iter([light, heavy, light])
    env = CrossSimEnv("Hopper", "mujoco", perturbations=lambda rng: next(draws))
    fresh = CrossSimEnv("Hopper", "mujoco", perturbations=lambda rng: light)
    actions = np.random.default_rng(1).uniform(-1, 1, (40, 3))

    def rollout(e, seed):
        obs = [e.reset(seed=seed)[0]]
        obs += [e.step(a)[0] for a in actions]
        return np.array(obs)

    rollout(env, 3), rollout(env, 3)
    first_light_model = env._models[light.model].model
    np.testing.assert_array_equal(rollout(env, 3), rollout(fresh, 3))  # back on the cached light model
    assert env.model is first_light_model and len(env._models) == 3  # nominal, light, heavy
    env.close(), fresh.close()


def test_engine_state_reused_between_episodes_gives_fresh_state_results():
    """The harness resets a used MjData in place (reset_into): episodes equal those of a fresh env."""
    from crosssim.gym_env import CrossSimEnv

    env, fresh = CrossSimEnv("Hopper", "mujoco"), CrossSimEnv("Hopper", "mujoco")
    actions = np.random.default_rng(2).uniform(-1, 1, (60, 3))

    def rollout(e, seed):
        out = [e.reset(seed=seed)[0]]
        out += [e.step(a)[0] for a in actions]
        return np.array(out)

    rollout(env, 5)
    state = env.episode.stepper.state
    np.testing.assert_array_equal(rollout(env, 3), rollout(fresh, 3))
    assert env.episode.stepper.state is state  # reused, not reallocated
    env.close(), fresh.close()


def test_observation_noise_differs_between_episodes_without_a_sampler():
    """A profile's obs_noise is a fresh draw per episode (and the same again for the same seed)."""
    from dataclasses import replace

    from crosssim.runner.episode import Episode
    from crosssim.runner.stepper import ControlStepper
    from crosssim.variant import HarnessVariant, Variant

    clean, noisy = make_env("Hopper"), make_env("Hopper")
    noisy.sim = replace(noisy.sim, variant=Variant(harness=HarnessVariant(obs_noise=0.1)))
    noisy.episode = Episode(ControlStepper(noisy.sim, noisy.harness))

    def noise(seed):
        return noisy.reset(seed=seed)[0] - clean.reset(seed=seed)[0]

    first, second = noise(1), noise(2)
    assert np.abs(first).max() > 0.01
    assert not np.allclose(first, second)
    np.testing.assert_array_equal(first, noise(1))
