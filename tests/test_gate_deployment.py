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


def _with_axes(summary, **axes):
    from crosssim.results import Rehearsal

    reh = Rehearsal(verdict="low", loss=0.01, loss_ci95=(0.0, 0.02), failure_rate=0.0, failure_ci95=(0.0, 0.1),
                    nominal_failure_rate=0.0, episodes=10, support={"low": 1.0}, margin=2.0, margin_censored=False,
                    margin_points=[], engines={}, axes=[(n, v, "family") for n, v in axes.items()], shares={},
                    bands={})
    return dataclasses.replace(summary, risk=dataclasses.replace(summary.risk, rehearsal=reh))


def test_a_milder_rehearsal_axis_fails_even_where_the_family_severity_stays():
    """The verdict rests on the rehearsal's distribution: one axis made milder (sensor noise halved,
    contact softness dropped) lowers the bar though the family's severity is unchanged."""
    gaps = dict(actuation=1.0, timing=1.0, contact=1.0)
    base = _with_axes(_with_gaps(_summary(), **gaps), obs_noise=0.01, motor_strength=0.9, contact_timeconst=0.03,
                      motor_free_speed=20.0)
    pr = _with_axes(_with_gaps(_summary(), **gaps), obs_noise=0.005, motor_strength=0.9, motor_free_speed=40.0)
    check = next(c for c in decide(pr, GateConfig(), base).checks if c.name == "deployment gap")
    assert check.status == FAIL
    for name in ("obs_noise", "contact_timeconst", "motor_free_speed"):  # a free speed is milder when higher
        assert f"rehearsal {name}" in check.message
    assert "motor_strength" not in check.message
    harsher = _with_axes(_with_gaps(_summary(), **gaps), obs_noise=0.02, motor_strength=0.8, contact_timeconst=0.04,
                         motor_free_speed=10.0)
    assert not any(c.name == "deployment gap" for c in decide(harsher, GateConfig(), base).checks)
