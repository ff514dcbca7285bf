"""The rehearsal in lockstep (the default): every episode its own reality and model, one policy
forward per control step for all, and the same rows as one episode at a time (crosssim.runner.batched)."""

from pathlib import Path

import pytest

from crosssim.rehearsal import FAMILY as REHEARSAL
from crosssim.runner.crossval import CrossvalConfig, plan_crossval
from crosssim.runner.workers import EngineJob, execute_job

EPISODES = tuple((i, 20 + i) for i in range(4))
STEPS = 120
"""Control steps: long enough for the drawn realities to matter (falls, lost return), short enough
that the policy output's last-bit difference between a batch and one row does not grow chaotic."""

RETURN_TOLERANCE = 1e-4
"""Relative, on the return: a batch of 4 and one row differ in the policy output's last bits (the
matrix product's kernel depends on its shape); PhysX integrates in float32, where that shows at
3e-5 after 120 steps (measured), the float64 engines at 1e-7."""


def _rows(job: EngineJob) -> tuple[dict, list[str]]:
    rows, errors = {}, []

    def emit(kind, payload):
        if kind == "row":
            rows[payload["episode"]] = payload
        elif kind == "error":
            errors.append(payload)
    execute_job(job, emit)
    return rows, errors


@pytest.mark.parametrize("engine", ["mujoco", "pybullet", "physx", "newton-mujoco-warp"])
def test_rehearsal_in_lockstep_gives_the_one_at_a_time_rows(engine, good_policy, tmp_path):
    card = str(Path(good_policy) / "card.yaml")
    plan = plan_crossval(CrossvalConfig(policy=card, engines=(engine,), episodes=len(EPISODES), out=str(tmp_path),
                                        cache=False))
    rehearsal = dict(plan.conditions)[REHEARSAL]
    base = dict(card_path=card, profile=engine, episodes=EPISODES, max_steps=STEPS,
                conditions=((REHEARSAL, rehearsal),))
    single, errors = _rows(EngineJob(**base))
    if errors and "not installed" in errors[0]:
        pytest.skip(errors[0])
    batched, batch_errors = _rows(EngineJob(**base, batch=True))
    assert not errors and not batch_errors, errors + batch_errors
    assert set(single) == set(batched) == {i for i, _ in EPISODES}
    lengths = {row["length"] for row in single.values()}
    for episode, row in single.items():
        assert batched[episode]["length"] == row["length"], (engine, episode)
        assert batched[episode]["ret"] == pytest.approx(row["ret"], rel=RETURN_TOLERANCE), (engine, episode)
    # Each episode really ran under its own reality: they differ from one another.
    assert len({round(row["ret"], 6) for row in single.values()}) == len(EPISODES), lengths
