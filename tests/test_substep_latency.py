"""Sub-step latency, the timing ladder's bottom rungs (docs/risk.md, "Ladders"): a latency of a
fraction of a control period reaches every engine through the shared control step, as the same
physical delay."""

import numpy as np
import pytest

from conftest import ROOT
from crosssim.card import load_card
from crosssim.frame import InitialState
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness
from crosssim.runner.simulator import open_engine
from crosssim.runner.stepper import ControlStepper
from crosssim.sweep import LADDERS
from crosssim.variant import Variant

HOPPER = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"
ACTION = np.array([0.5, -0.5, 0.5])
ENGINES = ("mujoco", "pybullet")
RATIO_TOL = {"mujoco": 0.02, "pybullet": 0.1}
"""Tolerance on the velocity response's share (1 - delay). MuJoCo's response is linear in the torque's
duration over one period (implicit damping); PyBullet damps explicitly and emulates armature, so its
response to a torque held for part of 8 ms is non-linear by up to about 0.08 at these delays."""


@pytest.fixture(scope="module")
def harness():
    if not HOPPER.exists():
        pytest.skip("default hopper policy not present")
    return Harness.from_card(load_card(HOPPER))


def _stepper(engine, harness, fields):
    sim = open_engine(load_profile(engine), harness.scene, Variant.of(**fields), base=harness.model_variant)
    st = ControlStepper(sim, harness)
    init = harness.task.nominal_initial_state(harness.canonical)
    qpos = init.qpos.copy()
    qpos[1] += 1.0  # in the air: no contact during the period, the joints respond to torque alone
    st.reset(InitialState(qpos=qpos, qvel=init.qvel), 0)
    return sim, st


def _torque_timeline(engine, harness, fields, monkeypatch):
    """Per physics step of one control period: the share of the new action's torque the engine got."""
    sim, st = _stepper(engine, harness, fields)
    got = []
    real = type(st.engine).step
    monkeypatch.setattr(type(st.engine), "step", lambda self, m, s, tau, n=1: got.extend([np.array(tau)] * n) or real(self, m, s, tau, n))
    st.step(ACTION)
    monkeypatch.undo()
    sim.close()
    full = harness.actuation.torques(harness.actuation.target(ACTION), None, None)
    j = np.flatnonzero(full)[0]
    return np.array([t[j] / full[j] for t in got]), st.physics_dt


def _response_share(engine, harness, fields):
    """Joint velocity change over one period from the action, as a share of the undelayed one."""
    def dqd(f, action):
        sim, st = _stepper(engine, harness, f)
        q0 = st.engine.joint_state(st.model, st.state)[1].copy()
        st.step(action)
        out = st.engine.joint_state(st.model, st.state)[1] - q0
        sim.close()
        return out
    rest = dqd(fields, np.zeros(3))
    idx = harness.actuation.dof_index
    return (dqd(fields, ACTION) - rest)[idx] / (dqd({}, ACTION) - dqd({}, np.zeros(3)))[idx]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("delay", [0.25, 0.5, 0.3])
def test_substep_latency_delays_the_torque_by_that_time(engine, delay, harness, monkeypatch):
    shares, dt = _torque_timeline(engine, harness, {"action_delay": delay}, monkeypatch)
    period = harness.control_dt
    assert len(shares) * dt == pytest.approx(period)
    # The previous action (zero) holds for delay x period; then the new one: the torque's time integral
    # over the period is (1 - delay) x period (0.3 of 4 physics steps is 1.2 steps: one blended step).
    held = float(np.sum(1.0 - shares) * dt)
    assert held == pytest.approx(delay * period, abs=1e-12)
    assert shares[-1] == pytest.approx(1.0)
    share = _response_share(engine, harness, {"action_delay": delay})
    assert np.all(np.abs(share - (1.0 - delay)) <= RATIO_TOL[engine]), share


def test_a_delay_the_harness_ignored_is_caught(harness, monkeypatch):
    """The broken case: a stepper that drops the fraction (whole steps only) fails both checks."""
    real_init = ControlStepper.__init__

    def broken(self, *a, **k):
        real_init(self, *a, **k)
        self.delay_substeps = 0.0

    monkeypatch.setattr(ControlStepper, "__init__", broken)
    share = _response_share("mujoco", harness, {"action_delay": 0.5})
    assert np.all(np.abs(share - 0.5) > RATIO_TOL["mujoco"])  # full response: the test above would fail


def test_timing_ladder_has_substep_rungs():
    lad = LADDERS["timing"]
    assert lad.fields(1) == {"action_latency": 0, "action_delay": 0.25, "obs_noise": 0.0025}
    assert lad.fields(2) == {"action_latency": 0, "action_delay": 0.5, "obs_noise": 0.005}
    assert lad.fields(3) == {"action_latency": 1, "obs_noise": 0.01}  # whole steps: the fields as before
    assert lad.severity_of("action_latency", 0.5) == pytest.approx(0.5)  # 4 ms at 8 ms per step
    assert Variant.of(**lad.fields(2)).harness.action_delay == 0.5
