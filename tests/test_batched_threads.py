"""The lockstep path with each control step's physics in a pool of threads (MuJoCo releases the
GIL in mj_step): the same rows as one thread bit for bit, and as one episode at a time within the
native PD law's last bits, episodes ending at their own steps."""

import pytest

from conftest import CARDS, requires_fixtures
from crosssim.card import load_card
from helpers.rowwise_policy import RowwisePolicy
from crosssim.runner.batched import physics_threads, run_episodes_lockstep
from crosssim.runner.harness import Harness
from crosssim.runner.rollout import run_episode
from crosssim.runner.simulator import open_engine
from crosssim.profiles import load_profile

pytestmark = requires_fixtures
G1 = CARDS / "robots" / "unitree-g1.yaml"
AMPS = (0.0, 3.0, 6.0, 12.0, 1e30)
"""One action scale per episode: the robot stands, stumbles or falls at its own step; the last
one's targets saturate the torque limit (MuJoCo would zero a ctrl above 1e10)."""


def _Shaky(amps):
    return RowwisePolicy(amps, obs_size=47, pos=slice(9, 21), phase=slice(45, 46), gain=3.0)


@pytest.fixture(scope="module")
def g1():
    harness = Harness.from_card(load_card(G1))
    sim = open_engine(load_profile("mujoco"), harness.scene)
    yield harness, sim
    sim.close()


def _lockstep(g1, threads, steps=150, amps=AMPS):
    harness, sim = g1
    out = {}
    slots = [(k, k, 7 + k) for k in range(len(amps))]
    run_episodes_lockstep(sim, harness, _Shaky(amps), slots, batch_size=len(amps), max_steps=steps,
                          on_result=lambda r: out.__setitem__(r.episode, r), threads=threads)
    return out


def test_threads_give_the_same_rows_as_one_thread(g1):
    one, many = _lockstep(g1, threads=1), _lockstep(g1, threads=3)
    assert set(one) == set(many) == set(range(len(AMPS)))
    for k, row in one.items():
        assert (many[k].ret, many[k].length, many[k].terminated, many[k].failure, many[k].metrics) == \
            (row.ret, row.length, row.terminated, row.failure, row.metrics), k


def test_threaded_lockstep_matches_one_at_a_time(g1):
    harness, sim = g1
    batched = _lockstep(g1, threads=2)
    lengths = {k: r.length for k, r in batched.items()}
    assert len(set(lengths.values())) >= 3, lengths  # the episodes end at different steps
    for k, amp in enumerate(AMPS):
        alone = run_episode(sim, harness, _Shaky([amp]), episode=k, seed=7 + k, max_steps=150)
        got = batched[k]
        assert (got.length, got.terminated, got.termination_reason) == \
            (alone.length, alone.terminated, alone.termination_reason), k
        if alone.failure is not None:
            assert got.failure is not None
            continue
        # MuJoCo's actuators sum the PD law in another order than crosssim's numpy: the last bits
        assert got.ret == pytest.approx(alone.ret, rel=1e-7), k
        for name, value in alone.metrics.items():
            assert got.metrics[name] == pytest.approx(value, rel=1e-6, abs=1e-9), (k, name)


def test_an_engine_failure_in_a_pool_thread_fails_its_episode_only(g1, monkeypatch):
    from crosssim.errors import EngineFailure

    engine, step_targets = g1[1].engine, g1[1].engine.step_targets
    seen = []  # states in the order they first step: the slots' order

    def failing(model, state, targets, n):
        if not any(state is s for s in seen):
            seen.append(state)
        if len(seen) > 1 and state is seen[1] and state.time > 0.1:
            raise EngineFailure("mujoco: diverged (injected)")
        step_targets(model, state, targets, n)

    monkeypatch.setattr(engine, "step_targets", failing)
    rows = _lockstep(g1, threads=2, steps=60, amps=(0.0, 0.0, 0.0))
    assert "injected" in rows[1].failure and rows[1].length == 5
    assert rows[0].failure is None and rows[2].failure is None and rows[0].length > 5


def test_thread_count_follows_the_engine_and_the_batch(g1):
    harness, sim = g1
    assert physics_threads(sim.engine, 1) == 1
    assert 1 <= physics_threads(sim.engine, 64) <= 64
    pybullet = open_engine(load_profile("pybullet"), Harness.for_task("Hopper").scene)
    assert physics_threads(pybullet.engine, 64) == 1  # one server per model: no parallel states
    pybullet.close()


def test_the_thread_count_can_be_capped(g1, monkeypatch):
    from crosssim.errors import CrossSimError

    monkeypatch.setenv("CROSSSIM_PHYSICS_THREADS", "1")
    assert physics_threads(g1[1].engine, 64) == 1
    monkeypatch.setenv("CROSSSIM_PHYSICS_THREADS", "two")
    with pytest.raises(CrossSimError, match="CROSSSIM_PHYSICS_THREADS='two'"):
        physics_threads(g1[1].engine, 64)
