"""Every registered task x every installed engine: build, reset, step, finite (generated).

Tasks with their own scene run through ``Harness.for_task``; tasks that take the robot from a
card (Locomotion) run through tests/cards/<task>.yaml-style smoke cards.
"""

import importlib.util

import numpy as np
import pytest

from conftest import CARDS, installed_engines
from crosssim.card import load_card
from crosssim.errors import CrossSimError
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness
from crosssim.runner.simulator import open_engine
from crosssim.runner.stepper import ControlStepper
from crosssim.tasks import registered_tasks

SMOKE_CARDS = {"Locomotion": CARDS / "ant-locomotion.yaml"}
NEWTON_PROFILES = ("newton-mujoco-warp", "newton-featherstone", "newton-xpbd")
try:
    import newton  # noqa: F401

    COLUMNS = installed_engines() + list(NEWTON_PROFILES)
except ImportError:
    COLUMNS = installed_engines()
if importlib.util.find_spec("sapien") is not None:  # the physx column (crosssim[physx])
    COLUMNS = COLUMNS + ["physx"]
CASES = [(t, e) for t in sorted(registered_tasks()) for e in COLUMNS]
# Measured and documented (docs/engines.md, "Newton"): what a solver cannot do on a task is asserted,
# not skipped. XPBD has no joint armature, so Ant's 150 N m motors act on legs of 1e-4 kg m^2 and it
# diverges within 0.15 s; Ant-v5's observation needs contact wrenches, not computed for XPBD.
EXPECTED_FAILURES = {
    ("Ant", "newton-xpbd"): "contact wrenches are not available",
    ("Locomotion", "newton-xpbd"): r"diverged \(NaN\) at t = ",
    # XPBD again has no armature: Reacher's and Pusher's geared motors on light links with armature
    # (Reacher 1, Pusher 0.04 kg m^2 per joint) diverge within 0.05 s.
    ("Reacher", "newton-xpbd"): r"diverged \(NaN\) at t = ",
    # Pusher has a frictionless (condim 1) contact with its table, which Newton's own contact model
    # cannot build: refused at load (crosssim.engines.features), before XPBD could diverge.
    ("Pusher", "newton-xpbd"): "cannot build frictionless contact \\(condim 1\\) of geom",
    ("Pusher", "newton-featherstone"): "cannot build frictionless contact \\(condim 1\\) of geom",
    ("Humanoid", "newton-xpbd"): "contact wrenches are not available",
}
# The Fetch tasks run the benchmark's mocap law: a mocap body welded to the arm, which only MuJoCo
# simulates (docs/manipulation.md). The weld is refused at load by engines that build no equality
# constraints, and the law by newton's MuJoCo-Warp solver, which loads the weld but has no mocap step.
EXPECTED_FAILURES.update({(t, e): ("cannot build equality constraint 'equality_0' \\(type weld\\)" if e != "newton-mujoco-warp"
                                   else "drives a mocap body welded to the arm, which engine newton cannot build")
                          for t in ("FetchPickAndPlace", "FetchPush") for e in ("pybullet", "physx", *NEWTON_PROFILES)})
# Swimmer swims in MuJoCo's fluid model (viscosity, density); only engines declaring it run it.
EXPECTED_FAILURES.update({("Swimmer", e): f"{e}: swimmer.xml moves in a fluid .* has no fluid model; run it in mujoco"
                          for e in ("pybullet", "physx", *NEWTON_PROFILES)})


def harness_for(task_name: str) -> Harness:
    if task_name in SMOKE_CARDS:
        return Harness.from_card(load_card(SMOKE_CARDS[task_name]))
    return Harness.for_task(task_name)


@pytest.mark.parametrize("task_name,engine_name", CASES, ids=[f"{t}-{e}" for t, e in CASES])
def test_task_runs_in_engine(task_name, engine_name):
    harness = harness_for(task_name)
    c = harness.canonical
    profile = load_profile(engine_name)
    rng = np.random.default_rng(0)
    expected = EXPECTED_FAILURES.get((task_name, engine_name))
    if expected:  # one clear line, when the engine is built or while it runs
        with pytest.raises(CrossSimError, match=expected) as refused:
            stepper = ControlStepper(open_engine(profile, harness.scene), harness)
            frame, ts = stepper.reset(harness.task.initial_state(c, rng), 0)
            for _ in range(20):
                frame = stepper.step(rng.uniform(-1, 1, harness.action_size))
        assert "\n" not in str(refused.value)
        return
    sim = open_engine(profile, harness.scene)
    stepper = ControlStepper(sim, harness)
    frame, ts = stepper.reset(harness.task.initial_state(c, rng), 0)
    for _ in range(20):
        obs = stepper.observe(frame, ts)
        assert obs.shape == (harness.obs_size,) and np.isfinite(obs).all()
        action = rng.uniform(-1, 1, harness.action_size)
        after = stepper.step(action)
        assert after.is_finite()
        step = harness.task.step(frame, after, action, ts, stepper.control_dt)
        assert np.isfinite(step.reward)
        frame = after
    assert frame.time == pytest.approx(20 * stepper.control_dt, rel=1e-6)
    sim.close()


def test_every_task_is_covered():
    assert set(registered_tasks()) <= {t for t, _ in CASES}
