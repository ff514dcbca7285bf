"""Every registered task x every installed engine: build, reset, step, finite (generated)."""

import numpy as np
import pytest

from conftest import installed_engines
from crosssim.engines import EngineProfile, get_engine
from crosssim.actuation import Actuation
from crosssim.scene import canonical_model, resolve_scene
from crosssim.tasks import registered_tasks

CASES = [(t, e) for t in sorted(registered_tasks()) for e in installed_engines()]


@pytest.mark.parametrize("task_name,engine_name", CASES, ids=[f"{t}-{e}" for t, e in CASES])
def test_task_runs_in_engine(task_name, engine_name):
    task = registered_tasks()[task_name]()
    scene = resolve_scene(task.scene)
    c = canonical_model(scene)
    engine = get_engine(engine_name)
    model = engine.load(scene, EngineProfile(engine_name, engine_name))
    act = Actuation.motors(c)
    rng = np.random.default_rng(0)
    state = engine.reset(model, task.initial_state(c, rng))
    frame = engine.frame(model, state, contacts=task.needs_contacts)
    ts = task.reset(frame)
    for _ in range(20):
        obs = task.observe(frame, ts)
        assert obs.shape == (task.observation_size(c),) and np.isfinite(obs).all()
        action = rng.uniform(-1, 1, task.action_size(c))
        q, qd = engine.joint_state(model, state)
        engine.step(model, state, act.torques(act.target(action), q, qd), task.frame_skip)
        after = engine.frame(model, state, contacts=task.needs_contacts)
        assert after.is_finite()
        step = task.step(frame, after, action, ts, task.frame_skip * c.timestep)
        assert np.isfinite(step.reward)
        frame = after
    assert frame.time == pytest.approx(20 * task.frame_skip * c.timestep, rel=1e-6)
    engine.close(model)
