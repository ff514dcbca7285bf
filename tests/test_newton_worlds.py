"""Newton lockstep batches as N worlds of one model (crosssim.engines.newton_worlds): every world's
parameters are the single-world model's, and a batch gives the one-at-a-time rows.

Measured (Hopper, 4 episodes of amplitudes 0 / 0.1 / 0.3 / 1.0, 200 control steps, seeds 30-33):
returns, lengths, terminations and metrics of the batch equal one at a time bit for bit (the
worlds of SolverMuJoCo on Warp's CPU device are independent and their kernels run each world's
arithmetic in the same order), so the tolerances below are zero."""

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("newton") is None:
    pytest.skip("newton is not installed (pip install 'crosssim[newton]')", allow_module_level=True)

from crosssim.profiles import load_profile
from crosssim.runner.batched import can_batch, run_episodes_lockstep
from crosssim.runner.harness import Harness
from crosssim.runner.rollout import run_episode
from crosssim.runner.simulator import open_engine
from helpers.rowwise_policy import RowwisePolicy

AMPS = (0.0, 0.1, 0.3, 1.0)
"""One action scale per episode: Hopper hops, stumbles or falls at its own step."""
RETURN_TOL = 0.0
"""Absolute tolerance on an episode's return: measured difference 0.0 (bit-identical)."""
METRIC_TOL = 0.0
"""Absolute tolerance on each metric: measured difference 0.0."""


def _policy(amps):
    return RowwisePolicy(amps, obs_size=11, pos=slice(2, 5), phase=slice(5, 8), gain=2.0)


@pytest.fixture(scope="module")
def hopper():
    harness = Harness.for_task("Hopper")
    sim = open_engine(load_profile("newton-mujoco-warp"), harness.scene)
    yield sim, harness
    sim.close()


def test_worlds_give_the_one_at_a_time_rows(hopper):
    sim, harness = hopper
    assert can_batch(sim.engine, _policy(AMPS)) and sim.engine.capabilities.worlds
    batched = {}
    run_episodes_lockstep(sim, harness, _policy(AMPS), [(k, k, 30 + k) for k in range(len(AMPS))],
                          batch_size=len(AMPS), max_steps=200, on_result=lambda r: batched.__setitem__(r.episode, r))
    alone = {k: run_episode(sim, harness, _policy([a]), episode=k, seed=30 + k, max_steps=200)
             for k, a in enumerate(AMPS)}
    assert len({r.length for r in alone.values()}) >= 3  # ended worlds sit beside running ones
    for k, row in alone.items():
        got = batched[k]
        assert got.failure is None and row.failure is None, (got.failure, row.failure)
        assert (got.length, got.terminated, got.termination_reason) == \
            (row.length, row.terminated, row.termination_reason), k
        assert abs(got.ret - row.ret) <= RETURN_TOL, (k, got.ret, row.ret)
        assert got.metrics.keys() == row.metrics.keys()
        for name, value in row.metrics.items():
            assert abs(got.metrics[name] - value) <= METRIC_TOL or got.metrics[name] == value, (k, name)


def test_a_delay_and_a_per_step_law_stay_in_lockstep(hopper, monkeypatch):
    """A fractional action delay splits each control period into parts and a motor lag makes the
    torque law stateful (one engine step call per physics step): the rows still equal one at a
    time, and every round is one step of the whole model, not one per episode."""
    from crosssim.variant import Variant

    nominal, harness = hopper
    sim = open_engine(load_profile("newton-mujoco-warp"), harness.scene, Variant.of(action_delay=0.5, motor_lag=0.01))
    built = []
    make = sim.engine.worlds_model
    monkeypatch.setattr(sim.engine, "worlds_model", lambda *a: built.append(make(*a)) or built[-1])
    try:
        batched = {}
        run_episodes_lockstep(sim, harness, _policy(AMPS), [(k, k, 30 + k) for k in range(len(AMPS))],
                              batch_size=len(AMPS), max_steps=60, on_result=lambda r: batched.__setitem__(r.episode, r))
        alone = {k: run_episode(sim, harness, _policy([a]), episode=k, seed=30 + k, max_steps=60)
                 for k, a in enumerate(AMPS)}
    finally:
        sim.close()
    for k, row in alone.items():
        got = batched[k]
        assert (got.length, got.failure, got.ret) == (row.length, row.failure, row.ret), k
    substeps = round(harness.control_dt / sim.physics_dt)
    assert built[0].physics_steps == max(r.length for r in alone.values()) * substeps


def test_every_world_holds_the_reconciled_parameters(hopper):
    from crosssim.engines.newton_worlds import world_mismatches

    sim, _ = hopper
    worlds = sim.engine.worlds_model(sim.model, 3)
    try:
        assert world_mismatches(sim.model.nm, worlds.nm, 3) == []
        for name in ("body_mass", "body_inertia", "joint_X_p", "joint_damping", "joint_armature", "shape_material_mu"):
            one, many = getattr(sim.model.nm, name).numpy(), getattr(worlds.nm, name).numpy()
            assert np.array_equal(many.reshape(3, *one.shape)[2], one), name
        audit = {(r.quantity, r.item): r.status for r in sim.engine.audit(worlds)}
        assert "MISMATCH" not in audit.values()
    finally:
        sim.engine.close(worlds)


