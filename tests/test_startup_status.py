"""A long start-up said before the wait (Warp's cold compile) is closed with its elapsed time."""

from pathlib import Path

from crosssim.runner import crossval as cv

CARD = Path(__file__).resolve().parents[1] / "policies" / "hopper-ppo-mujoco" / "card.yaml"


def test_a_stated_start_up_ends_with_its_elapsed_time(tmp_path, monkeypatch):
    monkeypatch.setattr(cv, "_startup_status", lambda profile: "compiling kernels (once)")
    said = []
    plan = cv.plan_crossval(cv.CrossvalConfig(policy=str(CARD), engines=("mujoco",), episodes=2, max_steps=20,
                                              out=str(tmp_path), inline=True, risk=False, report=False, cache=False))
    cv.execute(plan, progress=lambda e, done, total, row: said.append(row.get("status")))
    statuses = [s for s in said if s]
    assert statuses[0] == "compiling kernels (once)"
    assert len(statuses) == 2 and statuses[1].startswith("start-up done in ") and statuses[1].endswith("cached)")
