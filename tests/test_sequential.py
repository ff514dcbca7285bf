"""Sequential allocation: episodes are added, --episodes at a time with continuing seeds, until the
rehearsal's class is decided or the budget ends, and the summary says which (crosssim.evaluate)."""

import json
from pathlib import Path

import pytest

from crosssim import rehearsal
from crosssim.evaluate import crossval
from crosssim.runfolder import RunFolder
from crosssim.runner.crossval import CrossvalConfig


CARD = Path(__file__).resolve().parents[1] / "policies" / "hopper-ppo-mujoco" / "card.yaml"
"""The project's default policy: it does its task, so the harness check lets the rehearsal run."""


def _run(card, out, **kw):
    return crossval(CrossvalConfig(policy=str(card), engines=("mujoco",), episodes=2, max_steps=150, out=str(out),
                                   inline=True, report=False, cache=False, sweep_episodes=2, **kw))


def test_an_undecided_class_runs_more_episodes_up_to_the_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(rehearsal, "DECIDED_SUPPORT", 1.01)  # never decided: the budget must end it
    card = CARD
    run = _run(card, tmp_path / "a", max_episodes=6)
    reh = run.summary.risk.rehearsal
    assert [s["episodes"] for s in reh.stages] == [2, 4, 6] and reh.decided is False
    assert reh.episodes == 6 and run.summary.episodes == 6
    assert "NOT decided within the budget of 6 episodes" in run.summary.risk.message
    rows = RunFolder(tmp_path / "a").rows()
    for condition in ("nominal", rehearsal.FAMILY):  # every stage's rows stored, seeds continuing
        got = rows[rows.condition == condition]
        assert sorted(got.episode) == list(range(6)) and sorted(got.seed) == list(range(6)), condition
    saved = json.loads((tmp_path / "a" / "summary.json").read_text())["risk"]["rehearsal"]
    assert saved["decided"] is False and len(saved["stages"]) == 3
    # Same seed, same numbers: the staged run is reproducible.
    again = _run(card, tmp_path / "b", max_episodes=6).summary.risk.rehearsal
    assert (again.loss, again.failure_rate, again.stages) == (reh.loss, reh.failure_rate, reh.stages)


def test_a_decided_class_stops_at_once_and_a_budget_of_one_stage_runs_one(tmp_path):
    card = CARD
    reh = _run(card, tmp_path / "a", max_episodes=2).summary.risk.rehearsal
    assert len(reh.stages) == 1 and reh.episodes == 2
    assert reh.decided is (reh.stages[0]["support"] >= rehearsal.DECIDED_SUPPORT)


def test_a_quick_preview_runs_one_stage_and_is_not_judged(tmp_path, monkeypatch):
    monkeypatch.setattr(rehearsal, "DECIDED_SUPPORT", 1.01)
    quick = _run(CARD, tmp_path / "q", quick=True, max_episodes=6).summary
    assert quick.risk.rehearsal.stages == [] and quick.risk.rehearsal.decided is None
    assert quick.risk.rehearsal.episodes == 2 and "decided" not in quick.risk.message
