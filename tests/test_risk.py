"""The risk profile: bisection on the ladders, margins from dose-response curves, headroom over
the expected deployment gap, and the verdict (docs/risk.md)."""

import dataclasses
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from crosssim.card import load_card
from crosssim.deployment import StatedDeployment
from crosssim.errors import CardError
from crosssim.evaluate import crossval
from crosssim.results import support_text
from crosssim.risk import risk_profile
from crosssim.runner import CrossvalConfig
from crosssim.sweep import LADDERS, Ladder, bisect_rungs, curve_at, margin_from_curve, retained

HOPPER = ROOT / "policies" / "hopper-ppo-mujoco" / "card.yaml"
DR = ROOT / "policies" / "hopper-ppo-150k-dr-s0" / "card.yaml"
NODR = ROOT / "policies" / "hopper-ppo-150k-nodr-s0" / "card.yaml"


def test_bisection_visits_the_bracket():
    seen = []
    visited = bisect_rungs(6, lambda k: seen.append(k) or k <= 4)
    assert visited == [(3, True), (5, False), (4, True)] and seen == [3, 5, 4]  # ceil(log2 7) = 3 rungs
    assert bisect_rungs(6, lambda k: True) == [(3, True), (5, True), (6, True)]
    assert bisect_rungs(6, lambda k: False) == [(3, False), (1, False)]
    assert bisect_rungs(4, lambda k: None) == []  # no data: the search stops


def test_margin_hand_computed():
    assert margin_from_curve([(1, 0.95), (2, 0.7)], 0.9) == (pytest.approx(1 + 0.05 / 0.25), False)
    assert margin_from_curve([(2, 0.7), (1, 0.95)], 0.9)[0] == pytest.approx(1.2)  # visiting order does not matter
    assert margin_from_curve([(1, 0.95), (2, 0.92)], 0.9) == (2.0, True)  # no fail: a lower bound
    assert margin_from_curve([(0.5, 0.5)], 0.9) == (pytest.approx(0.5 * 0.1 / 0.5), False)  # from nominal (0, 1)
    assert retained([-100.0], [-150.0]) == pytest.approx(0.5)  # negative metrics: share of |nominal| lost
    assert curve_at([(0.5, 0.98), (1, 0.94), (2, 0.7)], 1.5) == pytest.approx(0.82)
    lad = LADDERS["actuation"]
    assert lad.severity_of("motor_strength", 0.9) == pytest.approx(1.0)
    assert lad.severity_of("motor_lag", 0.005) == pytest.approx(0.625)
    assert lad.severity_of("motor_strength", 0.4) == pytest.approx(6.0)  # beyond the top rung: the last step extended
    assert lad.settings_at(1.5) == pytest.approx({"motor_strength": 0.85, "motor_lag": 0.012})


def _rows(retained_at: dict, engines=(("mujoco", 1000.0), ("pybullet", 1000.0), ("newton", 100.0)), episodes=3):
    """Rows of nominal and the visited rungs: ``retained_at[family] = {rung: share}``; the third
    engine reaches only 10 % of the reference (weight 0.1: shown, not counted) and keeps everything at the same visited rungs."""
    recs = []
    for e, base in engines:
        conds = [("nominal", 1.0)] + [(LADDERS[f].condition(k), share if base > 500 else 1.0)
                                      for f, rungs in retained_at.items() for k, share in rungs.items()]
        for c, share in conds:
            for i in range(episodes):
                recs.append({"policy": "p", "engine": e, "condition": c, "episode": i, "seed": i,
                             "return": base * share + i, "length": 1000, "terminated": False, "failure": None,
                             "x_velocity": 1.0})
    return pd.DataFrame.from_records(recs)


VISITED = {"actuation": {3: 0.7, 1: 0.98, 2: 0.85}, "timing": {2: 0.99, 3: 0.97, 4: 0.95},
           "contact": {3: 0.99, 5: 0.95, 6: 0.93}}


@pytest.fixture
def card():
    if not HOPPER.exists():
        pytest.skip("default hopper policy not present")
    return dataclasses.replace(load_card(HOPPER), claimed={})


