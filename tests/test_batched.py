"""Episodes in lockstep with one batched policy forward per control step (crosssim.runner.batched)."""

from pathlib import Path

import numpy as np
import pytest

from crosssim.card import load_card
from crosssim.policies import load_policy
from crosssim.runner.batched import can_batch, run_episodes_lockstep
from crosssim.runner.rollout import Harness, run_episode
from crosssim.runner.simulator import open_engine
from crosssim.runner.workers import EngineJob, execute_job
from crosssim.profiles import load_profile

EPISODES = tuple((i, 10 + i) for i in range(4))


def _rows(job: EngineJob) -> dict[tuple[str, int], dict]:
    out = {}
    execute_job(job, lambda kind, payload: out.__setitem__((payload["condition"], payload["episode"]), payload)
                if kind == "row" else None)
    return out


def test_lockstep_matches_one_at_a_time_and_ignores_which_episodes_ran(good_policy):
    card = str(Path(good_policy) / "card.yaml")
    conditions = (("nominal", {}), ("timing", {"action_latency": 1, "obs_noise": 0.02}))
    base = dict(card_path=card, profile="mujoco", episodes=EPISODES, max_steps=150, conditions=conditions, record=True)
    single = _rows(EngineJob(**base))
    batched = _rows(EngineJob(**base, batch=True))
    assert set(single) == set(batched) and len(batched) == 8
    for key, row in single.items():  # the policy's last bits differ between a batch and one row
        assert batched[key]["length"] == row["length"], key
        assert batched[key]["ret"] == pytest.approx(row["ret"], rel=1e-6), key
        assert batched[key]["failure"] is None
    # Episodes taken from the cache leave their batch row idle: the others get identical numbers.
    partial = _rows(EngineJob(**base, batch=True, skip=frozenset({("nominal", 1), ("timing", 2)})))
    assert set(partial) == set(batched) - {("nominal", 1), ("timing", 2)}
    for key, row in partial.items():
        assert row["ret"] == batched[key]["ret"] and row["length"] == batched[key]["length"]
    assert batched[("nominal", 0)]["trajectory"]["qpos"].shape[0] == batched[("nominal", 0)]["length"]


class _Rows:
    """A batchable policy whose row 1 misbehaves (NaN action), or that raises when asked to."""

    batchable, obs_size, action_size = True, 11, 3

    def __init__(self, mode: str):
        self.mode = mode

    def reset(self):
        pass

    def act(self, obs):
        if self.mode == "raise":
            raise RuntimeError("policy exploded")
        out = np.zeros((len(obs), 3))
        out[1] = np.nan
        return out


@pytest.mark.parametrize("mode", ["nan", "raise"])
def test_a_misbehaving_row_fails_its_episode_only(mode):
    harness = Harness.for_task("Hopper")
    sim = open_engine(load_profile("mujoco"), harness.scene)
    results = []
    run_episodes_lockstep(sim, harness, _Rows(mode), [(0, 0, 0), (1, 1, 1), (2, 2, 2)], batch_size=3,
                          max_steps=20, on_result=results.append)
    failed = {r.episode: r.failure for r in results}
    assert len(results) == 3
    if mode == "nan":
        assert "non-finite action" in failed[1] and failed[0] is None and failed[2] is None
        assert all(r.length == 20 for r in results if r.episode != 1)
    else:
        assert all("policy exploded" in f for f in failed.values())


def test_engines_and_policies_that_cannot_batch_run_one_at_a_time(good_policy):
    card = load_card(Path(good_policy) / "card.yaml")
    harness = Harness.from_card(card)
    policy = load_policy(card, obs_size=harness.obs_size, action_size=harness.action_size)
    try:  # Newton's Featherstone solver cannot run a batch as worlds (newton_worlds: SolverMuJoCo only)
        other = open_engine(load_profile("newton-featherstone"), harness.scene)
    except Exception as exc:  # an install without Newton
        pytest.skip(f"newton-featherstone: {exc}")
    mujoco = open_engine(load_profile("mujoco"), harness.scene)
    assert can_batch(mujoco.engine, policy, mujoco.model) and not can_batch(other.engine, policy, other.model)
    base = dict(card_path=str(card.path), profile="newton-featherstone", episodes=EPISODES[:2], max_steps=60)
    assert _rows(EngineJob(**base, batch=True)) == _rows(EngineJob(**base))  # fell back, bit-identical
    direct = run_episode(other, harness, policy, episode=0, seed=10, max_steps=60)
    assert direct.ret == _rows(EngineJob(**base))[("nominal", 0)]["ret"]
    other.close(), mujoco.close()
