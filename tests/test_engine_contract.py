"""The engine contract, checked the same way for every engine column crosssim knows (generated).

Columns are every registered engine (built-ins and entry-point plugins; one plugin is installed
here, through a real entry point, so the plugin path is covered) and every simulators/*.yaml
profile. An engine that is not installed is skipped with its install hint. The checks: ``reset``
returns a state that is not the model; ``step`` advances the state it is given (two states
stepped in turn evolve exactly as each does alone); ``reset_into``, where declared, equals a
fresh ``reset``; frames are finite with canonical shapes; ``audit`` returns AuditRows; ``close``
can be called twice. ``test_the_interleaving_check_can_fail`` shows the central check failing on
an adapter that keeps one state on its model (as PyBullet's and Newton's once did).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from crosssim.engines import AuditRow, EngineCapabilities, registered_engines
from crosssim.engines.mujoco import EngineMuJoCo
from crosssim.errors import CrossSimError, EngineUnavailable
from crosssim.profiles import load_profile, profile_dirs
from crosssim.runner.harness import Harness
from crosssim.runner.simulator import open_engine
from crosssim.variant import compile_model

TASK = "Hopper"  # contacts, joint limits, a planar base: what the baseline crossval runs
STEPS, SUBSTEPS = 25, 2
TIGHT = 1e-9
"""Absolute tolerance of "evolves as if alone" [rad, m, rad/s, m/s]: states must not leak at all."""

PLUGIN = '''
"""A third-party engine for the contract suite: MuJoCo with its RK4 integrator."""
import mujoco
from crosssim.engines.mujoco import EngineMuJoCo


class EngineRK4(EngineMuJoCo):
    name = "contract-rk4"

    def load(self, compiled, profile):
        model = super().load(compiled, profile)
        model.mj.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
        return model
'''


def _plugin_site() -> Path:
    site = Path(tempfile.mkdtemp(prefix="crosssim-contract-plugin-"))
    dist = site / "contract_rk4-0.1.dist-info"
    dist.mkdir()
    (site / "contract_rk4.py").write_text(PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: contract-rk4\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[crosssim.engines]\ncontract-rk4 = contract_rk4:EngineRK4\n")
    return site


SITE = str(_plugin_site())


def _columns() -> list[str]:
    sys.path.insert(0, SITE)
    try:
        names = set(registered_engines())
    finally:
        sys.path.remove(SITE)
    assert "contract-rk4" in names, "the entry-point plugin was not registered"
    for folder in profile_dirs():
        names |= {p.stem for p in folder.glob("*.yaml")} if folder.is_dir() else set()
    return sorted(names)


COLUMNS = _columns()


@pytest.fixture(scope="module")
def harness() -> Harness:
    return Harness.for_task(TASK)


@pytest.fixture(scope="module", params=COLUMNS)
def column(request, harness):
    """(engine, model) of one column, loaded once for all checks; closed again at the end."""
    sys.path.insert(0, SITE)  # the plugin's entry point, for this module only
    request.addfinalizer(lambda: sys.path.remove(SITE))
    try:
        sim = open_engine(load_profile(request.param), harness.scene)
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    yield sim.engine, sim.model
    sim.close()  # a third close: closing is idempotent


def _initial(harness: Harness, seed: int):
    return harness.task.initial_state(harness.canonical, np.random.default_rng(seed))


def _torques(harness: Harness, seed: int) -> np.ndarray:
    limit = np.where(np.isfinite(harness.max_torque), 0.5 * harness.max_torque, 0.0)
    return np.random.default_rng(seed).uniform(-1, 1, (STEPS, harness.canonical.joint_count)) * limit


def _record(engine, model, state) -> np.ndarray:
    """Everything a state shows: joint_state and the frame, as one vector (copied)."""
    q, qd = engine.joint_state(model, state)
    f = engine.frame(model, state)
    return np.concatenate([q, qd, f.qpos, f.qvel, f.base_pos, f.base_quat, f.base_lin_vel, f.base_ang_vel,
                           f.joint_torque, [f.time]])


def _alone(engine, model, harness, seed: int) -> np.ndarray:
    state = engine.reset(model, _initial(harness, seed))
    rows = [_record(engine, model, state)]
    for tau in _torques(harness, seed):
        engine.step(model, state, tau, SUBSTEPS)
        rows.append(_record(engine, model, state))
    return np.array(rows)


def check_interleaving(engine, model, harness) -> None:
    """Two states of one model stepped in turn each evolve exactly as when run alone."""
    alone = [_alone(engine, model, harness, seed) for seed in (1, 2)]
    assert np.abs(alone[0] - alone[1]).max() > 1e-3, "the two episodes must differ for the check to mean anything"
    states = [engine.reset(model, _initial(harness, seed)) for seed in (1, 2)]
    assert states[0] is not states[1]
    torques = [_torques(harness, seed) for seed in (1, 2)]
    got = [[_record(engine, model, s)] for s in reversed(states)][::-1]  # read in the other order
    for t in range(STEPS):
        for k in (0, 1):
            engine.step(model, states[k], torques[k][t], SUBSTEPS)
        for k in (1, 0):
            got[k].append(_record(engine, model, states[k]))
    for k in (0, 1):
        np.testing.assert_allclose(np.array(got[k]), alone[k], rtol=0, atol=TIGHT,
                                   err_msg=f"{engine.name}: state {k} stepped in turn with another differs from alone")


def test_capabilities_are_declared_on_the_class(column):
    engine, _ = column
    assert isinstance(type(engine).capabilities, EngineCapabilities)


def test_reset_returns_a_state_that_is_not_the_model(column, harness):
    engine, model = column
    state = engine.reset(model, _initial(harness, 0))
    assert state is not None and state is not model and type(state) is not type(model)


def test_step_uses_the_state_it_is_given(column, harness):
    check_interleaving(*column, harness)


def test_reset_into_equals_a_fresh_reset(column, harness):
    engine, model = column
    if not engine.capabilities.reset_into:
        pytest.skip(f"{engine.name} does not declare reset_into")
    used = engine.reset(model, _initial(harness, 1))
    for tau in _torques(harness, 1)[:10]:
        engine.step(model, used, tau, SUBSTEPS)
    state = engine.reset_into(model, used, _initial(harness, 2))
    reused = [_record(engine, model, state)]
    for tau in _torques(harness, 2):
        engine.step(model, state, tau, SUBSTEPS)
        reused.append(_record(engine, model, state))
    del used, state
    np.testing.assert_array_equal(np.array(reused), _alone(engine, model, harness, 2))


def test_frames_are_finite_with_canonical_shapes(column, harness):
    engine, model = column
    c = harness.canonical
    state = engine.reset(model, _initial(harness, 3))
    frame = engine.frame(model, state)
    assert frame.time == 0.0 and not frame.joint_torque.any()
    tau = _torques(harness, 3)[0]
    engine.step(model, state, tau, SUBSTEPS)
    frame = engine.frame(model, state)
    shapes = dict(qpos=(c.nq,), qvel=(c.nv,), base_pos=(3,), base_quat=(4,), base_lin_vel=(3,), base_ang_vel=(3,),
                  joint_torque=(c.joint_count,), body_ext_wrench=(0, 6))
    for name, shape in shapes.items():
        assert np.shape(getattr(frame, name)) == shape, name
    assert frame.is_finite() and frame.time > 0
    assert abs(np.linalg.norm(frame.base_quat) - 1) < 1e-5
    np.testing.assert_array_equal(frame.joint_torque, tau)  # what was applied, canonical order
    q, qd = engine.joint_state(model, state)
    np.testing.assert_array_equal(q, frame.qpos)
    np.testing.assert_array_equal(qd, frame.qvel)
    try:
        wrench = engine.frame(model, state, contacts=True).body_ext_wrench
    except CrossSimError as exc:  # a solver without contact forces says so in one line
        assert "not available" in str(exc)
    else:
        assert wrench.shape == (len(c.body_names), 6) and np.isfinite(wrench).all()


def test_audit_returns_audit_rows(column):
    engine, model = column
    rows = engine.audit(model)
    assert rows and all(isinstance(r, AuditRow) for r in rows)
    assert {r.status for r in rows} <= {"ok", "unsupported", "MISMATCH"}
    assert "timestep" in {r.quantity for r in rows}


def test_close_works_twice(column):
    engine, model = column
    engine.close(model)
    engine.close(model)


class EngineSharedState(EngineMuJoCo):
    """A broken adapter: one MjData kept on the model; the state handed out is ignored."""

    name = "shared-state"

    def reset(self, model, initial):
        model.data = super().reset(model, initial)
        return object()

    def step(self, model, state, torques, n_substeps=1):
        super().step(model, model.data, torques, n_substeps)

    def joint_state(self, model, state):
        return super().joint_state(model, model.data)

    def frame(self, model, state, *, contacts=False):
        return super().frame(model, model.data, contacts=contacts)


def test_the_interleaving_check_can_fail(harness):
    engine = EngineSharedState()
    model = engine.load(compile_model(harness.scene), load_profile("mujoco"))
    with pytest.raises(AssertionError, match="differs from alone"):
        check_interleaving(engine, model, harness)


@pytest.mark.parametrize("name", ["pybullet", "physx"])
def test_no_temporary_mesh_folder_outlives_the_model(name, harness, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    try:
        sim = open_engine(load_profile(name), harness.scene)
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    sim.close()
    assert not list(tmp_path.iterdir()), f"{name} left {list(tmp_path.iterdir())}"


@pytest.mark.parametrize("name", ["newton-featherstone", "pybullet"])
def test_stepping_a_closed_model_is_an_engine_failure(name, harness):
    from crosssim.errors import EngineFailure

    try:
        sim = open_engine(load_profile(name), harness.scene)
    except EngineUnavailable as exc:
        pytest.skip(str(exc))
    engine, model = sim.engine, sim.model
    state = engine.reset(model, _initial(harness, 0))
    sim.close()
    with pytest.raises(EngineFailure, match="closed"):
        engine.step(model, state, np.zeros(harness.canonical.joint_count))