def test_profile_hand_computed(card):
    risk = risk_profile(_rows(VISITED), card, ladders=LADDERS, reference="mujoco", resamples=50)
    act = risk.components["actuation"]
    # Bracket rung 1 (severity 0.5, kept ~0.98) .. rung 2 (severity 1, ~0.85): 0.5 + 0.5 (0.98 - 0.9) / (0.98 - 0.85).
    assert act.margin == pytest.approx(0.5 + 0.5 * 0.08 / 0.13, abs=0.01) and not act.censored
    assert act.gap == pytest.approx(1.0)  # gymnasium default: motors 10 % weaker (severity 1), lag 5 ms (0.625)
    assert act.headroom == pytest.approx(act.margin) and act.verdict == "medium"
    assert act.drop_at_gap == pytest.approx(0.15, abs=0.005)
    assert act.engine_margins["newton"] == 2.0 and act.engine_spread == pytest.approx(0.0)  # newton does not count
    assert [p.rung for p in act.curves["mujoco"]] == [1, 2, 3]
    assert risk.components["timing"].censored and risk.components["timing"].verdict == "low"
    assert risk.verdict == "medium" and risk.driver == "actuation" and "least headroom in actuation" in risk.message
    assert risk.aggregate.headroom == act.headroom and risk.aggregate.engine_weights["newton"] == pytest.approx(0.1, abs=0.002)
    lo, hi = act.margin_ci95
    assert lo <= act.margin <= hi


def test_verdict_support_calls_an_edge_verdict_uncertain(card):
    """The verdict's support is the share of bootstrap resamples whose rule gives each class: a clean
    medium is 100 % medium and says nothing more; a margin on the medium/low edge (1x the gap) with
    a spread of episodes at the rung that decides it is called uncertain, and the classes it moves
    between are named."""
    clean = risk_profile(_rows(VISITED), card, ladders=LADDERS, reference="mujoco", resamples=200)
    assert clean.verdict_support == {"medium": 1.0} and "uncertain" not in clean.message and not clean.uncertain
    assert clean.thresholds["verdict_support_min"] == 0.9
    assert risk_profile(_rows(VISITED), card, ladders=LADDERS, reference="mujoco", resamples=0).verdict_support == {}

    rows = _rows(VISITED, engines=(("mujoco", 1000.0),), episodes=4)
    decides = rows.condition == LADDERS["actuation"].condition(2)  # severity 1; rung 3 (severity 2) keeps 0.7
    rows.loc[decides, "return"] = [780.0, 1000.0, 860.0, 960.0]  # mean 0.90 of nominal: margin about 1.0
    edge = risk_profile(rows, card, ladders=LADDERS, reference="mujoco", resamples=400)
    assert edge.driver == "actuation" and edge.verdict in ("medium", "low")
    assert set(edge.verdict_support) == {"medium", "low"} and sum(edge.verdict_support.values()) == pytest.approx(1.0)
    assert edge.verdict_support[edge.verdict] < 0.9 and edge.uncertain
    assert f"uncertain: {edge.verdict} in {support_text(edge.verdict_support[edge.verdict])}" in edge.message
    assert "more --sweep-episodes" in edge.message


def test_a_support_just_under_the_threshold_never_reads_as_it():
    """Shares are printed rounded down: 0.898 next to "uncertain" reads 89 %, not 90 % (seen on the
    default hopper: "uncertain: high in 90% ...")."""
    assert [support_text(p) for p in (0.898, 0.9, 0.999, 1.0, 0.0)] == ["89%", "90%", "99%", "100%", "0%"]


