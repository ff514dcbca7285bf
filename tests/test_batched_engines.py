"""Lockstep batches on engines other than MuJoCo: PhysX steps one world per episode (a state is a
world of its own), so a batch gives the same rows as one episode at a time, bit for bit, when the
policy's rows do not depend on each other; PyBullet gives a batch one server per episode (a
server holds one world), with the same rows. Newton batches as N worlds of one model:
tests/test_newton_worlds.py."""

import pytest
from conftest import CARDS, requires_fixtures

from crosssim.profiles import load_profile
from helpers.rowwise_policy import RowwisePolicy
from crosssim.runner.batched import can_batch, run_episodes_lockstep
from crosssim.runner.harness import Harness
from crosssim.runner.rollout import run_episode
from crosssim.runner.simulator import open_engine

AMPS = (0.0, 0.1, 0.3, 1.0)
"""One action scale per episode: Hopper hops, stumbles or falls at its own step."""


def _Rowwise(amps):
    return RowwisePolicy(amps, obs_size=11, pos=slice(2, 5), phase=slice(5, 8), gain=2.0)


def _both(engine: str, steps: int = 200):
    pytest.importorskip({"physx": "sapien", "pybullet": "pybullet"}.get(engine, "mujoco"))
    harness = Harness.for_task("Hopper")
    sim = open_engine(load_profile(engine), harness.scene)
    try:
        batched = {}
        slots = [(k, k, 30 + k) for k in range(len(AMPS))]
        run_episodes_lockstep(sim, harness, _Rowwise(AMPS), slots, batch_size=len(AMPS), max_steps=steps,
                              on_result=lambda r: batched.__setitem__(r.episode, r))
        alone = {k: run_episode(sim, harness, _Rowwise([a]), episode=k, seed=30 + k, max_steps=steps)
                 for k, a in enumerate(AMPS)}
    finally:
        sim.close()
    return sim, batched, alone


@pytest.mark.parametrize("engine", ["physx", "pybullet"])
def test_lockstep_gives_the_one_at_a_time_rows(engine):
    """PhysX: one world per state; PyBullet: one server per episode (its worlds_model)."""
    sim, batched, alone = _both(engine)
    assert sim.engine.capabilities.concurrent_states and can_batch(sim.engine, _Rowwise(AMPS), sim.model)
    assert len({r.length for r in alone.values()}) >= 2  # the episodes end at their own steps
    for k, row in alone.items():
        got = batched[k]
        assert (got.ret, got.length, got.terminated, got.termination_reason, got.failure, got.metrics) == \
            (row.ret, row.length, row.terminated, row.termination_reason, row.failure, row.metrics), k


def test_pybullet_batch_servers_are_closed_and_its_states_stay_in_their_own():
    pytest.importorskip("pybullet")
    import numpy as np
    import pybullet

    from crosssim.frame import InitialState
    from crosssim.scene import load_mujoco_model

    harness = Harness.for_task("Hopper")
    sim = open_engine(load_profile("pybullet"), harness.scene)
    m = load_mujoco_model(harness.scene)
    initial = InitialState(m.qpos0.copy(), np.zeros(m.nv))
    engine = sim.engine
    try:
        worlds = engine.worlds_model(sim.model, 2)
        clients = [w.client for w in worlds.members]
        assert len(set(clients + [sim.model.client])) == 3  # a server per episode, the model's own apart
        a, b = engine.reset(worlds, initial), engine.reset(worlds, initial)
        with pytest.raises(Exception, match="hold live states"):
            engine.reset(worlds, initial)
        engine.step(worlds, a, np.full(len(sim.model.joint_link), 50.0), 20)  # only a moves
        assert not np.allclose(engine.joint_state(worlds, a)[0], engine.joint_state(worlds, b)[0])
        own = engine.reset(sim.model, initial)
        with pytest.raises(Exception, match="not one of this batch"):
            engine.step(worlds, own, np.zeros(len(sim.model.joint_link)))
        del b
        engine.reset(worlds, initial)  # b's server is free again
        engine.close(worlds)
        assert not any(pybullet.isConnected(c) for c in clients) and pybullet.isConnected(sim.model.client)
    finally:
        sim.close()


@requires_fixtures
def test_pybullet_robot_with_mesh_collisions_runs_one_at_a_time():
    """A server per episode costs a mesh robot more than batching saves (G1: 1.6 s per server)."""
    pytest.importorskip("pybullet")
    from crosssim.card import load_card

    g1 = Harness.from_card(load_card(CARDS / "robots" / "unitree-g1.yaml"))
    sim = open_engine(load_profile("pybullet"), g1.scene)
    hopper = open_engine(load_profile("pybullet"), Harness.for_task("Hopper").scene)
    try:
        assert not sim.engine.worlds_ready(sim.model) and sim.engine.worlds_model(sim.model, 2) is None
        assert hopper.engine.worlds_ready(hopper.model)
    finally:
        sim.close(), hopper.close()