def test_a_replicated_model_without_reconciliation_is_refused(hopper, monkeypatch):
    """The check is real: Newton's import alone (settotalmass ignored, D6 anchors) differs."""
    from crosssim.engines import newton_worlds
    from crosssim.errors import EngineFailure

    sim, _ = hopper
    monkeypatch.setattr(newton_worlds, "tile_parameters", lambda *a: None)
    with pytest.raises(EngineFailure, match="worlds differ from the single-world model"):
        sim.engine.worlds_model(sim.model, 2)


def test_worlds_stepped_apart_match_the_single_model(hopper):
    """Steps of different lengths, read in any order, a reset in place: each world moves by its own
    steps only."""
    from crosssim.tasks import make_task

    sim, harness = hopper
    engine, rng = sim.engine, np.random.default_rng(5)
    initial = [make_task("Hopper").initial_state(harness.canonical, np.random.default_rng(s)) for s in (1, 2)]
    worlds = engine.worlds_model(sim.model, 2)
    try:
        a, b = (engine.reset(worlds, i) for i in initial)
        ref = [engine.reset(sim.model, i) for i in initial]
        for t in range(10):
            if t == 5:  # a world reset in place starts afresh (its warm start forgotten), as a single state does
                engine.reset_into(worlds, a, initial[1])
                engine.reset_into(sim.model, ref[0], initial[1])
            ta, tb = (np.r_[np.zeros(3), rng.normal(0, 20, 3)] for _ in "ab")  # the root's slides and hinge: none
            engine.step(worlds, a, ta, 2)
            engine.step(worlds, b, tb, 3)  # another number of steps: run apart, a kept still meanwhile
            engine.step(sim.model, ref[0], ta, 2)
            engine.step(sim.model, ref[1], tb, 3)
            for got, want in ((b, ref[1]), (a, ref[0])):
                fa, fb = engine.frame(worlds, got), engine.frame(sim.model, want)
                assert fa.time == fb.time
                np.testing.assert_array_equal(fa.qpos, fb.qpos)
                np.testing.assert_array_equal(fa.qvel, fb.qvel)
                np.testing.assert_array_equal(fa.base_pos, fb.base_pos)
    finally:
        engine.close(worlds)


def test_a_perturbed_condition_has_its_own_worlds(hopper):
    """A mass / friction rung builds its own single-world model; its worlds hold the rung's values."""
    from crosssim.variant import Variant

    nominal, harness = hopper
    sim = open_engine(load_profile("newton-mujoco-warp"), harness.scene, Variant.of(mass_scale=1.3, friction_scale=0.7))
    worlds = sim.engine.worlds_model(sim.model, 2)
    try:
        for name in ("body_mass", "shape_material_mu"):
            one, many = getattr(sim.model.nm, name).numpy(), getattr(worlds.nm, name).numpy()
            assert np.array_equal(many.reshape(2, *one.shape)[1], one), name
            assert not np.array_equal(one, getattr(nominal.model.nm, name).numpy()), name
    finally:
        sim.engine.close(worlds)
        sim.close()


def test_contact_wrenches_of_a_world_match_the_single_model(hopper):
    """Tasks with contact costs (Ant, Humanoid) read SolverMuJoCo's cfrc_ext of their own world."""
    from crosssim.tasks import make_task

    sim, harness = hopper
    engine = sim.engine
    initial = make_task("Hopper").initial_state(harness.canonical, np.random.default_rng(3))
    worlds = engine.worlds_model(sim.model, 2)
    try:
        a, b = engine.reset(worlds, initial), engine.reset(worlds, initial)
        ref = engine.reset(sim.model, initial)
        torques = np.r_[np.zeros(3), 5.0, -5.0, 2.0]
        for _ in range(60):  # 0.48 s: the foot lands
            engine.step(worlds, a, -torques, 4)
            engine.step(worlds, b, torques, 4)
            engine.step(sim.model, ref, torques, 4)
        got, want = engine.frame(worlds, b, contacts=True), engine.frame(sim.model, ref, contacts=True)
        assert np.abs(want.body_ext_wrench).max() > 1.0  # in contact
        np.testing.assert_array_equal(got.body_ext_wrench, want.body_ext_wrench)
    finally:
        engine.close(worlds)


def test_a_solver_without_worlds_runs_one_at_a_time():
    """Only SolverMuJoCo batches as worlds; another Newton solver's states swap what the solver
    keeps (not cheap), so the runner does not batch on it."""
    harness = Harness.for_task("Hopper")
    sim = open_engine(load_profile("newton-featherstone"), harness.scene)
    try:
        assert not can_batch(sim.engine, _policy(AMPS), sim.model)
        assert can_batch(sim.engine, _policy(AMPS))  # the class alone cannot tell: the model decides
    finally:
        sim.close()