def test_tighter_deployment_gap_changes_the_verdict(card):
    rows = _rows(VISITED)
    # severity 5: the margin (0.81) is below a quarter of it (HIGH_BELOW 0.25); at severity 3 (0.27) it is medium
    wide = dataclasses.replace(card, deployment=StatedDeployment(motor_strength=0.5))
    narrow = dataclasses.replace(card, deployment=StatedDeployment(motor_strength=0.02, motor_lag=0.0))
    assert risk_profile(rows, wide, ladders=LADDERS, reference="mujoco", resamples=20).verdict == "high"
    low = risk_profile(rows, narrow, ladders=LADDERS, reference="mujoco", resamples=20)
    assert low.verdict == "low", low.message
    assert low.deployment["motor_strength"] == 0.02 and low.deployment["friction"] == 0.8  # the rest: class default
    # A policy made fragile to timing (loses 30 % with one step of latency) now has the least headroom.
    fragile = _rows({**VISITED, "timing": {2: 0.5, 1: 0.7}})
    risk = risk_profile(fragile, card, ladders=LADDERS, reference="mujoco", resamples=20)
    assert risk.verdict == "high" and risk.driver == "timing"


def test_deployment_section_in_card(tmp_path):
    import shutil

    import yaml

    if not HOPPER.exists():
        pytest.skip("default hopper policy not present")
    folder = tmp_path / "policy"
    shutil.copytree(HOPPER.parent, folder)
    raw = yaml.safe_load(HOPPER.read_text())
    (folder / "robot-gap.yaml").write_text("latency: 0.016\nfriction: [0.5, 1.2]\n")
    raw["deployment"] = {"file": "robot-gap.yaml", "motor_strength": 0.15}
    (folder / "card.yaml").write_text(yaml.safe_dump(raw))
    card = load_card(folder / "card.yaml")
    assert card.deployment.stated() == {"latency": 0.016, "friction": 0.5, "motor_strength": 0.15}
    assert card.deployment.file == (folder / "robot-gap.yaml").resolve()
    raw["deployment"] = {"latncy": 0.02}
    (folder / "card.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(CardError, match=r"card.yaml: field 'deployment.latncy' is not known; did you mean 'deployment.latency'"):
        load_card(folder / "card.yaml")
    raw["deployment"] = {"latency": 20}  # milliseconds written as seconds: a huge gap, refused
    (folder / "card.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(CardError, match=r"deployment.latency' must be a number from 0 to 1 \(seconds: 20 ms is 0.02"):
        load_card(folder / "card.yaml")
    raw["deployment"] = {"motor_strength": -0.1}
    (folder / "card.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(CardError, match="deployment.motor_strength"):
        load_card(folder / "card.yaml")


TINY = {"actuation": Ladder("actuation", (1, 3), (("motor_strength", (0.9, 0.7)), ("motor_lag", (0.008, 0.024))), "a"),
        "timing": Ladder("timing", (1, 2), (("action_latency", (1, 2)), ("obs_noise", (0.01, 0.02))), "t"),
        "contact": Ladder("contact", (1, 3), (("friction_scale", (0.86, 0.58)), ("mass_scale", (1.06, 1.18))), "c")}


def test_default_hopper_end_to_end(tmp_path, card, monkeypatch):
    """The default policy, 2 episodes, a plan with a tiny ladder (the jobs carry its rungs to the
    workers, the verdict reads it from the plan): margins, a verdict, the curve in summary.json; run
    again from the cache, same numbers."""
    from crosssim.evaluate import run as run_plan
    from crosssim.runner import plan_crossval

    monkeypatch.setenv("CROSSSIM_CACHE", str(tmp_path / "cache"))
    runs = []
    for k in range(2):
        plan = plan_crossval(CrossvalConfig(policy=str(HOPPER), engines=("mujoco",), episodes=2, sweep_episodes=2,
                                            max_steps=150, workers=1, out=str(tmp_path / f"run{k}"), report=False))
        runs.append(run_plan(dataclasses.replace(plan, ladders=TINY)))
    risk = runs[0].summary.risk
    assert risk.verdict in ("low", "medium", "high") and risk.driver in TINY, risk.message
    for name, c in risk.components.items():
        assert np.isfinite(c.margin) and 0 <= c.margin <= TINY[name].levels[-1], (name, c)
        assert c.curves["mujoco"] and all(p.episodes == 2 for p in c.curves["mujoco"])
    df0, df1 = (pd.read_parquet(tmp_path / f"run{k}" / "results.parquet") for k in range(2))
    pd.testing.assert_frame_equal(df0, df1)  # the second run read every row from the cache
    from crosssim.rehearsal import scale_of

    rehearsed = {c for c in df0.condition if scale_of(c) is not None}
    assert "rehearsal" in rehearsed and risk.rehearsal is not None and risk.verdict == risk.rehearsal.verdict
    assert len(df0) > 2 and set(df0.condition) - {"nominal"} - rehearsed <= {c for lad in TINY.values()
                                                                             for c in map(lad.condition, (1, 2))}
    again = runs[1].summary.risk
    assert {n: c.margin for n, c in again.components.items()} == {n: c.margin for n, c in risk.components.items()}
    assert sum(risk.verdict_support.values()) == pytest.approx(1.0) and again.verdict_support == risk.verdict_support
    import io

    from crosssim.cli import print_risk

    printed = io.StringIO()
    print_risk(risk, file=printed)
    line = printed.getvalue().split("verdict support (share of bootstrap resamples of the rehearsal episodes per class): ")[1]
    assert f"{risk.verdict} {100 * risk.verdict_support.get(risk.verdict, 0):.0f}%" in line.splitlines()[0]
    from crosssim.report import write_report

    html = write_report(tmp_path / "run0", filmstrips=False).read_text()
    assert 'id="dose-response"' in html and html.count("<tr><td>") >= 3 and "expected gap" in html
    assert 'id="verdict-support"' in html and f"{risk.verdict.upper()} " in html.split('id="verdict-support"')[1]
    assert 'id="rehearsal"' in html and "Deployment rehearsal" in html


@pytest.mark.skipif(not (DR.exists() and NODR.exists()), reason="example DR/no-DR policies not present")
def test_domain_randomised_policy_has_more_headroom(tmp_path):
    headroom = {}
    for name, card_path in (("dr", DR), ("nodr", NODR)):
        summary = crossval(CrossvalConfig(policy=str(card_path), engines=("mujoco",), episodes=3,
                                          out=str(tmp_path / name), report=False)).summary
        headroom[name] = summary.risk.aggregate.headroom
    assert headroom["dr"] > headroom["nodr"], headroom


def test_worker_and_parent_visit_the_same_rungs():
    """The sweep search runs in an engine worker (here the JSON-lines one, as for a profile's own
    interpreter); replaying it on the rows the worker sent visits exactly the rungs it ran."""
    import json
    import math
    import subprocess

    from crosssim.runner.harness import Harness
    from crosssim.runner.workers import EngineJob, payload_frame
    from crosssim.sweep import search_family

    if not HOPPER.exists():
        pytest.skip("default hopper policy not present")
    sweeps = tuple((n, tuple((lad.condition(k), lad.fields(k)) for k in range(1, lad.rungs + 1)))
                   for n, lad in LADDERS.items())
    job = EngineJob(str(HOPPER), "mujoco", ((0, 0), (1, 1)), max_steps=50, sweeps=sweeps,
                    sweep_episodes=((0, 0), (1, 1)))
    payload = dataclasses.asdict(job) | {"skip": []}
    proc = subprocess.run([sys.executable, "-m", "crosssim.runner.stdio_worker"], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [m["payload"] for m in map(json.loads, proc.stdout.splitlines()) if m["kind"] == "row"]
    ran = {(r["condition"], r["episode"]): r for r in rows}
    task = Harness.from_card(load_card(HOPPER)).task
    metric = lambda ps: task.metric_values(payload_frame(ps), "return")  # noqa: E731
    replayed = set()
    for family, rungs in sweeps:
        visited = search_family(rungs, lambda c, f: [ran.get((c, i)) for i in (0, 1)], metric)
        assert 1 <= len(visited) <= math.ceil(math.log2(len(rungs) + 1))
        replayed |= {rungs[k - 1][0] for k, _ in visited}
    assert replayed == {c for c, _ in ran} - {"nominal"}
