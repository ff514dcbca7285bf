"""Every registered task x every installed engine: build, reset, step, finite (generated).

Tasks with their own scene run through ``Harness.for_task``; tasks that take the robot from a
card (Locomotion) run through tests/cards/<task>.yaml-style smoke cards.
"""

import numpy as np
import pytest

from conftest import CARDS, installed_engines
from crosssim.card import load_card
from crosssim.engines import EngineProfile, get_engine
from crosssim.runner.harness import Harness
from crosssim.runner.stepper import ControlStepper
from crosssim.tasks import registered_tasks

SMOKE_CARDS = {"Locomotion": CARDS / "ant-locomotion.yaml"}
CASES = [(t, e) for t in sorted(registered_tasks()) for e in installed_engines()]


def harness_for(task_name: str) -> Harness:
    if task_name in SMOKE_CARDS:
        return Harness.from_card(load_card(SMOKE_CARDS[task_name]))
    return Harness.for_task(task_name)


@pytest.mark.parametrize("task_name,engine_name", CASES, ids=[f"{t}-{e}" for t, e in CASES])
def test_task_runs_in_engine(task_name, engine_name):
    harness = harness_for(task_name)
    c = harness.canonical
    engine = get_engine(engine_name)
    model = engine.load(harness.scene, EngineProfile(engine_name, engine_name))
    stepper = ControlStepper(engine, model, harness)
    rng = np.random.default_rng(0)
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
    engine.close(model)


def test_every_task_is_covered():
    assert set(registered_tasks()) <= {t for t, _ in CASES}
