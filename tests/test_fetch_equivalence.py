"""crosssim's Fetch tasks in MuJoCo reproduce gymnasium-robotics' FetchPickAndPlace-v4 and
FetchPush-v4 step for step: same seed, same actions, observation within 1e-9 (measured: bit for
bit), reward and is_success equal, every step of full 50-step episodes. A law that is 2 % off fails.
Skipped where gymnasium-robotics is not installed (pip install 'crosssim[robotics]')."""

import contextlib
import dataclasses
import io
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium_robotics", reason="the benchmark: pip install 'crosssim[robotics]'")
import gymnasium as gym  # noqa: E402
from gymnasium.spaces import flatten  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "helpers"))
import robotics_fix  # noqa: E402

from crosssim.gym_env import make_env  # noqa: E402

ATOL = 1e-9
SEEDS = (0, 7, 123)


def benchmark(env_id: str):
    with contextlib.redirect_stdout(io.StringIO()):  # its import prints an Adroit notice
        import gymnasium_robotics
    robotics_fix.patch()
    gym.register_envs(gymnasium_robotics)
    return gym.make(env_id)


def compare(ours, ref, seeds=SEEDS, steps: int = 50) -> int:
    """Steps compared; AssertionError at the first that differs."""
    rng = np.random.default_rng(1)
    n = 0
    for seed in seeds:
        o_ref, _ = ref.reset(seed=seed)
        o, _ = ours.reset(seed=seed)
        np.testing.assert_allclose(o, flatten(ref.observation_space, o_ref), atol=ATOL, rtol=0,
                                   err_msg=f"reset, seed {seed}")
        for t in range(steps):
            a = rng.uniform(-1.0, 1.0, 4)  # float64: the benchmark scales a float32 action in float32
            o_ref, r_ref, term, trunc, info = ref.step(a)
            o, r, _, _, terms = ours.step(a)
            np.testing.assert_allclose(o, flatten(ref.observation_space, o_ref), atol=ATOL, rtol=0,
                                       err_msg=f"seed {seed}, step {t}")
            assert r == r_ref, f"reward, seed {seed}, step {t}"
            assert terms["is_success"] == float(info["is_success"]), f"is_success, seed {seed}, step {t}"
            assert not term
            n += 1
    return n


@pytest.mark.parametrize("task", ["FetchPickAndPlace", "FetchPush"])
def test_fetch_matches_benchmark(task):
    assert compare(make_env(task), benchmark(f"{task}-v4")) == 50 * len(SEEDS)


def test_a_wrong_law_fails():
    """The check can fail: the mocap moving 4.9 cm per unit action instead of 5 cm is caught."""
    ours = make_env("FetchPickAndPlace")
    act = ours.harness.actuation
    ours.harness.actuation = dataclasses.replace(act, law=dataclasses.replace(act.law, pos_scale=0.049))
    with pytest.raises(AssertionError, match="step"):
        compare(ours, benchmark("FetchPickAndPlace-v4"), seeds=(0,))


def test_a_wrong_goal_draw_fails():
    """Reset reproduces the benchmark's draws: another seed's goal is caught at reset."""
    ours, ref = make_env("FetchPickAndPlace"), benchmark("FetchPickAndPlace-v4")
    o_ref, _ = ref.reset(seed=1)
    o, _ = ours.reset(seed=2)
    assert np.abs(o - flatten(ref.observation_space, o_ref)).max() > 1e-3
