"""The Fetch experts do their tasks in MuJoCo through crosssim's harness, and the episodes table
names why an episode failed: a gripper that never closes misses the grasp, one that opens while
carrying drops the object, one that never moves times out."""

import numpy as np
import pytest

from crosssim.policies.base import CallablePolicy
from crosssim.profiles import load_profile
from crosssim.runner.harness import Harness
from crosssim.runner.rollout import run_episode
from crosssim.runner.simulator import open_engine
from crosssim.tasks import fetch_expert

pytest.importorskip("gymnasium_robotics", reason="Fetch's scene files: pip install 'crosssim[robotics]'")


def episodes(task: str, fn, n: int = 6):
    h = Harness.for_task(task)
    sim = open_engine(load_profile("mujoco"), h.scene)
    try:
        return [run_episode(sim, h, CallablePolicy(fn, 31, 4), episode=k, seed=k) for k in range(n)]
    finally:
        sim.close()


@pytest.mark.parametrize("task,fn", [("FetchPickAndPlace", fetch_expert.pick_and_place),
                                     ("FetchPush", fetch_expert.push)])
def test_expert_succeeds(task, fn):
    results = episodes(task, fn)
    assert all(r.failure is None for r in results)
    assert [r.termination_reason for r in results] == ["success"] * len(results)
    assert all(r.metrics["success"] == 1.0 and 0 < r.metrics["time_to_success"] < 2.0 for r in results)


def never_closes(obs):
    a = fetch_expert.pick_and_place(obs)
    return np.array([*a[:3], 1.0])


def opens_when_lifted(obs):
    a = fetch_expert.pick_and_place(obs)
    lifted = obs[11] > 0.47  # block 4.5 cm above the table: open
    return np.array([*a[:3], 1.0]) if lifted else a


def test_failures_are_named():
    missed = episodes("FetchPickAndPlace", never_closes, 3)
    assert {r.termination_reason for r in missed} == {"missed grasp"}
    assert all(r.metrics["success"] == 0.0 and np.isnan(r.metrics["time_to_success"]) for r in missed)
    dropped = [r.termination_reason for r in episodes("FetchPickAndPlace", opens_when_lifted, 6)]
    assert "dropped object" in dropped
    idle = episodes("FetchPickAndPlace", lambda obs: np.zeros(4), 2)
    assert {r.termination_reason for r in idle} == {"timeout"}
