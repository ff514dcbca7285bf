"""The G1 lockstep path: the TorchScript LSTM rebuilt as a batched module (checked against the file
step by step) and the PD law run by MuJoCo's own actuators, against the one-at-a-time path."""

from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import CARDS, FIXTURES, requires_fixtures
from crosssim.policies.recurrent import MATCH_ATOL, matches
from crosssim.policies.torchscript import TorchScriptPolicy
from crosssim.runner.workers import EngineJob, execute_job

pytestmark = requires_fixtures
G1 = CARDS / "robots" / "unitree-g1.yaml"
MOTION = FIXTURES / "unitree-g1" / "motion.pt"


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the engine workers: a busy 2-core host crawls with more
    yield
    torch.set_num_threads(before)


def test_rebuilt_lstm_matches_the_file_step_by_step():
    policy = TorchScriptPolicy(MOTION, 47)
    assert policy.batchable and policy.batched is not None
    rng = np.random.default_rng(3)
    xs = rng.normal(0.0, 1.0, (120, 4, 47))
    policy.reset()
    batch = np.array([policy.act(x) for x in xs])
    for row in range(4):  # each row alone through the TorchScript file, its memory reset first
        policy.reset()
        alone = np.array([policy.act(x[row]) for x in xs])
        # float32 in another kernel order: the last bits, carried through 120 recurrent steps
        np.testing.assert_allclose(batch[:, row], alone, rtol=0, atol=MATCH_ATOL)


def test_a_miswired_rebuild_is_refused():
    policy = TorchScriptPolicy(MOTION, 47)
    with torch.no_grad():
        policy.batched.lstm.weight_hh_l0.mul_(0.9)  # the kind of error a wrong rebuild makes
    assert not matches(policy.module, policy._reset, policy.batched, 47)


def _rows(job: EngineJob) -> dict:
    out = {}
    execute_job(job, lambda kind, p: out.__setitem__(p["episode"], p) if kind == "row" else None)
    return out


def test_g1_lockstep_matches_one_at_a_time():
    base = dict(card_path=str(G1), profile="mujoco", episodes=((0, 0), (1, 1), (2, 2)), max_steps=120, trust=True,
                record=True)
    single, batched = _rows(EngineJob(**base)), _rows(EngineJob(**base, batch=True))
    assert set(single) == set(batched) == {0, 1, 2}
    for k, row in single.items():  # the policy output and the PD sums differ in the last bits only
        assert batched[k]["failure"] is None and batched[k]["length"] == row["length"] == 120
        assert batched[k]["ret"] == pytest.approx(row["ret"], rel=1e-7)
        assert set(batched[k]["metrics"]) == set(row["metrics"])
        for name, value in row["metrics"].items():  # torque terms included: read from MuJoCo's actuators
            assert batched[k]["metrics"][name] == pytest.approx(value, rel=1e-6, abs=1e-9), name
    a, b = single[0]["trajectory"]["qpos"], batched[0]["trajectory"]["qpos"]
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)


def test_native_pd_only_where_it_is_the_card_law_exactly():
    from crosssim.card import load_card
    from crosssim.profiles import load_profile
    from crosssim.runner.harness import Harness
    from crosssim.runner.simulator import open_engine

    h = Harness.from_card(load_card(G1))
    sim = open_engine(load_profile("mujoco"), h.scene)
    native = sim.engine.native_pd_model(sim.model, h.actuation)
    assert native is not None and sim.model.mj.actuator_gainprm[:, 0].max() == 0  # the shared model untouched
    sim.model.mj.opt.integrator = 3  # implicitfast would differentiate the kd term: not the same law
    assert sim.engine.native_pd_model(sim.model, h.actuation) is None
    hopper = Harness.for_task("Hopper")  # motors, not PD
    hsim = open_engine(load_profile("mujoco"), hopper.scene)
    assert hsim.engine.native_pd_model(hsim.model, hopper.actuation) is None


def test_g1_lockstep_through_the_sandbox():
    """Untrusted files run in the sandboxed policy process: the rebuild happens there, after lockdown."""
    from crosssim.policies.sandbox import unavailable

    if unavailable():
        pytest.skip(f"policy sandbox unavailable: {unavailable()}")
    from crosssim.policies.sandbox import SandboxedPolicy

    sandboxed = SandboxedPolicy("torchscript", MOTION, obs_size=47)
    assert sandboxed.batchable  # rebuilt after the lockdown (nothing new may be imported there)
    sandboxed.close()
    base = dict(card_path=str(G1), profile="mujoco", episodes=((0, 0), (1, 1)), max_steps=40)
    single, batched = _rows(EngineJob(**base)), _rows(EngineJob(**base, batch=True))
    for k, row in single.items():
        assert batched[k]["failure"] is None and batched[k]["ret"] == pytest.approx(row["ret"], rel=1e-7)
