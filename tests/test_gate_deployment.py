"""The gate: a pull request's card cannot lower the expected deployment gap its risk is measured at."""

import dataclasses

from crosssim.gate import FAIL, PASS, GateConfig, decide
from crosssim.results import RiskComponent

from test_gate import _summary


def _with_gaps(summary, **gaps):
    comps = {f: RiskComponent(what=f, margin=2.0, margin_ci95=(2.0, 2.0), censored=False, margin_settings={}, gap=g,
                              gap_settings={}, headroom=None if g is None else 2.0 / g, headroom_ci95=None,
                              drop_at_gap=0.05, drop_at_gap_ci95=(0.05, 0.05), verdict="low", engine_margins={},
                              engine_spread=0.0, curves={})
             for f, g in gaps.items()}
    return dataclasses.replace(summary, risk=dataclasses.replace(summary.risk, components=comps))


def test_a_milder_gap_in_the_pull_request_fails():
    base = _with_gaps(_summary(), actuation=1.0, timing=1.0, contact=1.0)
    pr = _with_gaps(_summary(), actuation=None, timing=1.0, contact=0.5)  # the card zeroed motors, halved friction
    decision = decide(pr, GateConfig(), base)
    assert decision.status == FAIL
    check = next(c for c in decision.checks if c.name == "deployment gap")
    assert "actuation gap 0 < 1" in check.message and "contact gap 0.5 < 1" in check.message
    assert "timing" not in check.message


def test_the_same_or_a_harsher_gap_passes():
    base = _with_gaps(_summary(), actuation=1.0, timing=None, contact=1.0)
    for pr in (base, _with_gaps(_summary(), actuation=2.0, timing=1.0, contact=1.0)):
        decision = decide(pr, GateConfig(), base)
        assert decision.status == PASS and not any(c.name == "deployment gap" for c in decision.checks)


def test_no_risk_numbers_no_gap_check():
    base = _with_gaps(_summary(), actuation=1.0)
    pr = _summary()  # no components (as on a harness mismatch)
    assert not any(c.name == "deployment gap" for c in decide(pr, GateConfig(), base).checks)


def test_a_changed_risk_metric_fails():
    base = _summary()
    pr = dataclasses.replace(_summary(), risk=dataclasses.replace(_summary().risk, metric="survival"))
    decision = decide(pr, GateConfig(), base)
    assert decision.status == FAIL
    assert "'survival'" in next(c for c in decision.checks if c.name == "risk metric").message
    assert not any(c.name == "risk metric" for c in decide(base, GateConfig(), base).checks)
